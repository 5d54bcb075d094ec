"""Batched activation patching (Meng et al. 2022; Wang et al. 2022; Heimersheim & Nanda 2024).

Clean run ``x_c``, corrupted run ``x_r``, metric ``m``. *Denoising* runs ``x_r`` and patches one
cell (site, position[, head]) with its value from ``x_c``; *noising* runs ``x_c`` and patches in
``x_r``. The normalised effect is ``(m_patched - m_base) / (m_source - m_base)`` with ``base`` the
run being patched and ``source`` the run the activation comes from: for denoising the familiar
``(m_patched - m_corrupt) / (m_clean - m_corrupt)``; 1 = the cell alone restores the source
behaviour, 0 = no effect.

Unlike ``transformer_lens.patching`` (one forward per cell) many cells run in one forward: each
batch row is (pair, cell) and carries its own patch mask, built only from
:mod:`probekit.interventions` ops. The source activations come from one cached run and the
unembedding runs on the last token only. Every row still runs every block: the work is the
same row-forwards as TL's, so the speedup comes from batching (large for one pair, small for a
batch of pairs; see ``scripts/bench_patching.py``). Pairs may
have different lengths (padding; cells past a pair's length are NaN); within a pair, clean and
corrupt must have equal length so positions correspond.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ..capture.batching import PaddingSide
from ..errors import ConfigError, DataError
from ..interventions import Op, Read, Replace, run_with_interventions
from ..models.protocol import HookedModel
from ..sites import HEAD_KINDS, Site

Metric = Callable[[Tensor, Tensor], Tensor]
RESID_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_post")
HEAD_PATCH_KINDS = ("attn_z", "attn_q", "attn_k", "attn_v")
_BY = {
    ("layer", "pos"): RESID_KINDS + HEAD_PATCH_KINDS,
    ("layer", "head"): HEAD_PATCH_KINDS,
    ("layer", "pos", "head"): HEAD_PATCH_KINDS,
}


@dataclass(frozen=True)
class PatchingResult:
    """A patching grid: the metric per cell, its normalised effect, and labelled axes.

    ``values`` is the metric averaged over pairs (cells a pair does not have are skipped),
    ``per_pair`` keeps every pair (NaN where the pair is too short), ``normalized`` is
    ``(values - base.mean()) / (source.mean() - base.mean())``.
    """

    values: Float[Tensor, "*grid"]
    per_pair: Float[Tensor, "pair ..."]
    normalized: Float[Tensor, "*grid"]
    axes: tuple[str, ...]
    labels: dict[str, list[str]]
    kind: str
    direction: str
    base: Float[Tensor, " pair"]
    source: Float[Tensor, " pair"]

    @property
    def clean(self) -> Tensor:
        """Metric of the clean run per pair."""
        return self.source if self.direction == "denoise" else self.base

    @property
    def corrupt(self) -> Tensor:
        """Metric of the corrupted run per pair."""
        return self.base if self.direction == "denoise" else self.source


def as_token_lists(tokens: Tensor | Sequence[Sequence[int]], what: str) -> list[list[int]]:
    """Token ids as lists; a 2-D tensor is one prompt per row."""
    if isinstance(tokens, Tensor):
        if tokens.ndim != 2:
            raise DataError(f"{what} must be (pair, pos), got shape {tuple(tokens.shape)}")
        return tokens.tolist()
    out = [list(map(int, t)) for t in tokens]
    if not out or min(len(t) for t in out) == 0:
        raise DataError(f"{what} is empty or holds an empty prompt; give >= 1 token per prompt")
    return out


def check_pairs(clean: list[list[int]], corrupt: list[list[int]]) -> None:
    """Clean and corrupted prompts pair up one to one with equal lengths (positions correspond)."""
    if len(clean) != len(corrupt):
        raise DataError(
            f"{len(clean)} clean prompts but {len(corrupt)} corrupted prompts; give one corrupted "
            "prompt per clean prompt"
        )
    for i, (c, r) in enumerate(zip(clean, corrupt)):
        if len(c) != len(r):
            raise DataError(
                f"pair {i}: clean prompt has {len(c)} tokens but corrupted has {len(r)}; a "
                "position grid needs equal lengths: rephrase or pad the shorter prompt"
            )


def run_metric(metric: Metric, last_logits: Tensor, pair: Tensor) -> Tensor:
    """Apply ``metric`` to last-token logits ``(row, d_vocab)``; check one value per row."""
    value = metric(last_logits, pair)
    n = last_logits.shape[0]
    if not isinstance(value, Tensor) or value.shape != (n,):
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise DataError(
            f"metric returned {shape}, expected one value per prompt ({n},): "
            "metrics map (row, d_vocab) last-token logits and (row,) pair indices to (row,)"
        )
    return value.detach().float()


def token_labels(model: HookedModel, tokens: list[int]) -> list[str]:
    """``"t:token"`` labels for a position axis (token strings when a tokenizer is present)."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return [f"{t}:{i}" for t, i in enumerate(tokens)]
    return [f"{t}:{tok.decode([i])}" for t, i in enumerate(tokens)]


