"""Report blocks of the neuron results: the one place their tables, heatmap and plots are built.

``[[neurons]]`` (``suites/analyses/neurons.py``) calls :func:`study_blocks` (which uses
:func:`experiment_blocks` and :func:`ap_by_layer_plot`) and :func:`study_warnings`; ``RelationNeuronResult._blocks()`` and ``NeuronStatistics._blocks()``
call them too, so a notebook cell shows the same table and plots as the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..report.blocks import Block, Column, Heatmap, LinePlot, Series, Table, Text

if TYPE_CHECKING:
    from .examples import RelationNeuronStudy
    from .experiments import RelationNeuronResult
    from .statistics import NeuronStatistics

__all__ = ["ap_by_layer_plot", "experiment_blocks", "experiment_rows", "pct", "study_blocks",
           "study_warnings"]


def pct(v: float | None) -> float | None:
    """A fraction in points (``0.25 -> 25.0``); None / NaN -> None."""
    return None if v is None or v != v else 100.0 * v


def experiment_rows(res: RelationNeuronResult) -> list[dict[str, Any]]:
    """The report table's rows: one per relation, accuracies and changes in points."""
    own_lo, own_hi = res.random_own.amin(1), res.random_own.amax(1)  # all n_random sets on r
    rows = []
    for i, r in enumerate(res.relations):
        rows.append({
            "relation": r, "n": res.n_test[i],
            "base_first": pct(float(res.baseline_first[i])),
            "base_gen": pct(float(res.baseline_generation[i])),
            "intra": pct(float(res.change_first[i, i])),
            "inter": pct(float(np.delete(res.change_first[i].numpy(), i).mean())),
            "rand": f"[{100 * float(own_lo[i]):+.0f}, {100 * float(own_hi[i]):+.0f}]",
            "gen_intra": pct(float(res.change_generation[i, i])),
            "p": res.tests[i].p_value, "p_holm": res.p_holm[i],
            "p_floor": res.p_floor, "p_holm_floor": res.p_holm_floor,
            **({"gen_p": res.tests_generation[i].p_value,
                "gen_p_holm": res.p_holm_generation[i]} if res.tests_generation else {}),
            **({"post_intra": pct(float(res.change_post[i, i])),
                "post_p_holm": res.p_holm_post[i]} if res.config.post else {}),
        })
    return rows


def experiment_blocks(res: RelationNeuronResult) -> list[Block]:
    """Per-relation table, the set x relation accuracy-change heatmap (and greedy, if run), cumulativity."""
    rels = list(res.relations)
    n_set = len(next(iter(res.sets.values())))
    post_cols = (
        Column(key="post_intra", header="change on r, same neurons off at mlp_post", fmt="+.1f"),
        Column(key="post_p_holm", header="p (Holm) at mlp_post", fmt=".3f"),
    ) if res.config.post else ()
    gen_cols = (
        Column(key="gen_p", header="greedy: p vs random", fmt=".3f"),
        Column(key="gen_p_holm", header="greedy: p (Holm)", fmt=".3f"),
    ) if res.tests_generation else ()
    fmt = ".1f"
    table = Table(
        title="Per relation (test facts; accuracy and changes in points)",
        columns=(
            Column(key="relation", header="relation", fmt="", align="left"),
            Column(key="n", header="test facts", fmt="d"),
            Column(key="base_first", header="baseline first-token acc", fmt=fmt),
            Column(key="base_gen", header="baseline greedy acc", fmt=fmt),
            Column(key="intra", header="change on r (own neurons off)", fmt="+.1f"),
            Column(key="inter", header="mean change on r' != r", fmt="+.1f"),
            Column(key="rand", header=f"{res.n_random} random sets: change on r [min, max]",
                   fmt=""),
            Column(key="gen_intra", header="greedy change on r", fmt="+.1f"),
            Column(key="p", header="p vs random", fmt=".3f"),
            Column(key="p_floor", header="p floor 1/(1+n_random)", fmt=".3g"),
            Column(key="p_holm", header="p (Holm)", fmt=".3f"),
            Column(key="p_holm_floor", header="Holm floor", fmt=".3g"),
            *gen_cols,
            *post_cols,
        ),
        rows=tuple(experiment_rows(res)),
    )
    heat = Heatmap(
        title="First-token accuracy change (points) when relation r's neurons are off",
        values=tuple(tuple(pct(float(v)) for v in row) for row in res.change_first),
        row_labels=tuple(rels), col_labels=tuple(rels),
        xlabel="relation scored (test facts)", ylabel="relation whose neurons are off",
        colorbar="accuracy change (points)", vmin=-100.0, vmax=100.0, cmap="RdBu",
    )
    cumulative = LinePlot(
        title="Cumulativity: drop on r as more of r's neurons are off",
        x_labels=tuple(f"{100 * s:g}%" for s in res.shares),
        series=tuple(Series(name=r, values=tuple(pct(float(v)) for v in res.cumulative[i]))
                     for i, r in enumerate(rels)),
        xlabel=f"share of r's {n_set} neurons deactivated (ranked by AP)",
        ylabel="accuracy drop on r (points)",
    )
    greedy = (Heatmap(
        title="Greedy-generation accuracy change (points) when relation r's neurons are off",
        values=tuple(tuple(pct(float(v)) for v in row) for row in res.change_generation),
        row_labels=tuple(rels), col_labels=tuple(rels),
        xlabel="relation scored (test facts)", ylabel="relation whose neurons are off",
        colorbar="accuracy change (points)", vmin=-100.0, vmax=100.0, cmap="RdBu",
    ),) if res.tests_generation else ()
    return [table, heat, *greedy, cumulative]


