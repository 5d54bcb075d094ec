"""Report blocks of a layer sweep: the one place its plot and table are built.

``[[probe]]`` (``suites/analyses/probe.py``) calls :func:`sweep_blocks` with the suite's extras
(label, chance level, control task, per-site permutation tests); ``SweepResult._blocks()``
calls it with what the sweep alone knows, so a notebook cell shows the same plot and table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..report.blocks import Block, Column, LinePlot, Series, Table, Text
from ..report.labels import site_label

if TYPE_CHECKING:
    from .sweep import SweepResult

__all__ = ["sweep_blocks"]

_HPARAM = {"logistic": "C", "ridge": "alpha"}


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
    labels = tuple(site_label(r["site"]) for r in rows)
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
