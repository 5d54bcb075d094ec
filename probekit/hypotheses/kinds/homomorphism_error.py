"""``measure = "homomorphism_error"``: held-out HE of a composition at one block (An & Du 2026)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class HomomorphismErrorSpec:
    """Keys of a ``homomorphism_error`` claim (data: a SCAN-style task, ``prompt_only = false``).

    ``layer``: the block; ``composition``: ``"modifier"`` (primitive + modifier) or
    ``"sequence"`` (``then``); ``statistic``: ``"mse"`` ([C]: mean over operator families of the
    held-out MSE) or ``"normalised"`` (ours: ``1 - R^2``); ``parts``: ``"same_pass"`` ([C])
    or ``"separate"`` ([O]: part states from separate forward passes, one operator per
    modifier; :mod:`probekit.homomorphism.separate`); the rest as ``[[homomorphism]]``.
    """

    layer: int
    composition: Literal["modifier", "sequence"] = "modifier"
    statistic: Literal["mse", "normalised"] = "normalised"
    split: str = "train"
    families: tuple[Literal["affine", "bilinear", "mlp"], ...] = ("affine", "bilinear", "mlp")
    solver: Literal["adam", "closed_form_ridge"] = "adam"
    parts: Literal["same_pass", "separate"] = "same_pass"
    pooling: Literal["mean", "last"] = "mean"
    site: str = "resid_post"
    train_fraction: float = 0.8
    seed: int = 0


def _check_compositions(ctx: Any, spec: HomomorphismErrorSpec) -> None:
    """NotApplicableError when the data has no SCAN parse or none of the claimed compositions."""
    from ...errors import NotApplicableError
    from ...homomorphism import PARSE_COLUMNS

    ex = ctx.examples
    missing = [c for c in PARSE_COLUMNS if c not in ex.columns]
    if missing:
        raise NotApplicableError(
            f"homomorphism_error needs a SCAN-style task (parse columns {missing} missing; "
            f"have {sorted(ex.columns)}): HE is defined for compositional commands only"
        )
    idx = ex.split(spec.split)
    if spec.composition == "modifier":
        mods = ex.columns["mod_positions"]
        if not any(m is not None for i in idx for m in mods[i]):
            raise NotApplicableError(f"the {spec.split!r} inputs have no modifiers (no modified "
                                     "clause), so modifier HE is undefined for this task")
    elif not any(len(ex.columns["part_spans"][i]) > 1 for i in idx):
        raise NotApplicableError(f"the {spec.split!r} inputs are all single clauses, so sequence "
                                 "HE (consecutive parts) is undefined for this task")


@register_measurement("homomorphism_error", spec=HomomorphismErrorSpec)
def homomorphism_error(spec: HomomorphismErrorSpec, ctx: Any) -> Measurement:
    """HE at ``layer`` from :func:`probekit.homomorphism.measure_he`.

    ``mse``: per scored pair, the family-mean held-out squared error (its mean is HE; bootstrap
    over scored pairs, as the HE result's own CI). ``normalised``: ``sum err / sum sq. dev``
    over the scored pairs, bootstrapped as a ratio of sums.
    """
    import numpy as np

    from ...errors import ConfigError
    from ...homomorphism import HEConfig, measure_he
    from ...stats.bootstrap import bootstrap_indices

    _check_compositions(ctx, spec)
    cfg = HEConfig(families=tuple(spec.families), solver=spec.solver, parts=spec.parts,
                   pooling=spec.pooling, site=spec.site, train_fraction=spec.train_fraction,
                   seed=spec.seed)
    layers, results = measure_he(ctx, spec.split, (spec.composition,), cfg)
    if spec.layer not in layers:
        raise ConfigError(f"layer {spec.layer} not measured; blocks are {list(layers)}")
    res = results[spec.composition]
    row = res.layers.index(spec.layer)
    err, dev = res.pair_he[row], res.pair_sq_dev[row]
    method = (f"{spec.composition} HE at {spec.site}@{spec.layer}: operators "
              f"{list(spec.families)} ({spec.solver}) fit on {res.n_fit} pairs, scored on "
              f"{res.n_scored}; " + ("parts from one pass, one shared operator [C]"
                                     if spec.parts == "same_pass" else
                                     "parts from separate passes, one operator per group [O]"))
    details = {"parts": spec.parts, "solver": spec.solver}
    details |= {"he_mse": float(res.he[row]), "he_normalised": float(res.he_normalised[row]),
               "n_pairs": res.n_pairs}
    if spec.statistic == "mse":
        return Measurement(metric="HE (held-out MSE)", values=err, unit="scored pairs",
                           method=method, details=details)
    boot = bootstrap_indices(err.size, ctx.stats.n_bootstrap, ctx.stats.seed)
    return Measurement(
        metric="HE (1 - R^2)", estimate=float(res.he_normalised[row]),
        resamples=err[boot].sum(1) / np.maximum(dev[boot].sum(1), 1e-300), n=int(err.size),
        unit="scored pairs", method=method, details=details,
    )
