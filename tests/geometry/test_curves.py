"""geometry_by_layer on a constructed two-layer case with a known ordering."""

import numpy as np
import pytest
import torch

from probekit.geometry import geometry_by_layer, manifold_capacity, manifolds_from_labels


def test_curves_order_layers_and_match_single_calls():
    g = torch.Generator().manual_seed(0)
    c, per, d = 8, 12, 40
    y = np.repeat(np.arange(c), per)
    noise = torch.randn(c * per, d, generator=g, dtype=torch.float64)
    centres = 4 * torch.randn(c, d, generator=g, dtype=torch.float64)
    tangled = noise  # layer 0: labels carry no structure
    untangled = centres[torch.from_numpy(y)] + 0.3 * noise  # layer 1: tight, separated classes
    acts = torch.stack([tangled, untangled])
    cur = geometry_by_layer(acts, y, layer_names=["a", "b"], max_points=10, n_t=100, seed=0)
    assert cur.layers == ["a", "b"] and cur.n_classes == c and cur.points_per_class == 10
    assert cur.capacity[1] > 3 * cur.capacity[0]
    assert cur.radius[1] < cur.radius[0]
    assert cur.nc1[1] < 0.1 * cur.nc1[0]
    assert cur.fisher_ratio[1] > 10 * cur.fisher_ratio[0]
    ms, _ = manifolds_from_labels(untangled, y, max_points=10, seed=0)
    single = manifold_capacity(ms, n_t=100, seed=0)
    assert cur.capacity[1] == pytest.approx(single.capacity, rel=1e-9)
    assert cur.utility[1] == pytest.approx(single.utility, rel=1e-9)
    r2 = single.radius**2
    assert single.utility == pytest.approx(single.capacity * single.dimension * r2 / (1 + r2))
    assert set(cur.to_dict()) >= {"capacity", "nc1", "participation_ratio", "n_pcs_90"}


def test_geometry_from_store_equals_tensors(tmp_path):
    from probekit.capture import Site, all_layers, capture_to_store
    from probekit.geometry import geometry_from_store
    from probekit.models import ModelConfig, build_model
    from probekit.store import ActivationStore

    model = build_model(ModelConfig(n_layers=2, d_model=24, n_heads=2, d_head=12, d_vocab=13,
                                    n_ctx=8, act_fn="gelu"))
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 13, (60, 5), generator=g).tolist()
    labels = [t[-1] % 3 for t in tokens]
    capture_to_store(model, tokens, tmp_path / "s", all_layers(model, "resid_post"),
                     metadata={"cls": labels}, progress=False)
    cur = geometry_from_store(tmp_path / "s", "cls", max_points=10, n_t=50)
    acts = ActivationStore(tmp_path / "s").load_layers("resid_post")
    ref = geometry_by_layer(acts, np.asarray(labels), max_points=10, n_t=50)
    assert cur.layers == [Site(0, "resid_post").name, Site(1, "resid_post").name]
    np.testing.assert_allclose(cur.capacity, ref.capacity)
    np.testing.assert_allclose(cur.nc1, ref.nc1)
