"""named_weight: state-dict keys and TransformerLens names give the same matrices."""

import pytest
import torch

from probekit.errors import ConfigError
from probekit.models import ModelConfig, build_model
from probekit.models.weights import named_weight, weight_names


@pytest.fixture(scope="module")
def tiny():
    return build_model(ModelConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, d_vocab=11,
                                   n_ctx=4, d_mlp=32, normalization_type=None, seed=3))


def test_tl_names_are_the_state_dict_matrices(tiny):
    sd = tiny.state_dict()
    torch.testing.assert_close(named_weight(tiny, "W_E"), sd["embed.weight"].double())
    torch.testing.assert_close(named_weight(tiny, "blocks.1.mlp.W_in").T,
                               sd["blocks.1.mlp.in.weight"].double())
    # per-head weights joined into the layer's projection: the state dict's matrix transposed
    torch.testing.assert_close(named_weight(tiny, "blocks.0.attn.W_Q").T,
                               sd["blocks.0.attn.q.weight"].double())
    torch.testing.assert_close(named_weight(tiny, "blocks.0.attn.W_O").T,
                               sd["blocks.0.attn.o.weight"].double())
    head1 = named_weight(tiny, "blocks.0.attn.W_Q", head=1)
    torch.testing.assert_close(head1.T, sd["blocks.0.attn.q.weight"].double()[8:16])
    assert named_weight(tiny, "blocks.0.attn.q.weight").shape == (16, 16)


def test_a_copy_not_a_view(tiny):
    w = named_weight(tiny, "blocks.0.mlp.in.weight")
    w.zero_()
    assert tiny.state_dict()["blocks.0.mlp.in.weight"].abs().sum() > 0


def test_bad_names(tiny):
    with pytest.raises(ConfigError, match="no weight 'blocks.0.mlp.W_inn'.*blocks.0.mlp.W_in"):
        named_weight(tiny, "blocks.0.mlp.W_inn")
    with pytest.raises(ConfigError, match="not a matrix"):
        named_weight(tiny, "W_in")  # stacked over layers
    with pytest.raises(ConfigError, match="heads 0..1"):
        named_weight(tiny, "blocks.0.attn.W_K", head=2)
    with pytest.raises(ConfigError, match="has no heads"):
        named_weight(tiny, "W_E", head=0)
    assert "W_U" in weight_names(tiny) and "blocks.1.attn.W_O" in weight_names(tiny)
