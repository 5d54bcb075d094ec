"""Level-mean R^2 (An & Du's unit) vs numpy.polyfit, beside the per-model R^2."""

import math

import numpy as np
import pytest

from probekit.diagnosis import level_mean_r2
from probekit.errors import DataError


def _r2(x, y, d):
    fit = np.polyval(np.polyfit(x, y, d), x)
    return 1 - ((y - fit) ** 2).sum() / ((y - y.mean()) ** 2).sum()


def test_level_means_equal_polyfit():
    rng = np.random.default_rng(0)
    noise = np.repeat(np.linspace(0, 0.3, 6), 5)
    he = noise + 0.05 * rng.normal(size=30)
    ood = 1 - 2 * noise + 0.2 * rng.normal(size=30)
    t = {"noise": noise.tolist(), "he": he.tolist(), "ood": ood.tolist()}
    res = level_mean_r2(t, "ood", "he", "noise")
    mm = np.array([he[noise == v].mean() for v in np.unique(noise)])
    my = np.array([ood[noise == v].mean() for v in np.unique(noise)])
    for d, rl, rm in zip(res.degrees, res.r2_levels, res.r2_models, strict=True):
        assert rl == pytest.approx(_r2(mm, my, d), abs=1e-9)
        assert rm == pytest.approx(_r2(he, ood, d), abs=1e-9)
    assert res.n_per_level == (5,) * 6 and res.unit == "level means (An & Du's unit)"
    # the pitfall of diagnosis.md: a shared knob makes level means look far better than models
    assert res.r2_levels[0] > 0.8 and res.r2_models[0] < res.r2_levels[0] - 0.2
    assert res.to_records()[0]["r2_level_means"] == res.r2_levels[0]


def test_degree_at_least_levels_is_explicit():
    t = {"k": [0, 0, 1, 1, 2, 2], "m": [1.0, 1.2, 2.0, 2.1, 2.9, 3.2], "y": [0.1, 0.2, 0.5, 0.4, 0.9, 1.0]}
    res = level_mean_r2(t, "y", "m", "k", degrees=(1, 2, 3))
    assert math.isfinite(res.r2_levels[0]) and res.reasons[0] == ""
    # degree 2 through 3 level means (3 coefficients) interpolates them: R^2 = 1 is no evidence
    assert math.isnan(res.r2_levels[1]) and res.reasons[1] == "degree 2 on 3 levels would interpolate the means"
    assert math.isnan(res.r2_levels[2]) and res.reasons[2] == "degree 3 on 3 levels would interpolate the means"
    two = level_mean_r2({k: v[:4] for k, v in t.items()}, "y", "m", "k", degrees=(1,))
    assert math.isnan(two.r2_levels[0])  # a line through 2 means
    with pytest.raises(DataError, match="knob 'k' has 1 level"):
        level_mean_r2(dict(t, k=[0] * 6), "y", "m", "k")
