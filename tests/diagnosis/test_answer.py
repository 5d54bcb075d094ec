"""The diagnosis report's answer (issue 57): one line per marker, the forest plot, the ranking
table a paper can cite, unstable LOGO numbers and degenerate outcomes said, not printed."""

from __future__ import annotations

import re

import pytest

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.answer import answer_blocks, with_report_sections
from probekit.diagnosis.statistics.blocks import diagnosis_blocks, flag_marks, logo_cell
from probekit.diagnosis.statistics.degenerate import DegenerateRule, degenerate_outcome
from probekit.errors import ConfigError
from probekit.report.blocks import Bullets, Forest, Table, Text
from probekit.report.numbers import format_p
from probekit.report.write import render_block, render_html
from tests.diagnosis.statistics.test_analysis import population


def _marker(name, verdict, r, lo, hi, p, mde=0.39, flags=(), reason=""):
    return {"marker": name, "verdict": verdict, "partial_r": r, "partial_low": lo,
            "partial_high": hi, "partial_p_holm": p, "mde_partial_r": mde, "n": 30,
            "pearson": r, "flags": list(flags), "reason": reason, "n_permutations_used": 999}


def _report(outcome_values, markers) -> dict:
    n = len(outcome_values)
    return {"suite": {"name": "toy", "description": "a toy population"},
            "model": {"id": "population of 30 models", "fingerprint": "", "n_layers": 0},
            "data": {"splits": {"models": n}, "probe_device": "cpu", "positions": ""},
            "hypotheses": [], "table": {"final": [1] * n, "seed": [i % 5 for i in range(n)],
                                        "ood": outcome_values},
            "diagnosis": {"settings": {"outcome": "ood", "groups": "seed", "knobs": [],
                                       "covariates": ["noise"]},
                          "analysis": {"outcome": "ood", "covariates": ["noise"],
                                       "settings": {"equivalence_margin": 0.2,
                                                    "confidence_level": 0.95,
                                                    "n_permutations": 999, "unit": "seeds"},
                                       "markers": markers}},
            "analyses": [{"section": "diagnosis", "title": "Diagnosis", "blocks": []}]}


MARKERS = [_marker("small", "no_association", 0.05, -0.1, 0.15, 1.0),
           _marker("na", "not_applicable", None, None, None, None, reason="constant"),
           _marker("big", "adds_beyond_covariates", -0.62, -0.75, -0.41, 0.001)]


def test_one_line_per_marker_in_ranking_order_and_a_forest_plot():
    blocks = answer_blocks(_report([i / 29 for i in range(30)], MARKERS))
    lead, lines, forest = blocks
    assert isinstance(lead, Text) and lead.text.startswith("Which markers predict ood given noise?")
    assert isinstance(lines, Bullets) and lines.items == (
        "big: adds_beyond_covariates, partial r -0.62 [-0.75, -0.41], Holm p < 0.001, MDE 0.39",
        "small: no_association, partial r +0.05 [-0.10, +0.15], Holm p 1, MDE 0.39",
        "na: not_applicable (constant)")
    assert lines.colors[0] == "#1b7837"
    assert isinstance(forest, Forest) and forest.labels == ("big", "small", "na")
    assert forest.values == (-0.62, 0.05, None) and forest.band == 0.2
    assert forest.shade == (0.39, 0.39, 0.39) and forest.anchor == "forest"


def test_a_layer_family_is_one_line_at_its_best_layer():
    layers = [dict(_marker(f"probe@L{k}", "inconclusive", r, r - 0.2, r + 0.2, p), partial_p=q)
              for k, (r, p, q) in enumerate([(0.1, 1.0, 0.6), (0.45, 0.04, 0.01),
                                             (0.5, 0.09, 0.02), (0.2, 1.0, 0.3)])]
    blocks = answer_blocks(_report([i / 29 for i in range(30)], [*layers, *MARKERS[:1]]))
    lines = next(b for b in blocks if isinstance(b, Bullets))
    # L1 has the smallest partial p (0.01), not the largest |r| (L2): the family's choice
    assert lines.items[0].startswith("probe (best L1 of 4): inconclusive, partial r +0.45")
    assert "Holm p 0.04" in lines.items[0] and len(lines.items) == 2
    forest = next(b for b in blocks if isinstance(b, Forest))
    assert forest.labels == ("probe (best L1 of 4)", "small")


def test_a_degenerate_outcome_gets_the_warning_and_no_verdict():
    ood = [0.0, 0.01, 0.02, 0.0288] * 7 + [0.01, 0.0]
    blocks = answer_blocks(_report(ood, MARKERS))
    warning = blocks[0]
    assert warning.level == "warning" and "near-constant" in warning.text
    assert "range 0.0288, below the 0.05" in warning.text
    lines = next(b for b in blocks if isinstance(b, Bullets))
    assert [x.split(",")[0] for x in lines.items] == ["big: no verdict", "small: no verdict",
                                                      "na: not_applicable (constant)"]
    forest = next(b for b in blocks if isinstance(b, Forest))
    assert set(forest.categories) == {"no verdict", "not_applicable"}


