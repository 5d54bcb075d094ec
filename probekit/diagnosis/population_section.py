"""The "Population" section of a diagnosis report: what was compared, before any statistic.

Built from the ``report.json`` dict alone (its ``table``, ``diagnosis.settings`` and ``suite``),
so a saved report gains it when re-rendered (:func:`with_population_section`), and the section
is the same whether the models were trained here or read from a table:

* the design: each varying knob with its levels, the seeds (the resampling groups), the number
  of models and of series checkpoints, what was held fixed and the training preset and steps;
* each outcome (the analysed outcome and the outcome-like covariates): its definition, the split
  it is measured on and its number of evaluation examples (the table's ``COLUMN__n``);
* each marker in one line: its measurement kind, its site and its other keys.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from probekit.report.blocks import Block, Column, Table, Text, blocks_to_dicts

__all__ = ["analysed_rows", "population_blocks", "resampling_unit", "state_units",
           "with_population_section"]

_NOT_DESIGN = {"checkpoint", "run", "step", "final", "name"}
_SITE_KEYS = ("site", "sites", "site_a", "site_b", "layer", "layers", "block", "blocks",
              "position", "positions")
_SKIP_KEYS = {"name", "measure"}


def _outcome_like(column: str) -> bool:
    return (column.startswith(("ood:", "id_", "train_", "final_")) or column.endswith("__n")
            or column in ("ood_accuracy", "id_accuracy"))


def _level(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _levels(values: list[Any]) -> list[Any]:
    distinct = {json.dumps(v, sort_keys=True, default=str): v for v in values if v is not None}
    try:
        return sorted(distinct.values())
    except TypeError:
        return list(distinct.values())


def analysed_rows(table: dict[str, list[Any]]) -> list[int]:
    """The rows the analysis used: the final checkpoints, else every row.

    The table diagnosis's rule: a table without ``final`` flags, or rows chosen by ``where``
    among which none is final (e.g. ``where = { step = 300 }``), analyses every row.
    """
    n = len(next(iter(table.values()), []))
    finals = [i for i, f in enumerate(table.get("final") or []) if f and f != "0"]
    return finals if finals else list(range(n))


_final_rows = analysed_rows


def _design_table(report: dict[str, Any], finals: list[int], markers: list[str]) -> Table:
    table, settings = report["table"], report["diagnosis"]["settings"]
    origin = _origin(report)
    knobs, groups = list(settings.get("knobs") or []), settings.get("groups")
    n_all = len(next(iter(table.values()), []))
    rows: list[dict[str, Any]] = []
    cells = 1
    for k in knobs:
        lv = _levels([table[k][i] for i in finals]) if k in table else []
        cells *= max(len(lv), 1)
        rows.append({"what": f"knob {k}", "value": ", ".join(_level(v) for v in lv),
                     "n": len(lv)})
    group_cols = [c for c in dict.fromkeys(["seed", *([groups] if groups else [])])
                  if c in table and c not in knobs]
    for g in group_cols:
        lv = _levels([table[g][i] for i in finals])
        role = "resampling groups" if g == groups else "not a resampling unit"
        rows.append({"what": f"{'seeds' if g == 'seed' else g} ({role})",
                     "value": ", ".join(_level(v) for v in lv), "n": len(lv)})
    n_groups = rows[-1]["n"] if group_cols else 1
    shape = (f"{cells} knob cell{'s' if cells != 1 else ''} x {n_groups} "
             f"{'seeds' if group_cols and group_cols[-1] == 'seed' else 'groups'}"
             if knobs and group_cols else "")
    rows.append({"what": "models analysed", "value": shape,
                 "n": len(finals)})
    if n_all > len(finals):
        steps = _levels([table["step"][i] for i in range(n_all) if i not in set(finals)])
        rows.append({"what": "series checkpoints (early warning)",
                     "value": "steps " + ", ".join(_level(s) for s in steps),
                     "n": n_all - len(finals)})
    used = set(knobs) | set(group_cols) | set(markers) | _NOT_DESIGN
    fixed = []
    for c in table:
        if c in used or _outcome_like(c) or f"{c}__n" in table:  # an outcome has its count
            continue
        lv = _levels([table[c][i] for i in finals])
        if len(lv) == 1:
            fixed.append(f"{c}={_level(lv[0])}")
    pop = origin.get("population") or {}
    fixed += list(pop.get("sets") or [])
    rows.append({"what": "held fixed", "value": "; ".join(fixed) or "(nothing recorded)",
                 "n": None})
    preset = pop.get("preset")
    steps = pop.get("steps")
    if steps is None and "step" in table and finals:
        final_steps = _levels([table["step"][i] for i in finals])
        steps = ", ".join(_level(s) for s in final_steps) if final_steps else None
    if preset is None and "preset" in table:
        presets = _levels([table["preset"][i] for i in finals])
        preset = ", ".join(presets) if presets else None
    training = ", ".join(t for t in ((f"preset {preset}" if preset else ""),
                                     (f"{steps} steps" if steps is not None else "")) if t)
    if pop.get("models"):
        training = f"model entries (not trained here): {', '.join(map(str, pop['models']))}"
    rows.append({"what": "training", "value": training or "not recorded in the table "
                 f"({report['data'].get('source', {}).get('file', 'the table')})", "n": None})
    covs = list(settings.get("covariates") or [])
    rows.append({"what": "covariates (held in every partial test)",
                 "value": ", ".join(covs) or "none", "n": len(covs)})
    return Table(
        title="Design", anchor="design",
        columns=(Column(key="what", header="", fmt="", align="left"),
                 Column(key="value", header="levels / value", fmt="", align="left"),
                 Column(key="n", header="n", fmt="d")),
        rows=tuple(rows),
        caption="Knob levels and seeds over the analysed models (the final checkpoints, or "
        "every row kept by the file's where when none is final); "
        "held fixed: columns with one value over those models, plus the grid's fixed --set "
        "overrides.")


def _origin(report: dict[str, Any]) -> dict[str, Any]:
    """The population and marker sections of the diagnosis file behind the report."""
    suite = report.get("suite", {})
    return suite.get("origin") or {k: suite[k] for k in ("population", "marker", "data")
                                   if k in suite}


def _examples(table: dict[str, list[Any]], column: str, finals: list[int]) -> str:
    n_col = f"{column}__n"
    if n_col not in table:
        return "not recorded"
    lv = _levels([table[n_col][i] for i in finals])
    if not lv:
        return "not recorded"
    return _level(lv[0]) if len(lv) == 1 else f"{_level(min(lv))}-{_level(max(lv))}"


#: the scoring rules of an ``[outcome]`` evaluation file, in words (:mod:`.outcomes`)
_RULES = {"exact_match": "greedy exact match of the answer's tokens",
          "first_token": "greedy first token = the answer's first token",
          "logprob": "the answer's log-probability (nats, summed over its tokens)"}


def _eval_rule(column: str, outcome: dict[str, Any] | None) -> tuple[str, str] | None:
    """``(definition, split)`` of a column of the ``[outcome]`` evaluation file, else None."""
    if not outcome:
        return None
    scores = outcome.get("score")
    scores = [scores] if isinstance(scores, str) else list(scores or [])
    name = outcome.get("name")
    for score in scores:
        prefix = (f"{score}_" if name is None else
                  f"{name}_" if len(scores) == 1 else f"{name}_{score}_")
        if column.startswith(prefix) and len(column) > len(prefix):
            return (f"mean {_RULES.get(score, score)} over the examples of "
                    f"{outcome.get('file')}", column[len(prefix):])
    return None


def _outcome_row(column: str, role: str, table: dict[str, list[Any]], finals: list[int],
                 source: str, outcome: dict[str, Any] | None = None) -> dict[str, Any]:
    metric = "accuracy (exact match, or the task's primary metric)"
    rule = _eval_rule(column, outcome)
    if rule is not None:
        what, split = rule
    elif column == "id_accuracy":
        what, split = f"{metric} on the in-distribution held-out split", "test_id"
    elif column in ("train_accuracy", "train_loss"):
        what, split = f"{column.split('_')[1]} on the training split", "train"
    elif column.startswith("id_step_"):
        what = f"first training step at which held-out accuracy reaches {column[8:]}"
        split = "test_id"
    elif column.startswith("ood:"):
        name = column[4:]
        parts = sorted(c[4:] for c in table if c.startswith(f"ood:{name}_")
                       and c[len(name) + 5:].isdigit())
        if parts:
            what, split = f"unweighted mean {metric} over the splits {name}_N", ", ".join(parts)
        else:
            what, split = f"{metric} on the held-out split {name}", name
    else:
        what, split = f"a column of the table {source} (defined where the table was made)", "-"
    return {"column": column, "role": role, "definition": what, "split": split,
            "examples": _examples(table, column, finals)}


def _outcomes_table(report: dict[str, Any], finals: list[int]) -> Table:
    table, settings = report["table"], report["diagnosis"]["settings"]
    source = report["data"].get("source", {}).get("file", "")
    outcome = report.get("suite", {}).get("outcome")
    rows = [_outcome_row(settings["outcome"], "outcome", table, finals, source, outcome)]
    rows += [_outcome_row(c, "covariate", table, finals, source, outcome)
             for c in settings.get("covariates") or []
             if (_outcome_like(c) or f"{c}__n" in table) and c in table]
    return Table(
        title="Outcomes", anchor="outcomes",
        columns=(Column(key="column", header="column", fmt="", align="left"),
                 Column(key="role", header="role", fmt="", align="left"),
                 Column(key="definition", header="definition", fmt="", align="left"),
                 Column(key="split", header="split", fmt="", align="left"),
                 Column(key="examples", header="examples per model", fmt="", align="left")),
        rows=tuple(rows),
        caption="examples: the evaluation examples behind each model's value (the table's "
        "COLUMN__n; a range when the models differ).")


def _short(v: Any, limit: int = 48) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _split_name(key: str, value: Any, data: dict[str, Any]) -> Any:
    """A marker's split key as the split it reads: ``"train"`` is ``[data] train_split``.

    A kind's ``train_split = "train"`` / ``test_split = "test"`` name the suite's roles, which
    ``[data] train_split`` / ``test_split`` map to the file's splits (``identify``, ``test``):
    the report shows the split read, never ``train`` for a split called otherwise.
    """
    if not key.endswith("split") or value not in ("train", "test"):
        return value
    return data.get(f"{value}_split") or value


def _markers_table(report: dict[str, Any], markers: list[str]) -> Table | Text:
    defs = {m.get("name"): m for m in _origin(report).get("marker") or []}
    if not any(name in defs for name in markers):
        source = report["data"].get("source", {}).get("file", "the table")
        return Text(text=f"Markers ({len(markers)}, columns of {source}; their definitions "
                    f"are where the table was made): {', '.join(markers)}.")
    rows, own = [], {}
    data = _origin(report).get("data") or {}
    for name in markers:
        d = defs.get(name)
        if d is not None:
            own[name] = {k: _short(_split_name(k, v, data), 200) for k, v in d.items()
                         if k not in _SKIP_KEYS and k not in _SITE_KEYS
                         and v not in (None, "", [], {})}
    # a key with the same value on every defined marker is stated once, in the caption
    common = ({k: v for k, v in next(iter(own.values())).items()
               if all(o.get(k) == v for o in own.values())} if len(own) > 1 else {})
    for name in markers:
        d = defs.get(name)
        if d is None:
            rows.append({"marker": name, "kind": "column of the table", "site": "-",
                         "keys": "defined where the table was made"})
            continue
        site = "; ".join(f"{k}={_short(d[k], 200)}" for k in _SITE_KEYS
                         if d.get(k) not in (None, "", [], {}))
        keys = ", ".join(f"{k}={v}" for k, v in own[name].items() if k not in common)
        rows.append({"marker": name, "kind": d.get("measure", "-"), "site": site or "-",
                     "keys": keys or "-"})
    shared = "; ".join(f"{k}={v}" for k, v in common.items())
    return Table(
        title="Marker definitions", anchor="markers", collapsed=True,
        columns=(Column(key="marker", header="marker", fmt="", align="left", nowrap=True),
                 Column(key="kind", header="kind", fmt="", align="left"),
                 Column(key="site", header="site", fmt="", align="left"),
                 Column(key="keys", header="keys", fmt="", align="left")),
        rows=tuple(rows),
        caption=f"Keys every marker shares: {shared}." if shared else "")


def population_blocks(report: dict[str, Any]) -> list[Block]:
    """The Population section's blocks of a ``report.json``-shaped diagnosis dict.

    Needs ``table``, ``diagnosis.settings`` (outcome, covariates, groups, knobs) and
    ``data``; marker definitions and the training preset come from ``suite`` (a diagnosis
    file's ``[population]`` / ``[[marker]]``, or ``suite.origin`` of a table diagnosis made
    from one) when present.
    """
    table = report["table"]
    finals = _final_rows(table)
    markers = list(report["diagnosis"].get("markers") or
                   [m["name"] for m in _origin(report).get("marker") or []]
                   or [m.get("marker") for m in (report["diagnosis"].get("analysis") or {})
                       .get("markers", [])])
    design = _design_table(report, finals, markers)
    design = dataclasses.replace(design, caption=design.caption + " The p-values and CIs of "
                                 f"this report resample {resampling_unit(report)} (delta R^2: "
                                 "leave one group out) unless a table says otherwise.")
    return [design, _outcomes_table(report, finals),
            _markers_table(report, markers)]


def resampling_unit(report: dict[str, Any]) -> str:
    """The analysis's resampling unit in words ("models permuted within seed strata ...")."""
    analysis = report["diagnosis"].get("analysis") or {}
    unit = (analysis.get("settings") or {}).get("unit")
    if unit:
        return str(unit)
    groups = report["diagnosis"]["settings"].get("groups")
    return f"{groups} groups" if groups else "models"


