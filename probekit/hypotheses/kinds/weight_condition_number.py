"""``measure = "weight_condition_number"``: ``s_max / s_min`` of a weight matrix.

:func:`probekit.geometry.weight_markers.condition_numbers`. KappaTune (Ludwig, arXiv
2506.16289) ranks tensors by it to choose which to fine-tune; reading it as a generalization /
OOD marker is OUR EXTENSION, not a published result.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import exact
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class WeightConditionSpec:
    """Keys of a ``weight_condition_number`` claim.

    ``weight``: a state-dict key or TransformerLens name (``"W_E"``, ``"W_U"``,
    ``"blocks.0.mlp.W_in"``, ``"blocks.0.attn.W_Q"``: per-head weights joined into the layer's
    projection unless ``head`` is given), or ``"all"`` (the mean over every weight matrix of the
    state dict, each reshaped to ``(shape[0], -1)``; units = matrices); ``log10``: report
    ``log10(s_max / s_min)`` (spans of orders of magnitude; ``"all"`` then averages the logs).
    """

    weight: str
    head: int | None = None
    log10: bool = False


@register_measurement("weight_condition_number", spec=WeightConditionSpec)
def weight_condition_number(spec: WeightConditionSpec, ctx: Context) -> Measurement:
    """Condition number of ``weight`` (exact: a degenerate CI), or its mean over all weights."""
    import numpy as np

    from ...geometry.weight_markers import condition_numbers

    conds = condition_numbers(ctx.model, spec.weight, head=spec.head)
    per = {k: float(np.log10(v)) if spec.log10 else float(v) for k, v in conds.items()}
    what = "log10 condition number" if spec.log10 else "condition number"
    cite = "(our extension as a marker; KappaTune, Ludwig 2025)"
    if spec.weight == "all":
        return Measurement(
            metric=f"{what} (mean over weights)", values=np.array(list(per.values())),
            unit="weight matrices", details={"per_weight": per},
            method=f"mean over {len(per)} weight matrices of {what} s_max / s_min {cite}",
        )
    target = spec.weight if spec.head is None else f"{spec.weight}[head {spec.head}]"
    return Measurement(
        metric=f"{what} of {target}", **exact(ctx, per[spec.weight]), unit="weight matrix",
        method=f"{what} s_max / s_min of {target} {cite}; exact, no resampling",
        details={"condition_number": float(conds[spec.weight])},
    )
