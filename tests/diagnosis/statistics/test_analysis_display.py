"""MarkerAnalysis in a notebook (issue 35): the report's ranking table, sentences and plot."""

import pytest

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.statistics.blocks import analysis_blocks, diagnosis_blocks, partial_scatters
from probekit.errors import ConfigError
from probekit.report.blocks import Scatter
from tests.diagnosis.statistics.test_analysis import population
from tests.report.notebook_checks import check_display


def test_display_shows_the_report_ranking_and_the_top_partial_scatter():
    t = population(0)
    a = marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=200)
    html = a._repr_html_()
    check_display(a, headers=["marker", "verdict", "Spearman", "partial", "r", "out-of-sample (LOGO)",
                              "delta R^2"],
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
    from tests.diagnosis.statistics.test_blocks import flat

    report_scatter = next(b for b in flat(diagnosis_blocks(a, t)) if isinstance(b, Scatter)
                          and b.title == block.title)
    assert report_scatter == block
    text = repr(a)
    assert text.startswith("MarkerAnalysis(30 models, outcome ood, covariates noise:"), text
    n_adds = sum(s.verdict == "adds_beyond_covariates" for s in a.markers)
    assert f"{n_adds} adds_beyond_covariates" in text


def test_without_covariates_there_is_no_plot_but_a_table():
    a = marker_analysis(population(1), "ood", groups="seed", n_permutations=200)
    check_display(a, headers=["marker", "partial", "r"], numbers={"spearman": "+.3f"}, plot=False)
    assert partial_scatters(a) == ()
    with pytest.raises(ConfigError, match="MarkerAnalysis has no plot in the report"):
        a.plot()


def test_ranking_names_the_verdict_of_analysis():
    from probekit.diagnosis.statistics import analysis, blocks

    assert blocks._ADDS == analysis.ADDS


def test_early_warning_shows_the_report_curves_and_sentences():
    from probekit.diagnosis import early_warning
    from probekit.report.blocks import LinePlot
    from tests.diagnosis.statistics.test_early import series
    from tests.report.notebook_checks import parse_html

    ew = early_warning(series(), "final", step="step", markers=["gini", "noise"],
                       covariates=["wd", "train_acc"], groups="seed", n_permutations=200)
    blocks = ew._blocks()
    assert [type(b) for b in blocks if isinstance(b, LinePlot)] == [LinePlot, LinePlot]
    report = diagnosis_blocks(ew.analyses[-1], {k: [v for v, s in zip(c, series()["step"],
                                                                       strict=True) if s == 300]
                                                for k, c in series().items()}, early=ew)
    assert report[-len(blocks):] == blocks  # the report's early-warning blocks, the same builder
    html = ew._repr_html_()
    assert "gini first adds beyond wd, train_acc at step 200 (steps 100, 200, 300)." in html
    assert len(parse_html(html).images) == 2
    frame = ew.to_frame()
    assert len(frame) == 3 * 2 and list(frame.columns) == list(ew.to_records()[0])
    assert frame["partial_r"].tolist() == pytest.approx([r["partial_r"] for r in ew.to_records()])
    fig = ew.plot()
    ax = fig.axes[0]
    assert ax.get_ylabel() == "partial r" and ax.get_xlabel() == "step"
    gini = ax.get_lines()[0].get_ydata()
    assert list(gini) == pytest.approx([a["gini"].partial_r for a in ew.analyses])
    assert repr(ew) == "EarlyWarning(3 steps, outcome final, earliest step: gini 200, noise never)"
