"""Report blocks render generically; the report package renders and never runs the pipeline."""

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest

from probekit.report.blocks import Column, LinePlot, Series, Table, Text, strict_json
from probekit.report.write import class_summary, format_cell, render_html
from probekit.sites import Site, site_label

REPORT = Path(__file__).resolve().parents[2] / "probekit" / "report"


def test_report_imports_no_pipeline_module():
    allowed = {"probekit.errors", "probekit.util", "probekit.sites", "probekit.lazy", "probekit.report"}
    found = set()
    for path in REPORT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = "probekit.report" if node.level == 1 else "probekit"
                mod = f"{base}.{node.module}" if node.module else base
                if not any(mod == a or mod.startswith(a + ".") for a in allowed):
                    found.add((path.name, mod))
    assert found == set()  # no suites, capture, models, probes: report only renders


def test_strict_json_replaces_non_finite_values():
    value = {"a": float("nan"), "b": [1.0, float("inf"), np.float64(2.5)], "c": np.array([np.nan, 1])}
    out = strict_json(value)
    assert out == {"a": None, "b": [1.0, None, 2.5], "c": [None, 1.0]}
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize(("value", "fmt", "text"), [
    (0.97333, ".3f", "0.973"), (-0.01, "+.3f", "-0.010"), (0.0001234, ".3g", "0.000123"),
    ([0.41, 1.0], "ci", "[0.410, 1.000]"), (None, ".3f", "-"), (math.nan, ".3f", "-"),
    ("resid_post@3", "", "resid_post@3"), ([None, 1.0], "ci", "-"),
])
def test_format_cell(value, fmt, text):
    assert format_cell(value, fmt) == text


def test_site_labels_are_one_function():
    assert site_label(Site(3, "resid_post")) == "resid_post@3"
    assert site_label("blocks.0.mlp.hook_post") == "mlp_post@0"
    assert site_label("hook_embed") == "embed"
    assert site_label("acts") == "acts" and site_label(None) == "-"


def test_class_summary():
    assert class_summary({"a": 3, "b": 1}) == "a: 3, b: 1"
    assert class_summary({"2": 900}) == "2: 900 (one class only)"
    many = {str(i): i + 1 for i in range(20)}
    assert class_summary(many) == "20 classes, 1-20 each (n=210)"


def _report(blocks):
    return {
        "suite": {"name": "t", "description": "d"},
        "model": {"id": "m", "fingerprint": "f", "n_layers": 1, "d_model": 4, "compatibility_mode": False},
        "data": {"n_examples": 3, "splits": {"train": 3}, "positions": "last", "probe_device": "cpu"},
        "hypotheses": [], "versions": {"probekit": "0"},
        "analyses": [{"section": "x", "title": "Section X", "blocks": [b.to_dict() for b in blocks]}],
    }


def test_generic_rendering_of_tables_text_and_plots():
    table = Table(columns=(Column(key="site", header="site", fmt="", align="left"),
                           Column(key="v", header="value", fmt=".2f")),
                  rows=({"site": "embed", "v": 0.123}, {"site": "resid_post@0", "v": float("nan")}),
                  highlight=(0,), caption="cap")
    plot = LinePlot(title="p", x_labels=("a", "b"), series=(
        Series(name="shown", values=(0.1, 0.2)), Series(name="all-nan", values=(None, None))))
    html = render_html(_report([Text(text="careful", level="warning"), table, plot]))
    assert "1 layer," in html and "1 layers" not in html
    assert "Warning: careful" in html and "<td>0.12</td>" in html and "<td>-</td>" in html
    assert '<tr class="best"><td class="l">embed</td>' in html
    assert html.count("data:image/png;base64,") == 1


def test_automatic_series_colours_never_repeat_a_fixed_one():
    from probekit.report.plots import series_colors

    series = [{"color": "tab:blue"}, {"color": "tab:red"}, {"color": None}, {}]
    colors = series_colors(series)
    assert colors[:2] == ["tab:blue", "tab:red"]
    assert len(set(colors)) == 4


def test_hypothesis_rows_print_no_negative_zero_and_no_empty_section():
    assert "Hypothesis tests" not in render_html(_report([]))
    report = _report([])
    report["hypotheses"] = [{
        "name": "h", "site_label": "-", "statistic": -0.0, "metric": "drop", "effect_size": -1e-9,
        "effect_size_name": "z", "p_value": 1.0, "method": "m", "alpha": 0.05, "verdict": "keep",
    }, {
        "name": "g", "site_label": "-", "statistic": -0.25, "metric": "drop", "effect_size": None,
        "effect_size_name": "z", "p_value": 0.01, "method": "m", "alpha": 0.05, "verdict": "reject",
    }]
    html = render_html(report)
    assert "Hypothesis tests" in html
    assert "<td>0.000 (drop)</td>" in html and "-0.250 (drop)" in html and "+0.000 (z)" in html
    assert "-0.000" not in html
