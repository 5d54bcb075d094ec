"""Report blocks of the probe results: the one place their plots and tables are built.

``[[probe]]`` (``suites/analyses/probe.py``) calls :func:`sweep_blocks` with the suite's extras
(label, chance level, control task, per-site permutation tests) and :func:`correctness_blocks`
with its site names; ``SweepResult._blocks()`` and ``CorrectnessProbeResult._blocks()`` call
them with what the result alone knows, so a notebook cell shows the same plot and table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..report.blocks import Block, Column, LinePlot, Series, Table, Text
from ..sites import site_label

if TYPE_CHECKING:
    from .correctness import CorrectnessProbeResult
    from .sweep import SweepResult

__all__ = [
    "baseline_rows", "correctness_blocks", "correctness_rows", "row_label", "survives_controls",
    "sweep_blocks",
]

_HPARAM = {"logistic": "C", "ridge": "alpha"}


def row_label(site: str, layer: int | None) -> str:
    """Short label of a sweep row: the site's label, with ``@layer`` for a stacked layer."""
    label = site_label(site)
    if layer is not None and not label.endswith(f"@{layer}"):
        label += f"@{layer}"
    return label


def sweep_blocks(
    sweep: SweepResult,
    *,
    label: str | None = None,
    chance: float | None = None,
    chance_text: str = "",
    control_test: Sequence[float] | None = None,
    selectivity: Sequence[float] | None = None,
    permutation: Mapping[str, Any] | None = None,
    alpha: float = 0.05,
) -> list[Block]:
    """Summary text, metric-by-site plot, selectivity and permutation plots, per-site table.

    Args:
        sweep: the layer sweep.
        label: the probed label's name (plot title).
        chance: the chance level of the metric (a reference line), when known.
        chance_text: how ``chance`` was computed (e.g. "majority-class rate of the test split").
        control_test: control-task test accuracy per row (Hewitt & Liang 2019), with
            ``selectivity`` (task - control) per row.
        selectivity: see ``control_test``.
        permutation: per-site permutation tests: ``n_permutations``, ``p_values``,
            ``p_adjusted``, ``correction``.
        alpha: significance level of the permutation tests.

    Returns:
        The blocks, in the report's order.
    """
    rows = sweep.to_dict()["rows"]
    labels = tuple(row_label(r["site"], r["layer"]) for r in rows)
    best = sweep.best_row
    pct = int(round(100 * sweep.confidence_level))
    text = f"Selected on CV validation: {labels[best]}, test {sweep.metric} {sweep.test[best]:.3f}"
    text += "." if chance is None else f"; chance {chance:.3f} ({chance_text})."
    if sweep.ood_gap:
        text += " ID - OOD gap there: " + ", ".join(
            f"{k} {float(v[best]):+.3f}" for k, v in sweep.ood_gap.items()) + "."
    if permutation is not None:
        n_sig = int((np.asarray(permutation["p_adjusted"]) <= alpha).sum())
        text += (
            f" {n_sig} of {len(rows)} sites significant after "
            f"{permutation['correction']} at alpha={alpha}."
        )
    series = [
        Series(name="train", values=tuple(sweep.train.tolist()), style="dotted", color="grey"),
        Series(name="CV validation", values=tuple(sweep.val.tolist()), style="dashed",
               color="tab:blue"),
        Series(name=f"test (ID) [{pct}% CI]", values=tuple(sweep.test.tolist()),
               low=tuple(sweep.test_ci_low.tolist()), high=tuple(sweep.test_ci_high.tolist()),
               color="tab:blue"),
    ]
    for name in sweep.ood:
        series.append(Series(
            name=f"OOD {name}", values=tuple(sweep.ood[name].tolist()),
            low=tuple(sweep.ood_ci_low[name].tolist()), high=tuple(sweep.ood_ci_high[name].tolist()),
        ))
    title = f"{sweep.probe} probe" + ("" if label is None else f" for {label!r}")
    blocks: list[Block] = [
        Text(text=text),
        LinePlot(
            title=title, x_labels=labels, series=tuple(series), ylabel=sweep.metric,
            hlines=() if chance is None else ((chance, "chance"),), marker=best,
            marker_label="selected (val)",
        ),
    ]
    if control_test is not None and selectivity is not None:
        blocks.append(LinePlot(
            title="Selectivity (Hewitt & Liang 2019): task - control test accuracy",
            x_labels=labels, ylabel="test accuracy / selectivity",
            series=(
                Series(name="task", values=tuple(sweep.test.tolist()), style="bar",
                       color="tab:blue"),
                Series(name="control task", values=tuple(float(v) for v in control_test),
                       style="bar", color="tab:grey"),
                Series(name="selectivity", values=tuple(float(v) for v in selectivity),
                       color="tab:green"),
            ),
        ))
    if permutation is not None:
        floor = 1.0 / (1 + permutation["n_permutations"])
        blocks.append(LinePlot(
            title="Permutation tests per site", x_labels=labels, ylabel="-log10 p",
            series=(
                Series(name="raw p", values=tuple(
                    (-np.log10(np.maximum(permutation["p_values"], floor))).tolist())),
                Series(name=f"{permutation['correction']}-adjusted", values=tuple(
                    (-np.log10(np.maximum(permutation["p_adjusted"], floor))).tolist()),
                    style="dashed"),
            ),
            hlines=((float(-np.log10(alpha)), f"alpha={alpha}"),),
        ))
    columns = [
        Column(key="site", header="site", fmt="", align="left"),
        Column(key="hyperparameter", header=_HPARAM.get(sweep.probe, "hparam"), fmt=".3g"),
        Column(key="train", header=f"train {sweep.metric}"),
        Column(key="val", header=f"CV validation {sweep.metric}"),
        Column(key="test", header=f"test {sweep.metric}"),
        Column(key="test_ci", header=f"test {pct}% CI", fmt="ci"),
    ]
    for name in sweep.ood:
        columns += [Column(key=f"ood/{name}", header=f"OOD {name}"),
                    Column(key=f"ood_ci/{name}", header=f"OOD {name} CI", fmt="ci"),
                    Column(key=f"gap/{name}", header=f"gap {name}", fmt="+.3f")]
    table_rows = [dict(r, site=labels[i]) for i, r in enumerate(rows)]
    if control_test is not None and selectivity is not None:
        columns += [Column(key="control", header="control test"),
                    Column(key="selectivity", header="selectivity", fmt="+.3f")]
        for i, r in enumerate(table_rows):
            r["control"] = float(control_test[i])
            r["selectivity"] = float(selectivity[i])
    if permutation is not None:
        columns.append(Column(key="p_adjusted", header=f"p ({permutation['correction']})",
                              fmt=".3g"))
        for i, r in enumerate(table_rows):
            r["p_adjusted"] = permutation["p_adjusted"][i]
    blocks.append(Table(columns=tuple(columns), rows=tuple(table_rows), highlight=(best,),
                        caption="Highlighted: the site selected on CV validation."))
    return blocks


