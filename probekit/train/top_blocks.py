"""The fast fine-tune forward: the top k blocks of a decoder on cached inputs, rows packed.

With only the top ``k`` of ``L`` blocks trained, the residual stream entering block ``b = L - k``
does not depend on the trained weights, so it is computed once per row
(:mod:`probekit.train.block_inputs`) and a step runs only

    logits_t = W_U norm(f_{L-1}( ... f_b(h_b) ... ))_t,

which is the full forward's logits on the same weights (equal up to float summation order;
tested to 1e-5 on a tiny Llama and on SmolLM2-135M).

**Packing.** A batch's rows are placed first-fit-decreasing into sequences no longer than its
longest row (Krell et al. 2021, "Efficient Sequence Packing without Cross-contamination"); each row
keeps its own positions ``0..n-1`` (rotary) and attends only to its own earlier tokens (a
block-diagonal causal mask), so no padding token is computed and no row sees another: each row's
logits are those of the row alone.

**Head at scored positions.** The answer-only loss

    L = - (1 / |A|) sum_{t in A} log softmax(W_U norm(h_t))_{x_{t+1}},   A = {t : label_{t+1} scored},

needs the ``d_vocab``-wide head at the positions of ``A`` only; :func:`scored_loss` applies it
there (in the full forward too), which is the same number as the head at every position.

Supported: Llama-family decoders (``model_type = "llama"``: SmolLM2, Llama), whose blocks all use
full causal attention with one rotary embedding; another architecture is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .finetune_data import IGNORE_INDEX

__all__ = [
    "SUPPORTED",
    "Packed",
    "block_of",
    "causal_lm",
    "check_supported",
    "first_block",
    "full_scored_loss",
    "pack",
    "pack_rows",
    "packed_scored_loss",
    "scored_loss",
    "top_hidden",
]

#: model types whose blocks the fast path runs (one rotary embedding, full attention everywhere)
SUPPORTED = ("llama",)


def block_of(name: str) -> int | None:
    """The decoder block a parameter or module name belongs to (``model.layers.3.mlp`` -> 3)."""
    parts = name.split(".")
    for a, b in zip(parts, parts[1:]):
        if a in ("layers", "h", "blocks") and b.isdigit():
            return int(b)
    return None


def causal_lm(model: Any) -> Any:
    """The Hugging Face causal LM inside ``model`` (a peft wrapper's base model, or itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def check_supported(model: Any) -> None:
    """Refuse a model whose blocks the fast path cannot run on their own.

    Raises:
        ConfigError: naming the model type and the alternative (``trainable_layers``).
    """
    lm = causal_lm(model)
    kind = getattr(lm.config, "model_type", type(lm).__name__)
    types = set(getattr(lm.config, "layer_types", None) or ["full_attention"])
    if kind not in SUPPORTED or types != {"full_attention"}:
        raise ConfigError(f"FinetuneConfig.trainable_blocks: the cached top-block path runs "
                          f"model types {list(SUPPORTED)} (full attention in every block), not "
                          f"{kind!r}; choose the trained blocks with trainable_layers instead "
                          "(the full forward, no cache)")


def first_block(n_layers: int, k: int) -> int:
    """``L - k``: the first trained block of the top ``k`` (its input is cached).

    Raises:
        ConfigError: ``k`` larger than the model's ``L`` blocks.
    """
    if not 1 <= k <= n_layers:
        raise ConfigError(f"FinetuneConfig.trainable_blocks = {k}: the model has {n_layers} "
                          f"blocks; choose 1..{n_layers}")
    return n_layers - k


# ---------------------------------------------------------------------------- packing


def pack(lengths: list[int], capacity: int | None = None) -> list[list[int]]:
    """First-fit-decreasing bins of row indices, each holding at most ``capacity`` tokens.

    ``capacity`` defaults to the longest row (so a bin is never longer than the padded batch).
    Rows are placed longest first (ties by index), each into the first bin it fits; a row's
    index order inside a bin is its placement order. Deterministic.
    """
    cap = max(lengths) if capacity is None else capacity
    if max(lengths) > cap:
        raise ConfigError(f"pack: a row of {max(lengths)} tokens exceeds capacity {cap}")
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda j: (-lengths[j], j)):
        for b, free in enumerate(room):
            if lengths[i] <= free:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(cap - lengths[i])
    return bins


