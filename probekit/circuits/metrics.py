"""Patching metrics: plain functions of final-token logits, one value per row.

A metric maps ``logits: (row, d_vocab)`` (each row's logits at its prompt's last real token) and
``pair: (row,)`` (which prompt pair each row belongs to: batched patching runs many rows per
pair) to ``(row,)``. Bind the per-pair answers with :func:`functools.partial`:

    >>> metric = partial(logit_diff, answer=answers, foil=foils)   # answers: (n_pairs,)
    >>> metric(logits, torch.arange(n_pairs))                      # one value per pair
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import DataError


def _pick(logits: Tensor, pair: Tensor, ids: Tensor, what: str) -> Tensor:
    """``ids[pair]`` validated against ``logits``' vocabulary."""
    ids = torch.as_tensor(ids, device=logits.device).long()
    pair = pair.to(logits.device).long()
    if ids.ndim != 1 or (pair.numel() and int(pair.max()) >= ids.shape[0]):
        raise DataError(
            f"{what} has shape {tuple(ids.shape)} but rows refer to pair {int(pair.max())}; "
            "give one token id per prompt pair"
        )
    if int(ids.max()) >= logits.shape[-1] or int(ids.min()) < 0:
        raise DataError(f"{what} holds a token id outside 0..{logits.shape[-1] - 1}")
    return ids[pair]


def logit_diff(
    logits: Float[Tensor, "row vocab"],
    pair: Int[Tensor, " row"],
    *,
    answer: Int[Tensor, " n_pairs"],
    foil: Int[Tensor, " n_pairs"],
) -> Float[Tensor, " row"]:
    """``logits[answer] - logits[foil]`` per row (Wang et al. 2022, IOI)."""
    a = _pick(logits, pair, answer, "answer")
    f = _pick(logits, pair, foil, "foil")
    rows = torch.arange(logits.shape[0], device=logits.device)
    return logits[rows, a] - logits[rows, f]


def answer_logprob(
    logits: Float[Tensor, "row vocab"], pair: Int[Tensor, " row"], *, answer: Int[Tensor, " n_pairs"]
) -> Float[Tensor, " row"]:
    """``log softmax(logits)[answer]`` per row."""
    a = _pick(logits, pair, answer, "answer")
    rows = torch.arange(logits.shape[0], device=logits.device)
    return torch.log_softmax(logits, -1)[rows, a]


def last_token_logits(
    logits: Float[Tensor, "batch pos vocab"], lengths: Int[Tensor, " batch"]
) -> Float[Tensor, "batch vocab"]:
    """The logits at each row's last real token (``logits`` aligned: index t = token t)."""
    rows = torch.arange(logits.shape[0], device=logits.device)
    return logits[rows, lengths.to(logits.device) - 1]