def correctness_rows(
    res: CorrectnessProbeResult, sites: Sequence[str], layers: Sequence[int | None] | None = None,
) -> list[dict[str, Any]]:
    """One row per site: mean CV AUROC with its +-1.96 SE band, pooled / within-group AUROC, OOD.

    The band is clipped to [0, 1]; per OOD split: its fold-wise AUROC, band and ID - OOD gap.
    """
    n_folds = res.fold_auroc.shape[1]
    layers = list(res.layers) if layers is None else list(layers)

    def se(sd: Any) -> np.ndarray:
        return 1.96 * np.asarray(sd) / np.sqrt(n_folds)

    def band(m: float, s: float) -> list[float]:  # an AUROC interval stays inside [0, 1]
        return [max(0.0, m - s), min(1.0, m + s)]

    rows = []
    for i, site in enumerate(sites):
        m, s = float(res.auroc_mean[i]), float(se(res.auroc_std)[i])
        # one figure per site: the mean over CV folds (no separate validation / test split)
        row = {"site": site, "layer": layers[i], "cv_auroc": m, "cv_auroc_ci": band(m, s),
               "pooled": float(res.pooled_auroc[i])}
        if res.within_group_auroc is not None:
            row["within_group"] = float(res.within_group_auroc[i])
        for k in res.ood_mean:
            om, os_ = float(res.ood_mean[k][i]), float(se(res.ood_std[k])[i])
            row[f"ood/{k}"], row[f"ood_ci/{k}"], row[f"gap/{k}"] = om, band(om, os_), m - om
        rows.append(row)
    return rows


def baseline_rows(res: CorrectnessProbeResult) -> list[dict[str, Any]]:
    """One row per baseline: its pooled AUROC and the probe's advantage with its CI."""
    grouped = res.within_group_auroc is not None
    out = []
    for b in res.baselines.values():
        r = {"baseline": b.name, "pooled": b.pooled_auroc,
             "diff_pooled": b.diff_pooled.estimate,
             "diff_pooled_ci": [b.diff_pooled.low, b.diff_pooled.high]}
        if grouped and b.diff_within is not None:
            r.update(within=b.within_group_auroc, diff_within=b.diff_within.estimate,
                     diff_within_ci=[b.diff_within.low, b.diff_within.high])
        out.append(r)
    return out


def survives_controls(res: CorrectnessProbeResult, alpha: float) -> tuple[bool, bool]:
    """``(significant, beats_all)`` of the correctness probe's controls.

    ``significant``: the best-of-sites test rejects at ``alpha``; ``beats_all``: every baseline's
    difference CI lies above 0.
    """
    key = "diff_within_ci" if res.within_group_auroc is not None else "diff_pooled_ci"
    base = baseline_rows(res)
    beats_all = bool(base) and all(r[key][0] > 0 for r in base)
    mx = res.max_stat_test
    return (mx is not None and mx.p_value <= alpha), beats_all


