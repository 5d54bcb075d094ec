"""Patching metrics: plain functions of final-token logits, one value per row.

A metric maps ``logits: (row, d_vocab)`` (each row's logits at its prompt's last real token) and
``pair: (row,)`` (which prompt pair each row belongs to: batched patching runs many rows per
pair) to ``(row,)``. Bind the per-pair answers with :func:`functools.partial`:

    >>> metric = partial(logit_diff, answer=answers, foil=foils)   # answers: (n_pairs,)
    >>> metric(logits, torch.arange(n_pairs))                      # one value per pair

TransformerLens' convention, ``metric(logits) -> scalar``, is accepted too (detected from the
signature by :func:`as_pair_metric`: one positional parameter): it is called once per row, on
that prompt's last-token logits shaped ``(1, 1, d_vocab)`` (batch, pos, vocab, so
``logits[:, -1, :]`` works) and must return one number. It cannot see which pair a row belongs
to: a metric whose answers differ between pairs takes the two-argument form.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import ConfigError, DataError
from ..shapes import shape_checked

_EXPECTED = ("metric(logits: (row, d_vocab), pair: (row,)) -> (row,), or TransformerLens' "
             "metric(logits) -> scalar")


@dataclass(frozen=True)
class PerPromptMetric:
    """A TransformerLens-style ``metric(logits) -> scalar`` as a probekit metric.

    ``self(logits, pair)[i] = fn(logits[i][None, None, :])``: one call per row, on that prompt's
    last-token logits shaped ``(1, 1, d_vocab)``; gradients flow (attribution patching, EAP).
    """

    fn: Callable[..., Any]
    answer_tokens: Tensor | None = None

    def __call__(
        self, logits: Float[Tensor, "row vocab"], pair: Int[Tensor, " row"]
    ) -> Float[Tensor, " row"]:
        """One value per row: ``fn`` on each row's logits alone (and its pair's answer tokens)."""
        values = []
        if self.answer_tokens is not None and logits.shape[0]:
            top = int(pair.max())
            if top >= self.answer_tokens.shape[0]:
                raise DataError(
                    f"the metric's answer_tokens default has {self.answer_tokens.shape[0]} rows but "
                    f"pair {top} is patched; give one answer row per prompt pair"
                )
        for i in range(logits.shape[0]):
            kwargs = ({} if self.answer_tokens is None
                      else {"answer_tokens": self.answer_tokens[int(pair[i])][None]})
            value = self.fn(logits[i][None, None, :], **kwargs)
            if not isinstance(value, Tensor) or value.numel() != 1:
                shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
                raise DataError(
                    f"one-argument (TransformerLens-style) metric returned {shape} for one prompt's "
                    "logits (1, 1, d_vocab); it must return one number (e.g. end in .mean())"
                )
            values.append(value.reshape(()).to(logits.dtype))
        return torch.stack(values) if values else logits.new_zeros(0)


def as_pair_metric(metric: Callable[..., Any]) -> Callable[[Tensor, Tensor], Tensor]:
    """``metric`` in probekit's two-argument form; a one-argument metric is wrapped.

    Decided from the signature (:func:`inspect.signature`): two positional parameters (or
    ``*args``, or no inspectable signature) -> used as is; exactly one, or one required and the
    second not named ``pair`` -> TransformerLens' ``metric(logits) -> scalar``, wrapped in
    :class:`PerPromptMetric`. The TransformerLens tutorial's ``metric(logits,
    answer_tokens=answer_tokens, per_prompt=False)`` is recognised: each row gets its pair's
    row of the ``answer_tokens`` default (``(n_pairs, ...)``).

    Raises:
        ConfigError: a metric that takes no positional argument or needs more than two, with
            the expected signature.
    """
    if isinstance(metric, PerPromptMetric):
        return metric
    try:
        params = list(inspect.signature(metric).parameters.values())
    except (TypeError, ValueError):  # builtins, some C callables: assume the native form
        return metric
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return metric
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) == 1 and len(positional) >= 2 and positional[1].name != "pair":
        # TransformerLens' tutorial metric(logits, answer_tokens=answer_tokens, per_prompt=False):
        # called per row with that row's pair's answer tokens (not with ``pair`` as answers)
        default = next((p.default for p in params if p.name == "answer_tokens"), None)
        if isinstance(default, Tensor):
            if default.is_floating_point():
                raise DataError(f"the metric's answer_tokens default has dtype {default.dtype}; "
                                "token ids must be integers (.long())")
            return PerPromptMetric(metric, answer_tokens=default)
        return PerPromptMetric(metric)
    if len(positional) >= 2 and len(required) <= 2:
        return metric
    if len(positional) == 1:
        return PerPromptMetric(metric)
    name = getattr(metric, "__qualname__", repr(metric))
    raise ConfigError(
        f"metric {name} takes {len(required)} required positional argument(s); expected {_EXPECTED}"
    )


def _pick(logits: Tensor, pair: Tensor, ids: Tensor, what: str) -> Tensor:
    """``ids[pair]`` validated against ``logits``' vocabulary."""
    ids = torch.as_tensor(ids, device=logits.device)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        shown = ", ".join(repr(v) for v in ids.reshape(-1)[:3].tolist())
        raise DataError(f"{what} holds {ids.dtype} values ({shown}, ...); token ids must be "
                        "integers: pass a long tensor, e.g. torch.tensor(ids, dtype=torch.long)")
    ids = ids.long()
    pair = pair.to(logits.device).long()
    if ids.ndim != 1 or (pair.numel() and int(pair.max()) >= ids.shape[0]):
        raise DataError(
            f"{what} has shape {tuple(ids.shape)} but rows refer to pair {int(pair.max())}; "
            "give one token id per prompt pair"
        )
    if int(ids.max()) >= logits.shape[-1] or int(ids.min()) < 0:
        raise DataError(f"{what} holds a token id outside 0..{logits.shape[-1] - 1}")
    return ids[pair]


@shape_checked
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


@shape_checked
def answer_logprob(
    logits: Float[Tensor, "row vocab"], pair: Int[Tensor, " row"], *, answer: Int[Tensor, " n_pairs"]
) -> Float[Tensor, " row"]:
    """``log softmax(logits)[answer]`` per row."""
    a = _pick(logits, pair, answer, "answer")
    rows = torch.arange(logits.shape[0], device=logits.device)
    return torch.log_softmax(logits, -1)[rows, a]


@shape_checked
def last_token_logits(
    logits: Float[Tensor, "batch pos vocab"], lengths: Int[Tensor, " batch"]
) -> Float[Tensor, "batch vocab"]:
    """The logits at each row's last real token (``logits`` aligned: index t = token t)."""
    n_pos = logits.shape[1]
    if lengths.shape != (logits.shape[0],):
        raise DataError(f"lengths has shape {tuple(lengths.shape)} for {logits.shape[0]} rows of "
                        "logits; give one length per row")
    bad = lengths[(lengths < 1) | (lengths > n_pos)]
    if bad.numel():
        raise DataError(f"lengths holds {int(bad[0])}, outside 1..{n_pos} (the logits' positions); "
                        "give each row's number of real tokens")
    rows = torch.arange(logits.shape[0], device=logits.device)
    return logits[rows, lengths.to(logits.device) - 1]
