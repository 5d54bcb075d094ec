"""Progress measures of modular addition with their sampling units and bootstrap replicates.

:mod:`probekit.grokking.progress_measures` defines the measures of Nanda et al. (2023, arXiv
2301.05217, §5.1) on one checkpoint's logit grid; this module gives each the unit it varies
over and resamples those units (Efron & Tibshirani 1993), for a claim's confidence interval:

* :func:`ablation_loss`: per-pair cross-entropy of the restricted / excluded logits on a split
  of the ``p x p`` pairs (units: pairs);
* :func:`fourier_gini_resamples`: Gini of the ``p`` Fourier-component norms of ``W_E`` or
  ``W_L = W_out W_U``; a resample recomputes every norm over resampled embedding dimensions /
  neurons, ``||c_j||^2 = sum_d n_d c_jd^2`` with ``n_d`` the resample counts;
* :func:`circuit_efficiency`: ``||theta||_2 / mean margin`` (Varma et al. 2023), the mean logit
  margin resampled over pairs;
* :func:`restricted_loss_lead`: over a checkpoint series, the step at which the held-out loss
  falls to a threshold minus the step at which the restricted loss does; a resample reweights
  the pairs once and recomputes both curves and both crossings (:func:`crossing_step`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from jaxtyping import Bool, Float

from ..errors import ConfigError, DataError, NotApplicableError
from .progress_measures import (
    ProgressSeries,
    ablated_logits,
    crossing_step,
    gini,
    logit_margin,
    modular_pair_loss,
    neuron_path,
    sum_direction_power,
    sum_squared_weights,
)

__all__ = [
    "AblationLoss", "Efficiency", "Lead", "Resampled", "ablation_loss", "circuit_efficiency",
    "fourier_gini_resamples", "pair_split", "restricted_loss_lead", "top_key_frequencies",
]

Split = Literal["all", "train", "test"]


@dataclass(frozen=True, kw_only=True)
class Resampled:
    """A statistic, its bootstrap replicates ``(B,)`` and the number ``n`` of resampled units."""

    estimate: float
    resamples: np.ndarray
    n: int


@dataclass(frozen=True, kw_only=True)
class AblationLoss:
    """Per-pair loss of the ablated logits on a split, the full logits' mean loss, the keys."""

    loss: np.ndarray
    full_loss: float
    keys: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Efficiency(Resampled):
    """``||theta||_2 / mean margin`` with its two parts."""

    param_norm: float
    mean_margin: float


@dataclass(frozen=True, kw_only=True)
class Lead(Resampled):
    """Held-out crossing step minus restricted crossing step, and the two steps."""

    restricted_step: float
    test_step: float


def pair_split(name: str, train_mask: Bool[np.ndarray, "p p"]) -> Bool[np.ndarray, "p p"]:
    """The pairs of ``"all"``, ``"train"`` (``train_mask``) or ``"test"`` (held out)."""
    masks = {"all": np.ones_like(train_mask), "train": train_mask, "test": ~train_mask}
    if name not in masks:
        raise ConfigError(f"split {name!r}: use one of {sorted(masks)}")
    return masks[name]


