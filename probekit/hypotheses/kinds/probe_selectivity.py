"""``measure = "probe_selectivity"``: probe accuracy above a control task (Hewitt & Liang 2019).

``selectivity = acc(task) - acc(control)`` for the same probe family, site and splits, the
control relabelling each example by a random but consistent map from its type to a label
(:func:`probekit.probes.claims.selectivity`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import example_types, label_name, labels, site_rows
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class ProbeSelectivitySpec:
    """Keys of a ``probe_selectivity`` claim (probe keys as ``probe_accuracy``).

    ``types``: what the control map is a function of: ``"input"`` (each distinct token
    sequence is one type: the control is a random relabelling of the inputs), ``"position"``
    (the token at the probed ``[capture] positions``, Hewitt & Liang's word type) or
    ``"column:NAME"`` (a metadata column, e.g. the primitive word); ``n_control_maps``: control
    maps averaged (seeds ``seed, seed + 1, ...``).
    """

    site: str
    label: str | None = None
    train_split: str = "train"
    test_split: str = "test"
    C: float = 1.0
    max_iter: int = 200
    types: str = "input"
    n_control_maps: int = 1
    seed: int = 0


@register_measurement("probe_selectivity", spec=ProbeSelectivitySpec)
def probe_selectivity(spec: ProbeSelectivitySpec, ctx: Context) -> Measurement:
    """Per test example: task-probe correct minus control-probe correct (mean = selectivity)."""
    from ...probes.claims import selectivity

    site, X = site_rows(ctx, spec.site)
    label = label_name(ctx, spec.label)
    test = ctx.examples.split(spec.test_split)
    res = selectivity(X.numpy(), labels(ctx, spec.label), example_types(ctx, spec.types),
                      ctx.examples.split(spec.train_split), test, C=spec.C,
                      max_iter=spec.max_iter, n_control_maps=spec.n_control_maps, seed=spec.seed)
    task, control = res.task, res.control
    return Measurement(
        metric="selectivity (accuracy - control accuracy)", values=task - control,
        n=int(len(test)), unit=f"{spec.test_split} examples",
        method=f"logistic probe (C={spec.C:g}) for {label!r} at {site.key}: accuracy "
        f"{task.mean():.3g} minus {control.mean():.3g} on a control task (random map from "
        f"{spec.types} type to label, {spec.n_control_maps} map(s); Hewitt & Liang 2019)",
        details={"site": site.key, "accuracy": float(task.mean()),
                 "control_accuracy": float(control.mean()), "n_types": res.n_types},
    )
