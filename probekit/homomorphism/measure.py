"""Core HE measurement on part states: fit each family on the fit pairs, score the rest.

``composition_he(a, b, target)`` with ``a, b, target`` of shape ``(layer, pair, d)``: operators
``f([a; b]) ~ target`` are fit on all layers at once, and the held-out error is summarised per
layer, family and group with percentile-bootstrap CIs (An & Du 2026, [C] fit/score protocol:
one operator shared by every group; with ``HEConfig(parts="separate")``, [O], one operator per
group, fit on that group's fit pairs, and ``1 - R^2`` taken within groups).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import DataError, NonFiniteError
from ..progress import track
from ..shapes import shape_checked
from ..stats import bootstrap_indices, percentile_interval
from .config import HEConfig
from .operators import make_operator
from .result import HEResult
from .split import split_pairs


class TooFewPairsError(DataError):
    """Too few fit or scored pairs in a group for one operator per group (``parts="separate"``).

    A property of the data (e.g. a model trained on ten single-clause commands): the
    ``homomorphism_error`` kind reports it as not applicable to that model
    (:func:`probekit.homomorphism.layer_he.layer_he`).
    """


def _states(x: object, name: str) -> Tensor:
    """``x`` as a float tensor (numpy arrays accepted); anything else is refused naming ``name``."""
    if isinstance(x, Tensor):
        t = x
    elif isinstance(x, np.ndarray):
        t = torch.from_numpy(x)
    else:
        raise DataError(f"{name} is a {type(x).__name__}; pass a (layer, pair, d) tensor or numpy "
                        "array of states (e.g. from pair_vectors)")
    if not (t.is_floating_point()):
        raise DataError(f"{name} has dtype {t.dtype}; states must be floating point")
    return t


@shape_checked
def composite_target(
    a: Float[Tensor, "layer pair d"], b: Float[Tensor, "layer pair d"]
) -> Float[Tensor, "layer pair d"]:
    """[C]'s composite ``(a + b) / 2``: the mean-pooled state of the span ``a b``."""
    return (a + b) / 2


