"""Build TL-native ``TransformerBridge`` models from a :class:`ModelConfig`."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .config import ModelConfig
from .protocol import HookedModel


def sinusoidal_positions(n_ctx: int, d_model: int) -> Float[Tensor, "pos d_model"]:
    """Fixed sinusoidal position embeddings (Vaswani et al. 2017, section 3.5).

    ``PE[pos, 2i] = sin(pos / 10000^(2i / d_model))``, ``PE[pos, 2i + 1] = cos(pos /
    10000^(2i / d_model))`` (float32; computed in float64). An & Du (2026) [C] add these to the
    token embeddings unscaled.
    """
    pos = torch.arange(n_ctx, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, two_i / d_model)
    pe = torch.zeros(n_ctx, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def build_model(config: ModelConfig, *, device: str | torch.device = "cpu") -> HookedModel:
    """Return a freshly initialised ``TransformerBridge`` (transformer-lens 4.x ``boot_native``).

    Initialisation is deterministic in ``config.seed`` and leaves the global RNG untouched.
    ``positional_embedding_type="sinusoidal"`` builds TL's learned ("standard") position table
    and overwrites it with :func:`sinusoidal_positions`, frozen (``requires_grad=False``, so the
    trainer leaves it out of the optimiser); it is saved with the other weights, so a
    checkpoint loads the same table.
    """
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    sinusoidal = config.positional_embedding_type == "sinusoidal"
    tl_cfg = TransformerBridgeConfig(
        n_layers=config.n_layers,
        d_model=config.d_model,
        n_heads=config.n_heads,
        d_head=config.d_head,
        d_vocab=config.d_vocab,
        n_ctx=config.n_ctx,
        d_mlp=config.d_mlp if config.d_mlp is not None else 4 * config.d_model,
        act_fn=config.act_fn,
        normalization_type=config.normalization_type,
        positional_embedding_type="standard" if sinusoidal else config.positional_embedding_type,
        n_key_value_heads=config.n_key_value_heads,
        attn_only=config.attn_only,
        seed=config.seed,
        default_prepend_bos=False,
    )
    model = TransformerBridge.boot_native(tl_cfg, device=device)
    if sinusoidal:
        w_pos = model.W_pos
        with torch.no_grad():
            w_pos.copy_(sinusoidal_positions(config.n_ctx, config.d_model).to(w_pos))
        w_pos.requires_grad_(False)
    model.eval()
    return model
