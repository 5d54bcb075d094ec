"""MarkerAnalysis in a notebook (issue 35): the report's ranking table, sentences and plot."""

import pytest

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.blocks import analysis_blocks, diagnosis_blocks, partial_scatters
from probekit.errors import ConfigError
from probekit.report.blocks import Scatter
from tests.diagnosis.test_analysis import population
from tests.report.notebook_checks import check_display


def test_display_shows_the_report_ranking_and_the_top_partial_scatter():
    t = population(0)
    a = marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=200)
    html = a._repr_html_()
    check_display(a, headers=["marker", "verdict", "Spearman", "partial r", "delta R^2 (LOGO)"],
                  numbers={"spearman": "+.3f", "partial_r": "+.3f", "delta_r2": "+.3f"})
    # the same blocks as the report's head: warnings, ranking, one sentence per marker
    head = analysis_blocks(a)
    assert diagnosis_blocks(a, t)[: len(head)] == head
    for s in a.markers:
        assert a.sentence(s.marker).split(":")[0] in html
    # the main plot: the top-ranked (largest |partial r|) marker's partial-residual scatter
    top = max(a.markers, key=lambda s: abs(s.partial_r))
    assert top.marker == "planted"
    (block,) = partial_scatters(a, top=1)
    assert isinstance(block, Scatter) and block.title.startswith("planted: partial residuals")
    assert block.x == top.marker_residuals and len(block.x) == 30
    fig = a.plot()
    xs = fig.axes[0].collections[0].get_offsets()[:, 0]
    assert xs.tolist() == pytest.approx(list(top.marker_residuals))
    # the same scatter as the report's (which colours it by the knob when asked)
    report_scatter = next(b for b in diagnosis_blocks(a, t) if isinstance(b, Scatter)
                          and b.title == block.title)
    assert report_scatter == block
    text = repr(a)
    assert text.startswith("MarkerAnalysis(30 models, outcome ood, covariates noise:"), text
    n_adds = sum(s.verdict == "adds_beyond_covariates" for s in a.markers)
    assert f"{n_adds} adds_beyond_covariates" in text


def test_without_covariates_there_is_no_plot_but_a_table():
    a = marker_analysis(population(1), "ood", groups="seed", n_permutations=200)
    check_display(a, headers=["marker", "partial r"], numbers={"spearman": "+.3f"}, plot=False)
    assert partial_scatters(a) == ()
    with pytest.raises(ConfigError, match="MarkerAnalysis has no plot in the report"):
        a.plot()


def test_ranking_names_the_verdict_of_analysis():
    from probekit.diagnosis import analysis, ranking

    assert ranking._ADDS == analysis.ADDS
