"""``measure = "homomorphism_error"``: held-out HE of a composition at one block (An & Du 2026)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import Context
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


@register_measurement("homomorphism_error", spec=HomomorphismErrorSpec)
def homomorphism_error(spec: HomomorphismErrorSpec, ctx: Context) -> Measurement:
    """HE at ``layer`` from :func:`probekit.homomorphism.layer_he.layer_he`.

    ``mse``: per scored pair, the family-mean held-out squared error (its mean is HE; bootstrap
    over scored pairs, as the HE result's own CI). ``normalised``: ``sum err / sum sq. dev``
    over the scored pairs, bootstrapped as a ratio of sums.
    """
    from ...homomorphism import HEConfig
    from ...homomorphism.layer_he import layer_he

    cfg = HEConfig(families=tuple(spec.families), solver=spec.solver, parts=spec.parts,
                   pooling=spec.pooling, site=spec.site, train_fraction=spec.train_fraction,
                   seed=spec.seed)
    res = layer_he(ctx, spec.split, spec.composition, spec.layer, cfg,
                   n_bootstrap=ctx.stats.n_bootstrap, seed=ctx.stats.seed)
    how = ("parts from one pass, one shared operator [C]" if spec.parts == "same_pass" else
           "parts from separate passes, one operator per group [O]")
    method = (f"{spec.composition} HE at {spec.site}@{spec.layer}: operators "
              f"{list(spec.families)} ({spec.solver}) fit on {res.n_fit} pairs, scored on "
              f"{res.n_scored}; {how}")
    details = {"parts": spec.parts, "solver": spec.solver, "he_mse": res.he,
               "he_normalised": res.he_normalised, "n_pairs": res.n_pairs}
    if spec.statistic == "mse":
        return Measurement(metric="HE (held-out MSE)", values=res.pair_he, unit="scored pairs",
                           method=method, details=details)
    return Measurement(
        metric="HE (1 - R^2)", estimate=res.he_normalised, resamples=res.normalised_resamples,
        n=int(res.pair_he.size), unit="scored pairs", method=method, details=details,
    )
