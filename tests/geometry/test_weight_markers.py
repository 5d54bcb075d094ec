"""Weight markers by name: condition numbers and rotation from init against the matrix functions."""

import math

import pytest
import torch

from probekit.errors import ConfigError, NonFiniteError
from probekit.geometry import layer_rotation, matrix_condition_number, weight_condition_numbers
from probekit.geometry.weight_markers import condition_numbers, rotations_from_init
from probekit.models import ModelConfig, build_model


def _tiny(seed=0):
    return build_model(ModelConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, d_vocab=10, n_ctx=4,
                                   d_mlp=16, normalization_type=None, seed=seed))


def test_condition_numbers_of_one_weight_and_of_all():
    model = _tiny()
    w = model.state_dict()["blocks.0.mlp.in.weight"]
    one = condition_numbers(model, "blocks.0.mlp.in.weight")
    assert one == {"blocks.0.mlp.in.weight": pytest.approx(matrix_condition_number(w.double()))}
    assert condition_numbers(model, "all") == pytest.approx(weight_condition_numbers(model.state_dict()))
    with pytest.raises(ConfigError, match="head is for one attention weight"):
        condition_numbers(model, "all", head=0)
    with torch.no_grad():
        model.state_dict()["blocks.0.mlp.in.weight"][:, 0] = 0.0
    with pytest.raises(NonFiniteError, match="singular"):
        condition_numbers(model, "blocks.0.mlp.W_in")


def test_rotation_from_init_is_zero_for_itself_and_matches_layer_rotation():
    init, model = _tiny(0), _tiny(1)
    assert all(abs(v) < 1e-9 for v in rotations_from_init(init, init).values())
    want = {k: float(v[-1]) for k, v in layer_rotation([init.state_dict(), model.state_dict()]).items()}
    assert rotations_from_init(init, model) == pytest.approx(want, rel=1e-9)
    a, b = init.W_E.detach().double().ravel(), model.W_E.detach().double().ravel()
    cos = float(a @ b / (a.norm() * b.norm()))
    assert rotations_from_init(init, model, "W_E")["W_E"] == pytest.approx(1 - cos, rel=1e-9)
    assert not math.isnan(cos)
