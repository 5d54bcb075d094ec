"""Pad variable-length token sequences into batches with an explicit attention mask."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from jaxtyping import Int
from torch import Tensor

from ..models.protocol import HookedModel

PaddingSide = Literal["left", "right"]


@dataclass(frozen=True)
class TokenBatch:
    """A padded batch. ``offsets[i]`` is the number of left-pad tokens of row ``i``.

    Token ``t`` (0-based, unpadded) of example ``i`` sits at padded column ``offsets[i] + t``.
    """

    input_ids: Int[Tensor, "batch pos"]
    attention_mask: Int[Tensor, "batch pos"]
    lengths: Int[Tensor, " batch"]
    offsets: Int[Tensor, " batch"]
    example_ids: Int[Tensor, " batch"]

    @property
    def is_padded(self) -> bool:
        """Whether any row is shorter than the batch width."""
        return bool((self.lengths != self.input_ids.shape[1]).any())

    def to(self, device: str | torch.device) -> TokenBatch:
        """The batch on ``device``."""
        return TokenBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.lengths.to(device),
            self.offsets.to(device),
            self.example_ids.to(device),
        )


def pad_batch(
    sequences: Sequence[Sequence[int]],
    *,
    pad_id: int,
    side: PaddingSide = "right",
    example_ids: Sequence[int] | None = None,
) -> TokenBatch:
    """Pad ``sequences`` to a common length on ``side``; mask is 1 on real tokens."""
    if side not in ("left", "right"):
        raise ValueError(f"padding side must be 'left' or 'right', got {side!r}")
    if not sequences:
        raise ValueError("cannot pad an empty batch")
    lengths = [len(s) for s in sequences]
    if min(lengths) == 0:
        bad = lengths.index(0)
        ids = example_ids[bad] if example_ids is not None else bad
        raise ValueError(f"example {ids} has no tokens; every example needs at least one")
    width = max(lengths)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    offsets = []
    for row, seq in enumerate(sequences):
        start = width - len(seq) if side == "left" else 0
        ids[row, start : start + len(seq)] = torch.as_tensor(list(seq), dtype=torch.long)
        mask[row, start : start + len(seq)] = 1
        offsets.append(start)
    if example_ids is None:
        example_ids = range(len(sequences))
    return TokenBatch(
        input_ids=ids,
        attention_mask=mask,
        lengths=torch.tensor(lengths, dtype=torch.long),
        offsets=torch.tensor(offsets, dtype=torch.long),
        example_ids=torch.as_tensor(list(example_ids), dtype=torch.long),
    )


def model_device(model: HookedModel) -> torch.device:
    """The device token batches must be on for ``model``: its ``cfg.device`` (CPU if unset)."""
    return torch.device(getattr(getattr(model, "cfg", None), "device", None) or "cpu")


def pad_id_of(model: HookedModel) -> int:
    """The tokenizer's pad id (0 where there is none)."""
    tok = getattr(model, "tokenizer", None)
    pad = getattr(tok, "pad_token_id", None) if tok is not None else None
    return int(pad) if pad is not None else 0


def safe_padding_side(model: HookedModel, side: PaddingSide) -> PaddingSide:
    """``side``, except left padding of a float64 model, which runs right-padded (with a warning).

    Hugging Face eager attention (e.g. Llama/SmolLM2) masks with ``finfo(float64).min`` and then
    takes the softmax in float32, where that value is ``-inf``: a left-pad query that sees only
    pad keys gets ``softmax(all -inf) = NaN``, which reaches real tokens through ``0 * NaN`` in
    the next layer's value mixing. probekit only passes the 0/1 attention mask, so the cause is
    upstream; results in unpadded coordinates do not depend on the padding side, so right padding
    is a safe substitute.
    """
    if side != "left":
        return side
    dtype = getattr(getattr(model, "cfg", None), "dtype", None)
    if dtype is None:
        dtype = next((p.dtype for p in model.parameters()), None)
    if dtype == torch.float64:
        warnings.warn(
            "left padding of a float64 model gives NaN at fully masked pad queries in Hugging Face "
            "eager attention; running right-padded instead (identical results in unpadded "
            "coordinates)",
            stacklevel=3,
        )
        return "right"
    return side


def iter_batches(
    sequences: Sequence[Sequence[int]],
    *,
    batch_size: int,
    pad_id: int,
    side: PaddingSide = "right",
    start: int = 0,
):
    """Yield :class:`TokenBatch` of consecutive examples from index ``start`` on."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for lo in range(start, len(sequences), batch_size):
        hi = min(lo + batch_size, len(sequences))
        yield pad_batch(sequences[lo:hi], pad_id=pad_id, side=side, example_ids=range(lo, hi))
