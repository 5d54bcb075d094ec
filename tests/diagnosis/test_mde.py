"""The report's MDE simulated for the test it runs (probekit.diagnosis.mde)."""

import dataclasses
import math
import time

import numpy as np
import pytest

from probekit.diagnosis import marker_analysis
from probekit.diagnosis import mde as mde_mod
from probekit.diagnosis.mde import design_curve, mde_sentence, with_simulated_mde
from probekit.diagnosis.statistics.simulate import simulate_population


def _table(n=30, n_seeds=5, K=3, rho=0.0, seed=0):
    t = simulate_population("seed_effects", n=n, n_seeds=n_seeds, n_levels=3, rho=rho, seed=seed)
    rng = np.random.default_rng([seed, 7])
    for k in range(1, K):
        t[f"null{k}"] = rng.standard_normal(n).tolist()
    return t


def test_each_marker_gets_the_simulated_mde_of_its_design(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    t = _table()
    t["null2"][4] = None  # a marker with a missing cell: its own design (29 rows)
    a = marker_analysis(t, "y", covariates=["knob"], groups="seed", n_permutations=200)
    b, rec = with_simulated_mde(a, t, n_simulations=100)
    assert rec["source"] == "simulated" and len(rec["designs"]) == 2
    full, short = sorted(rec["designs"], key=lambda d: -d["n_models"])
    assert full["markers"] == ["m", "null1"] and short["markers"] == ["null2"]
    assert short["n_models"] == 29 and full["level"] == pytest.approx(0.05 / 3)
    assert b["m"].mde_partial_r == full["mde"] and b["null2"].mde_partial_r == short["mde"]
    assert full["classical_mde"] == pytest.approx(a["m"].mde_partial_r)  # the formula it replaces
    assert b["m"].partial_p == a["m"].partial_p  # nothing else changes
    assert f"detects |partial r| >= {full['mde']:.2f} with 80% power" in b.sentence("m") \
        or b["m"].verdict != "inconclusive"
    text = mde_sentence(rec)
    assert text.startswith("MDE (80%-power |partial r|) simulated for this test on this design "
                           "(100 simulated populations, HC3 + 599 Freedman-Lane permutations, "
                           "level 0.0167 = alpha / markers tested")
    # cached: a rerun reads the curve (this process, then the file under the cache)
    mde_mod._MEMO.clear()
    start = time.perf_counter()
    c, rec2 = with_simulated_mde(a, t, n_simulations=100)
    assert time.perf_counter() - start < 1.0
    assert rec2["designs"][0]["mde"] == rec["designs"][0]["mde"]
    assert list((tmp_path / "cache" / "power").glob("*.json"))


def test_zero_simulations_or_cluster_inference_keep_the_formula():
    t = _table()
    a = marker_analysis(t, "y", covariates=["knob"], groups="seed", n_permutations=200)
    b, rec = with_simulated_mde(a, t, n_simulations=0)
    assert b is a and rec["source"] == "formula"
    cl = dataclasses.replace(a, settings={**a.settings, "inference": "cluster"})
    _, rec = with_simulated_mde(cl, t, n_simulations=100)
    assert rec["source"] == "formula" and "cluster" in rec["reason"]
    assert mde_sentence(rec).startswith("MDE: noncentral-t formula (inference = cluster")


def test_design_curve_is_keyed_by_the_design(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    C = np.random.default_rng(0).standard_normal((20, 2))
    g = np.repeat(np.arange(4), 5)
    c1, k1 = design_curve(C, g, level=0.05, n_simulations=50)
    c2, k2 = design_curve(C, g, level=0.025, n_simulations=50)
    c3, k3 = design_curve(C, g, level=0.05, n_simulations=50)
    assert k1 != k2 and k1 == k3 and c3 is c1
    assert math.isfinite(c1.mde) or not math.isfinite(c3.mde)


@pytest.mark.slow
def test_power_at_the_reported_mde_is_at_least_75_percent():
    """Done-when of issue 55: populations planted at the report's MDE are detected >= 75 %.

    30 models (3 knob levels x 5 seeds x 2), seed random effects shared by marker and outcome,
    3 markers (2 null) under Holm: the report's own decision (Holm partial p <= 0.05). The
    noncentral-t MDE it replaces is detected in about 70 % (measured: 73 +- 4 % at 4 markers).
    """
    K, S = 3, 150
    t = _table(K=K, rho=0.3)
    a = marker_analysis(t, "y", covariates=["knob"], groups="seed", n_permutations=200)
    b, _ = with_simulated_mde(a, t, n_simulations=400)
    reported = b["m"].mde_partial_r
    assert reported > a["m"].mde_partial_r  # above the formula
    hits = 0
    for s in range(S):
        res = marker_analysis(_table(K=K, rho=reported, seed=1000 + s), "y", covariates=["knob"],
                              groups="seed", seed=s)
        hits += res["m"].partial_p_holm <= 0.05
    power = hits / S
    assert power >= 0.75, (power, reported)


def test_unit_levels_count_a_family_once_and_its_layers_within_it():
    """Weighted Holm (probekit.diagnosis.statistics.families): U units; a marker outside a family is first
    tested at alpha / U, a family's best layer at alpha / (U |F|); without families alpha / K."""
    from types import SimpleNamespace as S

    from probekit.diagnosis.mde import unit_levels

    ms = [S(marker="he", family="", mde_partial_r=0.3), S(marker="cap", family="", mde_partial_r=0.3),
          *[S(marker=f"probe@L{i}", family="probe", mde_partial_r=0.3) for i in range(4)],
          S(marker="na", family="", mde_partial_r=float("nan"))]
    lv = unit_levels(ms, 0.05, 6)
    assert lv["he"] == pytest.approx(0.05 / 3) and lv["cap"] == pytest.approx(0.05 / 3)
    assert lv["probe@L2"] == pytest.approx(0.05 / 12)
    plain = unit_levels(ms[:2], 0.05, 2)
    assert plain == {"he": pytest.approx(0.025), "cap": pytest.approx(0.025)}
