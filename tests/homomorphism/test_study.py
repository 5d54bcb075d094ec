import json

import numpy as np
import pytest

from probekit.executor import InProcessExecutor
from scripts import he_study


def test_poly_r2_exact_and_against_numpy():
    x = np.linspace(0, 1, 8)
    assert he_study.poly_r2(x, 2 * x**2 - x + 1, 2) == pytest.approx(1.0)
    y = np.sin(5 * x)
    resid = y - np.polyval(np.polyfit(x, y, 1), x)
    ref = 1 - (resid**2).sum() / ((y - y.mean()) ** 2).sum()
    assert he_study.poly_r2(x, y, 1) == pytest.approx(ref)


def test_smoke_study_runs_resumes_and_reports(tmp_path):
    out = tmp_path / "study"
    summary = he_study.main(
        ["--smoke", "--out", str(out)], executor=InProcessExecutor(check_picklable=True)
    )
    an = summary["analysis"]
    assert an["n_models"] == 6  # 3 noise levels x {plain, regularised}
    assert set(an["poly_r2_modifier_he_vs_ood"]) == {"1"}  # 3 level means: degree 1 only
    assert 0.0 <= an["poly_r2_modifier_he_vs_ood"]["1"] <= 1.0
    assert an["single_models"]["modifier_he_vs_ood"]["n"] == 3
    reg = an["regularisation"]
    assert reg["n_pairs"] == 3 and {"modifier_he", "sequence_he", "ood_token_acc"} <= set(reg)
    assert (out / "scatter.png").stat().st_size > 1000
    saved = json.loads((out / "study.json").read_text())
    assert len(saved["models"]) == 6
    # resumable: a finished model is not retrained (its result.json is reused)
    again = he_study.main(["--smoke", "--out", str(out)])
    assert again["analysis"]["train_s_total"] == an["train_s_total"]
