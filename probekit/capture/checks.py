"""Checks of a capture's inputs against the model, run before any forward pass or store write.

A failed check raises :class:`probekit.errors.DataError` naming the example, the value and the
limit, so a bad token id reads ``example 3: token id 50000 is outside the model's vocabulary
(vocab size 49152...)`` instead of torch's ``index out of range in self``, and no stub store is
left behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import DataError
from ..inputs import check_vocab
from ..models.protocol import HookedModel
from ..sites import Site
from .positions import PositionRule, SpanMean, TokenIndex, check_rule_matches


class PositionOutOfRangeError(DataError, IndexError):
    """A position rule points outside an example (also an ``IndexError`` for older callers)."""


def check_capture_inputs(
    model: HookedModel, tokens: Sequence[Sequence[int]], sites: Sequence[Site], rule: PositionRule
) -> None:
    """Check capture inputs before any forward pass.

    Token ids within ``d_vocab``, lengths within ``n_ctx``, positions inside each example, and
    every site a hook point of ``model``.

    Raises:
        DataError: naming the first bad example; ``ConfigError`` for a site the model lacks.
    """
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
