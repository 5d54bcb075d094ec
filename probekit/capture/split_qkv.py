"""Per-head Q/K/V inputs (``q_input``/``k_input``/``v_input``) on TL-native bridges.

TransformerLens' ``use_split_qkv_input`` gives each head its own copy of the residual stream
entering attention (``(batch, pos, head, d_model)``, before ``ln1``), so one head's query, key or
value input can be read, patched or differentiated alone. Bridges of HF models (SmolLM2, GPT-2,
Gemma) provide the fork; the attention of TL-native bridges (testbed checkpoints,
:func:`probekit.models.build_model`) does not. For those, :func:`emulate_split_qkv` rewrites the
hooks of such sites into two hooks on points the bridge does have:

1. at ``blocks.L.hook_resid_pre`` (after every other hook there) the residual entering the block
   is kept: on these pre-norm blocks it is exactly ``ln1``'s input;
2. at ``blocks.L.attn.hook_q`` (``hook_k``, ``hook_v``; before any other hook there) the kept
   residual is copied per head, ``x_h = x`` (``(batch, pos, head, d_model)``; KV heads for K/V
   under grouped-query attention), the site's hook functions run on the copies, and the
   projection is recomputed head by head: ``q_h = ln1(x_h) W_Q^h + b_Q^h``.

Without a write the recomputed projection equals the bridge's own; a write to head ``h``'s copy
changes only head ``h``'s projection, and gradients taken at the copies are per-head input
gradients (their sum over heads plus the skip path's gradient is the gradient of
``resid_pre``). Rotary embeddings are applied after ``hook_q``/``hook_k``, as in the bridge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError
from ..models.protocol import HookedModel
from ..sites import Site

HookFn = Callable[[Tensor], "Tensor | None"]
SPLIT_KINDS = {"q_input": ("attn_q", "q"), "k_input": ("attn_k", "k"), "v_input": ("attn_v", "v")}


def _is_native_attention(model: HookedModel, layer: int) -> bool:
    attn = model.blocks[layer].attn
    orig = getattr(attn, "original_component", None)
    return type(orig).__name__ == "NativeAttention"


def needs_emulation(model: HookedModel, sites: Sequence[Site]) -> bool:
    """Whether some of ``sites`` are per-head Q/K/V inputs on a bridge without the native fork."""
    return any(s.kind in SPLIT_KINDS and s.layer is not None and _is_native_attention(model, s.layer)
               for s in sites)


def _chain(fns: Sequence[HookFn], x: Tensor) -> Tensor:
    for fn in fns:
        out = fn(x)
        if out is not None:
            x = out
    return x


def _projection(model: HookedModel, layer: int, which: str) -> tuple[Tensor, Tensor | None]:
    """``(W (head, d_head, d_model), b (head, d_head))`` of the native q/k/v linear layer."""
    linear: Any = getattr(model.blocks[layer].attn, which)
    linear = getattr(linear, "original_component", None) or linear
    d_head = int(model.cfg.d_head)
    w = linear.weight
    b = linear.bias
    n = w.shape[0] // d_head
    return w.reshape(n, d_head, w.shape[1]), None if b is None else b.reshape(n, d_head)


def _norm(model: HookedModel, layer: int) -> Callable[[Tensor], Tensor]:
    ln1: Any = getattr(model.blocks[layer], "ln1", None)
    if ln1 is None:
        return lambda x: x
    module = getattr(ln1, "original_component", None)
    if module is None:
        raise ConfigError(f"block {layer}'s ln1 has no original module; per-head inputs cannot be emulated")
    return module


def emulate_split_qkv(
    model: HookedModel, hooks: Sequence[tuple[Site, HookFn]]
) -> list[tuple[Site, HookFn]]:
    """Rewrite ``q/k/v_input`` hooks on native attention into resid_pre + projection hooks.

    Other hooks pass through unchanged; the recompute hooks run first at their hook point, the
    residual keepers last at theirs.
    """
    split: dict[tuple[int, str], list[HookFn]] = {}
    rest: list[tuple[Site, HookFn]] = []
    for site, fn in hooks:
        if site.kind in SPLIT_KINDS and site.layer is not None and _is_native_attention(model, site.layer):
            split.setdefault((site.layer, site.kind), []).append(fn)
        else:
            rest.append((site, fn))
    if not split:
        return list(hooks)
    kept: dict[int, Tensor] = {}
    first: list[tuple[Site, HookFn]] = []
    last: list[tuple[Site, HookFn]] = []
    for layer in sorted({layer for layer, _ in split}):
        last.append((Site(layer, "resid_pre"), _keeper(kept, layer)))
    for (layer, kind), fns in split.items():
        out_kind, which = SPLIT_KINDS[kind]
        first.append((Site(layer, out_kind), _recompute(model, kept, layer, which, fns)))
    return first + rest + last


def _keeper(kept: dict[int, Tensor], layer: int) -> HookFn:
    def keep(activation: Tensor) -> None:
        kept[layer] = activation

    return keep


def _recompute(
    model: HookedModel, kept: dict[int, Tensor], layer: int, which: str, fns: Sequence[HookFn]
) -> HookFn:
    def recompute(activation: Tensor) -> Tensor:
        x = kept[layer]
        w, b = _projection(model, layer, which)
        n = w.shape[0]
        copies = x[:, :, None, :].expand(x.shape[0], x.shape[1], n, x.shape[2])
        copies = _chain(fns, copies)
        normed = _norm(model, layer)(copies)
        out = torch.einsum("bphm,hdm->bphd", normed.to(w.dtype), w)
        if b is not None:
            out = out + b
        return out.to(activation.dtype).reshape(activation.shape)

    return recompute
