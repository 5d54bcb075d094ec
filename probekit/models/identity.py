"""What identifies a model: a content fingerprint of its weights and a human-readable id.

Re-exported by :mod:`probekit.fingerprint` beside the dataset fingerprint. Defined in the models
package, whose :func:`~probekit.models.load_model_cached` returns the fingerprint, so that
``models`` and ``fingerprint`` do not import each other (``fingerprint`` sits above ``models``).
"""

from __future__ import annotations

import hashlib
import json

import torch

from .protocol import HookedModel

__all__ = ["model_fingerprint", "model_id"]

_CFG_KEYS = (
    "n_layers", "d_model", "n_heads", "d_head", "d_mlp", "d_vocab", "n_ctx", "act_fn",
    "normalization_type", "architecture", "n_key_value_heads", "positional_embedding_type",
)


def model_fingerprint(model: HookedModel) -> str:
    """blake2b over the architecture fields and every parameter/buffer byte (16 hex digits)."""
    digest = hashlib.blake2b(digest_size=8)
    cfg = {k: str(getattr(model.cfg, k, None)) for k in _CFG_KEYS}
    digest.update(json.dumps(cfg, sort_keys=True).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        t = tensor.detach().cpu().contiguous()
        digest.update(str(t.dtype).encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def model_id(model: HookedModel) -> str:
    """A human-readable id: registered name, checkpoint path, HF dir, or ``cfg.model_name``.

    ``probekit_source`` (set by :func:`probekit.models.load_model`) comes before the config's
    ``model_name``, which for a named model is its cache path.
    """
    for attr in ("probekit_name", "probekit_checkpoint", "probekit_source"):
        if getattr(model, attr, None):
            return str(getattr(model, attr))
    return str(getattr(model.cfg, "model_name", type(model).__name__))
