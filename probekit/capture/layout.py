"""Padded <-> unpadded layouts and write masks: the write-back inverse of ``select_positions``.

A batch runs *padded* (``TokenBatch``: token ``t`` of row ``i`` sits at column
``offsets[i] + t``). Everything probekit hands out or takes in is *aligned*: index ``t`` of row
``i`` is unpadded token ``t``, whatever the padding side, and entries at ``t >= lengths[i]`` are
``fill``. So a clean cache read from a right-padded batch patches a left-padded run of the same
prompts, and position rules (:mod:`probekit.capture.positions`) keep their unpadded meaning for
writes as for reads.

``attn_pattern`` is laid out ``(batch, query, head, key)`` (see :mod:`probekit.sites`); its key
axis (the last) is aligned too, then padded with zeros to a declared width.
"""

from __future__ import annotations

import einops
import torch
from jaxtyping import Bool, Float, Shaped
from torch import Tensor

from ..errors import ConfigError, DataError
from ..shapes import shape_checked
from .batching import TokenBatch
from .positions import AllTokens, LastToken, PositionRule, SpanMean, TokenIndex, _take


@shape_checked
def to_aligned(
    padded: Shaped[Tensor, "batch pos ..."], batch: TokenBatch, *, axis: int = 1, fill: float = 0.0
) -> Shaped[Tensor, "batch pos ..."]:
    """Shift each row so unpadded token ``t`` sits at index ``t`` along ``axis``.

    ``aligned[i, t] = padded[i, offsets[i] + t]`` for ``t < lengths[i]``, else ``fill``.
    """
    if not bool(batch.offsets.any()):  # right padding (or none): only the tail changes
        return _mask_tail(padded, batch, axis, fill)
    moved = padded.movedim(axis, 1)
    width = moved.shape[1]
    offsets = batch.offsets.to(moved.device)
    t = torch.arange(width, device=moved.device)
    cols = (offsets[:, None] + t[None, :]).clamp(max=width - 1)
    rows = torch.arange(moved.shape[0], device=moved.device)[:, None]
    out = moved[rows, cols]
    valid = t[None, :] < batch.lengths.to(moved.device)[:, None]
    out = torch.where(expand_to(valid, out), out, torch.full_like(out, fill))
    return out.movedim(1, axis)


def _mask_tail(padded: Tensor, batch: TokenBatch, axis: int, fill: float) -> Tensor:
    if not batch.is_padded:
        return padded
    moved = padded.movedim(axis, 1)
    t = torch.arange(moved.shape[1], device=moved.device)
    valid = t[None, :] < batch.lengths.to(moved.device)[:, None]
    out = torch.where(expand_to(valid, moved), moved, torch.full_like(moved, fill))
    return out.movedim(1, axis)


@shape_checked
def to_padded(
    aligned: Shaped[Tensor, "batch apos ..."],
    batch: TokenBatch,
    width: int,
    *,
    axis: int = 1,
    fill: float = 0.0,
) -> Shaped[Tensor, "batch width ..."]:
    """Inverse of :func:`to_aligned`: ``padded[i, offsets[i] + t] = aligned[i, t]`` (``t < lengths[i]``).

    Columns of ``padded`` holding pad tokens (or beyond ``aligned``'s length) get ``fill``.
    """
    moved = aligned.movedim(axis, 1)
    n = moved.shape[1]
    offsets = batch.offsets.to(moved.device)
    c = torch.arange(width, device=moved.device)
    t = c[None, :] - offsets[:, None]
    valid = (t >= 0) & (t < batch.lengths.to(moved.device)[:, None]) & (t < n)
    rows = torch.arange(moved.shape[0], device=moved.device)[:, None]
    out = moved[rows, t.clamp(0, max(n - 1, 0))]
    out = torch.where(expand_to(valid, out), out, torch.full_like(out, fill))
    return out.movedim(1, axis)


