"""Checks of a capture's inputs against the model, run before any forward pass or store write.

A failed check raises :class:`probekit.errors.DataError` naming the example, the value and the
limit, so a bad token id reads ``example 3: token id 50000 is outside the model's vocabulary
(vocab size 49152...)`` instead of torch's ``index out of range in self``, and no stub store is
left behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import Tensor

from ..errors import DataError
from ..inputs import check_vocab
from ..models.protocol import HookedModel
from ..sites import Site
from .positions import PositionRule, SpanMean, TokenIndex, check_rule_matches

#: Token input of the capture API: a list of token-id lists, or a ``(batch, pos)`` integer array /
#: tensor; checked at run time by :func:`check_token_sequences` (a flat list is refused there).
TokenInput = Sequence[Any] | np.ndarray | Tensor


class PositionOutOfRangeError(DataError, IndexError):
    """A position rule points outside an example (also an ``IndexError`` for older callers)."""


def _integer_dtype(dtype: object) -> bool | None:
    """True/False for an integer / non-integer numpy or torch dtype; None for a non-array."""
    if dtype is None:
        return None
    is_float = getattr(dtype, "is_floating_point", None)
    if is_float is not None:  # a torch dtype
        return not is_float and not getattr(dtype, "is_complex", False) and str(dtype) != "torch.bool"
    kind = getattr(dtype, "kind", None)
    return kind in ("i", "u") if kind is not None else None


def check_token_sequences(tokens: object) -> None:
    """Refuse token input that is not a batch of integer-id sequences, naming the fix.

    Accepted: a list of lists of ints, a 2-D integer numpy array or tensor ``(batch, pos)``.
    Refused: one flat list of ids (``[1, 2, 3]``: a batch of three one-token examples would be
    ambiguous, and ``len`` of an int fails deep inside), a text, float or boolean ids (a float
    tensor from ``torch.tensor([[1., 2.]])`` would be truncated silently), arrays of another rank.

    Raises:
        DataError: naming the shape, the dtype or the first bad example.
    """
    if isinstance(tokens, (str, bytes)):
        raise DataError(f"tokens is a text ({tokens[:30]!r}); pass token ids (a list of lists of "
                        "ints), e.g. model.to_tokens(text).tolist()")
    ints = _integer_dtype(getattr(tokens, "dtype", None))
    shape = getattr(tokens, "shape", None)
    if shape is not None and ints is not None:
        if len(shape) != 2:
            fix = ("; for one example wrap it: tokens[None] (shape (1, pos))"
                   if len(shape) == 1 else "")
            raise DataError(f"tokens has shape {tuple(shape)}; expected (batch, pos) token ids"
                            f"{fix}")
        if not ints:
            raise DataError(f"tokens has dtype {tokens.dtype}; token ids must be integers: pass "  # type: ignore[attr-defined]
                            "tokens.long() (torch) or tokens.astype(int) (numpy) after checking "
                            "they are whole numbers")
        return
    if not hasattr(tokens, "__len__") or not hasattr(tokens, "__getitem__"):
        raise DataError(f"tokens is {type(tokens).__name__}; pass a list of token-id lists, one per "
                        "example")
    for i, seq in enumerate(tokens):  # type: ignore[arg-type]
        if isinstance(seq, (int, float)) or (getattr(seq, "ndim", None) == 0):
            raise DataError(
                f"tokens[{i}] is the single id {seq!r}, not a sequence: tokens must be a batch "
                f"(a list of token-id lists); for one example wrap it: [{_short(tokens)}]"
            )
        if isinstance(seq, (str, bytes)):
            raise DataError(f"tokens[{i}] is a text ({seq[:30]!r}); pass token ids, e.g. "
                            "model.to_tokens(text)[0].tolist()")
        dtype_ok = _integer_dtype(getattr(seq, "dtype", None))
        if dtype_ok is False:
            raise DataError(f"tokens[{i}] has dtype {seq.dtype}; token ids must be integers: "
                            "pass .long() / .astype(int)")
        if dtype_ok is None:
            for t in seq:
                if isinstance(t, bool) or not isinstance(t, int) and not (
                        _integer_dtype(getattr(t, "dtype", None)) and getattr(t, "ndim", 0) == 0):
                    raise DataError(f"tokens[{i}] holds {t!r} ({type(t).__name__}); token ids "
                                    "must be integers")


def token_lists(tokens: object) -> list[list[int]]:
    """``tokens`` checked (:func:`check_token_sequences`) as a list of lists of Python ints.

    A 2-D integer array or tensor ``(batch, pos)`` becomes one list per row.
    """
    check_token_sequences(tokens)
    if hasattr(tokens, "tolist") and getattr(tokens, "shape", None) is not None:
        return [list(map(int, row)) for row in tokens.tolist()]  # type: ignore[attr-defined]
    return [[int(t) for t in (seq.tolist() if hasattr(seq, "tolist") else seq)]
            for seq in tokens]  # type: ignore[attr-defined]


def _short(tokens: object) -> str:
    text = repr(list(tokens)[:5])[1:-1]  # type: ignore[call-overload]
    return f"[{text}{', ...' if len(tokens) > 5 else ''}]"  # type: ignore[arg-type]


def check_capture_inputs(
    model: HookedModel, tokens: Sequence[Sequence[int]], sites: Sequence[Site], rule: PositionRule
) -> None:
    """Check capture inputs before any forward pass.

    Token ids within ``d_vocab``, lengths within ``n_ctx``, positions inside each example, and
    every site a hook point of ``model``.

    Raises:
        DataError: naming the first bad example; ``ConfigError`` for a site the model lacks.
    """
    check_token_sequences(tokens)
    if len(tokens) == 0:
        raise DataError("no examples to capture; pass at least one token sequence")
    where = [f"example {i}" for i in range(len(tokens))]
    for loc, seq in zip(where, tokens):
        if len(seq) == 0:
            raise DataError(f"{loc} has no tokens; every example needs at least one")
    check_vocab(tokens, int(model.cfg.d_vocab), where)
    n_ctx = int(model.cfg.n_ctx)
    for loc, seq in zip(where, tokens):
        if len(seq) > n_ctx:
            raise DataError(f"{loc} has {len(seq)} tokens but the model's context is {n_ctx}")
    check_rule_matches(rule, len(tokens))
    lengths = [len(seq) for seq in tokens]
    if isinstance(rule, TokenIndex):
        for loc, index, n in zip(where, rule.indices, lengths):
            if not -n <= index < n:
                raise PositionOutOfRangeError(
                    f"TokenIndex: {loc} has {n} tokens but index {index} was requested (valid: "
                    f"0..{n - 1}, or -{n}..-1 from the end)"
                )
    if isinstance(rule, SpanMean):
        for loc, (start, end), n in zip(where, rule.spans, lengths):
            if not 0 <= start < end <= n:
                raise PositionOutOfRangeError(
                    f"{loc} has {n} tokens; span {(start, end)} must satisfy "
                    "0 <= start < end <= length"
                )
    for site in sites:
        site.validate(model)
