"""Layer rotation and condition numbers on constructed weights."""

import math

import numpy as np
import pytest
import torch

from probekit.errors import DataError
from probekit.geometry.dynamics import (
    activation_condition_number,
    checkpoint_dynamics,
    layer_rotation,
    plot_dynamics,
    weight_condition_numbers,
)


def _state(w, b=None):
    return {"blocks.0.attn.W_Q": w, "blocks.0.attn.b_Q": torch.zeros(3) if b is None else b,
            "blocks.0.ln1.w": torch.ones(3)}


def test_rotation_of_a_planar_rotation_is_one_minus_cos():
    w0 = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    states = []
    for theta in (0.0, math.pi / 3, math.pi / 2, math.pi):
        w = torch.tensor([[math.cos(theta), math.sin(theta)], [0.0, 0.0]], dtype=torch.float64)
        states.append(_state(3.0 * w if theta else w0))
    rot = layer_rotation(states)
    assert list(rot) == ["blocks.0.attn.W_Q"]  # biases and LN gains excluded
    np.testing.assert_allclose(rot["blocks.0.attn.W_Q"].numpy(), [0.0, 0.5, 1.0, 2.0], atol=1e-9)


def test_condition_numbers_known_values():
    w = torch.diag(torch.tensor([10.0, 2.0, 0.5], dtype=torch.float64))
    q, _ = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64))
    assert weight_condition_numbers(_state(q @ w))["blocks.0.attn.W_Q"] == pytest.approx(20.0)
    # 3-D weight reshaped to (shape[0], -1)
    w3 = torch.zeros(2, 2, 2, dtype=torch.float64)
    w3[0, 0, 0], w3[1, 1, 1] = 4.0, 1.0
    assert weight_condition_numbers({"W_O": w3})["W_O"] == pytest.approx(4.0)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(5000, 2, generator=g, dtype=torch.float64) * torch.tensor([3.0, 1.0])
    acts = torch.stack([z, 2 * z + 1])
    np.testing.assert_allclose(activation_condition_number(acts).numpy(), 9.0, rtol=0.05)


def test_checkpoint_series_and_plot(tmp_path):
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    dirs = []
    w = torch.randn(4, 4, generator=g)
    for i in range(3):
        d = tmp_path / f"step_{i}"
        d.mkdir()
        save_file({"W_in": (w + 0.5 * i * torch.eye(4)).contiguous()}, str(d / "model.safetensors"))
        dirs.append(d)
    m = checkpoint_dynamics(dirs, steps=[0, 10, 20])
    assert m.steps == (0, 10, 20)
    r = m.rotation["W_in"]
    assert r[0] == pytest.approx(0.0, abs=1e-9) and r[1] > 0 and r[2] > r[1]
    assert plot_dynamics(m, tmp_path / "dyn.png").stat().st_size > 1000


def test_mismatched_checkpoints_raise():
    with pytest.raises(DataError, match="same architecture"):
        layer_rotation([_state(torch.eye(2)), _state(torch.eye(3))])


def test_weight_rotation_and_condition_number_of_constructed_matrices():
    from probekit.geometry.dynamics import matrix_condition_number, weight_rotation

    g = torch.Generator().manual_seed(1)
    w0 = torch.randn(6, 4, generator=g, dtype=torch.float64)
    u = torch.randn(6, 4, generator=g, dtype=torch.float64)
    u = u - (u * w0).sum() / (w0 * w0).sum() * w0  # orthogonal to w0
    u = u * w0.norm() / u.norm()
    for theta in (0.0, 0.3, math.pi / 2, 2.5):
        w = 2.0 * (math.cos(theta) * w0 + math.sin(theta) * u)
        assert weight_rotation(w0, w) == pytest.approx(1 - math.cos(theta), abs=1e-9)
    with pytest.raises(DataError, match="zero weight"):
        weight_rotation(w0, torch.zeros_like(w0))
    with pytest.raises(DataError, match="same shape"):
        weight_rotation(w0, w0.T)
    q1, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=torch.float64))
    s = torch.zeros(6, 4, dtype=torch.float64)
    s[range(4), range(4)] = torch.tensor([50.0, 7.0, 3.0, 0.5], dtype=torch.float64)
    assert matrix_condition_number(q1 @ s @ q2) == pytest.approx(100.0, rel=1e-9)
    assert matrix_condition_number((q1 @ s @ q2).T) == pytest.approx(100.0, rel=1e-9)
    s[3, 3] = 0.0
    assert matrix_condition_number(s) == math.inf
