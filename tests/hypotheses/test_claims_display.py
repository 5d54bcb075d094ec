"""Claim verdicts display themselves in a notebook (issue 35): the report's claims table."""

import numpy as np

from probekit.hypotheses import Measurement
from probekit.hypotheses.verdict import claims_table, judge_all
from probekit.report.blocks import LinePlot, Series
from tests.hypotheses.helpers import claim
from tests.report.notebook_checks import check_display


def _claims():
    rng = np.random.default_rng(0)
    curve = LinePlot(title="per layer", x_labels=("0", "1"), xlabel="layer", ylabel="accuracy",
                     series=(Series(name="acc", values=(0.2, 0.9)),))
    planted = Measurement(metric="accuracy", values=rng.normal(0.9, 0.05, 50), blocks=(curve,))
    null = Measurement(metric="accuracy", values=rng.normal(0.5, 0.05, 50))
    return judge_all([(claim(">=", (0.8,)), planted), (claim(">=", (0.8,)), null)], seed=0)


def test_claim_result_displays_its_row_and_its_kinds_plot():
    good, bad = _claims()
    assert (good.verdict, bad.verdict) == ("PASS", "FAIL")
    parsed = check_display(good, headers=["claim", "verdict", "effect", "95% CI", "claimed",
                                          "Holm p", "n"],
                           numbers={"effect": ".3f", "p_holm": ".3g"})
    assert "PASS" in parsed.tables[0]["cells"]
    rec = good.to_records()[0]
    assert rec["claimed"] == ">= 0.8" and rec["n"] == 50
    assert f"[{rec['ci_low']:.3f}, {rec['ci_high']:.3f}]" in parsed.tables[0]["cells"]
    assert good.plot().axes[0].get_xlabel() == "layer"
    assert repr(bad).startswith("ClaimResult(FAIL ")
    check_display(bad, headers=["verdict"], numbers={"effect": ".3f"}, plot=False)


def test_claims_table_is_the_report_table():
    claims = _claims()
    table = claims_table(claims)
    assert [r["verdict"] for r in table.rows] == ["PASS", "FAIL"] and table.highlight == (0,)
    assert claims[0]._blocks()[0] == claims_table([claims[0]])
