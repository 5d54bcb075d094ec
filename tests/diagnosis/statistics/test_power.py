"""The partial test's power simulated on a design (probekit.diagnosis.statistics.power)."""

import math

import numpy as np
import pytest

from probekit.diagnosis.statistics.inference import (
    FixedNull,
    mde_partial_r,
    stratified_permutations,
)
from probekit.diagnosis.statistics.power import (
    _abs_t,
    _group_basis,
    _split_basis,
    auto_permutations,
    power_crossing,
    simulated_power,
)
from probekit.errors import ConfigError


def _design(n_seeds, n_levels=3, reps=1):
    knob = np.tile(np.repeat(np.arange(n_levels), reps), n_seeds)
    g = np.repeat(np.arange(n_seeds), n_levels * reps)
    C = (knob[:, None] == np.arange(1, n_levels)[None, :]).astype(float)  # one-hot, level 0 dropped
    return C, g


@pytest.mark.parametrize("groups", [True, False])
def test_vectorised_t_is_the_fixed_null_hc3_t(groups):
    rng = np.random.default_rng(3)
    n = 24
    C = rng.standard_normal((n, 4))
    g = np.repeat(np.arange(4), 6) if groups else None
    QD = _group_basis(g if groups else np.zeros(n, dtype=int))
    Qc, h0 = _split_basis(C, QD)
    zy, zp = rng.standard_normal((2, n))
    perms = stratified_permutations(n, 40, rng, g)
    rho = np.array([0.0, 0.3, 0.9])
    T = _abs_t(Qc, QD, h0, zy, zp, perms, rho)
    fe = np.eye(4)[g][:, 1:] if groups else np.zeros((n, 0))
    X = np.column_stack([np.ones(n), C, fe])
    for j, r in enumerate(rho):
        m = r * zy + math.sqrt(1 - r * r) * zp
        f = FixedNull.build(m, X, "hc3")
        ey = f.project(zy[None, :])[0]
        ref = np.abs(f.t_stats(np.vstack([ey[None, :], f.project(ey[perms])]))[1])
        np.testing.assert_allclose(T[:, j], ref, rtol=1e-9, atol=1e-12)


def test_null_rejects_at_about_the_level_and_power_grows_with_the_effect():
    C, g = _design(8, reps=2)  # 48 models, 8 seed groups
    c = simulated_power(C, g, level=0.05, effects=(0.2, 0.4, 0.6), n_simulations=400,
                        n_permutations=199)
    assert c.effects == (0.0, 0.2, 0.4, 0.6)
    assert abs(c.power[0] - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / 400)  # size at nominal
    assert c.power[1] < c.power[2] < c.power[3]  # common random numbers: monotone
    assert c.df == 48 - (1 + 2 + 7) - 1 and c.n_groups == 8 and c.inference == "within_groups"
    assert c.power_se[2] == pytest.approx(math.sqrt(c.power[2] * (1 - c.power[2]) / 400))


def test_mde_falls_with_more_seeds_and_sits_at_or_above_the_formula():
    level = 0.05 / 4
    mdes = []
    for seeds in (4, 8, 16):
        C, g = _design(seeds, reps=2)
        c = simulated_power(C, g, level=level, n_simulations=200, seed=1)
        mdes.append(c.mde)
        assert c.classical_mde == pytest.approx(mde_partial_r(c.df, level))
        assert c.mde >= c.classical_mde - 3 * c.mde_se  # HC3 + permutations lose power
        assert c.power_at(c.mde) == pytest.approx(0.8, abs=1e-9)
    assert mdes[0] > mdes[1] > mdes[2]


def test_crossing_is_read_off_the_curve():
    assert power_crossing([0.0, 0.2, 0.4], [0.05, 0.6, 1.0]) == (pytest.approx(0.3), 2)
    assert math.isnan(power_crossing([0.0, 0.2], [0.05, 0.5])[0])


def test_permutations_resolve_the_level():
    assert auto_permutations(0.05) == 199
    assert auto_permutations(0.05 / 7) == 1399  # 0.00714 x 1400 = 10 permuted |t| beyond it
    assert (auto_permutations(0.05 / 14) + 1) * 0.05 / 14 >= 10


def test_too_few_models_is_refused_with_the_fix():
    C, g = _design(3)  # 9 models: intercept, 2 knob terms, 2 seed effects
    extra = np.random.default_rng(0).standard_normal((9, 2))  # 2 more terms: 7 in all
    with pytest.raises(ConfigError, match=r"9 models leave 1 residual degrees of freedom for 7 "
                                          r"regression terms; add models \(seeds\) or drop "
                                          "covariates"):
        simulated_power(np.column_stack([C, extra]), g, level=0.05)
    with pytest.raises(ConfigError, match="level must be in"):
        simulated_power(C, g, level=0.0)
