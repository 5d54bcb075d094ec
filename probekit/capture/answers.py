"""Answers as token ids: what the patching metrics and the logit lens read at the last token.

A row's answer is a token id, or text that the task vocabulary or the model's tokenizer turns
into tokens. The metrics read one next-token logit, so an answer of several tokens is refused
(``answer_tokens = "single"``) or scored by its first token (``"first"``, reported).
Shared by the ``[[patching]]`` analysis, ``probekit patch``, the patching / logit-lens
measurement kinds and the real-LM outcomes of a diagnosis: an input-level helper (it reads the
model's tokenizer and the task vocabulary only), so it lives with capture, below the method
packages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..errors import ConfigError, DataError

__all__ = ["AnswerTokens", "answer_ids", "answer_token", "answer_token_ids", "reduction_warning"]

#: ``"single"``: refuse multi-token answers; ``"first"``: score them by their first token.
AnswerTokens = Literal["single", "first"]


def answer_token_ids(model: Any, value: Any, vocab: Any = None) -> list[int]:
    """Every token of a row's answer: an int as is, a string via the task vocabulary or tokenizer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if vocab is not None and str(value) in getattr(vocab, "tokens", ()):
        return [int(vocab.id(str(value)))]
    if getattr(model, "tokenizer", None) is None:
        raise ConfigError(
            f"answer {value!r} is text but the model has no tokenizer; give answers as token ids"
        )
    return [int(t) for t in model.to_tokens(str(value), prepend_bos=False)[0].tolist()]


def answer_token(
    model: Any, value: Any, vocab: Any = None, *, answer_tokens: AnswerTokens = "single",
    where: str = "",
) -> int:
    """A row's answer as one token id (the metric reads one next-token logit).

    ``answer_tokens = "single"`` refuses an answer of several tokens (naming the row, the answer
    and its tokens); ``"first"`` uses its first token, explicitly.

    Raises:
        DataError: a multi-token answer under ``"single"``, or an empty one.
    """
    ids = answer_token_ids(model, value, vocab)
    loc = f"{where}: " if where else ""
    if not ids:
        raise DataError(f"{loc}answer {value!r} has no tokens; give a non-empty answer")
    if len(ids) > 1 and answer_tokens != "first":
        tok = getattr(model, "tokenizer", None)
        pieces = [tok.decode([t]) for t in ids] if tok is not None else []
        shown = f"{ids} {pieces}" if pieces else f"{ids}"
        raise DataError(
            f"{loc}answer {value!r} is {len(ids)} tokens {shown}; the metric reads one next-token "
            "logit: give a single-token answer (or its token id), or set answer_tokens = \"first\" "
            "(--answer-tokens first) to use each answer's first token"
        )
    return ids[0]


def answer_ids(
    model: Any, values: Sequence[Any], where: Sequence[str], vocab: Any = None, *,
    answer_tokens: AnswerTokens = "single",
) -> tuple[list[int], list[str]]:
    """One token id per answer, and the answers reduced to their first token (for the report)."""
    ids, reduced = [], []
    for value, loc in zip(values, where):
        ids.append(answer_token(model, value, vocab, answer_tokens=answer_tokens, where=loc))
        if answer_tokens == "first" and len(answer_token_ids(model, value, vocab)) > 1:
            reduced.append(f"{loc}: {value!r}")
    return ids, reduced


def reduction_warning(reduced: Sequence[str], n: int) -> str:
    """The report / CLI line for answers reduced to their first token."""
    shown = "; ".join(reduced[:3]) + (f"; and {len(reduced) - 3} more" if len(reduced) > 3 else "")
    return (f"{len(reduced)} of {n} answers have several tokens and are scored by their first "
            f"token only (answer_tokens = \"first\"): {shown}")