@shape_checked
def composition_he(
    a: Float[Tensor, "layer pair d"],
    b: Float[Tensor, "layer pair d"],
    target: Float[Tensor, "layer pair d"] | None = None,
    *,
    labels: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
    kind: str = "modifier",
    config: HEConfig | None = None,
) -> HEResult:
    """HE of composing ``a`` and ``b`` into ``target`` (default :func:`composite_target`).

    Args:
        a: first part's states ``(layer, pair, d)``, pairs in collection order.
        b: second part's states, same shape.
        target: composite states, same shape (default ``(a + b) / 2``).
        labels: modifier / connective of each pair (default: all ``kind``).
        layers: block index of each layer row (default ``0..L-1``).
        kind: name recorded in the result.
        config: families, solver, split, bootstrap (default :class:`HEConfig`).
    """
    cfg = config or HEConfig()
    a, b = _states(a, "a"), _states(b, "b")
    target = None if target is None else _states(target, "target")
    if a.ndim != 3 or a.shape != b.shape:
        raise DataError(
            f"a {tuple(a.shape)} and b {tuple(b.shape)} must both be (layer, pair, d)"
        )
    if target is None:
        target = composite_target(a, b)
    if target.shape != a.shape:
        raise DataError(f"target {tuple(target.shape)} must match a {tuple(a.shape)}")
    for name, t in (("a", a), ("b", b), ("target", target)):
        if not torch.isfinite(t).all():
            raise NonFiniteError(f"{name} contains NaN/inf; drop those pairs or fix the model")
    L, n, _ = a.shape
    labels = tuple(labels) if labels is not None else (kind,) * n
    if len(labels) != n:
        raise DataError(f"{len(labels)} labels for {n} pairs; give one label per pair")
    layers = tuple(int(x) for x in layers) if layers is not None else tuple(range(L))
    if len(layers) != L:
        raise DataError(f"layers lists {len(layers)} blocks but the states hold {L}")
    head = layers[cfg.layer] if -len(layers) <= cfg.layer < 0 else cfg.layer
    if head not in layers:
        raise DataError(f"HEConfig.layer={cfg.layer} is not among the measured layers {layers}")

    fit, score = split_pairs(
        n, train_fraction=cfg.train_fraction, shuffle=cfg.shuffle, seed=cfg.seed
    )
    X = torch.cat([a, b], dim=-1).to(torch.float64)
    Y = target.to(torch.float64)
    Ys = Y[:, torch.from_numpy(score)]
    groups = tuple(dict.fromkeys(labels))
    lab = np.asarray(labels)
    lab_scored = lab[score]
    # [C]: one operator for every pair; parts="separate" [O]: one per modifier / connective
    cells = [(fit, np.arange(len(score)))] if cfg.parts == "same_pass" else [
        (fit[lab[fit] == g], np.flatnonzero(lab_scored == g)) for g in groups
    ]
    # per scored pair: squared deviation from the scored mean (of its group when operators are
    # per group: 1 - R^2 within groups), mean over dims
    sq_dev = np.zeros((L, len(score)))
    for _, s_pos in cells:
        ys = Ys[:, torch.from_numpy(s_pos)]
        sq_dev[:, s_pos] = ((ys - ys.mean(1, keepdim=True)) ** 2).mean(-1).numpy()
    errs = []
    for family in track(cfg.families, desc="homomorphism operators", unit="fit",
                        total=len(cfg.families) * len(cells), weight=lambda _: len(cells)):
        pred = torch.zeros_like(Ys)
        for f_idx, s_pos in cells:
            if not len(s_pos):
                continue
            if len(f_idx) < 2 or (cfg.parts == "separate" and len(s_pos) < 2):
                raise TooFewPairsError(
                    f"group {str(lab[score[s_pos[0]]])!r} has {len(f_idx)} fit and {len(s_pos)} "
                    "scored pair(s); one operator per group (parts='separate') needs >= 2 of "
                    "each (1 - R^2 within a group): use more examples"
                )
            op = make_operator(family, solver=cfg.solver, alpha=cfg.alpha, seed=cfg.seed)
            op.fit(X[:, torch.from_numpy(f_idx)], Y[:, torch.from_numpy(f_idx)])
            pred[:, torch.from_numpy(s_pos)] = op.predict_tensor(
                X[:, torch.from_numpy(score[s_pos])])
        errs.append(((pred - Ys) ** 2).mean(-1).numpy())
    err = np.stack(errs, axis=1)  # (layer, family, score)
    sst = sq_dev.sum(-1)[:, None]
    mse = err.mean(-1)
    normalised = err.sum(-1) / sst

    group_mse = np.full((L, len(cfg.families), len(groups)), np.nan)
    counts = []
    for g, name in enumerate(groups):
        sel = lab_scored == name
        counts.append(int(sel.sum()))
        if sel.any():
            group_mse[:, :, g] = err[:, :, sel].mean(-1)

    idx = bootstrap_indices(len(score), cfg.n_resamples, cfg.seed)  # (resample, score)
    he_pair = err.mean(1)  # (layer, score): mean over families per pair
    he_boot = he_pair[:, idx].mean(-1)  # (layer, resample)
    he_lo, he_hi = percentile_interval(he_boot, cfg.confidence_level)
    norm_boot = (err[:, :, idx].sum(-1) / sq_dev[:, None, idx].sum(-1)).mean(1)  # (layer, resample)
    nlo, nhi = percentile_interval(norm_boot, cfg.confidence_level)
    return HEResult(
        kind=kind, layers=layers, families=tuple(cfg.families), groups=groups,
        mse=mse, normalised=normalised, group_mse=group_mse,
        he=mse.mean(1), he_low=np.asarray(he_lo, dtype=np.float64),
        he_high=np.asarray(he_hi, dtype=np.float64),
        he_normalised=normalised.mean(1),
        he_normalised_low=np.asarray(nlo, dtype=np.float64),
        he_normalised_high=np.asarray(nhi, dtype=np.float64),
        headline_layer=head, n_pairs=n, n_fit=len(fit), n_scored=len(score),
        group_counts=tuple(counts), config=cfg, pair_he=he_pair, pair_sq_dev=sq_dev,
    )