_UNIT_WORDS = ("permuted", "bootstrap over", "resampl", "unit", "simulations")


def state_units(blocks: Sequence[Block], unit: str) -> tuple[Block, ...]:
    """``blocks`` with every table that shows a p-value or a CI naming its resampling unit.

    A table whose caption already names one (permutation, bootstrap, resampling, unit,
    simulations) is kept; any other table with a ``p`` / ``CI`` column gets "p-values and CIs
    from ``unit``." appended to its caption.
    """
    out = []
    for b in blocks:
        if isinstance(b, Table) and not any(w in b.caption.lower() for w in _UNIT_WORDS):
            heads = [c.header for c in b.columns]
            if any(h.split(" ")[-1] in ("p", "CI") or "CI" in h.split() or "[CI]" in h
                   for h in heads):
                b = dataclasses.replace(b, caption=(b.caption + " " if b.caption else "")
                                        + f"p-values and CIs from {unit}.")
        out.append(b)
    return tuple(out)


def with_population_section(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with its Population section first among ``analyses`` (replaced if present)."""
    rest = [a for a in report.get("analyses", []) if a.get("section") != "population"]
    section = {"section": "population", "title": "Population", "data": {}, "warnings": [],
               "hypotheses": [], "blocks": blocks_to_dicts(population_blocks(report))}
    return {**report, "analyses": [section, *rest]}