@dataclass(frozen=True, kw_only=True)
class Packed:
    """Rows packed into sequences: inputs, positions, mask, and where each row sits.

    Attributes:
        hidden: ``(n_seq, width, d)`` the rows' cached inputs (zeros in the unused tail).
        positions: ``(n_seq, width)`` each token's position in its own row (rotary).
        mask: ``(n_seq, 1, width, width)`` bool, True where query ``i`` may attend key ``j``
            (same row, ``j <= i``; an unused slot attends to itself only, so no row is empty).
        slots: per row (in input order), ``(sequence, start, length)``.
    """

    hidden: Any
    positions: Any
    mask: Any
    slots: tuple[tuple[int, int, int], ...]


def pack_rows(rows: list[Any], *, padded: bool = False) -> Packed:
    """Pack ``(n_i, d)`` row tensors with :func:`pack` (capacity: the longest row).

    ``padded``: one row per sequence instead (a right-padded batch; for comparisons).
    """
    import torch

    lengths = [int(r.shape[0]) for r in rows]
    bins = [[i] for i in range(len(rows))] if padded else pack(lengths)
    width = max(lengths)
    hidden = rows[0].new_zeros((len(bins), width, rows[0].shape[-1]))
    positions = torch.zeros((len(bins), width), dtype=torch.long)
    # segment id per slot: the row's index, or a unique negative id for an unused slot
    segment = -1 - torch.arange(len(bins) * width).reshape(len(bins), width)
    slots: list[tuple[int, int, int]] = [(0, 0, 0)] * len(rows)
    for b, members in enumerate(bins):
        start = 0
        for i in members:
            n = lengths[i]
            hidden[b, start:start + n] = rows[i]
            positions[b, start:start + n] = torch.arange(n)
            segment[b, start:start + n] = i
            slots[i] = (b, start, n)
            start += n
    causal = torch.tril(torch.ones(width, width, dtype=torch.bool))
    mask = (segment[:, :, None] == segment[:, None, :]) & causal
    return Packed(hidden=hidden, positions=positions, mask=mask[:, None], slots=tuple(slots))


# ---------------------------------------------------------------------------- forward


def top_hidden(model: Any, packed: Packed, first: int) -> Any:
    """Blocks ``first..L-1`` and the final norm on packed cached inputs: ``(n_seq, width, d)``."""
    import torch

    lm = causal_lm(model)
    decoder = lm.model
    h = packed.hidden.to(next(decoder.parameters()).device)
    positions = packed.positions.to(h.device)
    mask = packed.mask.to(h.device)
    if getattr(lm.config, "_attn_implementation", "sdpa") == "eager":  # an additive mask
        mask = torch.zeros(mask.shape, dtype=h.dtype, device=h.device).masked_fill(
            ~mask, torch.finfo(h.dtype).min)
    rotary = decoder.rotary_emb(h, position_ids=positions)
    for layer in decoder.layers[first:]:
        out = layer(h, attention_mask=mask, position_ids=positions, position_embeddings=rotary)
        h = out[0] if isinstance(out, tuple) else out
    return decoder.norm(h)


def scored_loss(model: Any, hidden: Any, targets: Any) -> Any:
    """Mean cross-entropy of the head's logits at ``hidden`` (``(n, d)``) for ``targets``."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    lm = causal_lm(model)
    logits = lm.get_output_embeddings()(hidden)
    cap = getattr(lm.config, "final_logit_softcapping", None)
    if cap:  # Gemma-style logit soft-capping, as the model's own forward applies it
        logits = torch.tanh(logits / cap) * cap
    return F.cross_entropy(logits.float(), targets)


def full_scored_loss(model: Any, ids: Any, labels: Any, mask: Any) -> Any:
    """The answer-only loss of a padded batch through the whole model, head at scored tokens."""
    lm = causal_lm(model)
    hidden = lm.model(input_ids=ids, attention_mask=mask).last_hidden_state[:, :-1]
    target = labels[:, 1:]
    keep = target != IGNORE_INDEX
    return scored_loss(model, hidden[keep], target[keep])


def packed_scored_loss(model: Any, rows: list[Any], labels: list[list[int]], first: int,
                       *, padded: bool = False) -> Any:
    """The answer-only loss of rows given by their cached inputs at block ``first``, packed.

    ``padded``: one row per sequence (:func:`pack_rows`), the same loss with padding computed.
    """
    import torch

    packed = pack_rows(rows, padded=padded)
    hidden = top_hidden(model, packed, first)
    width = hidden.shape[1]
    index, target = [], []
    for (seq, start, n), y in zip(packed.slots, labels):
        nxt = torch.as_tensor(y[1:n], dtype=torch.long)
        at = torch.nonzero(nxt != IGNORE_INDEX).flatten()
        index.append(seq * width + start + at)
        target.append(nxt[at])
    flat = hidden.reshape(-1, hidden.shape[-1])
    where = torch.cat(index).to(flat.device)
    return scored_loss(model, flat[where], torch.cat(target).to(flat.device))
