"""``measure = "probe_selectivity"``: probe accuracy above a control task (Hewitt & Liang 2019).

"Designing and Interpreting Probes with Control Tasks" (EMNLP 2019): the control task keeps
the inputs and relabels them by a random but consistent map from word type to label, drawn
from the real label distribution (:func:`probekit.probes.control_labels`);
``selectivity = acc(task) - acc(control)`` for the same probe family, site and splits. A probe
that reads the property has high selectivity; one that memorises types has high control
accuracy and low selectivity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def example_types(ctx: Any, types: str) -> list[Any]:
    """One hashable type per example: the input, the token at the probed position, or a column."""
    from ...errors import ConfigError

    ex = ctx.examples
    if types == "input":
        return [tuple(t) for t in ex.tokens]
    if types.startswith("column:"):
        return list(ex.column(types.split(":", 1)[1]))
    if types != "position":
        raise ConfigError(f"types = {types!r}; expected \"input\", \"position\" or \"column:NAME\"")
    pos = ctx.suite.capture.positions
    if pos == "last":
        return [t[-1] for t in ex.tokens]
    if pos.startswith("column:"):
        col = ex.column(pos.split(":", 1)[1])
        return [t[int(p)] for t, p in zip(ex.tokens, col)]
    raise ConfigError(f"types = \"position\" needs [capture] positions \"last\" or \"column:NAME\", "
                      f"not {pos!r}")


@register_measurement("probe_selectivity", spec=ProbeSelectivitySpec)
def probe_selectivity(spec: ProbeSelectivitySpec, ctx: Any) -> Measurement:
    """Per test example: task-probe correct minus control-probe correct (mean = selectivity).

    The control map is drawn once over the train and test rows together (a type keeps its
    control label across splits); with ``n_control_maps > 1`` the control correctness is the
    mean over maps. Bootstrap over test examples.
    """
    import warnings

    import numpy as np
    from sklearn.exceptions import ConvergenceWarning

    from ...errors import ConfigError
    from ...probes import LogisticProbe
    from ...probes.control import control_labels
    from ...sites import Site

    if spec.n_control_maps < 1:
        raise ConfigError(f"n_control_maps = {spec.n_control_maps}; expected >= 1")
    site = Site.parse(spec.site)
    X = ctx.activations([site])[site].double().cpu().numpy()
    ex = ctx.examples
    label = spec.label or ctx.suite.data.label
    y = np.asarray(ex.column(label))
    train, test = ex.split(spec.train_split), ex.split(spec.test_split)
    rows = np.union1d(train, test)
    ids: dict[Any, int] = {}  # type -> id by first appearance (deterministic across processes)
    kinds = np.asarray([ids.setdefault(t, len(ids)) for t in example_types(ctx, spec.types)],
                       dtype=np.int64)
    if np.unique(kinds[rows]).size < 2:
        raise ConfigError(f"types = {spec.types!r} gives one type on these examples, so the "
                          "control task is constant; use types = \"input\" or a column")

    def test_correct(labels: np.ndarray) -> np.ndarray:
        probe = LogisticProbe(C=spec.C, max_iter=spec.max_iter).fit(X[train], labels[train])
        return (probe.predict(X[test]) == labels[test]).astype(np.float64)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        task = test_correct(y)
        controls = []
        for j in range(spec.n_control_maps):
            ctrl = y.copy()
            ctrl[rows] = control_labels(kinds[rows], task_labels=y[rows],
                                        random_state=spec.seed + j)
            controls.append(test_correct(ctrl))
    control = np.mean(controls, axis=0)
    return Measurement(
        metric="selectivity (accuracy - control accuracy)", values=task - control,
        n=int(len(test)), unit=f"{spec.test_split} examples",
        method=f"logistic probe (C={spec.C:g}) for {label!r} at {site.key}: accuracy "
        f"{task.mean():.3g} minus {control.mean():.3g} on a control task (random map from "
        f"{spec.types} type to label, {spec.n_control_maps} map(s); Hewitt & Liang 2019)",
        details={"site": site.key, "accuracy": float(task.mean()),
                 "control_accuracy": float(control.mean()),
                 "n_types": int(np.unique(kinds[rows]).size)},
    )