def pad_keys(
    pattern: Float[Tensor, "batch query *head key"], batch: TokenBatch, key_width: int
) -> Float[Tensor, "batch query *head key_width"]:
    """Attention pattern with the key axis in unpadded coordinates, zero-padded to ``key_width``.

    ``key_width`` must be at least the longest prompt; a fixed width (the dataset's longest prompt)
    gives every batch the same shape.
    """
    aligned = to_aligned(pattern, batch, axis=-1)
    width = aligned.shape[-1]
    if key_width < int(batch.lengths.max()):
        raise ConfigError(
            f"attn_pattern key width {key_width} < longest prompt {int(batch.lengths.max())}; "
            "pass a key width of at least the longest prompt"
        )
    if key_width > width:
        aligned = torch.nn.functional.pad(aligned, (0, key_width - width))
    return aligned[..., :key_width]


@shape_checked
def position_mask(
    batch: TokenBatch,
    positions: PositionRule | Bool[Tensor, "batch apos"] | Bool[Tensor, "batch apos head"],
    *,
    rows: tuple[int, ...] | None = None,
) -> Bool[Tensor, "batch pos"] | Bool[Tensor, "batch pos head"]:
    """Which padded cells a write touches: a position rule or an aligned boolean mask, per row.

    Rules: ``LastToken``/``TokenIndex`` -> one token per row, ``SpanMean`` -> every token of the
    span, ``AllTokens`` -> every real token. A mask is in unpadded coordinates (``True`` at pad
    entries is an error); a 3-D mask selects heads per cell. ``rows`` restricts to those rows.
    """
    width = batch.input_ids.shape[1]
    device = batch.input_ids.device
    if isinstance(positions, Tensor):
        mask = positions.to(device=device, dtype=torch.bool)
        if mask.shape[0] != batch.input_ids.shape[0]:
            raise DataError(
                f"position mask has {mask.shape[0]} rows but the batch has "
                f"{batch.input_ids.shape[0]}; give one mask row per batch row"
            )
        t = torch.arange(mask.shape[1], device=device)
        beyond = t[None, :] >= batch.lengths.to(device)[:, None]
        if bool((mask.flatten(2).any(-1) if mask.ndim == 3 else mask)[beyond].any()):
            raise DataError(
                "position mask is True beyond a row's length; masks are in unpadded coordinates "
                "(index t = token t of the prompt)"
            )
        out = to_padded(mask, batch, width)
    else:
        out = _rule_mask(batch, positions, width)
    if rows is not None:
        keep = torch.zeros(out.shape[0], dtype=torch.bool, device=device)
        keep[list(rows)] = True
        out = out & expand_to(keep, out)
    return out


def _rule_mask(batch: TokenBatch, rule: PositionRule, width: int) -> Bool[Tensor, "batch pos"]:
    device = batch.input_ids.device
    offsets = batch.offsets.to(device)
    if isinstance(rule, (LastToken, TokenIndex)):
        col = offsets + rule.token_index(batch).to(device)
        mask = torch.zeros(batch.input_ids.shape, dtype=torch.bool, device=device)
        mask[torch.arange(mask.shape[0], device=device), col] = True
        return mask
    if isinstance(rule, SpanMean):
        spans = _take(rule.spans, batch, "SpanMean.spans").reshape(-1, 2).to(device)
        t = torch.arange(width, device=device)[None, :] - offsets[:, None]
        return (t >= spans[:, :1]) & (t < spans[:, 1:])
    if isinstance(rule, AllTokens):
        return batch.attention_mask.to(device).bool()
    raise ConfigError(
        f"unknown position rule {rule!r}; use LastToken, TokenIndex, SpanMean, AllTokens or a "
        "boolean mask"
    )


def expand_to(mask: Tensor, like: Tensor) -> Tensor:
    """Append singleton axes to ``mask`` so it broadcasts against ``like``."""
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


def to_probekit_layout(kind: str, act: Tensor) -> Tensor:
    """TL's layout -> probekit's (``pos`` on axis 1): only ``attn_pattern`` moves (b h q k -> b q h k)."""
    if kind == "attn_pattern":
        return einops.rearrange(act, "b h q k -> b q h k")
    return act


def from_probekit_layout(kind: str, act: Tensor) -> Tensor:
    """Inverse of :func:`to_probekit_layout`."""
    if kind == "attn_pattern":
        return einops.rearrange(act, "b q h k -> b h q k")
    return act
