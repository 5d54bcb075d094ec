"""Diagnosis statistics in a notebook (issue 35): the report's own tables, frame, repr."""

import pytest

from probekit.diagnosis import (
    conditional_mutual_information,
    diagnosis_blocks,
    granulated_kendall_tau,
    level_mean_r2,
    marker_analysis,
)
from probekit.diagnosis.table_diagnosis import diagnose_table
from probekit.errors import ConfigError
from probekit.report.blocks import Column, Table
from tests.diagnosis.statistics.test_analysis import population
from tests.report.notebook_checks import check_display


def test_level_mean_r2_shows_the_report_table():
    t = population(0)
    lv = level_mean_r2(t, "ood", "tracks_knob", "noise")
    check_display(lv, headers=["poly degree", "R^2 over level means", "R^2 over models"],
                  numbers={"r2_level_means": ".3f", "r2_models": ".3f"}, plot=False)
    a = marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=50)
    assert lv._blocks()[0] in diagnosis_blocks(a, t, levels=lv)
    assert repr(lv).startswith(f"LevelMeanR2(tracks_knob -> ood over {len(lv.levels)} levels")
    with pytest.raises(ConfigError, match="LevelMeanR2 has no plot"):
        lv.plot()


def test_granulated_tau_and_cmi_show_the_report_tables():
    t = population(0)
    g = granulated_kendall_tau(t, "ood", "planted", ["noise", "seed"])
    check_display(g, headers=["marker", "knob", "tau", "groups"], numbers={"tau": "+.3f"},
                  plot=False)
    c = conditional_mutual_information(t, "ood", "planted", ["noise", "seed"])
    html = check_display(c, headers=["min normalised CMI", "given", "normalised CMI"],
                         numbers={"normalised": ".3f", "cmi": ".3f"}, plot=False)
    assert format(c.score, ".3f") in html.tables[0]["cells"]
    a = marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=50)
    report = diagnosis_blocks(a, t, granulated=[g, c])
    assert g._blocks()[0] in report and c._blocks()[0] in report
    assert repr(g).startswith(f"GranulatedTau(planted -> ood, {g.n} models: tau {g.tau:+.3f}")
    assert repr(c).startswith(f"CMIResult(planted -> ood, {c.n_pairs} pairs")


def test_table_diagnosis_and_diagnosis_results_show_the_report_body(tmp_path):
    from probekit.diagnosis.runner import DiagnosisResult
    from probekit.diagnosis.spec import DiagnosisFile, PopulationSpec
    from probekit.suites.spec import build_suite
    from tests.diagnosis.test_table_diagnosis import _population, _spec

    _population(tmp_path / "markers.csv")
    res = diagnose_table(_spec(tmp_path, 'knobs = ["knob"]\n'))
    html = check_display(res, headers=["marker", "verdict", "partial", "r"],
                         numbers={"spearman": "+.3f", "partial_r": "+.3f"})
    assert res.to_records() == res.analysis.to_records()
    assert res._blocks() == res.blocks and len(html.tables) >= 2
    assert res.analysis.sentence("planted").split(":")[0] in res._repr_html_()
    assert repr(res) == f"TableDiagnosisResult({res.analysis._summary()})"
    xs = res.plot().axes[0].collections[0].get_offsets()[:, 0]
    top = max((s for s in res.analysis.markers if s.applicable), key=lambda s: abs(s.partial_r))
    assert xs.tolist() == pytest.approx(list(top.marker_residuals))
    host = DiagnosisFile(
        suite=build_suite(res.spec.source, res.spec.text,
                          {"model": {"train": {"preset": "(table)"}}, "data": {"label": "(table)"}}),
        population=PopulationSpec(), markers=(), diagnosis=res.spec.diagnosis, text=res.spec.text)
    d = DiagnosisResult(spec=host, settings=res.settings, table=res.table, cells=(),
                        analysis=res.analysis, blocks=res.blocks)
    check_display(d, headers=["marker", "verdict"], numbers={"partial_r": "+.3f"})
    empty = DiagnosisResult(spec=host, settings=res.settings, table={"x": [1.0, 2.0]}, cells=(),
                            blocks=(Table(title="t", columns=(Column(key="x", header="x"),),
                                          rows=({"x": 1.0}, {"x": 2.0})),))
    check_display(empty, headers=["x"], numbers={"x": ".3f"}, plot=False)
    assert repr(empty) == "DiagnosisResult(2 rows, outcome ood: no applicable marker)"
