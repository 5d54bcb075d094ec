"""``measure = "homomorphism_error"``: held-out HE of a composition at one block (An & Du 2026)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...context import Context
from ...homomorphism.config import HEConfig
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class HomomorphismErrorSpec(HEConfig):
    """Keys of a ``homomorphism_error`` claim or marker (data: a SCAN-style task, ``prompt_only = false``).

    :class:`~probekit.homomorphism.HEConfig`'s options are keys (as ``[[homomorphism]]``),
    except the bootstrap (``n_resamples``, ``confidence_level``: the file's ``[stats]``) and
    ``max_examples``; ``layer`` is required (the block). ``composition``: ``"modifier"``
    (primitive + modifier) or ``"sequence"`` (``then``); ``statistic``: ``"mse"`` ([C]: mean
    over operator families of the held-out MSE) or ``"normalised"`` (ours: ``1 - R^2``).
    """

    layer: int
    composition: Literal["modifier", "sequence"] = "modifier"
    statistic: Literal["mse", "normalised"] = "normalised"
    max_examples: int | None = field(default=None, init=False)
    n_resamples: int = field(default=1000, init=False)
    confidence_level: float = field(default=0.95, init=False)


@register_measurement("homomorphism_error", spec=HomomorphismErrorSpec,
                      needs_testbed="a SCAN-style composition task (primitive/modifier token structure)")
def homomorphism_error(spec: HomomorphismErrorSpec, ctx: Context) -> Measurement:
    """HE at ``layer`` from :func:`probekit.homomorphism.layer_he.layer_he`.

    ``mse``: per scored pair, the family-mean held-out squared error (its mean is HE; bootstrap
    over scored pairs, as the HE result's own CI). ``normalised``: ``sum err / sum sq. dev``
    over the scored pairs, bootstrapped as a ratio of sums.
    """
    from ...homomorphism.layer_he import layer_he
    from ...util.constraints import base_config

    cfg = base_config(spec, HEConfig, layer=-1)  # the block is layer_he's argument
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
