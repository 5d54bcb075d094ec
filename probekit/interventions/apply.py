"""Apply intervention ops inside a hook: probekit layout, head slice, unpadded -> padded writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..capture.batching import TokenBatch
from ..capture.layout import (
    expand_to,
    from_probekit_layout,
    position_mask,
    to_aligned,
    to_padded,
    to_probekit_layout,
)
from ..capture.positions import select_positions
from ..errors import ConfigError, DataError
from ..sites import Site
from .ops import Ablate, Add, Grad, Op, Read, Recompute, Replace, ReplaceByToken, ReplaceFromRows

#: Kinds whose hook feeds one branch only (the MLP, one head's projection): Grad differentiates
#: by the branch's own copy.
BRANCH_INPUT_KINDS = frozenset({"mlp_in", "q_input", "k_input", "v_input"})


@dataclass
class Records:
    """What a run recorded: reads and gradient targets, keyed by :class:`Site`."""

    reads: dict[Site, Tensor] = field(default_factory=dict)
    grad_targets: dict[Site, Tensor] = field(default_factory=dict)
    live: dict[Site, Tensor] = field(default_factory=dict)  # Recompute inputs (aligned, graph kept)


@dataclass(frozen=True)
class Keep:
    """Internal op: keep the site's final value (aligned, not detached) for :class:`Recompute`."""

    site: Site


def aligned_view(site: Site, part: Tensor, batch: TokenBatch) -> Tensor:
    """``part`` (probekit layout, padded) in aligned layout; ``attn_pattern`` keys aligned too."""
    out = to_aligned(part, batch)
    if site.kind == "attn_pattern":
        out = to_aligned(out, batch, axis=-1)
    return out


def _padded(site: Site, values: Tensor, batch: TokenBatch, width: int) -> Tensor:
    out = to_padded(values, batch, width)
    if site.kind == "attn_pattern":
        out = to_padded(out, batch, width, axis=-1)
    return out


def read_value(site: Site, part: Tensor, batch: TokenBatch, positions: object) -> Tensor:
    """Aligned whole tensor (``positions=None``) or the rows a position rule selects."""
    if positions is None:
        return aligned_view(site, part, batch)
    if site.kind == "attn_pattern":  # keys to unpadded coordinates, then select query rows
        part = to_aligned(part, batch, axis=-1)
    return select_positions(part, batch, positions).values  # type: ignore[arg-type]


def _mask_for(op: Op, part: Tensor, batch: TokenBatch, site: Site) -> Tensor:
    rows = getattr(op, "rows", None)
    mask = position_mask(batch, op.positions, rows=rows)  # type: ignore[union-attr]
    if mask.ndim == 3:
        if site.head is not None or part.ndim < 4:
            raise ConfigError(
                f"a (batch, pos, head) mask needs a head kind without head index, got site "
                f"{site.short}; pass a (batch, pos) mask or Site(..., head=None)"
            )
        if mask.shape[2] != part.shape[2]:
            raise DataError(
                f"head mask has {mask.shape[2]} heads but site {site.short} has {part.shape[2]}"
            )
    m = expand_to(mask, part)
    features = getattr(op, "features", None)
    if features is not None:
        if max(features) >= part.shape[-1]:
            raise ConfigError(
                f"feature index {max(features)} out of range for site {site.short} with "
                f"{part.shape[-1]} features"
            )
        f = torch.zeros(part.shape[-1], dtype=torch.bool, device=part.device)
        f[list(features)] = True
        m = m & f
    return m


def _check_values(site: Site, values: Tensor, part: Tensor, what: str, *, batched: bool) -> None:
    feat = tuple(part.shape[2:])
    if site.kind == "attn_pattern":
        feat = feat[:-1]  # key axis is aligned and may be any width >= the longest prompt
        got = tuple(values.shape[2:-1]) if batched else tuple(values.shape[:-1])
    else:
        got = tuple(values.shape[2:]) if batched else tuple(values.shape)
    if got != feat or (batched and values.shape[0] != part.shape[0]):
        want = f"(batch={part.shape[0]}, pos, {', '.join(map(str, feat))}{', key' if site.kind == 'attn_pattern' else ''})"
        raise DataError(
            f"{what} for site {site.short} has shape {tuple(values.shape)}, expected {want}; "
            "values are aligned (unpadded) as returned by Read"
        )