def correctness_blocks(
    res: CorrectnessProbeResult, sites: Sequence[str], *, label: str | None = None,
    alpha: float = 0.05,
) -> list[Block]:
    """The correctness probe's report: evaluation and verdict texts, AUROC by site, tables.

    Args:
        res: the correctness probe.
        sites: a name per row of ``res`` (site names or layer labels).
        label: the 0/1 correctness column (plot title).
        alpha: level of the best-of-sites permutation test.
    """
    if res.not_testable:
        return [Text(text=f"The correctness probe is not testable: {res.not_testable}.",
                     level="warning")]
    labels = tuple(site_label(s) for s in sites)
    rows = correctness_rows(res, sites)
    base_rows = baseline_rows(res)
    n_folds = res.fold_auroc.shape[1]
    best = list(res.layers).index(res.best_layer)
    grouped = res.within_group_auroc is not None
    metric_name = "within-group AUROC" if grouped else "mean CV AUROC"
    significant, beats_all = survives_controls(res, alpha)
    survives = significant and beats_all
    sel = res.selected_within_group_auroc if grouped else res.selected_pooled_auroc
    text = (
        f"Evaluation: {res.evaluation} on the ID questions ({int(res.n_correct)} correct, "
        f"{int(res.n_incorrect)} incorrect). Best site by {metric_name}: {labels[best]}; the "
        f"site is chosen on the same folds, so its value is optimistic: the p-value below is "
        f"for the best-of-{len(sites)}-sites statistic (max-statistic permutation, every site "
        f"refit per shuffle), and the baselines are compared with the nested-selection probe "
        f"(site chosen by inner CV in each training split; {metric_name} {sel:.3f})."
    )
    verdict = (
        "The effect survives the controls: significant after layer selection and above every "
        "baseline (CI of the difference above 0)."
        if survives
        else "The effect does NOT survive the controls: "
        + ("the best-of-sites statistic is not significant" if not significant else "")
        + (" and " if not significant and not beats_all else "")
        + ("the probe does not beat every baseline (a difference CI reaches 0)"
           if not beats_all else "")
        + "."
    )
    series = [Series(name=f"CV AUROC (ID, mean of {n_folds} folds, +-1.96 SE)",
                     values=tuple(r["cv_auroc"] for r in rows),
                     low=tuple(r["cv_auroc_ci"][0] for r in rows),
                     high=tuple(r["cv_auroc_ci"][1] for r in rows), color="tab:blue")]
    columns = [Column(key="site", header="site", fmt="", align="left"),
               Column(key="cv_auroc", header=f"CV AUROC (ID, {n_folds} folds)"),
               Column(key="cv_auroc_ci", header="+-1.96 SE", fmt="ci"),
               Column(key="pooled", header="pooled out-of-fold AUROC")]
    if grouped:
        series.append(Series(name="within-group AUROC",
                             values=tuple(r["within_group"] for r in rows), color="tab:red"))
        columns.append(Column(key="within_group", header="within-group AUROC"))
    for k in res.ood_mean:
        series.append(Series(name=f"OOD {k} (fold-wise)", values=tuple(r[f"ood/{k}"] for r in rows),
                             low=tuple(r[f"ood_ci/{k}"][0] for r in rows),
                             high=tuple(r[f"ood_ci/{k}"][1] for r in rows)))
        columns += [Column(key=f"ood/{k}", header=f"OOD {k} AUROC"),
                    Column(key=f"ood_ci/{k}", header=f"OOD {k} +-1.96 SE", fmt="ci"),
                    Column(key=f"gap/{k}", header=f"gap {k}", fmt="+.3f")]
    title = "correctness probe" + ("" if label is None else f" for {label!r}")
    blocks: list[Block] = [
        Text(text=text),
        Text(text=verdict, level="info" if survives else "warning"),
        LinePlot(title=title, x_labels=labels, series=tuple(series),
                 ylabel="AUROC", hlines=((0.5, "chance"),), marker=best,
                 marker_label=f"best site ({metric_name})"),
        Table(columns=tuple(columns), rows=tuple(dict(r, site=labels[i]) for i, r in enumerate(rows)),
              highlight=(best,), caption=f"Highlighted: the best site by {metric_name}."),
    ]
    if base_rows:
        bcols = [Column(key="baseline", header="baseline (same folds)", fmt="", align="left"),
                 Column(key="pooled", header="baseline pooled AUROC"),
                 Column(key="diff_pooled", header="probe - baseline (pooled)", fmt="+.3f"),
                 Column(key="diff_pooled_ci", header="95% CI", fmt="ci")]
        if grouped:
            bcols += [Column(key="within", header="baseline within-group AUROC"),
                      Column(key="diff_within", header="probe - baseline (within)", fmt="+.3f"),
                      Column(key="diff_within_ci", header="95% CI", fmt="ci")]
        blocks.append(Table(columns=tuple(bcols), rows=tuple(base_rows), caption=(
            "Probe = nested-selection probe; differences with paired percentile-bootstrap CIs "
            "(rows resampled jointly).")))
    return blocks
