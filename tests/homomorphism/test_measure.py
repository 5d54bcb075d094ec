import numpy as np
import pytest
import torch

from probekit.errors import DataError
from probekit.homomorphism import HEConfig, composition_he, split_pairs
from tests.homomorphism.conftest import planted

AFFINE = HEConfig(families=("affine",), alpha=1e-10, solver="closed_form_ridge")


def test_exact_affine_composition_has_zero_affine_he():
    a, b, t = planted()
    res = composition_he(a, b, t, config=AFFINE)
    assert res.mse.max() < 1e-18
    assert res.he_normalised.max() < 1e-18
    assert res.he_high.max() < 1e-18


def test_c_target_is_exactly_affine():
    # [C]'s composite (a + b) / 2 is linear in [a; b]: the closed-form affine and bilinear fits
    # give HE = 0 for any states whatsoever
    a, b, _ = planted()
    res = composition_he(a, b, config=HEConfig(families=("affine", "bilinear"), alpha=1e-10,
                                               solver="closed_form_ridge"))
    assert res.mse.max() < 1e-18


def test_default_reproduces_cs_adam_residual_which_scales_with_the_states():
    # the default (solver="adam") is [C]'s number: the residual of a 50-epoch Adam fit of the
    # linear target, so it is > 0 and grows with the square of the state size (states x 10 ->
    # HE x 100, up to the optimiser's nonlinearity in the scale)
    a, b, _ = planted(layers=1, n=200)
    cfg = HEConfig(families=("affine",))
    assert cfg.solver == "adam"
    base = composition_he(a, b, config=cfg).headline
    assert base == pytest.approx(0.2965, rel=1e-2)  # 200 pairs, d = 6: an unconverged fit
    big = composition_he(10 * a, 10 * b, config=cfg).headline
    assert big / base == pytest.approx(96.1, rel=2e-2)


def test_he_rises_monotonically_with_noise():
    he = [composition_he(*planted(noise=s), config=AFFINE).he for s in (0.0, 0.1, 0.3, 1.0, 3.0)]
    he = np.stack(he)  # (noise, layer)
    assert (np.diff(he, axis=0) > 0).all()
    # the mlp family too (the [C] headline averages all three)
    cfg = HEConfig(families=("mlp",))
    mlp = [composition_he(*planted(noise=s, layers=1), config=cfg).headline for s in (0.0, 1.0, 3.0)]
    assert mlp[0] < mlp[1] < mlp[2]


def test_normalised_he_invariant_to_rotation_and_scale():
    a, b, t = planted(noise=0.5)
    d = a.shape[-1]
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(9), dtype=torch.float64))
    base = composition_he(a, b, t, config=AFFINE)
    rot = composition_he(a @ q, b @ q, t @ q, config=AFFINE)
    np.testing.assert_allclose(rot.he_normalised, base.he_normalised, rtol=1e-9)
    np.testing.assert_allclose(rot.he_normalised_low, base.he_normalised_low, rtol=1e-9)
    scaled = composition_he(10 * a, 10 * b, 10 * t, config=AFFINE)
    np.testing.assert_allclose(scaled.he_normalised, base.he_normalised, rtol=1e-6)
    np.testing.assert_allclose(scaled.he, 100 * base.he, rtol=1e-6)  # raw MSE scales


def test_per_layer_equals_one_layer_at_a_time():
    a, b, t = planted(noise=0.3, layers=3)
    cfg = HEConfig(solver="closed_form_ridge")
    full = composition_he(a, b, t, config=cfg, layers=(4, 5, 6))
    for i in range(3):
        one = composition_he(a[i : i + 1], b[i : i + 1], t[i : i + 1], config=cfg, layers=(4 + i,))
        np.testing.assert_allclose(full.mse[i, :2], one.mse[0, :2], rtol=1e-9)  # closed form
        np.testing.assert_allclose(full.mse[i, 2], one.mse[0, 2], rtol=1e-4)  # Adam, float32
        np.testing.assert_allclose(full.normalised[i], one.normalised[0], rtol=1e-4)
        np.testing.assert_allclose(full.he_low[i], one.he_low[0], rtol=1e-4)
    assert full.headline_layer == 6


def test_bootstrap_ci_brackets_estimate_and_groups_split():
    a, b, t = planted(noise=0.5, n=200, layers=1)
    labels = ["twice", "thrice"] * 100
    res = composition_he(a, b, t, labels=labels, config=HEConfig(families=("affine",)))
    assert res.he_low[0] < res.he[0] < res.he_high[0]
    assert res.groups == ("twice", "thrice") and sum(res.group_counts) == res.n_scored == 40
    # pooled MSE = count-weighted mean of the group MSEs
    w = np.asarray(res.group_counts) / res.n_scored
    assert res.mse[0, 0] == pytest.approx(float((res.group_mse[0, 0] * w).sum()))


def test_split_protocol():
    fit, score = split_pairs(10)
    assert fit.tolist() == list(range(8)) and score.tolist() == [8, 9]
    fit2, score2 = split_pairs(10, shuffle=True, seed=1)
    assert sorted([*fit2, *score2]) == list(range(10)) and fit2.tolist() != fit.tolist()
    with pytest.raises(DataError, match="4 pairs split 0.8/0.2 leave 3 to fit and 1 to score"):
        split_pairs(4)


def test_too_few_pairs_and_mismatched_labels():
    a, b, t = planted(n=4)
    with pytest.raises(DataError, match="4 pairs"):
        composition_he(a, b, t)
    a, b, t = planted(n=20)
    with pytest.raises(DataError, match="3 labels for 20 pairs"):
        composition_he(a, b, t, labels=["x"] * 3)
    for layer in (-4, 3):
        with pytest.raises(DataError, match=f"HEConfig.layer={layer} is not among"):
            composition_he(a, b, t, config=HEConfig(layer=layer))
