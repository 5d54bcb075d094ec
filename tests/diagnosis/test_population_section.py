"""The diagnosis report's Population section, units, SVG scatters, no negative zero (issue 46)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from probekit.diagnosis.population_section import population_blocks, with_population_section
from probekit.diagnosis.runner import _csv
from probekit.diagnosis.table_diagnosis import diagnose_table
from probekit.report.blocks import Table, Text
from probekit.report.write import render_html

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"


def _grid_report() -> dict:
    """A report.json-shaped dict of a 2 x 2 x 3-seed grid with a series step (no statistics)."""
    rows = [(wd, frac, seed, step) for step in (30, 120) for wd in (0.1, 1.0) for frac in (0.4, 0.7)
            for seed in (0, 1, 2)]
    table = {"checkpoint": [f"runs/r{wd}-{frac}-{s}/checkpoints/step_{st}" for wd, frac, s, st in rows],
             "run": [f"runs/r{wd}-{frac}-{s}" for wd, frac, s, _ in rows],
             "step": [r[3] for r in rows], "final": [int(r[3] == 120) for r in rows],
             "preset": ["modadd_p23"] * len(rows),
             "train.weight_decay": [r[0] for r in rows], "task.train_fraction": [r[1] for r in rows],
             "seed": [r[2] for r in rows], "train_loss": [0.1] * len(rows),
             "id_accuracy": [0.9] * len(rows), "id_accuracy__n": [200] * len(rows),
             "ood:len_5": [0.5] * len(rows), "ood:len_6": [0.4] * len(rows),
             "ood:len": [0.45] * len(rows), "ood:len__n": [60] * 12 + [64] * 12,
             "gini": [0.3] * len(rows)}
    return {"suite": {"name": "grid", "population": {"preset": "modadd_p23", "steps": 120,
                                                       "sets": ["train.lr=1e-2"]},
                      "marker": [{"name": "gini", "measure": "fourier_gini", "site": "embed",
                                  "n_freq": 5, "split": None}]},
            "data": {"source": {"task": "(each checkpoint's training task)", "task_options": {}}},
            "table": table,
            "diagnosis": {"settings": {"outcome": "ood:len", "groups": "seed",
                                       "knobs": ["train.weight_decay", "task.train_fraction"],
                                       "covariates": ["train.weight_decay", "task.train_fraction",
                                                      "id_accuracy"]},
                          "analysis": {"settings": {"unit": "models permuted within seed strata"}}}}


def test_population_rows_equal_the_design():
    design, outcomes, markers = population_blocks(_grid_report())
    rows = {r["what"]: (r["value"], r["n"]) for r in design.rows}
    assert rows["knob train.weight_decay"] == ("0.1, 1", 2)
    assert rows["knob task.train_fraction"] == ("0.4, 0.7", 2)
    assert rows["seeds (resampling groups)"] == ("0, 1, 2", 3)
    assert rows["models analysed"] == ("4 knob cells x 3 seeds", 12)
    assert rows["series checkpoints (early warning)"] == ("steps 30", 12)
    assert rows["held fixed"][0] == "preset=modadd_p23; train.lr=1e-2"
    assert rows["training"][0] == "preset modadd_p23, 120 steps"
    assert rows["covariates (held in every partial test)"][1] == 3
    assert "resample models permuted within seed strata" in design.caption
    assert isinstance(outcomes, Table) and [r["column"] for r in outcomes.rows] == [
        "ood:len", "id_accuracy"]
    ood, idacc = outcomes.rows
    assert ood["split"] == "len_5, len_6" and ood["examples"] == "64"  # the final models' count
    assert "unweighted mean" in ood["definition"] and ood["role"] == "outcome"
    assert idacc["split"] == "test_id" and idacc["examples"] == "200"
    assert isinstance(markers, Table) and markers.collapsed and markers.rows == (
        {"marker": "gini", "kind": "fourier_gini", "site": "site=embed", "keys": "n_freq=5"},)


def test_design_counts_the_rows_a_where_filter_kept():
    """A table whose rows were chosen by `where` among which none is final (step 300 of each
    run): every row is an analysed model, as in the table diagnosis (modadd_causal: 27)."""
    report = _grid_report()
    keep = [i for i, st in enumerate(report["table"]["step"]) if st == 30]
    report["table"] = {k: [v[i] for i in keep] for k, v in report["table"].items()}
    assert set(report["table"]["final"]) == {0}
    design = population_blocks(report)[0]
    rows = {r["what"]: (r["value"], r["n"]) for r in design.rows}
    assert rows["models analysed"] == ("4 knob cells x 3 seeds", 12)
    assert rows["knob train.weight_decay"] == ("0.1, 1", 2)
    assert rows["seeds (resampling groups)"] == ("0, 1, 2", 3)
    assert "series checkpoints (early warning)" not in rows


def test_marker_definitions_fold_away_with_shared_keys_said_once():
    report = _grid_report()
    report["suite"]["marker"] = [
        {"name": f"probe@L{k}", "measure": "probe", "site": f"blocks.{k}.hook_resid_post",
         "split": "train", "probe": {"kind": "logistic", "max_iter": 200}, "label": "r1"}
        for k in range(3)] + [{"name": "gini", "measure": "fourier_gini", "site": "embed",
                               "split": "train", "n_freq": 5}]
    report["diagnosis"]["markers"] = ["probe@L0", "probe@L1", "probe@L2", "gini"]
    markers = population_blocks(report)[2]
    assert isinstance(markers, Table) and markers.collapsed and markers.title == "Marker definitions"
    assert markers.caption == "Keys every marker shares: split=train."
    keys = [r["keys"] for r in markers.rows]
    assert keys[:3] == ['probe={"kind": "logistic", "max_iter": 200}, label=r1'] * 3
    assert keys[3] == "n_freq=5"


def test_population_section_is_first_and_replaced_not_duplicated():
    report = {**_grid_report(), "analyses": [{"section": "diagnosis", "blocks": []}]}
    once = with_population_section(report)
    twice = with_population_section(once)
    assert [a["section"] for a in twice["analyses"]] == ["population", "diagnosis"]
    assert twice["analyses"][0]["blocks"] == once["analyses"][0]["blocks"]


def test_markers_without_definitions_are_one_line():
    report = _grid_report()
    report["suite"] = {"name": "from a table"}
    report["data"] = {"source": {"file": "t.csv"}}
    report["diagnosis"]["markers"] = ["gini"]
    last = population_blocks(report)[-1]
    assert isinstance(last, Text) and last.text.startswith("Markers (1, columns of t.csv")


def _planted(tmp_path: Path) -> Path:
    """A 12-model x 3-seed table with a checkpoint column, and markers.json CIs for 'planted'."""
    rng = np.random.default_rng(0)
    knob = np.repeat(np.arange(4.0), 9)
    seed = np.tile(np.arange(3), 12)
    z = rng.normal(size=36)
    ckpt = [f"runs/m{i}/checkpoints/step_0000100" for i in range(36)]
    table = {"checkpoint": ckpt, "knob": knob.astype(int).tolist(), "seed": seed.tolist(),
             "id_accuracy": (0.5 + 0.01 * rng.normal(size=36)).tolist(),
             "ood": (-0.5 * knob + z + 0.3 * rng.normal(size=36)).tolist(),
             "planted": (z + 0.2 * rng.normal(size=36)).tolist(),
             "tracks": (knob + 0.3 * rng.normal(size=36)).tolist()}
    (tmp_path / "markers.csv").write_text(_csv(table))
    cells = [{"checkpoint": c, "planted": {"value": v, "low": v - 0.5, "high": v + 0.25}
              if i % 2 == 0 else {"value": v, "low": None, "high": None}}
             for i, (c, v) in enumerate(zip(ckpt, table["planted"], strict=True))]
    (tmp_path / "markers.json").write_text(json.dumps({"cells": cells}))
    spec = tmp_path / "diag.toml"
    spec.write_text('[suite]\nname = "planted"\n\n[population]\ntable = "markers.csv"\nknobs = ["knob"]\n\n'
                    '[diagnosis]\noutcome = "ood"\nn_permutations = 200\ncalibration_simulations = 0\n')
    return spec


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("population_section")
    spec = _planted(root)
    diagnose_table(spec, out=root / "out")
    return root / "out"


def test_report_starts_with_the_population_and_states_units(planted):
    report = json.loads((planted / "report.json").read_text())
    assert [a["section"] for a in report["analyses"]] == ["answer", "population", "diagnosis"]
    unit = report["diagnosis"]["analysis"]["settings"]["unit"]
    assert "seed" in unit
    blocks = report["analyses"][2]["blocks"]
    for b in blocks:  # every table with a p or CI column names its resampling unit
        heads = [c["header"] for c in b.get("columns", [])]
        if b["block"] == "table" and any(h.endswith((" p", "CI")) or h == "p" for h in heads):
            assert re.search(r"permuted|bootstrap over|resampl|unit|simulations",
                             b["caption"]), b["title"]
    opened = [x for b in blocks for x in (b["blocks"] if b["block"] == "fold" else [b])]
    sentences = [b["text"] for b in opened if b["block"] == "text"
                 and b["text"].startswith(("planted:", "tracks:"))]
    assert len(sentences) == 2 and all(unit in s for s in sentences)
    ranking = next(b for b in blocks if b.get("anchor") == "verdicts")
    assert unit in ranking["caption"]


def test_scatter_svg_has_one_title_per_model_and_the_markers_own_cis(planted):
    html = (planted / "report.html").read_text()
    svgs = re.findall(r"<svg class=\"scatter\".*?</svg>", html, re.S)
    assert len(svgs) == 4  # 2 markers x (marker vs outcome, partial residuals)
    root = ElementTree.fromstring(svgs[0])  # planted vs ood (ranked first: the larger |partial r|)
    groups = root.findall(f".//{SVG}g[@class='pt']")
    names = sorted(g.find(f"{SVG}title").text.split("\n")[0] for g in groups)
    assert names == sorted(f"m{i} step_0000100" for i in range(36))
    with_bar = [g for g in groups if g.find(f"{SVG}line[@class='errbar']") is not None]
    assert sorted(g.find(f"{SVG}title").text.split("\n")[0] for g in with_bar) == sorted(
        f"m{i} step_0000100" for i in range(0, 36, 2))
    # the tooltip states the CI read from markers.json: value - 0.5, value + 0.25
    table = json.loads((planted / "report.json").read_text())["table"]
    v = table["planted"][0]
    tip = next(g.find(f"{SVG}title").text for g in groups
               if g.find(f"{SVG}title").text.startswith("m0 step"))
    assert f"[{v - 0.5:.3g}, {v + 0.25:.3g}]" in tip
    # colour by the knob, shape by the seed: 4 colours, 3 shapes in the legend
    assert "seed=2" in svgs[0] and "knob=3" in svgs[0]


def test_no_negative_zero_anywhere():
    """A planted -0.0001 prints as 0.000 / +0.000 in cells, CIs, sentences, titles and SVG."""
    report = with_population_section({**_grid_report(), "model": {"id": "m", "fingerprint": "",
                                                                "n_layers": 0, "d_model": 0,
                                                                "compatibility_mode": False},
                                      "hypotheses": [], "analyses": []})
    report["suite"].update(description="")
    report["data"].update(n_examples=24, splits={"models": 12}, positions="", probe_device="cpu")
    report["analyses"].append({"section": "diagnosis", "title": "Diagnosis", "blocks": [
        {"block": "table", "title": "t", "caption": "r -0.000 here",
         "columns": [{"key": "a", "header": "a", "fmt": "+.3f", "align": "right"},
                     {"key": "b", "header": "b", "fmt": ".3f", "align": "right"},
                     {"key": "c", "header": "CI", "fmt": "ci", "align": "right"}],
         "rows": [{"a": -0.0001, "b": -0.0001, "c": [-0.0001, 0.2]}], "highlight": []},
        {"block": "text", "text": "partial r -0.00 [-0.000, 0.5] (p 0.9)", "level": "info"},
        {"block": "scatter", "title": "m vs y (partial r -0.00)", "x": [-0.0001, 0.3],
         "y": [-0.0001, 1.0], "xlabel": "m", "ylabel": "y", "categories": None,
         "color_label": ""}]})
    html = render_html(report)
    assert "+0.000" in html and "[0.000, 0.200]" in html
    assert not re.search(r"(?<![\w.])-0(\.0+)?(?![\d.])", html.replace("rotate(-90)", ""))


def test_plot_draws_one_figure_under_agg_and_inline():
    """result.plot() called once: one Figure returned, none left open in pyplot (no double draw)."""
    code = (
        "import matplotlib.pyplot as plt\n"
        "from matplotlib.figure import Figure\n"
        "from probekit.diagnosis import early_warning, marker_analysis\n"
        "from tests.diagnosis.statistics.test_early import series\n"
        "ew = early_warning(series(), 'final', step='step', markers=['gini'], covariates=['wd'],"
        " groups='seed', n_permutations=50)\n"
        "figs = [ew.plot(), ew.analyses[-1].plot()]\n"
        "assert all(isinstance(f, Figure) for f in figs), figs\n"
        "assert plt.get_fignums() == [], plt.get_fignums()\n"
        "assert len({id(f) for f in figs}) == 2 and all(len(f.axes) == 1 for f in figs)\n"
        "print('ok', plt.get_backend())\n")
    for backend in ("Agg", "module://matplotlib_inline.backend_inline"):
        res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, timeout=300, env={**_env(), "MPLBACKEND": backend})
        assert res.returncode == 0 and res.stdout.startswith("ok"), res.stderr[-2000:]


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


SHIPPED_REPORTS = sorted(p.parent.relative_to(ROOT / "docs" / "diagnosis").as_posix()
                         for p in (ROOT / "docs" / "diagnosis").rglob("report.html"))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["planted", *SHIPPED_REPORTS])
def test_the_answer_and_the_forest_plot_fill_the_first_screen(which, planted, tmp_path):
    """Headless Chromium at 1440 px (issue 57): the answer lines and the forest plot lie within
    the first 900 px, measured from the layout, then the Population section, then the verdict
    table; nothing is cut off; the page, its details folded, is at most 9,000 px tall and a
    single self-contained file (nothing fetched). On a planted population and on every shipped
    diagnosis report, the comparison report included."""
    import re

    from tests.report.chromium import find_chromium, render_report

    if find_chromium() is None:
        pytest.skip("headless Chromium not installed")
    html = planted / "report.html" if which == "planted" else (
        ROOT / "docs" / "diagnosis" / which / "report.html")
    result = render_report(html, tmp_path / f"{which.replace('/', '_')}.png", width=1440,
                           ids=("answer-lines", "forest", "population", "verdicts"))
    assert result["clipped"] == [] and result["broken"] == [], result
    tops, bottoms = result["tops"], result["bottoms"]
    assert None not in tops.values(), tops
    assert bottoms["answer-lines"] < bottoms["forest"] <= 900, (tops, bottoms)
    assert tops["forest"] < tops["population"] < tops["verdicts"], tops
    assert result["height"] <= 9000, result["height"]
    assert not re.search(r'<(img|script|link|iframe)[^>]+(src|href)="(?!data:)', html.read_text())


def test_every_part_of_a_diagnosis_displays_itself(planted):
    """DiagnosisResult.parts(): ranking, scatters, early warning, ... each with its own HTML."""
    from tests.diagnosis.test_table_diagnosis import _population

    root = planted.parent / "parts"
    root.mkdir(exist_ok=True)
    result = diagnose_table(_planted(root))
    parts = result.parts()
    assert list(parts)[:3] == ["ranking", "levels", "scatters"]
    assert sum(len(p._blocks()) for p in parts.values()) == len(result.blocks)
    ranking = parts["ranking"]
    assert [r["marker"] for r in ranking.to_records()] == [
        r["marker"] for r in result.analysis.to_records()]
    html = ranking._repr_html_()
    assert "Markers vs ood" in html and "<svg" not in html
    scatter_html = parts["scatters"]._repr_html_()
    assert scatter_html.count('<svg class="scatter"') == 4
    fig = parts["scatters"].plot()
    assert fig.axes[0].get_title().startswith("planted vs ood")
    assert _population  # the planted-table helper stays importable for these checks