def activation_patching(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    *,
    kind: str = "resid_pre",
    by: tuple[str, ...] | None = None,
    direction: str = "denoise",
    layers: Sequence[int] | None = None,
    batch_size: int = 64,
    padding_side: PaddingSide = "right",
) -> PatchingResult:
    """Patch every cell of a ``by`` grid of ``kind`` activations, many cells per forward pass.

    ``by`` is ``("layer", "pos")`` (default for residual-width kinds), ``("layer", "head")``
    (default for head kinds ``attn_z``/``attn_q``/``attn_k``/``attn_v``: the head at every
    position) or ``("layer", "pos", "head")``. ``metric`` maps last-token logits
    ``(row, d_vocab)`` and each row's pair index to ``(row,)`` (:mod:`probekit.circuits.metrics`). ``batch_size`` is
    the number of (pair, cell) rows per forward. Equals ``transformer_lens.patching``'s
    ``get_act_patch_*`` with a pair-averaged metric (tested to 1e-4 in float32).
    """
    clean = as_token_lists(clean_tokens, "clean_tokens")
    corrupt = as_token_lists(corrupt_tokens, "corrupt_tokens")
    check_pairs(clean, corrupt)
    if kind not in RESID_KINDS + HEAD_PATCH_KINDS:
        raise ConfigError(
            f"patching kind {kind!r} not supported; use one of {list(RESID_KINDS + HEAD_PATCH_KINDS)}"
        )
    by = by or (("layer", "head") if kind in HEAD_KINDS else ("layer", "pos"))
    by = tuple(by)
    if by not in _BY or kind not in _BY[by]:
        valid = [list(b) for b, kinds in _BY.items() if kind in kinds]
        raise ConfigError(f"by={list(by)} does not fit kind {kind!r}; use one of {valid}")
    if direction not in ("denoise", "noise"):
        raise ConfigError(f"direction {direction!r} unknown; use 'denoise' or 'noise'")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    n_layers = model.cfg.n_layers
    layer_list = list(range(n_layers)) if layers is None else [int(x) for x in layers]
    bad = [x for x in layer_list if not 0 <= x < n_layers]
    if bad:
        raise ConfigError(f"layers {bad} out of range; the model has {n_layers} layers")
    base_toks, src_toks = (corrupt, clean) if direction == "denoise" else (clean, corrupt)
    return patch_grid(model, base_toks, src_toks, metric, kind=kind, by=by, direction=direction,
                      layers=layer_list, batch_size=batch_size, padding_side=padding_side)


