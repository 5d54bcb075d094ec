"""Batched activation patching (Meng et al. 2022; Wang et al. 2022; Heimersheim & Nanda 2024).

Clean run ``x_c``, corrupted run ``x_r``, metric ``m``. *Denoising* runs ``x_r`` and patches one
cell (site, position[, head]) with its value from ``x_c``; *noising* runs ``x_c`` and patches in
``x_r``. The normalised effect is ``(m_patched - m_base) / (m_source - m_base)`` with ``base`` the
run being patched and ``source`` the run the activation comes from: for denoising the familiar
``(m_patched - m_corrupt) / (m_clean - m_corrupt)``; 1 = the cell alone restores the source
behaviour, 0 = no effect. With ``window=w`` a cell at layer ``l`` patches the same
position/head at blocks ``l .. l+w-1`` at once (Meng et al.'s windowed restoration).

Unlike ``transformer_lens.patching`` (one full forward per cell), each batch row is one
(pair, cell) with its own patch mask (:mod:`probekit.interventions` ops only), and:

- the base run is shared: a cell at layer ``l`` leaves blocks ``0..l-1`` as in the base run, so
  its row starts at block ``l`` from the base run's cached ``resid_pre@l`` (blocks before it do
  not run; rows are sorted by layer so a batch starts at its lowest layer);
- on Hugging Face models (KV cache) a cell at position ``t`` also leaves positions ``< t`` as
  in the base run at every block, so its row runs only the tokens from ``t`` on, with the
  earlier keys/values taken from the base run's cache (TL-native bridges run whole prompts);
- rows are packed into batches by a cost model (rows x tokens x blocks + a per-forward cost);
- a cell whose source activation equals the base activation exactly (e.g. tokens shared by the
  clean and corrupted prompt before the first difference) is the base run itself and takes
  ``m_base`` without a forward;
- the source activations come from one cached run and only the last token is unembedded.

Pairs may have different lengths (padding; cells past a pair's length are NaN); within a pair,
clean and corrupt must have equal length so positions correspond. Timings:
``scripts/bench_patching.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ..capture.batching import PaddingSide
from ..capture.runner import kv_cache_filled, kv_prefix, new_kv_cache, supports_kv_cache
from ..errors import ConfigError
from ..interventions import Op, Read, Replace, run_with_interventions
from ..models.protocol import HookedModel
from ..progress import track
from ..sites import HEAD_KINDS, Site
from .patch_grid import (
    BY_KINDS,
    HEAD_PATCH_KINDS,
    RESID_KINDS,
    Grid,
    Metric,
    PatchingResult,
    PatchOptions,
    as_token_lists,
    check_pairs,
    grid_result,
    grid_shape,
    prepare_grid,
    run_metric,
    token_labels,
)

__all__ = [
    "BY_KINDS", "HEAD_PATCH_KINDS", "RESID_KINDS", "Metric", "PatchOptions", "PatchingResult",
    "activation_patching",
    "as_token_lists", "check_pairs", "patch_grid", "run_metric", "token_labels",
]

#: Model-level kinds that act before block 0 (their effect is inside every cached ``resid_pre``).
_BEFORE_BLOCKS = ("embed", "pos_embed")


def activation_patching(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    options: PatchOptions | None = None,
    /,
    **keywords: Any,
) -> PatchingResult:
    """Patch every cell of a ``by`` grid of ``kind`` activations, many cells per forward pass.

    ``by`` is ``("layer", "pos")`` (default for residual-width kinds), ``("layer", "head")``
    (default for head kinds ``attn_z``/``attn_q``/``attn_k``/``attn_v``: the head at every
    position) or ``("layer", "pos", "head")``. ``layers`` are the cells' layers (default: every
    block); with ``window=w`` the cell at layer ``l`` patches blocks ``l..min(l+w, n_layers)-1``
    together (labels ``"l-last"``; ``window=1`` is the single-block grid). ``metric`` maps
    last-token logits ``(row, d_vocab)`` and each row's pair index to ``(row,)``
    (:mod:`probekit.circuits.metrics`); TransformerLens' one-argument ``metric(logits) ->
    scalar`` is accepted too, called once per prompt on its last-token logits shaped
    ``(1, 1, d_vocab)`` (:func:`~probekit.circuits.metrics.as_pair_metric`). ``batch_size`` is the number of (pair, cell) rows per
    forward. Equals ``transformer_lens.patching``'s ``get_act_patch_*`` with a pair-averaged
    metric (tested to 1e-4 in float32).

    The grid's options (``kind``, ``by``, ``direction``, ``layers``, ``window``, ``batch_size``,
    ``padding_side``) come as one :class:`~probekit.circuits.PatchOptions` (``options``, built
    and validated once, reusable across calls) or as keywords of the same names (which replace
    the fields of ``options``): ``activation_patching(model, clean, corrupt, metric,
    kind="attn_z", layers=[0, 1])`` equals ``activation_patching(model, clean, corrupt, metric,
    PatchOptions(kind="attn_z", layers=(0, 1)))``.
    """
    opts = PatchOptions.build(options, **keywords)
    grid = prepare_grid(model, clean_tokens, corrupt_tokens, opts)
    return patch_grid(model, grid, metric, batch_size=opts.batch_size,
                      padding_side=opts.padding_side)


def patch_grid(
    model: HookedModel,
    grid: Grid,
    metric: Metric,
    *,
    batch_size: int,
    padding_side: PaddingSide,
    base_ops: Callable[[Tensor], list[Op]] | None = None,
) -> PatchingResult:
    """Run the validated ``grid``: patch ``grid.source`` activations into ``grid.base`` runs.

    ``base_ops(pairs)`` gives extra ops for base rows of those pairs (e.g. causal tracing's
    embedding noise). When they all act before block 0 (``embed``, ``pos_embed``), rows start
    at their cell's block from the base run's residual and identity cells are not run;
    otherwise every row runs from the embeddings.
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    extra = base_ops or (lambda pairs: [])
    every = torch.arange(len(grid.base))
    extra_every = extra(every)
    # Rows may start mid-model from the base run's residual only if no extra op acts inside it.
    shared = all(op.site.layer is None and op.site.kind in _BEFORE_BLOCKS for op in extra_every)
    sites = grid.sites
    src = run_with_interventions(model, grid.source, [Read(site=s) for s in sites],
                                 padding_side=padding_side, logits="last")
    reads: dict[Site, Read] = {}
    if shared:
        for s in [Site(layer, "resid_pre") for layer in grid.layers if layer > 0] + sites:
            reads.setdefault(s, Read(site=s))
    # A cell at position t leaves positions < t as in the base run at every block, so on a
    # Hugging Face model its row runs only the tokens from t on, their keys/values before t
    # coming from the base run's KV cache.
    pos_axis = grid.by.index("pos") if "pos" in grid.by else None
    base_kv = (new_kv_cache() if shared and pos_axis is not None and padding_side == "right"
               and supports_kv_cache(model) else None)
    base = run_with_interventions(model, grid.base, extra_every + list(reads.values()),
                                  padding_side=padding_side, logits="last", kv_cache=base_kv)
    lengths = [len(t) for t in grid.base]
    if base_kv is not None and not kv_cache_filled(base_kv, max(lengths)):
        base_kv = None  # the model did not fill the cache: every row runs its whole prompt
    m_src = run_metric(metric, src.output, every)
    m_base = run_metric(metric, base.output, every)

    shape = grid_shape(model, grid)
    per_pair = torch.full((len(grid.base), *shape), float("nan"))
    same = _identity_cells(grid, src.reads, base.reads, shape) if shared else None
    rows = []
    for c in itertools.product(*(range(n) for n in shape)):
        for p in range(len(grid.base)):
            if "pos" in grid.by and c[grid.by.index("pos")] >= lengths[p]:
                continue  # the pair has no such position: NaN
            if same is not None and bool(same[(p, *c)]):
                per_pair[(p, *c)] = m_base[p]  # the patch writes what is already there
            else:
                rows.append((p, c))
    kv_pos = pos_axis if base_kv is not None else None
    chunks = _pack(rows, grid, kv_pos, max(lengths), batch_size)  # counted per (pair, cell)
    for chunk in track(chunks, desc="patching grid", unit="cell", total=per_pair.numel(),
                       initial=per_pair.numel() - len(rows), weight=len):
        pairs = torch.tensor([p for p, _ in chunk])
        first = min(grid.layers[c[0]] for _, c in chunk)
        q = min(c[pos_axis] for _, c in chunk) if kv_pos is not None else 0
        if first == 0 and extra_every:
            q = 0  # the extra ops act on the embeddings of whole prompts
        ops = _chunk_ops(chunk, grid, src.reads, lengths, shape, q)
        start = None
        if shared and first > 0:  # blocks before `first` are the base run's: start from its residual
            start = (first, base.reads[Site(first, "resid_pre")][pairs][:, q:])
        else:
            ops = extra(pairs) + ops
        out = run_with_interventions(model, [grid.base[p][q:] for p, _ in chunk], ops,
                                     padding_side=padding_side, logits="last", start=start,
                                     kv_cache=kv_prefix(base_kv, pairs, q) if q else None)
        values = run_metric(metric, out.output, pairs)
        for (p, c), v in zip(chunk, values.cpu()):
            per_pair[(p, *c)] = v
    return grid_result(model, grid, per_pair, m_base, m_src)


