"""A suite result in a notebook (issue 35): every analysis' report blocks in order."""

from pathlib import Path

from probekit.report.blocks import Column, LinePlot, Series, Table, Text
from probekit.suites.result import AnalysisResult
from probekit.suites.run import SuiteResult
from probekit.suites.spec import build_suite
from tests.report.notebook_checks import check_display


def _result() -> SuiteResult:
    suite = build_suite(Path("demo.toml"), "", {"suite": {"name": "demo"},
                                                 "model": {"train": {"preset": "(table)"}},
                                                 "data": {"label": "(table)"}})
    probe = AnalysisResult(
        section="probe", title="Probe accuracy by site", warnings=("few examples",),
        blocks=(LinePlot(title="accuracy", x_labels=("L0", "L1"), xlabel="site",
                         ylabel="accuracy", series=(Series(name="test", values=(0.625, 0.875)),)),
                Table(columns=(Column(key="site", header="site", fmt="", align="left"),
                               Column(key="acc", header="accuracy")),
                      rows=({"site": "L0", "acc": 0.625}, {"site": "L1", "acc": 0.875}))))
    geometry = AnalysisResult(section="geometry", title="Manifold geometry",
                              blocks=(Text(text="capacity rises with depth"),))
    return SuiteResult(suite=suite, model={"id": "tiny"}, data={}, analyses=(probe, geometry))


def test_suite_result_renders_its_whole_report_body():
    res = _result()
    parsed = check_display(res, headers=["section", "title", "blocks", "accuracy"],
                           numbers={"n_blocks": "d", "n_hypotheses": "d", "n_warnings": "d"})
    assert res.to_records() == [
        {"section": "probe", "title": "Probe accuracy by site", "n_blocks": 2, "n_hypotheses": 0,
         "n_warnings": 1},
        {"section": "geometry", "title": "Manifold geometry", "n_blocks": 1, "n_hypotheses": 0,
         "n_warnings": 0}]
    body = res._blocks()[1:]
    want = [Text(text="[probe] Probe accuracy by site"), *res.analyses[0].sections(),
            Text(text="[geometry] Manifold geometry"), *res.analyses[1].sections()]
    assert list(body) == want
    assert {"0.625", "0.875"} <= set(parsed.tables[1]["cells"])  # the probe's own table
    html = res._repr_html_()
    assert html.index("few examples") < html.index("capacity rises with depth")
    assert list(res.plot().axes[0].get_lines()[0].get_ydata()) == [0.625, 0.875]
    assert repr(res) == "SuiteResult(demo on tiny: 2 analyses, 0 hypotheses)"
