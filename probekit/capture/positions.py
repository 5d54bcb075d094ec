"""Position rules: which token(s) of each example a capture keeps.

Every rule maps an activation ``[batch, pos, *feature]`` plus the batch's padding layout to
rows ``[row, *feature]`` with, per row, the example id and the (unpadded) token position.
Positions are always given in *unpadded* coordinates; padding is resolved through the batch's
offsets, so left and right padding give identical rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import DataError
from ..inputs import as_int, position_spec_error
from ..shapes import shape_checked
from .batching import TokenBatch


@dataclass(frozen=True)
class Rows:
    """Selected activations with their provenance (one row per kept token or span)."""

    values: Float[Tensor, "row ..."]
    example: Int[Tensor, " row"]
    position: Int[Tensor, " row"]


@dataclass(frozen=True)
class LastToken:
    """The last non-pad token of each example (e.g. the prompt's final token)."""

    per_example: bool = field(default=True, init=False)

    def describe(self) -> dict[str, Any]:
        """JSON description of the rule (stored in manifests)."""
        return {"rule": "last_token"}

    def token_index(self, batch: TokenBatch) -> Int[Tensor, " batch"]:
        """The unpadded token index of each row of ``batch``."""
        return batch.lengths - 1


@dataclass(frozen=True)
class TokenIndex:
    """A given token index per example (unpadded; negative counts from the end)."""

    indices: tuple[int, ...]
    per_example: bool = field(default=True, init=False)

    def __init__(self, indices: Sequence[int]) -> None:
        """One index per example of the dataset (by example id)."""
        object.__setattr__(self, "indices", tuple(int(i) for i in indices))

    def describe(self) -> dict[str, Any]:
        """JSON description of the rule (stored in manifests)."""
        return {"rule": "token_index", "indices": list(self.indices)}

    def token_index(self, batch: TokenBatch) -> Int[Tensor, " batch"]:
        """The unpadded token index of each row of ``batch``."""
        idx = _take(self.indices, batch, "TokenIndex.indices")
        idx = torch.where(idx < 0, batch.lengths + idx, idx)
        bad = (idx < 0) | (idx >= batch.lengths)
        if bad.any():
            row = int(bad.nonzero()[0, 0])
            raise IndexError(
                f"TokenIndex: example {int(batch.example_ids[row])} has {int(batch.lengths[row])} "
                f"tokens but index {self.indices[int(batch.example_ids[row])]} was requested"
            )
        return idx


@dataclass(frozen=True)
class SpanMean:
    """Mean over the token span ``[start, end)`` of each example (unpadded coordinates)."""

    spans: tuple[tuple[int, int], ...]
    per_example: bool = field(default=True, init=False)

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        """One ``(start, end)`` span per example of the dataset (by example id)."""
        object.__setattr__(self, "spans", tuple((int(a), int(b)) for a, b in spans))

    def describe(self) -> dict[str, Any]:
        """JSON description of the rule (stored in manifests)."""
        return {"rule": "span_mean", "spans": [list(s) for s in self.spans]}


@dataclass(frozen=True)
class AllTokens:
    """Every non-pad token of every example: one row per token."""

    per_example: bool = field(default=False, init=False)

    def describe(self) -> dict[str, Any]:
        """JSON description of the rule (stored in manifests)."""
        return {"rule": "all_tokens"}


PositionRule = LastToken | TokenIndex | SpanMean | AllTokens


def _take(values: tuple, batch: TokenBatch, what: str) -> Tensor:
    n = len(values)
    ids = batch.example_ids.cpu()
    if int(ids.max()) >= n:
        raise IndexError(f"{what} has {n} entries but the dataset has example {int(ids.max())}")
    return torch.as_tensor([values[i] for i in ids.tolist()], dtype=torch.long)


def check_rule_matches(rule: PositionRule, n_examples: int) -> None:
    """Raise if a per-example rule carries the wrong number of entries."""
    count = (
        len(rule.indices)
        if isinstance(rule, TokenIndex)
        else len(rule.spans)
        if isinstance(rule, SpanMean)
        else None
    )
    if count is not None and count != n_examples:
        raise DataError(
            f"{type(rule).__name__} has {count} entries but the dataset has {n_examples} "
            "examples; give exactly one per example"
        )


def slice_rule(rule: PositionRule, start: int, end: int) -> PositionRule:
    """The rule for examples ``[start, end)`` only (per-example rules sliced; others unchanged)."""
    if isinstance(rule, TokenIndex):
        return TokenIndex(rule.indices[start:end])
    if isinstance(rule, SpanMean):
        return SpanMean(rule.spans[start:end])
    return rule


@shape_checked
def select_positions(
    acts: Float[Tensor, "batch pos ..."], batch: TokenBatch, rule: PositionRule
) -> Rows:
    """Apply ``rule`` to one batch of activations (``pos`` must be axis 1)."""
    device = acts.device
    offsets = batch.offsets.to(device)
    lengths = batch.lengths.to(device)
    examples = batch.example_ids.to(device)
    if isinstance(rule, (LastToken, TokenIndex)):
        tok = rule.token_index(batch).to(device)
        col = offsets + tok
        rows = torch.arange(acts.shape[0], device=device)
        return Rows(acts[rows, col], examples, tok)
    if isinstance(rule, SpanMean):
        spans = _take(rule.spans, batch, "SpanMean.spans").reshape(-1, 2).to(device)
        start, end = spans[:, 0], spans[:, 1]
        bad = (start < 0) | (end <= start) | (end > lengths)
        if bad.any():
            row = int(bad.nonzero()[0, 0])
            raise IndexError(
                f"SpanMean: example {int(examples[row])} has {int(lengths[row])} tokens; span "
                f"{tuple(spans[row].tolist())} must satisfy 0 <= start < end <= length"
            )
        cols = torch.arange(acts.shape[1], device=device)[None, :] - offsets[:, None]
        weights = ((cols >= start[:, None]) & (cols < end[:, None])).to(acts.dtype)
        weights = weights / weights.sum(1, keepdim=True)
        flat = acts.reshape(acts.shape[0], acts.shape[1], -1)
        mean = torch.einsum("bp,bpf->bf", weights, flat).reshape(acts.shape[0], *acts.shape[2:])
        return Rows(mean, examples, start)
    if isinstance(rule, AllTokens):
        mask = batch.attention_mask.to(device).bool()
        b_idx, p_idx = mask.nonzero(as_tuple=True)
        return Rows(acts[b_idx, p_idx], examples[b_idx], p_idx - offsets[b_idx])
    raise TypeError(f"unknown position rule {rule!r}; use LastToken, TokenIndex, SpanMean, AllTokens")


def parse_position_rule(text: str, columns: Mapping[str, Sequence[Any]]) -> PositionRule:
    """``"last"``, ``"all"`` or ``"column:NAME"`` (token index per example from ``columns``)."""
    if text == "last":
        return LastToken()
    if text == "all":
        return AllTokens()
    if not text.startswith("column:"):
        raise position_spec_error(text, list(columns))
    name = text.split(":", 1)[1]
    if name not in columns:
        raise position_spec_error(text, list(columns))
    return TokenIndex([
        as_int(v, where=f"example {i}", column=name, what="an integer token position")
        for i, v in enumerate(columns[name])
    ])