def _check_within(
    site: Site, mask: Tensor, batch: TokenBatch, limit: Tensor | int, what: str
) -> None:
    """Selected aligned positions must be below ``limit`` (per row or scalar)."""
    sel = to_aligned(mask.flatten(2).any(-1), batch) if mask.ndim > 2 else to_aligned(mask, batch)
    t = torch.arange(sel.shape[1], device=sel.device)
    lim = limit if isinstance(limit, Tensor) else torch.full((sel.shape[0],), limit)
    over = sel & (t[None, :] >= lim.to(sel.device)[:, None])
    if bool(over.any()):
        row, pos = (int(v) for v in over.nonzero()[0])
        raise DataError(
            f"site {site.short}: row {row} writes position {pos} but its {what} has only "
            f"{int(lim[row])} positions; select positions that exist in both"
        )


def apply_recompute(op: Recompute, site: Site, part: Tensor, batch: TokenBatch,
                    live: dict[Site, Tensor]) -> Tensor:
    """Return ``part`` with the selected cells set to ``op.fn(aligned part, inputs)``."""
    missing = [s.short for s in op.inputs if s not in live]
    if missing:
        raise ConfigError(
            f"Recompute at {site.short} needs {missing}, which the forward pass had not reached "
            "yet; inputs must come earlier in the model than the site they feed"
        )
    value = aligned_view(site, part, batch)
    new = op.fn(value, {s: live[s] for s in op.inputs})
    if not isinstance(new, torch.Tensor) or new.shape != value.shape:
        got = tuple(new.shape) if isinstance(new, torch.Tensor) else type(new).__name__
        raise DataError(
            f"Recompute.fn at {site.short} returned {got}, expected the aligned value's shape "
            f"{tuple(value.shape)}"
        )
    mask = _mask_for(op, part, batch, site)
    return torch.where(mask, _padded(site, new.to(part.dtype), batch, part.shape[1]), part)


def apply_write(op: Op, site: Site, part: Tensor, batch: TokenBatch) -> Tensor:
    """Return ``part`` with ``op`` applied (out of place, differentiable)."""
    width = part.shape[1]
    mask = _mask_for(op, part, batch, site)
    if isinstance(op, Replace):
        values = op.values.to(device=part.device, dtype=part.dtype)
        _check_values(site, values, part, "Replace.values", batched=True)
        _check_within(site, mask, batch, values.shape[1], "values tensor")
        return torch.where(mask, _padded(site, values, batch, width), part)
    if isinstance(op, ReplaceByToken):
        ids = batch.input_ids.to(part.device)
        table = op.table.to(device=part.device, dtype=part.dtype)
        if ids.shape[1] != width or tuple(table.shape[1:]) != tuple(part.shape[2:]):
            raise DataError(
                f"ReplaceByToken at {site.short}: table {tuple(table.shape)} and input ids "
                f"{tuple(ids.shape)} must match the site's (batch, pos, *feat) = {tuple(part.shape)} "
                "as (d_vocab, *feat) and (batch, pos)"
            )
        if int(ids.max()) >= table.shape[0]:
            raise DataError(f"ReplaceByToken.table has {table.shape[0]} rows but the batch holds token "
                            f"id {int(ids.max())}; give one row per vocabulary entry")
        return torch.where(mask, table[ids], part)
    if isinstance(op, ReplaceFromRows):
        src = torch.as_tensor(op.source_rows, dtype=torch.long, device=part.device)
        if src.numel() != part.shape[0] or int(src.max()) >= part.shape[0]:
            raise DataError(
                f"ReplaceFromRows.source_rows {op.source_rows} must give one row index in "
                f"-1..{part.shape[0] - 1} per batch row ({part.shape[0]} rows)"
            )
        keep = src >= 0
        mask = mask & expand_to(keep, mask)
        _check_within(site, mask, batch, batch.lengths.to(part.device)[src.clamp(min=0)], "source row")
        values = aligned_view(site, part, batch)[src.clamp(min=0)]
        return torch.where(mask, _padded(site, values, batch, width), part)
    if isinstance(op, Ablate):
        return torch.where(mask, _ablation_values(op, site, part, batch), part)
    if isinstance(op, Add):
        vec = op.vector.to(device=part.device, dtype=part.dtype)
        if vec.ndim == part.ndim:
            _check_values(site, vec, part, "Add.vector", batched=True)
            vec = _padded(site, vec, batch, width)
        else:
            _check_values(site, vec, part, "Add.vector", batched=False)
        return torch.where(mask, part + op.scale * vec, part)
    raise ConfigError(f"not a write op: {op!r}")