def patch_grid(
    model: HookedModel,
    base_toks: list[list[int]],
    src_toks: list[list[int]],
    metric: Metric,
    *,
    kind: str,
    by: tuple[str, ...],
    direction: str,
    layers: list[int],
    batch_size: int,
    padding_side: PaddingSide,
    base_ops: Callable[[Tensor], list[Op]] | None = None,
) -> PatchingResult:
    """Run the grid (validated arguments): patch ``src`` activations into ``base`` runs.

    ``base_ops(pairs)`` gives extra model-level ops (e.g. embedding noise) for base rows of
    those pairs.
    """
    layer_list = layers
    extra = base_ops or (lambda pairs: [])
    sites = [Site(layer, kind) for layer in layer_list]
    src = run_with_interventions(model, src_toks, [Read(site=s) for s in sites],
                                 padding_side=padding_side, logits="last")
    every = torch.arange(len(base_toks))
    base = run_with_interventions(model, base_toks, extra(every), padding_side=padding_side,
                                  logits="last")
    m_src = run_metric(metric, src.output, every)
    m_base = run_metric(metric, base.output, every)

    lengths = [len(t) for t in base_toks]
    n_pos = max(lengths)
    n_heads = sites[0].n_heads(model) if kind in HEAD_KINDS else 0
    axis_size = {"layer": len(layer_list), "pos": n_pos, "head": n_heads}
    grid = tuple(axis_size[a] for a in by)
    cells = list(itertools.product(*(range(n) for n in grid)))
    rows = [(p, c) for c in cells for p in range(len(base_toks))
            if "pos" not in by or c[by.index("pos")] < lengths[p]]
    per_pair = torch.full((len(base_toks), *grid), float("nan"))
    for lo in range(0, len(rows), batch_size):
        chunk = rows[lo : lo + batch_size]
        ops = _chunk_ops(chunk, by, sites, src.reads, lengths, n_heads)
        pairs = torch.tensor([p for p, _ in chunk])
        # No start_at_layer: the TransformerBridge (TL 4.x) still runs blocks 0..k-1 and
        # discards them (measured 7% slower than a plain forward), so rows run from the embeddings.
        out = run_with_interventions(
            model, [base_toks[p] for p, _ in chunk], extra(pairs) + ops,
            padding_side=padding_side, logits="last",
        )
        values = run_metric(metric, out.output, pairs)
        for (p, c), v in zip(chunk, values.cpu()):
            per_pair[(p, *c)] = v
    values = per_pair.nanmean(0)
    denom = m_src.mean() - m_base.mean()
    normalized = (values - m_base.mean().cpu()) / denom.cpu()
    labels = {"layer": [str(x) for x in layer_list], "pos": token_labels(model, base_toks[0])
              if len(set(map(tuple, base_toks))) == 1 else [str(t) for t in range(n_pos)],
              "head": [str(h) for h in range(n_heads)]}
    return PatchingResult(
        values=values, per_pair=per_pair, normalized=normalized, axes=by,
        labels={a: labels[a] for a in by}, kind=kind, direction=direction,
        base=m_base.cpu(), source=m_src.cpu(),
    )


def _chunk_ops(
    chunk: list[tuple[int, tuple[int, ...]]],
    by: tuple[str, ...],
    sites: list[Site],
    cache: dict[Site, Tensor],
    lengths: list[int],
    n_heads: int,
) -> list[Replace]:
    """One Replace per layer in the chunk; each row's mask selects its own cell."""
    pairs = torch.tensor([p for p, _ in chunk])
    n_pos = max(lengths[p] for p, _ in chunk)
    real = torch.arange(n_pos)[None, :] < torch.tensor([lengths[p] for p, _ in chunk])[:, None]
    index = torch.tensor([c for _, c in chunk]).reshape(len(chunk), len(by))
    col = {a: index[:, i] for i, a in enumerate(by)}
    rows = torch.arange(len(chunk))
    ops = []
    for li in col["layer"].unique().tolist():
        sel = col["layer"] == li
        r = rows[sel]
        if "head" in by:
            mask = torch.zeros(len(chunk), n_pos, n_heads, dtype=torch.bool)
            if "pos" in by:
                mask[r, col["pos"][sel], col["head"][sel]] = True
            else:
                mask[r, :, col["head"][sel]] = True
                mask &= real[:, :, None]
        else:
            mask = torch.zeros(len(chunk), n_pos, dtype=torch.bool)
            mask[r, col["pos"][sel]] = True
        site = sites[li]
        ops.append(Replace(site=site, values=cache[site][pairs], positions=mask))
    return ops
