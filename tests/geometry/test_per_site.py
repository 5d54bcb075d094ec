"""Per-site geometry / factorization: constant sites blank, width stacks equal the direct calls."""

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.geometry import (
    class_rows,
    concept_factorization,
    geometry_by_layer,
    site_factorization,
    site_geometry,
    width_groups,
)
from probekit.sites import Site


def _acts(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {Site(None, "embed"): torch.ones(n, 4),                  # constant: left blank
            Site(0, "resid_post"): torch.randn(n, 8, generator=g),
            Site(1, "mlp_post"): torch.randn(n, 6, generator=g),
            Site(1, "resid_post"): torch.randn(n, 8, generator=g)}


def test_width_groups_split_constant_sites_and_group_by_width():
    acts = _acts()
    flat, groups = width_groups(acts, np.arange(60))
    assert flat == [Site(None, "embed")]
    assert groups == [[Site(0, "resid_post"), Site(1, "resid_post")], [Site(1, "mlp_post")]]


def test_site_geometry_equals_geometry_by_layer_on_each_stack():
    acts = _acts()
    rows = np.arange(0, 60, 2)
    y = np.array([str(i % 3) for i in rows])
    geo = site_geometry(acts, rows, y, max_points=10, n_t=20, seed=1)
    direct = geometry_by_layer(torch.stack([acts[Site(0, "resid_post")][rows].double(),
                                            acts[Site(1, "resid_post")][rows].double()]), y,
                               max_points=10, n_t=20, seed=1)
    assert geo.values["capacity"][0] is None  # the constant embedding
    assert geo.values["capacity"][1] == direct.capacity[0]
    assert geo.values["capacity"][3] == direct.capacity[1]
    assert geo.n_classes == 3 and geo.points_per_class == 10
    assert any("identical for every row" in w for w in geo.warnings)


def test_class_rows_keeps_classes_with_enough_rows_and_refuses_fewer_than_two():
    y = np.array(["a"] * 5 + ["b"] * 5 + ["c"] * 2)
    assert class_rows(y, min_points=3).tolist() == [True] * 10 + [False] * 2
    assert class_rows(y, min_points=2, max_classes=2).sum() == 10
    with pytest.raises(ConfigError, match="found 1 class\\(es\\) of 'y' with >= 5 rows in split 'train'"):
        class_rows(y, min_points=5, max_classes=1, label="y", split="train")


def test_site_factorization_equals_concept_factorization():
    acts = _acts(n=48, seed=3)
    rows = np.arange(48)
    a = np.array([str(i % 4) for i in rows])
    b = np.array([str((i // 4) % 3) for i in rows])
    train = rows < 36
    fac = site_factorization(acts, rows, train, a, b, rtol=1e-3)
    direct = concept_factorization(acts[Site(1, "mlp_post")][rows].double()[None], a, b,
                                   train=train, rtol=1e-3)
    assert fac.values["r2_train"][0] is None and fac.values["principal_angles"][0] == []
    assert fac.values["r2_train"][2] == pytest.approx(float(direct.r2_train[0]), abs=0)
    assert fac.n_fitted_combinations == direct.n_train_combinations


def test_all_constant_sites_is_one_config_error():
    acts = {Site(0, "resid_post"): torch.zeros(10, 3)}
    with pytest.raises(ConfigError, match="every site is constant over the 'train' rows"):
        site_geometry(acts, np.arange(10), np.array(["a", "b"] * 5), split="train")
