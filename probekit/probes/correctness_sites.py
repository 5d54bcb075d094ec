"""The in-advance correctness probe over named sites, with its report numbers.

What a ``[[correctness]]`` suite section computes, as one function of activations and labels
(:func:`correctness_by_site`): the sites are stacked as the rows of
:func:`~probekit.probes.correctness_probe` ("No Answer Needed", arXiv 2509.10625:
diff-of-means direction, k-fold AUROC per site, baselines, best-of-sites max-statistic
permutation test), and the result is laid out as the report's JSON (the sweep layout: one CV
AUROC per site with its +-1.96 SE band). Labels that cannot test the probe give a result whose
``not_testable`` says why, never a test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import DataError
from ._validation import IndexLike, check_indices
from .blocks import baseline_rows, correctness_rows, survives_controls
from .correctness import CorrectnessConfig, CorrectnessProbeResult, correctness_probe

__all__ = ["CorrectnessSitesResult", "correctness_by_site"]


@dataclass(frozen=True, kw_only=True)
class CorrectnessSitesResult:
    """What :func:`correctness_by_site` found.

    Attributes:
        result: the correctness probe (one row per site, in ``sites`` order).
        sites: the site keys of the activations.
        best: index of the best site (highest selection metric).
        metric_name: ``"within-group AUROC"`` with groups, else ``"mean CV AUROC"``.
        data: the report's JSON numbers.
        not_testable: why the labels cannot test the probe (empty when they can).
    """

    result: CorrectnessProbeResult
    sites: tuple[Any, ...]
    best: int
    metric_name: str
    data: dict[str, Any]
    not_testable: str


def correctness_by_site(
    acts: Mapping[Any, torch.Tensor],
    correct: Sequence[Any] | np.ndarray,
    *,
    label: str,
    id_idx: IndexLike,
    ood_idx: Mapping[str, IndexLike] | None = None,
    groups: Sequence[Any] | None = None,
    group_column: str | None = None,
    texts: Sequence[str] | None = None,
    confidence: Sequence[float] | np.ndarray | None = None,
    alpha: float = 0.05,
    config: CorrectnessConfig,
) -> CorrectnessSitesResult:
    """Correctness probe at every site of ``acts`` (sites of one width), as report numbers.

    Args:
        acts: site -> ``(n, d)`` last-prompt-token activations of every example.
        correct: ``(n,)`` 0/1 (or bool) labels, 1 = the model's answer was correct.
        label: the label column's name.
        id_idx: the ID questions (the probe's folds are made over these).
        ood_idx: named OOD splits, scored fold-wise.
        groups: ``(n,)`` group of every example (grouped folds, within-group AUROC).
        group_column: the groups' column name (recorded).
        texts: ``(n,)`` question texts (TF-IDF baseline), or None.
        confidence: the model's answer confidence on the ``id_idx`` rows, in that order.
        alpha: level of the best-of-sites test (``survives_controls``).
        config: the probe's options.
    """
    sites = tuple(acts)
    widths = {acts[s].shape[1] for s in sites}
    if len(widths) != 1:
        raise DataError(f"correctness probes need sites of one width, got {sorted(widths)}")
    stack = torch.stack([acts[s] for s in sites])
    n = stack.shape[1]
    y_all = np.asarray(correct).astype(int).astype(bool)
    ids = check_indices(id_idx, n, name="id")
    oods = {k: check_indices(v, n, name=k) for k, v in (ood_idx or {}).items()}
    ood = {k: (stack[:, v], y_all[v]) for k, v in oods.items()}
    g = None if groups is None else np.asarray([str(v) for v in groups])[ids]
    txt = None if texts is None else [str(t) for t in np.asarray(texts, dtype=object)[ids]]
    res = correctness_probe(stack[:, ids], y_all[ids], groups=g, ood=ood, texts=txt,
                            confidence=confidence, config=config)
    names = [str(getattr(s, "name", s)) for s in sites]
    entry: dict[str, Any] = {
        "kind": "correctness", "label": label, "chance": 0.5,
        "n_correct": int(res.n_correct), "n_incorrect": int(res.n_incorrect),
        "evaluation": res.evaluation, "group_column": group_column,
    }
    grouped = res.within_group_auroc is not None
    metric_name = "within-group AUROC" if grouped else "mean CV AUROC"
    if res.not_testable:
        entry["not_testable"] = res.not_testable
        entry["warnings"] = [f"correctness probe not testable: {res.not_testable}"]
        return CorrectnessSitesResult(result=res, sites=sites, best=0, metric_name=metric_name,
                                      data=entry, not_testable=res.not_testable)
    rows = correctness_rows(res, names, [getattr(s, "layer", None) for s in sites])
    best = list(res.layers).index(res.best_layer)
    significant, beats_all = survives_controls(res, alpha)
    mx = res.max_stat_test
    entry.update({
        "sweep": {"probe": "correctness", "metric": "auroc", "confidence_level": 0.95,
                  "n_bootstrap": 0, "rows": rows,
                  "best": {"site": names[best], "layer": getattr(sites[best], "layer", None),
                           "cv_auroc": rows[best]["cv_auroc"]}},
        "ood_gap_at_best": {k: rows[best][f"gap/{k}"] for k in ood},
        "nested_selection": {
            "sites": [names[res.layers.index(lay)] for lay in res.selected_layers],
            "pooled_auroc": res.selected_pooled_auroc,
            "within_group_auroc": res.selected_within_group_auroc if grouped else None,
        },
        "baselines": baseline_rows(res),
        "max_statistic": None if mx is None else {
            "statistic": mx.statistic, "p_value": mx.p_value, "method": mx.method},
        "survives_controls": bool(significant and beats_all),
    })  # fmt: skip
    return CorrectnessSitesResult(result=res, sites=sites, best=best, metric_name=metric_name,
                                  data=entry, not_testable="")