def _counts(n: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """``(B, n)`` resample counts of ``n`` units (rows of :func:`bootstrap_indices`)."""
    from ..stats.bootstrap import bootstrap_indices

    boot = bootstrap_indices(n, n_bootstrap, seed)
    return np.stack([np.bincount(b, minlength=n) for b in boot]).astype(np.float64)


def top_key_frequencies(
    logits: Float[np.ndarray, "p p p"], keys: Sequence[int] | None, n_keys: int
) -> tuple[int, ...]:
    """``keys`` if given, else the ``n_keys`` frequencies with most sum-direction power."""
    if keys is not None:
        return tuple(keys)
    power = sum_direction_power(logits)
    return tuple(int(k) for k in (np.argsort(-power[1:], kind="stable") + 1)[:n_keys])


def ablation_loss(
    model: Any, logits: Float[np.ndarray, "p p p"], train_mask: Bool[np.ndarray, "p p"], *,
    which: Literal["restricted", "excluded"], keys: Sequence[int] | None = None, n_keys: int = 5,
    split: Split = "all", path: Literal["neuron", "logits"] = "neuron",
) -> AblationLoss:
    """Cross-entropy of the restricted / excluded logits on each ``split`` pair.

    ``keys`` default to :func:`top_key_frequencies` of ``logits``; ``path``: the neuron path
    (Nanda et al.; read from ``model``) or the full logits
    (:func:`~probekit.grokking.progress_measures.ablated_logits`).
    """
    p = train_mask.shape[0]
    keys = top_key_frequencies(logits, keys, n_keys)
    neurons = neuron_path(model, p) if path == "neuron" else None
    ablated = ablated_logits(logits, keys, which=which, path=path, neurons=neurons)
    rows = pair_split(split, train_mask)
    return AblationLoss(loss=modular_pair_loss(ablated)[rows],
                        full_loss=float(modular_pair_loss(logits)[rows].mean()), keys=keys)


def fourier_gini_resamples(
    model: Any, p: int, *, source: Literal["embed", "neuron_logit"], n_bootstrap: int, seed: int
) -> Resampled:
    """Gini of the ``p`` Fourier-component norms of ``W_E`` or ``W_L``, dimensions resampled.

    ``source="embed"``: rows ``0..p-1`` of ``W_E`` (units: embedding dimensions);
    ``"neuron_logit"``: ``W_L = W_out W_U[:, :p]`` transposed (units: MLP neurons).
    """
    from .fourier import fourier_basis

    if source == "embed":
        w = model.W_E.detach().double().cpu().numpy()[:p]  # (p, d_model)
    else:
        w = (model.W_out[0].detach().double() @ model.W_U[:, :p].detach().double()).cpu().numpy().T
    sq = (fourier_basis(p) @ w) ** 2  # (component, dim)
    counts = _counts(sq.shape[1], n_bootstrap, seed)
    reps = np.array([gini(np.sqrt(sq @ c)) for c in counts])
    return Resampled(estimate=gini(np.sqrt(sq.sum(1))), resamples=reps, n=int(sq.shape[1]))


def circuit_efficiency(
    model: Any, logits: Float[np.ndarray, "p p p"], train_mask: Bool[np.ndarray, "p p"], *,
    split: Split = "train", n_bootstrap: int, seed: int,
) -> Efficiency:
    """``||theta||_2 / mean_split margin`` (Varma et al. 2023; lower = more efficient).

    The margin is :func:`~probekit.grokking.progress_measures.logit_margin`; resamples recompute
    the mean margin over resampled pairs (the norm is exact). NotApplicableError when the mean
    margin is ``<= 0`` (the model does not fit these pairs: norm per margin is undefined).
    """
    from ..stats.bootstrap import bootstrap_indices

    margin = logit_margin(logits)[pair_split(split, train_mask)]
    norm = float(np.sqrt(sum_squared_weights(model.parameters())))
    if margin.mean() <= 0:  # e.g. an early checkpoint of a population: undefined, not an error
        raise NotApplicableError(f"mean {split} logit margin is {margin.mean():.3g} <= 0: the "
                                 "model does not fit these pairs, so norm per margin is undefined")
    boot = margin[bootstrap_indices(margin.size, n_bootstrap, seed)].mean(1)
    return Efficiency(estimate=norm / float(margin.mean()),
                      resamples=norm / np.maximum(boot, 1e-12), n=int(margin.size),
                      param_norm=norm, mean_margin=float(margin.mean()))


def restricted_loss_lead(
    series: ProgressSeries, *, threshold: float, n_bootstrap: int, seed: int
) -> Lead:
    """Steps by which the restricted loss reaches ``threshold`` before the held-out loss.

    Both curves are means over pairs (restricted: ``series.restricted_split``; held-out: the
    test pairs), their first crossings interpolated by :func:`crossing_step`. The bootstrap
    resamples pairs once and recomputes both crossings over the whole series; a resample whose
    curve never crosses counts as crossing at the last step. DataError when a curve of the
    series itself never crosses.
    """
    steps, t = series.steps, threshold
    r_cross = crossing_step(steps, series.curve("restricted_loss"), t)
    t_cross = crossing_step(steps, series.curve("test_loss"), t)
    if not np.isfinite(r_cross) or not np.isfinite(t_cross):
        raise DataError(
            f"over steps {steps[0]}..{steps[-1]} the restricted loss crosses {t:g} at {r_cross} "
            f"and the held-out loss at {t_cross}: a curve never falls to loss_threshold; raise "
            "it or extend the series"
        )
    flat = series.train_mask.ravel()
    r_units = pair_split(series.restricted_split, series.train_mask).ravel()
    R = np.stack([pt.restricted_pair_loss.ravel() for pt in series.points])  # (ckpt, pair)
    T = np.stack([pt.pair_loss.ravel() for pt in series.points])
    reps = []
    for c in _counts(flat.size, n_bootstrap, seed):
        cr, ct = c * r_units, c * ~flat
        rc = crossing_step(steps, R @ cr / cr.sum(), t)
        tc = crossing_step(steps, T @ ct / ct.sum(), t)
        reps.append(min(tc, steps[-1]) - min(rc, steps[-1]))
    return Lead(estimate=float(t_cross - r_cross), resamples=np.asarray(reps), n=int(flat.size),
                restricted_step=r_cross, test_step=t_cross)
