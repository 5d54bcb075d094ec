"""Marker families (issue 46 item 4): one [[marker]] over layers, one Holm family."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.runner import _csv
from probekit.diagnosis.spec import load_diagnosis
from probekit.diagnosis.statistics.families import (
    family_summaries,
    group_families,
    layer_of,
    member_label,
    weighted_holm,
)
from probekit.diagnosis.table_diagnosis import diagnose_table, table_diagnosis_from_file
from probekit.diagnosis.table_io import read_marker_table
from probekit.errors import ConfigError
from probekit.stats.multiple import holm
from probekit.suites.spec import SuiteError

ROOT = Path(__file__).resolve().parents[3]
SCAN = ROOT / "docs" / "diagnosis" / "scan_noise" / "markers.csv"
PROBES = [f"probe_primitive_b{k}" for k in range(4)]
FAMILY = [f"probe_primitive@L{k}" for k in range(4)]


def test_weighted_holm_is_holm_without_families_and_within_one_family():
    rng = np.random.default_rng(3)
    p = dict(zip([f"m{i}" for i in range(9)], rng.uniform(0, 0.1, size=9), strict=True))
    adj, thr = weighted_holm(p, {})
    assert [adj[k] for k in p] == list(holm(list(p.values())))  # exactly
    order = sorted(p, key=p.get)
    assert [thr[k] for k in order] == pytest.approx([0.05 / (9 - i) for i in range(9)])
    adj, _ = weighted_holm(p, {"fam": list(p)})  # one family, nothing else: Holm within it
    assert [adj[k] for k in p] == list(holm(list(p.values())))


def test_weighted_holm_hand_case():
    """Family a (3 layers) + markers b, c: U = 3 units; worked by hand in the docstring order."""
    p = {"a@L0": 0.01, "a@L1": 0.02, "a@L2": 0.5, "b": 0.03, "c": 0.04}
    adj, thr = weighted_holm(p, group_families(list(p)))
    # step 1: a@L0 at 3*3*0.01 = .09 (ties b's 3*.03, smaller p first); step 2: b .09;
    # step 3: U = 2 (a, c): a@L1 2*2*.02 = .08 -> .09 (monotone); step 4: c 2*.04 -> .09;
    # step 5: a@L2 alone: .5
    assert adj == pytest.approx({"a@L0": 0.09, "b": 0.09, "a@L1": 0.09, "c": 0.09, "a@L2": 0.5})
    assert thr == pytest.approx({"a@L0": 0.05 / 9, "b": 0.05 / 3, "a@L1": 0.05 / 4,
                                 "c": 0.05 / 2, "a@L2": 0.05})
    # plain Holm over the 5 would count the family 3 times: a@L0 at 5*.01
    assert holm(list(p.values()))[0] == pytest.approx(0.05)


def test_names():
    assert member_label("probe@L3") == "L3" and layer_of("probe@L3") == 3
    assert layer_of("probe@resid_post@2") == 2 and layer_of("probe") is None
    assert group_families(["x@L1", "y", "x@L0"]) == {"x": ("x@L1", "x@L0")}
    with pytest.raises(ValueError, match="share a name"):
        group_families(["x", "x@L0"])


def _scan_finals() -> dict[str, list]:
    t = read_marker_table(SCAN)
    keep = [i for i, f in enumerate(t["final"]) if f in (1, True, "1")]
    return {c: [t[c][i] for i in keep] for c in t}


def test_family_equals_separate_markers_after_holm_on_scan_noise():
    """The 4 per-block probes of the SCAN noise table: separately, then as probe_primitive@L*."""
    fam = _scan_finals()  # the shipped table holds the family form
    t = {(f"probe_primitive_b{c[-1]}" if c in FAMILY else c): v for c, v in fam.items()}
    kw = dict(covariates=["task.n_noise", "id_accuracy"], n_permutations=199,
              max_permutations=199)
    sep = marker_analysis(t, "ood:ood_len", markers=PROBES, **kw)
    one = marker_analysis(fam, "ood:ood_len", markers=FAMILY, **kw)
    raw = [sep[m].partial_p for m in PROBES]
    assert [one[m].partial_p for m in FAMILY] == raw
    by_hand = list(holm(raw))
    assert [one[m].partial_p_family for m in FAMILY] == by_hand
    assert [one[m].partial_p_holm for m in FAMILY] == by_hand  # the family alone
    assert one.families == {"probe_primitive": tuple(FAMILY)}
    # beside other markers the family counts once: U = 3 units, not 6 markers
    mix = marker_analysis(fam, "ood:ood_len", markers=[*FAMILY, "capacity", "weight_norm"], **kw)
    assert [mix[m].partial_p_family for m in FAMILY] == by_hand
    ref, _ = weighted_holm({m: mix[m].partial_p for m in [*FAMILY, "capacity", "weight_norm"]},
                           {"probe_primitive": FAMILY})
    assert {m: mix[m].partial_p_holm for m in ref} == ref
    assert mix["weight_norm"].partial_p_holm == pytest.approx(min(1, 3 * mix["weight_norm"].partial_p))
    (s,) = family_summaries(mix)
    assert s.best == min(FAMILY, key=lambda m: mix[m].partial_p)
    assert s.p_family == min(by_hand) == pytest.approx(min(1.0, 4 * min(raw)))
    sentence = mix.to_dict()["family_sentences"]["probe_primitive"]
    assert f"strongest at {member_label(s.best)} (smallest partial p)" in sentence
    assert "4 layers L0-L3" in sentence


def test_planted_layer_is_named_with_its_selection_in_the_p():
    rng = np.random.default_rng(0)
    n = 48
    knob = np.repeat(np.arange(6.0), 8)
    seed = np.tile(np.arange(8), 6)
    z = rng.normal(size=n)
    y = -0.5 * knob + z + 0.3 * rng.normal(size=n)
    table = {"knob": knob.tolist(), "seed": seed.tolist(), "ood": y.tolist()}
    for k in range(4):  # layer 2 carries the residual signal, the others only the knob
        table[f"probe@L{k}"] = ((z if k == 2 else 0.0) + knob + 0.3 * rng.normal(size=n)).tolist()
    a = marker_analysis(table, "ood", covariates=["knob"], n_permutations=999)
    (s,) = family_summaries(a)
    assert s.best == "probe@L2"
    b = a["probe@L2"]
    assert b.partial_p_family == pytest.approx(min(1.0, 4 * b.partial_p))
    assert b.partial_p_holm == s.p_holm <= 0.05 and b.verdict in ("adds_beyond_covariates", "partial_association")
    assert all(a[f"probe@L{k}"].partial_p_holm >= b.partial_p_holm for k in range(4))
    assert a.to_dict()["families"][0]["best"] == "probe@L2"
    no = marker_analysis(table, "ood", covariates=["knob"], n_permutations=999, families=None)
    assert no.families == {} and no["probe@L2"].partial_p_family == no["probe@L2"].partial_p
    with pytest.raises(ConfigError, match="not an analysed marker"):
        marker_analysis(table, "ood", covariates=["knob"], families={"f": ["nope"]})


def _family_toml(tmp_path: Path, marker: str) -> Path:
    text = (ROOT / "probes" / "diagnose_scan_noise.toml").read_text()
    a = text.rindex("[[marker]]", 0, text.index('name = "probe_primitive"\n'))
    b = text.index('[[marker]]\nname = "capacity"')
    text = text[:a] + marker + "\n" + text[b:]
    text = text.replace('color_by = "task.n_noise"',
                        'color_by = "task.n_noise"\nn_permutations = 199\n'
                        "calibration_simulations = 0")
    path = tmp_path / "diagnose_scan_noise_family.toml"
    path.write_text(text)
    return path


PROBE_FAMILY = ('[[marker]]\nname = "probe_primitive"\nmeasure = "probe_accuracy"\n'
                'site = "resid_post@3"\nlayers = "all"\n')


def test_spec_expands_layers_and_sites(tmp_path):
    spec = load_diagnosis(_family_toml(tmp_path, PROBE_FAMILY))
    probes = [m for m in spec.markers if m.measure == "probe_accuracy"]
    assert [m.name for m in probes] == FAMILY  # "all": the scan preset's 4 blocks
    assert [m.spec.site for m in probes] == [f"resid_post@{k}" for k in range(4)]
    assert len(spec.markers) == 14
    spec = load_diagnosis(_family_toml(tmp_path, PROBE_FAMILY.replace(
        'layers = "all"', "layers = [1, 3]")))
    assert [m.name for m in spec.markers if m.measure == "probe_accuracy"] == [
        "probe_primitive@L1", "probe_primitive@L3"]
    he = ('[[marker]]\nname = "he"\nmeasure = "homomorphism_error"\ncomposition = "modifier"\n'
          "layers = [2, 3]\n")
    spec = load_diagnosis(_family_toml(tmp_path, he))
    assert [(m.name, m.spec.layer) for m in spec.markers if m.name.startswith("he@")] == [
        ("he@L2", 2), ("he@L3", 3)]
    sites = PROBE_FAMILY.replace('layers = "all"', 'sites = ["resid_post@1", "attn_out@1"]')
    spec = load_diagnosis(_family_toml(tmp_path, sites))
    assert [m.name for m in spec.markers if m.measure == "probe_accuracy"] == [
        "probe_primitive@resid_post@1", "probe_primitive@attn_out@1"]
    clash = PROBE_FAMILY + '\n[[marker]]\nname = "probe_primitive"\nmeasure = "weight_norm"\n'
    for bad, match in ((PROBE_FAMILY.replace('"all"', '"some"'), "distinct layer indices"),
                       (clash, "share this name"),
                       (PROBE_FAMILY.replace('name = "probe_primitive"', 'name = "p@1"'),
                        "reserved")):
        with pytest.raises(SuiteError, match=match):
            load_diagnosis(_family_toml(tmp_path, bad))


@pytest.mark.slow
def test_table_diagnosis_of_the_family_form_gives_one_curve(tmp_path):
    """The shipped SCAN noise table (probe columns in family form), re-analysed by the family TOML."""
    csv = tmp_path / "markers.csv"
    csv.write_text(_csv(read_marker_table(SCAN)))
    spec = load_diagnosis(_family_toml(tmp_path, PROBE_FAMILY))
    result = diagnose_table(table_diagnosis_from_file(spec, csv))
    a = result.analysis
    assert a.families == {"probe_primitive": tuple(FAMILY)}
    assert len(a.markers) == 14
    curves = [b for b in result.blocks if type(b).__name__ == "LinePlot"
              and b.title.startswith("probe_primitive:")]
    assert len(curves) == 1
    (curve,) = curves
    assert [x.split(":")[0] for x in curve.x_labels] == ["L0", "L1", "L2", "L3"]
    assert list(curve.series[0].values) == pytest.approx([a[m].partial_r for m in FAMILY])
    assert all(math.isfinite(v) for v in curve.series[0].low)
    raw = [a[m].partial_p for m in FAMILY]
    assert [a[m].partial_p_family for m in FAMILY] == list(holm(raw))


@pytest.mark.slow
def test_runner_end_to_end_family_columns_and_report(tmp_path, monkeypatch, single_thread):
    """A tiny checkpoint population (2 train fractions x 3 seeds): a site family of probes."""
    from ..population_helpers import WEIGHT_NORM, write_checkpoint, write_file

    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    for f in (0.4, 0.6):
        for seed in range(3):
            d = write_checkpoint(tmp_path / "runs" / f"f{f}-s{seed}" / "checkpoints" /
                                 "step_0000020", seed=seed, step=20, train_fraction=f)
            (d / "optimizer.json").write_text("{}")
    markers = (WEIGHT_NORM + '\n\n[[marker]]\nname = "probe"\nmeasure = "participation_ratio"\n'
               'sites = ["attn_out@0", "resid_post@0"]\n')
    path = write_file(tmp_path, 'checkpoints = "runs/*"\nout = "pop"', markers,
                      'outcome = "id_accuracy"\ncovariates = ["task.train_fraction"]\n'
                      "n_permutations = 99\ncalibration_simulations = 0")
    from probekit.diagnosis.runner import diagnose

    result = diagnose(path, out=tmp_path / "out")
    assert "probe@attn_out@0" in result.table and "probe@resid_post@0" in result.table
    assert result.analysis.families == {"probe": ("probe@attn_out@0", "probe@resid_post@0")}
    header = (tmp_path / "out" / "markers.csv").read_text().splitlines()[0].split(",")
    assert {"wn", "probe@attn_out@0", "probe@resid_post@0"} <= set(header)
    # untrained models of one seed share their weights: the weight norm does not vary within
    # seed (not applicable, where it used to raise KeyError 'p')
    assert result.analysis["wn"].verdict == "not_applicable"
    assert "does not vary within groups" in result.analysis["wn"].reason
    report = (tmp_path / "out" / "report.json").read_text()
    assert '"family_sentences"' in report and "probe: partial r with id_accuracy per layer" \
        in report


def test_a_family_is_one_ranking_row_and_one_curve_its_layers_folded():
    """Issue 57 item 3: the page shrinks; the family's row is its best layer with the family p."""
    from probekit.diagnosis.statistics.blocks import analysis_blocks
    from probekit.report.blocks import Fold, LinePlot, Table, Text, blocks_to_dicts
    from probekit.report.write import render_html

    rng = np.random.default_rng(0)
    n = 48
    knob = np.repeat(np.arange(6.0), 8)
    z = rng.normal(size=n)
    table = {"knob": knob.tolist(), "seed": np.tile(np.arange(8), 6).tolist(),
             "ood": (-0.5 * knob + z + 0.3 * rng.normal(size=n)).tolist(),
             "other": rng.normal(size=n).tolist()}
    for k in range(4):
        table[f"probe@L{k}"] = ((z if k == 2 else 0.0) + knob + 0.3 * rng.normal(size=n)).tolist()
    a = marker_analysis(table, "ood", covariates=["knob"], n_permutations=99,
                        max_permutations=99)
    blocks = analysis_blocks(a)
    ranking = blocks[[isinstance(b, Table) for b in blocks].index(True)]
    assert [r["label"].rstrip(" *") for r in ranking.rows] == ["probe (best L2 of 4)", "other"]
    best = ranking.rows[0]
    assert best["marker"] == "probe@L2" and best["partial_p_holm"] == a["probe@L2"].partial_p_holm
    assert "A layer family is one row" in ranking.caption
    (curve,) = [b for b in blocks if isinstance(b, LinePlot)]
    assert [x.split(":")[0] for x in curve.x_labels] == ["L0", "L1", "L2", "L3"]
    fam_fold, sentences = [b for b in blocks if isinstance(b, Fold)]
    layers = fam_fold.blocks[0]
    assert layers.collapsed and [r["marker"] for r in layers.rows] == [f"probe@L{k}"
                                                                       for k in range(4)]
    assert [b.text for b in fam_fold.blocks[1:]] == [a.sentence(f"probe@L{k}") for k in range(4)]
    assert [b.text for b in sentences.blocks] == [a.sentence("other")]  # no layer repeated
    visible = [b for b in blocks if isinstance(b, Text)]
    assert len(visible) == 1 + len(a.warnings) and visible[-1].text.startswith("probe (4 layers")
    html = render_html({"suite": {"name": "f", "description": ""}, "diagnosis": {},
                        "model": {"id": "m", "fingerprint": "-", "n_layers": None},
                        "data": {"splits": {}, "probe_device": "cpu", "positions": ""},
                        "hypotheses": [],
                        "analyses": [{"section": "diagnosis", "title": "Diagnosis",
                                      "blocks": blocks_to_dicts(list(blocks))}]})
    curve_svg = html[html.index('<svg class="lineplot"'):]
    curve_svg = curve_svg[:curve_svg.index("</svg>")]
    assert curve_svg.count('<g class="pt"><title>') == 4 and "<polygon" in curve_svg
    # the family (its per-layer table folded once more inside), the sentences, the configuration
    assert html.count("<details") == 4
