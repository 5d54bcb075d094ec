"""The report of ``probekit diagnose A.toml B.toml``: a page that stands alone.

Built from the two diagnoses' own report dicts and the :class:`~.statistics.compare.PopulationComparison`
(it computes nothing): under the title, the answer (one line per marker: each population's
verdict and partial r with its CI, and the marker x population interaction with its unit), the
paired forest plot (A and B per marker, hover on every point) and links to the two
per-population reports; then both designs side by side (each population's Design table, one
column group each); then the verdicts-and-interaction table, the sentences folded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probekit.report.blocks import Block, Bullets, Column, Links, Table, Text, blocks_to_dicts
from probekit.report.numbers import format_p, p_floor

from .answer import VERDICT_COLORS

__all__ = ["comparison_report", "population_dirs"]


def population_dirs(files: tuple[Path, Path]) -> tuple[str, str]:
    """The sub-folder of each population's own report: its file stem, distinct whatever the names.

    Two files with the same stem (``x/pop.toml``, ``y/pop.toml``) get ``A-pop`` and ``B-pop``.
    """
    a, b = files[0].stem, files[1].stem
    return (a, b) if a != b else (f"A-{a}", f"B-{b}")


def _design(report: dict[str, Any]) -> dict[str, Any] | None:
    """The Design table (JSON form) of a diagnosis report dict, None without one."""
    for section in report.get("analyses", []):
        if section.get("section") == "population":
            for b in section["blocks"]:
                if b.get("block") == "table" and b.get("anchor") == "design":
                    return b
    return None


def _designs_side_by_side(reports: tuple[dict[str, Any], dict[str, Any]],
                          labels: tuple[str, str]) -> Table | Text:
    """One table: each design row (knobs, seeds, models, held fixed, ...) for A and for B."""
    designs = [_design(r) for r in reports]
    if designs[0] is None or designs[1] is None:
        return Text(text="A population has no Design table; see the two reports linked above.")
    order = list(dict.fromkeys([r["what"] for d in designs for r in d["rows"]]))
    by = [{r["what"]: r for r in d["rows"]} for d in designs]
    rows = []
    for what in order:
        row: dict[str, Any] = {"what": what}
        for key, rows_of in zip(("a", "b"), by, strict=True):
            r = rows_of.get(what) or {}
            row[f"{key}_value"], row[f"{key}_n"] = r.get("value", "-"), r.get("n")
        rows.append(row)
    cols = [Column(key="what", header="", fmt="", align="left")]
    for key, label in zip(("a", "b"), labels, strict=True):
        cols += [Column(key=f"{key}_value", header="levels / value", fmt="", align="left",
                        group=label),
                 Column(key=f"{key}_n", header="n", fmt="d", group=label)]
    return Table(title="Both designs", columns=tuple(cols), rows=tuple(rows), anchor="design",
                 caption="Each population's Design table (its analysed rows), side by side; "
                         "the per-population reports give their outcomes and marker "
                         "definitions.")


def _r(v: float) -> str:
    """``+0.12`` (2 decimals, signed; a value that rounds to zero unsigned)."""
    text = f"{v:+.2f}"
    return text[1:] if float(text) == 0 else text


def _line(c: Any, m: str) -> str:
    """``"he: A inconclusive, +0.12 [-0.2, 0.4]; B adds, ...; slope B - A +0.3 (...), p ..."``."""
    parts = [m + ":"]
    for label, an in zip(c.labels, (c.a, c.b), strict=True):
        s = an[m]
        r = ("partial r undefined" if s.partial_r != s.partial_r else
             f"partial r {_r(s.partial_r)} [{_r(s.partial_low)}, {_r(s.partial_high)}]")
        parts.append(f"{label} {s.verdict}, {r};")
    t = c.tests[m]
    floor = p_floor(t.get("n_resamples"))
    if t["p"] == t["p"]:
        word = "slopes differ" if t.get("p_holm", 1.0) <= c.settings["alpha"] else \
            "no difference shown"
        parts.append(f"slope {c.labels[1]} - {c.labels[0]} {t['delta']:+.3g} "
                     f"({c.slope_unit()}), interaction Holm p "
                     f"{format_p(t.get('p_holm'), floor)}: {word}")
    else:
        parts.append(f"difference not testable ({t.get('reason', '')})")
    return " ".join(parts)


def comparison_report(reports: tuple[dict[str, Any], dict[str, Any]], comparison: Any,
                      dirs: tuple[str, str]) -> dict[str, Any]:
    """The ``report.json`` dict of the comparison (render it with ``write_report``).

    ``reports``: the two diagnoses' report dicts (their ``to_dict()``); ``dirs``: the
    sub-folders their reports are written to (:func:`population_dirs`), linked from the answer.
    """
    c = comparison
    la, lb = c.labels
    outcome = c.settings.get("outcome")
    given = ", ".join(c.settings.get("covariates") or []) or "nothing"
    colors = dict(VERDICT_COLORS)
    answer: list[Block] = [
        Text(text=f"Does each marker predict {outcome} given {given} the same way in {la} and "
                  f"{lb}? Per marker: each population's verdict and partial r (95% CI), and "
                  f"the marker x population interaction (the difference of the slopes, in "
                  f"{c.slope_unit()}; p from {c.settings['unit']}, Holm over "
                  f"{len(c.markers)} markers)."),
        Bullets(items=tuple(_line(c, m) for m in c.markers),
                colors=tuple(colors.get(c.b[m].verdict) for m in c.markers),
                anchor="answer-lines"),
        c.forest(),
        Links(items=((f"{la}: its own report", f"{dirs[0]}/report.html"),
                     (f"{lb}: its own report", f"{dirs[1]}/report.html"),
                     ("compare.json", "compare.json")), anchor="links"),
    ]
    base = reports[0]
    section = {"data": {}, "warnings": [], "hypotheses": []}
    fingerprints = " / ".join(str(r.get("model", {}).get("fingerprint", "-")) for r in reports)
    return {
        **{k: base[k] for k in ("hypotheses", "provenance", "versions") if k in base},
        "model": {"id": f"two populations: {la} and {lb}", "fingerprint": fingerprints,
                  "n_layers": None},
        "data": {**{k: v for k, v in base.get("data", {}).items() if k != "source"},
                 "splits": {f"models in {la}": c.a.n_models, f"models in {lb}": c.b.n_models}},
        "suite": {**base["suite"], "name": f"{la} vs {lb}",
                  "description": f"Two populations side by side: {la} and {lb}, outcome "
                                 f"{outcome} given {given}; each population's own report is "
                                 "linked under the plot."},
        "diagnosis": {"comparison": c.to_dict()},
        "analyses": [
            {**section, "section": "answer", "title": "Answer", "blocks": blocks_to_dicts(answer)},
            {**section, "section": "population", "title": "Populations",
             "blocks": blocks_to_dicts([_designs_side_by_side(reports, c.labels)])},
            {**section, "section": "diagnosis", "title": f"Two populations: {la} and {lb}",
             "blocks": blocks_to_dicts(list(c.blocks()))},
        ],
    }
