"""``weight_norm``: total sum of squared weights (Nanda et al. 2023, §5.1).

:func:`probekit.grokking.progress_measures.sum_squared_weights` of the ``[model]`` (or
``checkpoint = "DIR"``): exact, so its CI is the point (no sampling unit).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import checkpoint_dir, exact
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class WeightNormSpec:
    """Keys of a ``weight_norm`` claim (``checkpoint``: default ``[model]``)."""

    checkpoint: str | None = None


@register_measurement("weight_norm", spec=WeightNormSpec)
def weight_norm(spec: WeightNormSpec, ctx: Context) -> Measurement:
    """Total sum of squared weights: exact, so its CI is the point (no sampling unit)."""
    from ...grokking.progress_measures import sum_squared_weights
    from ...models import load_checkpoint

    model = ctx.model if spec.checkpoint is None else load_checkpoint(
        checkpoint_dir(ctx, spec.checkpoint))
    return Measurement(
        metric="sum of squared weights", **exact(ctx, sum_squared_weights(model.parameters())),
        unit="model",
        method="sum of squares of every parameter (Nanda et al. 2023 §5.1); exact, no resampling",
    )
