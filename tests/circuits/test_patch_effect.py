"""Normalised patching effect: a ratio of sums, its pair bootstrap and the control's scale."""

import numpy as np
import pytest

from probekit.circuits.patch_effect import normalised_effect
from probekit.errors import DataError
from probekit.stats.bootstrap import bootstrap_indices


def test_full_restoration_is_one_and_no_effect_is_zero():
    rng = np.random.default_rng(0)
    corrupt, clean = rng.normal(size=20), rng.normal(size=20) + 3.0
    assert normalised_effect(clean, corrupt, clean, n_bootstrap=1000, seed=0).estimate == pytest.approx(1.0)
    none = normalised_effect(corrupt, corrupt, clean, n_bootstrap=1000, seed=0,
                             control=clean.copy())
    assert none.estimate == 0.0 and np.all(none.values == 0.0)
    assert none.control.mean() == pytest.approx(1.0)  # the control at the clean metric, same scale


def test_values_resamples_and_estimate_against_brute_force():
    rng = np.random.default_rng(1)
    corrupt, clean = rng.normal(size=15), rng.normal(size=15) + 2.0
    patched = corrupt + rng.uniform(0, 1, 15) * (clean - corrupt)
    eff = normalised_effect(patched, corrupt, clean, n_bootstrap=1000, seed=3)
    gain, gap = patched - corrupt, clean - corrupt
    assert eff.estimate == pytest.approx(gain.sum() / gap.sum(), rel=1e-9)
    np.testing.assert_allclose(eff.values, gain / gap.mean(), rtol=1e-9)
    assert eff.values.mean() == pytest.approx(eff.estimate, rel=1e-9)
    b = bootstrap_indices(15, 1000, 3)[42]
    assert eff.resamples[42] == pytest.approx(gain[b].sum() / gap[b].sum(), rel=1e-9)
    assert eff.control is None


def test_equal_clean_and_corrupt_runs_are_refused():
    x = np.ones(5)
    with pytest.raises(DataError, match="circuit's faithfulness is undefined"):
        normalised_effect(x, x, x, n_bootstrap=1000, seed=0, what="circuit's faithfulness")