def ap_by_layer_plot(stats: NeuronStatistics) -> LinePlot:
    """The most relation-specific unit per layer: max AP over every site of the layer."""
    layers, best = stats.max_ap_by_layer()
    return LinePlot(
        title="Most relation-specific unit per layer (max AP on identification prompts)",
        x_labels=tuple(str(layer) for layer in layers),
        series=tuple(Series(name=r, values=tuple(float(v) for v in best[j]))
                     for j, r in enumerate(stats.relations)),
        xlabel="layer", ylabel="max AP",
    )


def study_blocks(study: RelationNeuronStudy, *, response: str, method: str) -> list[Block]:
    """The ``[[neurons]]`` section's blocks: what was run, interference, table, heatmap, plots."""
    stats, res, sites = study.statistics, study.experiments, study.sites
    n_set = len(next(iter(res.sets.values())))
    layers, _ = stats.max_ap_by_layer()
    notes: list[Block] = [Text(text=(
        f"{n_set} neurons per relation ({stats.n_units} candidate units: "
        f"{', '.join(sorted({s.kind for s in sites}))} of {len(layers)} layers), ranked by the "
        f"average precision of their {response} response on {len(study.identification.tokens)} "
        f"identification prompts; deactivated ({method}) at every position on "
        f"{len(study.test.tokens)} test prompts with disjoint subjects. Controls: {res.n_random} "
        "random sets with the same number of units per layer and module (scored on r's facts; "
        f"the first {res.random_change.shape[1]} on every relation, for the spread), and the "
        "lowest-AP units."
    ))]
    if res.interference:
        notes.append(Text(text=(
            f"Interference (gains beyond every one of the {res.random_change.shape[1]} random "
            "sets scored on every relation): ") + "; ".join(
            f"{a} off -> {b} {100 * v:+.0f} pts" for a, b, v in res.interference)))
    return [*notes, *experiment_blocks(res), ap_by_layer_plot(stats)]


def study_warnings(res: RelationNeuronResult, *, alpha: float) -> list[str]:
    """Sentences the reader must see: too few random sets for Holm, relations barely recalled."""
    from ..stats.permutation import n_permutations_for

    rels = list(res.relations)
    warnings = []
    floor = min(1.0, len(rels) / (res.n_random + 1))
    if floor > alpha:
        need = n_permutations_for(alpha, len(rels))
        warnings.append(
            f"with {res.n_random} random sets the smallest Holm-adjusted p over {len(rels)} "
            f"relations is {floor:.3g} > alpha = {alpha}: no relation can be significant; use "
            f"n_random >= {need} or leave it unset (raw p-values are shown too)"
        )
    weak = [r for i, r in enumerate(rels) if float(res.baseline_first[i]) < 0.2]
    if weak:
        warnings.append(
            f"the model recalls few test facts of {weak} (first-token accuracy < 20%), so a "
            "drop there is bounded by a small baseline"
        )
    return warnings