#: Fixed cost of one batched forward (hooks, masks, KV copy, unembedding), in units of one
#: token through one block; measured ~0.3 s vs ~0.4 ms per token-block on SmolLM2, 1 CPU thread.
_FORWARD_COST = 800


def _pack(
    rows: list[tuple[int, tuple[int, ...]]], grid: Grid, pos_axis: int | None, width: int,
    batch_size: int,
) -> list[list[tuple[int, tuple[int, ...]]]]:
    """Batches of rows, each run from its lowest block (and, with a KV prefix, its first position).

    Rows are sorted by (block, position) from the last; a row joins the current batch while the
    batch has room and one forward of the union costs no more than two (cost = rows x tokens x
    blocks + :data:`_FORWARD_COST`).
    """
    def key(r: tuple[int, tuple[int, ...]]) -> tuple[int, int]:
        return grid.layers[r[1][0]], (r[1][pos_axis] if pos_axis is not None else 0)

    def cost(n: int, layer: int, q: int) -> int:
        return n * (width - q) * (grid.n_layers - layer) + _FORWARD_COST

    out: list[list[tuple[int, tuple[int, ...]]]] = []
    chunk: list[tuple[int, tuple[int, ...]]] = []
    layer0 = q0 = 0
    for r in sorted(rows, key=key, reverse=True):
        layer, q = key(r)
        if chunk and len(chunk) < batch_size:
            merged = cost(len(chunk) + 1, min(layer0, layer), min(q0, q))
            if merged <= cost(len(chunk), layer0, q0) + cost(1, layer, q):
                chunk.append(r)
                layer0, q0 = min(layer0, layer), min(q0, q)
                continue
        if chunk:
            out.append(chunk)
        chunk, layer0, q0 = [r], layer, q
    if chunk:
        out.append(chunk)
    return out


