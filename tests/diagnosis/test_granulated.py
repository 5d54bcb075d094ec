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