def _ablation_values(op: Ablate, site: Site, part: Tensor, batch: TokenBatch) -> Tensor:
    width = part.shape[1]
    if op.method == "zero":
        return torch.zeros_like(part)
    if op.method == "mean":
        if op.mean is None:
            real = expand_to(batch.attention_mask.to(part.device).bool(), part)
            total = torch.where(real, part, torch.zeros_like(part)).sum((0, 1))
            return total / batch.attention_mask.sum().to(part.dtype)
        mean = op.mean.to(device=part.device, dtype=part.dtype)
        if mean.ndim == part.ndim - 1:  # per position (pos, *feat), aligned
            return _padded(site, mean.expand(part.shape[0], *mean.shape), batch, width)
        _check_values(site, mean, part, "Ablate.mean", batched=False)
        return mean
    gen = torch.Generator().manual_seed(op.seed)
    if op.pool is None:
        n = part.shape[0]
        if n < 2:
            raise DataError("resample ablation without a pool needs >= 2 rows in the batch")
        shift = torch.randint(1, n, (1,), generator=gen)
        src = (torch.arange(n) + shift) % n  # a derangement: no row keeps its own value
        _check_within(site, _mask_for(op, part, batch, site), batch,
                      batch.lengths[src], "resampled source row")
        return _padded(site, aligned_view(site, part, batch)[src.to(part.device)], batch, width)
    pool = op.pool.to(device=part.device, dtype=part.dtype)
    if pool.ndim != part.ndim or tuple(pool.shape[2:]) != tuple(part.shape[2:]) and site.kind != "attn_pattern":
        raise DataError(
            f"Ablate.pool for site {site.short} has shape {tuple(pool.shape)}, expected aligned "
            f"(n, pos, {', '.join(map(str, part.shape[2:]))})"
        )
    idx = torch.randint(0, pool.shape[0], (part.shape[0],), generator=gen).to(part.device)
    return _padded(site, pool[idx], batch, width)


def site_hook(
    site_ops: Sequence[Op | Keep], site: Site, batch: TokenBatch, records: Records, grad: bool
):
    """The hook function for one hook point: run the ops of every site sharing it, in order.

    ``site_ops`` holds the ops of ``site`` (one head or all heads).
    """

    def hook(activation: Tensor) -> Tensor | None:
        full = to_probekit_layout(site.kind, activation)
        part = full if site.head is None else full[:, :, site.head]
        changed = False
        for op in site_ops:
            if isinstance(op, Read):
                records.reads[site] = read_value(site, part.detach(), batch, op.positions)
            elif isinstance(op, Grad):
                continue
            elif isinstance(op, Keep):
                records.live[site] = aligned_view(site, part, batch)
            elif isinstance(op, Recompute):
                part = apply_recompute(op, site, part, batch, records.live)
                changed = True
            else:
                part = apply_write(op, site, part, batch)
                changed = True
        if changed and site.head is not None:
            full = full.clone()
            full[:, :, site.head] = part
        elif changed:
            full = part
        out = from_probekit_layout(site.kind, full) if changed else activation
        if grad and any(isinstance(op, Grad) for op in site_ops):
            # Return the very tensor we differentiate by: TL hook points with a hook_conversion
            # (e.g. the bridge's hook_z) hand hooks a converted copy, and only a returned tensor
            # flows downstream.
            if not out.requires_grad:
                out = out.detach().requires_grad_(True)
            elif site.kind in BRANCH_INPUT_KINDS:
                # The bridge hands hook_mlp_in resid_mid itself and feeds the result to the MLP
                # branch only: differentiate by a fresh node, or the gradient is the total one.
                # (Other kinds keep the tensor: hook_resid_mid is ln2.hook_in on the bridge, and
                # its gradient must stay the residual's total gradient.)
                out = out.clone()
            records.grad_targets[site] = out
            changed = True
        return out if changed else None

    return hook
