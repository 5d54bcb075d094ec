"""Granulated Kendall tau and Jiang et al.'s CMI: exact values vs brute-force loops."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from probekit.diagnosis import conditional_mutual_information, granulated_kendall_tau
from probekit.errors import ConfigError


def grid(seed: int = 0, reps: int = 2) -> dict[str, list]:
    """3 x 4 grid of knobs a, b with ``reps`` seeds per cell; continuous m, y (no ties)."""
    rng = np.random.default_rng(seed)
    rows = [(a, b, s) for a in (0.0, 0.5, 1.0) for b in ("x", "y", "z", "w") for s in range(reps)]
    n = len(rows)
    y = rng.normal(size=n)
    return {"a": [r[0] for r in rows], "b": [r[1] for r in rows], "seed": [r[2] for r in rows],
            "y": y.tolist(), "m": (0.5 * y + rng.normal(size=n)).tolist()}


def brute_granulated(t, knobs):
    out = {}
    for k in knobs:
        others = [o for o in knobs if o != k]
        cells = {}
        for i in range(len(t["y"])):
            cells.setdefault(tuple(t[o][i] for o in others), []).append(i)
        taus = [stats.kendalltau([t["m"][i] for i in idx], [t["y"][i] for i in idx]).statistic
                for idx in cells.values()]
        out[k] = float(np.mean(taus))
    return out


def test_granulated_equals_brute_force():
    t = grid(0)
    g = granulated_kendall_tau(t, "y", "m", ["a", "b"])
    ref = brute_granulated(t, ["a", "b"])
    assert g.applicable and g.n_groups == {"a": 4, "b": 3}
    for k in ("a", "b"):
        assert g.per_knob[k] == pytest.approx(ref[k], abs=1e-12)
    assert g.psi == pytest.approx((ref["a"] + ref["b"]) / 2, abs=1e-12)
    assert g.tau == pytest.approx(stats.kendalltau(t["m"], t["y"]).statistic, abs=1e-12)
    # seed as a third knob: groups of single (a, b, seed) cells varying one knob
    g3 = granulated_kendall_tau(t, "y", "m", ["a", "b", "seed"])
    ref3 = brute_granulated(t, ["a", "b", "seed"])
    for k in ("a", "b", "seed"):
        assert g3.per_knob[k] == pytest.approx(ref3[k], abs=1e-12)


def test_marker_equal_to_outcome_and_marker_of_one_knob():
    t = grid(1)
    t["copy"] = list(t["y"])
    g = granulated_kendall_tau(t, "y", "copy", ["a", "b"])
    assert g.per_knob == {"a": 1.0, "b": 1.0} and g.psi == 1.0
    c = conditional_mutual_information(t, "y", "copy", ["a", "b"])
    assert c.applicable and c.score == pytest.approx(1.0, abs=1e-12)
    assert all(v == pytest.approx(1.0, abs=1e-12) for v in c.sets.values())
    # m = f(a) only: within groups varying b (a fixed) m is constant -> tau 0 (ties count 0)
    t["of_a"] = [2.0 * a**2 for a in t["a"]]
    t["y"] = [yy + 3 * a for yy, a in zip(t["y"], t["a"], strict=True)]
    g = granulated_kendall_tau(t, "y", "of_a", ["a", "b"])
    assert g.per_knob["b"] == 0.0 and g.per_knob["a"] > 0.5
    c = conditional_mutual_information(t, "y", "of_a", ["a", "b"])
    assert c.sets[("a",)] == pytest.approx(0.0, abs=1e-12)
    assert c.score == pytest.approx(0.0, abs=1e-12) and "a" in c.argmin
    assert c.sets[()] > 0.1  # unconditionally it looks informative


def brute_cmi(t, knobs, S):
    """Plug-in CMI by counting over ordered pairs that differ in exactly one knob."""
    n = len(t["y"])
    rows = []
    for i, j in itertools.permutations(range(n), 2):
        if sum(t[k][i] != t[k][j] for k in knobs) != 1:
            continue
        u = tuple(t[k][i] for k in S) + tuple(t[k][j] for k in S)
        rows.append((u, np.sign(t["m"][i] - t["m"][j]), np.sign(t["y"][i] - t["y"][j])))
    N = len(rows)
    cu = Counter(r[0] for r in rows)
    cuvm = Counter((r[0], r[1]) for r in rows)
    cuvy = Counter((r[0], r[2]) for r in rows)
    cuvv = Counter(rows)
    info = sum(c / N * math.log(c * cu[u] / (cuvm[(u, a)] * cuvy[(u, b)]))
               for (u, a, b), c in cuvv.items())
    h = -sum(c / N * math.log(c / cu[u]) for (u, _), c in cuvy.items())
    return info, h


def test_cmi_equals_brute_force():
    t = grid(2)
    t["m"] = [round(v, 0) for v in t["m"]]  # ties: V_m takes 0 too
    c = conditional_mutual_information(t, "y", "m", ["a", "b", "seed"], max_set_size=2)
    assert len(c.sets) + len(c.skipped) == 1 + 3 + 3
    for S in c.sets:
        info, h = brute_cmi(t, ["a", "b", "seed"], S)
        assert c.cmi[S] == pytest.approx(info, abs=1e-12)
        assert c.entropy[S] == pytest.approx(h, abs=1e-12)
        assert c.sets[S] == pytest.approx(info / h, abs=1e-12)
    assert c.score == min(c.sets.values())
    assert c.n_pairs == 2 * sum(1 for i, j in itertools.combinations(range(24), 2)
                                if sum(t[k][i] != t[k][j] for k in ("a", "b", "seed")) == 1)


def test_not_a_full_grid_is_not_applicable():
    t = grid(0)
    keep = [i for i in range(24) if not (t["a"][i] == 1.0 and t["b"][i] == "w")]
    sub = {k: [v[i] for i in keep] for k, v in t.items()}
    g = granulated_kendall_tau(sub, "y", "m", ["a", "b"])
    assert not g.applicable and math.isnan(g.psi)
    assert g.reason == "not a full grid: 1 of 12 knob combinations have no model with a m value " \
        "(e.g. a=1.0, b='w')"
    one = dict(t, a=[0.0] * 24)
    assert "knob(s) a take a single value" in granulated_kendall_tau(one, "y", "m", ["a", "b"]).reason
    with pytest.raises(ConfigError, match="knob column 'c' is not in the table"):
        granulated_kendall_tau(t, "y", "m", ["a", "c"])


# --------------------------------------------------------------------------- uncertainty


def _null_grid(seed: int) -> dict[str, list]:
    """3 x 4 grid x 2 seeds; y driven by knob a, m by knob b; m independent of y given the knobs."""
    t = grid(seed)
    rng = np.random.default_rng(10_000 + seed)
    t["y"] = [v + 2 * a for v, a in zip(t["y"], t["a"], strict=True)]
    t["m"] = [rng.normal() + {"x": 0, "y": 1, "z": 2, "w": 3}[b] for b in t["b"]]
    t["noise"] = rng.normal(size=24).tolist()
    return t


def _null_rejections(n: int, full: bool) -> None:
    """Rejections at 0.05 over ``n`` null populations are within the 95% Wilson interval of 0.05."""
    reject = Counter()
    for r in range(n):
        t = _null_grid(r)
        if full:
            g = granulated_kendall_tau(t, "y", "m", ["a", "b"], n_permutations=99, n_bootstrap=0,
                                       seed=r)
            reject["psi_a (m driven by b)"] += g.per_knob_p["a"] <= 0.05
        g = granulated_kendall_tau(t, "y", "noise", ["a", "b"], n_permutations=99, n_bootstrap=0,
                                   seed=r)
        reject["psi_b"] += g.per_knob_p["b"] <= 0.05
        reject["psi"] += g.psi_p <= 0.05
        reject["tau"] += g.tau_p <= 0.05
        if full:
            c = conditional_mutual_information(t, "y", "noise", ["a", "b"], n_permutations=99,
                                               n_bootstrap=0, seed=r)
            reject["cmi"] += c.p <= 0.05
    for name, k in reject.items():
        ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
        assert ci.low <= 0.05 <= ci.high, (name, k)


def test_permutation_p_is_uniform_under_the_null_small():
    _null_rejections(40, full=False)


@pytest.mark.slow
def test_permutation_p_is_uniform_under_the_null():
    _null_rejections(150, full=True)


def test_planted_monotone_marker_is_at_the_floor_with_a_degenerate_interval():
    t = grid(3, reps=3)
    t["mono"] = [math.exp(v) for v in t["y"]]  # monotone in the outcome
    g = granulated_kendall_tau(t, "y", "mono", ["a", "b"], "seed", n_permutations=199)
    floor = 1 / 200
    assert g.per_knob_p == {"a": floor, "b": floor} and g.psi_p == floor and g.tau_p == floor
    assert g.psi_p_mcse == pytest.approx(math.sqrt(floor * (1 - floor) / 199), rel=1e-12)
    assert g.per_knob_ci == {"a": (1.0, 1.0), "b": (1.0, 1.0)} and g.psi_ci == (1.0, 1.0)
    assert g.unit == "seed (3 groups)"
    recs = g.to_records()
    assert [r["p"] for r in recs] == [floor] * 3 and recs[-1]["low"] == recs[-1]["high"] == 1.0
    c = conditional_mutual_information(t, "y", "mono", ["a", "b"], 2, "seed", n_permutations=199)
    assert c.p == floor and (c.low, c.high) == (1.0, 1.0)
    # fewer than 3 groups: models are resampled within the design cells
    two = dict(t, seed=[s % 2 for s in t["seed"]])
    assert granulated_kendall_tau(two, "y", "m", ["a", "b"], "seed").unit == \
        "models within design cells"
    assert granulated_kendall_tau(t, "y", "m", ["a", "b"]).unit == "models within design cells"
    with pytest.raises(ConfigError, match="n_bootstrap=10 is below the 1000"):
        granulated_kendall_tau(t, "y", "m", ["a", "b"], n_bootstrap=10)


def test_vectorised_tau_equals_the_definition_with_and_without_weights():
    from probekit.diagnosis.statistics.granulated import pair_set, tau_stat

    t = grid(4, reps=3)
    t["m"] = [round(v) for v in t["m"]]  # ties in the marker
    m, y = np.array(t["m"], float), np.array(t["y"])
    g = granulated_kendall_tau(t, "y", "m", ["a", "b"], n_permutations=0, n_bootstrap=0)
    a_levels = sorted(set(t["a"]))
    group = np.array([a_levels.index(v) for v in t["a"]])  # knob b's groups: a fixed
    ps = pair_set(group, y)
    assert tau_stat(ps, m[None, :])[0] == pytest.approx(g.per_knob["b"], abs=1e-12)
    # weights w: pair (i, j) of distinct models weighs w_i w_j
    w = np.random.default_rng(0).integers(0, 3, size=(2, m.size)).astype(float)
    got = tau_stat(ps, np.tile(m, (2, 1)), w)
    for r in range(2):
        taus = []
        for lv in range(3):
            idx = np.flatnonzero(group == lv)
            num = den = 0.0
            for i, j in itertools.combinations(idx, 2):
                num += w[r, i] * w[r, j] * np.sign(m[i] - m[j]) * np.sign(y[i] - y[j])
                den += w[r, i] * w[r, j]
            if den:
                taus.append(num / den)
        assert got[r] == pytest.approx(np.mean(taus), abs=1e-12)
