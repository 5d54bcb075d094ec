"""``measure = "probe_accuracy"``: held-out accuracy of a logistic probe at a site (Alain & Bengio 2016)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class ProbeAccuracySpec:
    """Keys of a ``probe_accuracy`` claim.

    ``site``: e.g. ``"resid_post@0"`` or ``"embed"`` (activations at ``[capture] positions``);
    ``label``: the column to decode (default ``[data] label``); the probe is fit on
    ``train_split`` and scored on ``test_split`` with a fixed inverse regularisation ``C``.
    """

    site: str
    label: str | None = None
    train_split: str = "train"
    test_split: str = "test"
    C: float = 1.0
    max_iter: int = 200


@dataclass(frozen=True, kw_only=True)
class ShuffledFit:
    """One control refit: the probe trained on shuffled training labels (picklable task)."""

    X_train: Any
    y_train: Any
    X_test: Any
    y_test: Any
    C: float
    max_iter: int
    seed: int


def shuffled_accuracy(task: ShuffledFit) -> float:
    """Test accuracy of a probe fit on a seeded permutation of the training labels."""
    import numpy as np

    from ...probes import LogisticProbe

    y = np.random.default_rng(task.seed).permutation(task.y_train)
    probe = LogisticProbe(C=task.C, max_iter=task.max_iter).fit(task.X_train, y)
    return float(np.mean(probe.predict(task.X_test) == task.y_test))


@register_measurement("probe_accuracy", spec=ProbeAccuracySpec, control=True)
def probe_accuracy(spec: ProbeAccuracySpec, ctx, *, control: bool = False) -> Measurement:
    """Per-example correctness of a logistic probe on the test split (bootstrap over examples).

    Control: the accuracies of probes refit on shuffled training labels (``[stats]
    n_permutations`` refits), a permutation null (Hewitt & Liang 2019 style control).
    """
    import warnings

    import numpy as np
    from sklearn.exceptions import ConvergenceWarning

    from ...errors import DataError
    from ...probes import LogisticProbe
    from ...probes.splits import check_class_splits
    from ...sites import Site

    site = Site.parse(spec.site)
    X = ctx.activations([site])[site].double().cpu().numpy()
    ex = ctx.examples
    y = np.asarray(ex.column(spec.label or ctx.suite.data.label))
    train, test = ex.split(spec.train_split), ex.split(spec.test_split)
    split = check_class_splits(y, train, test, name=f"claim {spec.site} label "
                               f"{spec.label or ctx.suite.data.label!r}")
    if not split.testable:  # accuracy vs shuffled labels would pass for a probe that learned nothing
        raise DataError(split.problems[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        probe = LogisticProbe(C=spec.C, max_iter=spec.max_iter).fit(X[train], y[train])
        correct = (probe.predict(X[test]) == y[test]).astype(np.float64)
        null = None
        if control:
            tasks = [ShuffledFit(X_train=X[train], y_train=y[train], X_test=X[test], y_test=y[test],
                                 C=spec.C, max_iter=spec.max_iter, seed=ctx.stats.seed + 1 + i)
                     for i in range(ctx.stats.n_permutations)]
            null = np.asarray(ctx.executor.map(shuffled_accuracy, tasks, desc="shuffled-label probes"))
    return Measurement(
        metric="accuracy", values=correct, null=null, n=int(len(test)),
        unit=f"{spec.test_split} examples",
        method=f"logistic probe (C={spec.C:g}) for {spec.label or ctx.suite.data.label!r} at "
        f"{site.key}, fit on {len(train)} {spec.train_split} examples",
        details={"site": site.key, "n_train": int(len(train)), "n_classes": int(len(np.unique(y[train])))},
    )
