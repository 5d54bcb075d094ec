"""Sinusoidal positions: the formula, frozen in the built model, kept by a checkpoint."""

import math

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.models import build_model, load_checkpoint, save_checkpoint
from probekit.models.config import ModelConfig
from probekit.models.native import sinusoidal_positions

SIN = ModelConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, d_vocab=11, n_ctx=12,
                  act_fn="gelu", positional_embedding_type="sinusoidal")


def _vaswani(n_ctx, d):
    """Brute force, one cell at a time: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(.)."""
    pe = np.zeros((n_ctx, d))
    for p in range(n_ctx):
        for j in range(d):
            i2 = j - j % 2
            angle = p / 10000 ** (i2 / d)
            pe[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return torch.tensor(pe, dtype=torch.float32)


@pytest.mark.parametrize(("n_ctx", "d"), [(12, 16), (35, 128), (7, 5)])
def test_sinusoidal_positions_match_the_formula(n_ctx, d):
    got = sinusoidal_positions(n_ctx, d)
    assert got.shape == (n_ctx, d)
    torch.testing.assert_close(got, _vaswani(n_ctx, d), atol=1e-6, rtol=0)
    assert got[0, 0] == 0 and got[0, 1] == 1  # sin(0), cos(0)


def test_built_model_has_frozen_sinusoidal_w_pos_and_a_checkpoint_keeps_it(tmp_path):
    model = build_model(SIN)
    torch.testing.assert_close(model.W_pos.detach(), _vaswani(12, 16), atol=1e-6, rtol=0)
    assert not model.W_pos.requires_grad
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen == ["pos._original_component.weight"]
    learned = build_model(ModelConfig(**{**SIN.to_dict(), "positional_embedding_type": "standard"}))
    assert not torch.allclose(learned.W_pos, model.W_pos) and learned.W_pos.requires_grad
    # the rest of the initialisation is the learned-position model's (same seed)
    torch.testing.assert_close(learned.W_E, model.W_E)

    toks = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(0))
    save_checkpoint(model, SIN, tmp_path / "ck")
    back = load_checkpoint(tmp_path / "ck")
    assert not back.W_pos.requires_grad
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 back.state_dict().values()))
    with torch.no_grad():
        torch.testing.assert_close(back(toks), model(toks), atol=0, rtol=0)


def test_unknown_positional_type_is_refused():
    # under pytest beartype checks the Literal annotation first; without it, ConfigError
    with pytest.raises((ConfigError, TypeError), match="alibi"):
        ModelConfig(**{**SIN.to_dict(), "positional_embedding_type": "alibi"})
