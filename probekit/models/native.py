"""Build TL-native ``TransformerBridge`` models from a :class:`ModelConfig`."""

from __future__ import annotations

import torch

from .config import ModelConfig
from .protocol import HookedModel


def build_model(config: ModelConfig, *, device: str | torch.device = "cpu") -> HookedModel:
    """Return a freshly initialised ``TransformerBridge`` (transformer-lens 4.x ``boot_native``).

    Initialisation is deterministic in ``config.seed`` and leaves the global RNG untouched.
    """
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

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
        positional_embedding_type=config.positional_embedding_type,
        n_key_value_heads=config.n_key_value_heads,
        attn_only=config.attn_only,
        seed=config.seed,
        default_prepend_bos=False,
    )
    model = TransformerBridge.boot_native(tl_cfg, device=device)
    model.eval()
    return model
