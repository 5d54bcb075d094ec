"""``circuit_efficiency``: parameter norm per logit margin (Varma et al. 2023).

:func:`probekit.grokking.progress_stats.circuit_efficiency` on a modular-addition checkpoint (the
``[model]`` one, or ``checkpoint = "DIR"``), the margin bootstrapped over ``split`` pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import Context
from ..keys import checkpoint_model
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class CircuitEfficiencySpec:
    """Keys of a ``circuit_efficiency`` claim: margins over ``split`` pairs (default train)."""

    checkpoint: str | None = None
    split: Literal["all", "train", "test"] = "train"


@register_measurement("circuit_efficiency", spec=CircuitEfficiencySpec,
                      needs_testbed="the modular-addition logit grid of a probekit checkpoint")
def circuit_efficiency(spec: CircuitEfficiencySpec, ctx: Context) -> Measurement:
    """``||theta||_2 / mean logit margin`` (Varma et al. 2023; lower = more efficient)."""
    from ...grokking.modadd_checkpoints import train_mask
    from ...grokking.progress_measures import modular_logit_grid
    from ...grokking.progress_stats import circuit_efficiency as efficiency

    model, path = checkpoint_model(ctx, spec.checkpoint)
    mask = train_mask(path)
    res = efficiency(model, modular_logit_grid(model, mask.shape[0]), mask, split=spec.split,
                     n_bootstrap=ctx.stats.n_bootstrap, seed=ctx.stats.seed)
    return Measurement(
        metric="parameter norm per logit margin", estimate=res.estimate, resamples=res.resamples,
        n=res.n, unit=f"{spec.split} pairs",
        method=f"||theta||_2 = {res.param_norm:.4g} over the mean {spec.split} logit margin "
        f"{res.mean_margin:.4g} (Varma et al. 2023 circuit efficiency, per checkpoint)",
        details={"param_norm": res.param_norm, "mean_margin": res.mean_margin},
    )