def _identity_cells(
    grid: Grid, src: dict[Site, Tensor], base: dict[Site, Tensor], shape: tuple[int, ...]
) -> Tensor:
    """``(pair, *grid)`` bool: the cell's source values equal the base values at every window block.

    Such a patch writes what the base run already holds, so the patched run *is* the base run.
    """
    head = grid.kind in HEAD_KINDS
    per_layer = []
    for layer in grid.layers:
        eq = None
        for b in grid.window_of(layer):
            s = Site(b, grid.kind)
            e = (src[s] == base[s]).flatten(3 if head else 2).all(-1)  # (pair, pos[, head])
            eq = e if eq is None else eq & e
        if grid.by == ("layer", "pos") and head:
            eq = eq.all(2)
        elif grid.by == ("layer", "head"):
            eq = eq.all(1)
        per_layer.append(eq.cpu())
    out = torch.stack(per_layer, 1)  # (pair, layer, ...)
    return out[(slice(None), slice(None), *(slice(0, n) for n in shape[1:]))]


def _chunk_ops(
    chunk: list[tuple[int, tuple[int, ...]]],
    grid: Grid,
    cache: dict[Site, Tensor],
    lengths: list[int],
    shape: tuple[int, ...],
    q: int = 0,
) -> list[Replace]:
    """One Replace per patched block in the chunk; each row's mask selects its own cell.

    ``q > 0``: the rows hold the tokens from position ``q`` on (masks and values shifted).
    """
    by = grid.by
    pairs = torch.tensor([p for p, _ in chunk])
    n_pos = max(lengths[p] for p, _ in chunk) - q
    n_heads = shape[by.index("head")] if "head" in by else 0
    real = torch.arange(n_pos)[None, :] < torch.tensor([lengths[p] - q for p, _ in chunk])[:, None]
    index = torch.tensor([c for _, c in chunk]).reshape(len(chunk), len(by))
    col = {a: index[:, i] for i, a in enumerate(by)}
    cell_layer = torch.tensor(grid.layers)[col["layer"]]
    rows = torch.arange(len(chunk))
    ops = []
    for block in sorted({b for layer in cell_layer.unique().tolist() for b in grid.window_of(layer)}):
        sel = (cell_layer <= block) & (block < cell_layer + grid.window)
        r = rows[sel]
        if "head" in by:
            mask = torch.zeros(len(chunk), n_pos, n_heads, dtype=torch.bool)
            if "pos" in by:
                mask[r, col["pos"][sel] - q, col["head"][sel]] = True
            else:
                mask[r, :, col["head"][sel]] = True
                mask &= real[:, :, None]
        else:
            mask = torch.zeros(len(chunk), n_pos, dtype=torch.bool)
            mask[r, col["pos"][sel] - q] = True
        site = Site(block, grid.kind)
        ops.append(Replace(site=site, values=cache[site][pairs][:, q:], positions=mask))
    return ops