def test_weak_design_is_said_under_the_title():
    weak = [dict(m, mde_partial_r=0.99) for m in MARKERS]
    blocks = answer_blocks(_report([i / 29 for i in range(30)], weak))
    assert blocks[0].level == "warning" and "detects only |partial r| >= 0.99" in blocks[0].text


@pytest.mark.parametrize(("values", "flags", "expect"), [
    ([0.1 * k for k in range(10)], (), None),                        # varies: fine
    ([0.0, 0.01, 0.03] * 3, (), "near-constant"),                    # range 0.03 < 0.05
    ([1000.0, 1010.0, 1020.0], (), None),                            # not a proportion
    ([0.5] * 8 + [0.1, 0.9], (), "8 of the 10 analysed models (80%)"),
    ([0.5] * 7 + [0.1, 0.9, 0.3], (), None),                         # 70% tied: fine
    ([0.1, 0.5], ("degenerate_outcome(constant 0)",), "degenerate_outcome(constant 0)"),
    ([0.2, None, float("nan"), 0.9], (), None),                      # missing values skipped
])
def test_degenerate_outcome_rule(values, flags, expect):
    got = degenerate_outcome("y", values, flags)
    assert (got is None) if expect is None else (expect in got)


def test_degenerate_rule_bounds_are_checked():
    with pytest.raises(ConfigError, match="min_range=0"):
        DegenerateRule(min_range=0.0)
    with pytest.raises(ConfigError, match="max_tied_share=1.5"):
        DegenerateRule(max_tied_share=1.5)


def test_logo_delta_r2_is_unstable_below_five_groups_or_outside_minus_one_one():
    assert logo_cell(0.12, 5) == 0.12
    assert logo_cell(-20.83, 3) == {
        "text": "unstable (3 groups)",
        "hover": "delta R^2 = -20.830 (leave-one-group-out over 3 groups; fewer than 5 groups: "
                 "the folds disagree too much for a size)"}
    assert logo_cell(-1.75, 8)["text"] == "unstable (8 groups)"
    assert logo_cell(1.037, 6)["text"] == "unstable (6 groups)"
    assert logo_cell(float("nan"), 6) is None


def test_flags_become_footnote_marks_with_one_legend():
    marks, legend = flag_marks([("few_groups(G=3)",), ("few_groups(G=3)", "measured_on"), ()])
    assert marks == ["*", "*\u2020", ""]
    assert legend == [("*", "few_groups(G=3)"), ("\u2020", "measured_on")]


@pytest.fixture(scope="module")
def analysis():
    t = population(0)
    return t, marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=200)


def test_ranking_table_groups_its_headers_and_formats_p_once(analysis):
    t, a = analysis
    ranking = next(b for b in diagnosis_blocks(a, t) if isinstance(b, Table)
                   and b.anchor == "verdicts")
    keys = [c.key for c in ranking.columns]
    assert "reason" not in keys and "flags" not in keys  # empty / folded into marks
    groups = [c.group for c in ranking.columns]
    assert groups[2:6] == ["marginal (within seed)"] * 4
    assert groups[6:9] == ["partial"] * 3 and groups[9:11] == ["out-of-sample (LOGO)"] * 2
    assert [c.header for c in ranking.columns][:2] == ["marker", "verdict"]
    rendered = render_block(ranking.to_dict())
    assert rendered["groups"][2] == {"label": "marginal (within seed)", "span": 4}
    planted = rendered["cells"][0]
    assert planted[0].startswith("planted")
    # 200 permutations: the floor 1/201 reads "< 0.005"; every p cell one format
    p_cols = [k for k, c in enumerate(ranking.columns) if c.fmt == "p"]
    ps = [row[k] for row in rendered["cells"] for k in p_cols]
    row = ranking.rows[0]
    assert row["p_floor"] == pytest.approx(1 / (1 + a["planted"].n_permutations_used), rel=1e-12)
    assert planted[p_cols[1]] == format_p(row["partial_p_holm"], row["p_floor"])
    assert all(re.fullmatch(r"< 0\.00\d|[01](\.\d{1,6})?|-", p) for p in ps), ps
    html = render_html(with_report_sections(_report(t["ood"], [])))  # renders without markers
    assert "<svg class=\"forest\"" not in html and "id=\"answer\"" not in html


def test_report_opens_with_the_answer_then_the_population(analysis):
    t, a = analysis
    report = _report(t["ood"], a.to_dict()["markers"])
    html = render_html(with_report_sections(report))
    assert html.index('id="answer"') < html.index('id="forest"') < html.index('id="population"')
    assert html.index("<h1>") < html.index('id="answer"')
    forest = re.search(r'<svg class="forest".*?</svg>', html, re.S).group(0)
    assert forest.count('<g class="pt"><title>') == len(a.markers)
