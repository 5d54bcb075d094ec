"""One named weight matrix of a hooked model, as a 2-D float64 tensor.

Names are either state-dict keys (``"blocks.0.mlp.in.weight"``, ``"embed.weight"``) or
TransformerLens attribute paths (``"W_E"``, ``"W_U"``, ``"W_pos"``, ``"blocks.0.mlp.W_in"``,
``"blocks.0.attn.W_Q"``). TransformerLens keeps attention weights per head, ``W_Q/W_K/W_V`` as
``(head, d_model, d_head)`` and ``W_O`` as ``(head, d_head, d_model)``; without ``head`` they are
joined into the layer's whole projection (``h d k -> d (h k)`` and ``h k d -> (h k) d``, the
matrix the state dict stores up to a transpose), with ``head`` one head's matrix is returned.
"""

from __future__ import annotations

from typing import Any

import einops
import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import ConfigError

__all__ = ["named_weight", "weight_names"]

_TL_NAMES = ("W_E", "W_U", "W_pos")
_BLOCK_NAMES = ("mlp.W_in", "mlp.W_out", "attn.W_Q", "attn.W_K", "attn.W_V", "attn.W_O")


def weight_names(model: Any) -> list[str]:
    """The >= 2-D float weights of ``model`` by state-dict key, then the TransformerLens names."""
    keys = [k for k, v in model.state_dict().items() if v.ndim >= 2 and v.is_floating_point()]
    n_layers = int(model.cfg.n_layers) if hasattr(model, "cfg") else 0
    tl = [n for n in _TL_NAMES if hasattr(model, n)]
    tl += [f"blocks.{i}.{b}" for i in range(n_layers) for b in _BLOCK_NAMES]
    return keys + tl


def _attribute(model: Any, name: str) -> Any:
    obj = model
    for part in name.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def named_weight(model: Any, name: str, *, head: int | None = None) -> Float[Tensor, "m n"]:
    """The weight ``name`` of ``model`` as a detached float64 ``(m, n)`` matrix.

    Args:
        model: a hooked model (TransformerLens bridge or ``HookedTransformer``).
        name: a state-dict key or a TransformerLens attribute path (see the module docstring).
        head: for per-head attention weights (``blocks.L.attn.W_Q`` ...), one head's matrix;
            None joins the heads into the layer's projection.

    Returns:
        The matrix (a copy; changing it does not change the model).

    Raises:
        ConfigError: unknown name (the message lists the model's names), a ``head`` out of
            range or given for a weight that has no heads, or a weight that is not a matrix
            (e.g. the model-level ``W_in``, stacked over layers).
    """
    state = model.state_dict()
    if name in state:
        w = state[name]
    else:
        try:
            w = _attribute(model, name)
        except (AttributeError, IndexError, TypeError, ValueError):
            w = None
        if not isinstance(w, Tensor):
            raise ConfigError(
                f"model has no weight {name!r}; weights are {weight_names(model)}"
            ) from None
    w = w.detach().to(torch.float64).cpu()
    leaf = name.rsplit(".", 1)[-1]
    if w.ndim == 3 and leaf in ("W_Q", "W_K", "W_V", "W_O"):
        if head is not None:
            if not 0 <= head < w.shape[0]:
                raise ConfigError(f"head {head} of {name!r}: the layer has heads 0..{w.shape[0] - 1}")
            return w[head].clone()
        pattern = "h k d -> (h k) d" if leaf == "W_O" else "h d k -> d (h k)"
        return einops.rearrange(w, pattern).contiguous()
    if head is not None:
        raise ConfigError(f"head = {head} given for {name!r}, which has no heads; drop head")
    if w.ndim != 2:
        raise ConfigError(
            f"weight {name!r} has shape {tuple(w.shape)}, not a matrix; name one layer's weight, "
            f"e.g. 'blocks.0.mlp.W_in' (weights are {weight_names(model)})"
        )
    return w.clone()
