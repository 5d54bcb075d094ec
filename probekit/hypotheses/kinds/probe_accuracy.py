"""``measure = "probe_accuracy"``: held-out accuracy of a logistic probe at a site (Alain & Bengio 2016).

:func:`probekit.probes.claims.probe_correct`; control: probes refit on shuffled training labels
(:func:`probekit.probes.claims.shuffled_label_accuracies`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import label_name, labels, site_rows
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


@register_measurement("probe_accuracy", spec=ProbeAccuracySpec, control=True)
def probe_accuracy(spec: ProbeAccuracySpec, ctx: Context, *, control: bool = False) -> Measurement:
    """Per-example correctness of a logistic probe on the test split (bootstrap over examples).

    Control: the accuracies of probes refit on shuffled training labels (``[stats]
    n_permutations`` refits), a permutation null (Hewitt & Liang 2019 style control).
    """
    import numpy as np

    from ...errors import DataError
    from ...probes.claims import probe_correct, shuffled_label_accuracies
    from ...probes.splits import check_class_splits

    site, X = site_rows(ctx, spec.site)
    X, y, name = X.numpy(), labels(ctx, spec.label), label_name(ctx, spec.label)
    train, test = ctx.examples.split(spec.train_split), ctx.examples.split(spec.test_split)
    split = check_class_splits(y, train, test, name=f"claim {spec.site} label {name!r}")
    if not split.testable:  # accuracy vs shuffled labels would pass for a probe that learned nothing
        raise DataError(split.problems[0])
    fit = {"C": spec.C, "max_iter": spec.max_iter}
    correct = probe_correct(X, y, train, test, **fit)
    seeds = [ctx.stats.seed + 1 + i for i in range(ctx.stats.n_permutations)]
    null = shuffled_label_accuracies(X, y, train, test, seeds=seeds, executor=ctx.executor,
                                     **fit) if control else None
    return Measurement(
        metric="accuracy", values=correct, null=null, n=int(len(test)),
        unit=f"{spec.test_split} examples",
        method=f"logistic probe (C={spec.C:g}) for {name!r} at {site.key}, fit on {len(train)} "
        f"{spec.train_split} examples",
        details={"site": site.key, "n_train": int(len(train)), "n_classes": int(len(np.unique(y[train])))},
    )
