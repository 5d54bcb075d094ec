"""Diagnosis statistics in a notebook (issue 35): the report's own tables, frame, repr."""

import pytest

from probekit.diagnosis import (
    conditional_mutual_information,
    diagnosis_blocks,
    granulated_kendall_tau,
    level_mean_r2,
    marker_analysis,
)
from probekit.errors import ConfigError
from tests.diagnosis.test_analysis import population
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
