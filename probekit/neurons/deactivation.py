"""Deactivation experiments on relation neurons (Liu et al. 2025, EMNLP), through the intervention layer.

A unit set is "deactivated" by overwriting its coordinates with a constant at every position of
the prompt and of the generated tokens (the lineage code's forward hook; constant 0 by default,
or each unit's mean response). Factual recall is scored two ways:

- ``generation``: greedy decoding of up to ``max_new_tokens`` tokens; a fact is correct if the
  normalised continuation starts with the gold object (or one of its ``|``-separated aliases).
  On Hugging Face models the decoding keeps a KV cache computed under the ops (one pass over the
  prompts, then one token per step; exact, see :func:`greedy_under_sets`);
- ``first_token``: the gold object's first token is the argmax of the next-token distribution
  (one forward pass; used for the many random-set controls).

Both are scored for many unit sets per forward pass (``*_sets``: each set's ablation restricted
to its own rows of the batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Bool
from torch import Tensor

from ..capture import AllTokens
from ..capture.batching import TokenBatch, pad_id_of
from ..capture.generate import greedy_decode, is_correct, resolve_kv_cache
from ..errors import ConfigError, DataError
from ..interventions import Ablate, WriteOp, as_batch, run_with_interventions
from ..util.threads import ThreadTuner
from .config import METHODS
from .selection import NeuronSet


@dataclass(frozen=True)
class FactSet:
    """Prompts with their relation and gold object (``|``-separated aliases).

    Attributes:
        tokens: prompt token ids, one list per fact.
        relations: relation name of each fact.
        golds: gold object of each fact.
        gold_first_token: the first token id of ``" " + gold`` (first alias) per fact.
    """

    tokens: tuple[tuple[int, ...], ...]
    relations: tuple[str, ...]
    golds: tuple[str, ...]
    gold_first_token: tuple[int, ...]

    def __post_init__(self) -> None:
        """Check that every per-fact field has one entry per prompt."""
        n = len(self.tokens)
        for name in ("relations", "golds", "gold_first_token"):
            if len(getattr(self, name)) != n:
                raise DataError(
                    f"FactSet.{name} has {len(getattr(self, name))} entries for {n} prompts"
                )

    @classmethod
    def from_texts(
        cls, model: object, texts: Sequence[str], relations: Sequence[str], golds: Sequence[str]
    ) -> FactSet:
        """Tokenise prompts (no BOS) and gold objects with the model's tokenizer."""
        tok = model.tokenizer  # type: ignore[attr-defined]
        tokens = tuple(tuple(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
        first = tuple(
            int(tok(" " + g.split("|")[0], add_special_tokens=False)["input_ids"][0])
            for g in golds
        )
        return cls(tokens, tuple(map(str, relations)), tuple(map(str, golds)), first)

    def subset(self, mask: Sequence[bool] | np.ndarray) -> FactSet:
        """The facts where ``mask`` is true."""
        idx = np.flatnonzero(np.asarray(mask, dtype=bool))
        return FactSet(
            tuple(self.tokens[i] for i in idx),
            tuple(self.relations[i] for i in idx),
            tuple(self.golds[i] for i in idx),
            tuple(self.gold_first_token[i] for i in idx),
        )

    def relation_mask(self, relation: str) -> np.ndarray:
        """Boolean mask of the facts of ``relation``."""
        return np.array([r == relation for r in self.relations])


def deactivation_ops(
    neuron_set: NeuronSet | None,
    *,
    method: str = "zero",
    means: dict | None = None,
) -> list[Ablate]:
    """The intervention ops that deactivate ``neuron_set`` at every position.

    ``method="mean"`` needs ``means[site]``, a ``(width,)`` tensor of each unit's mean response.
    """
    if method not in METHODS:
        raise ConfigError(f"unknown deactivation method {method!r}; use one of {list(METHODS)}")
    if neuron_set is None:
        return []
    ops = []
    for site, units in neuron_set.units.items():
        if units.numel() == 0:
            continue
        if method == "mean":
            if means is None or site not in means:
                raise ConfigError(f"method='mean' needs the mean response of site {site}")
            ops.append(
                Ablate(site=site, method="mean", mean=means[site], features=tuple(units.tolist()),
                       positions=AllTokens())
            )
        else:
            ops.append(Ablate(site=site, features=tuple(units.tolist()), positions=AllTokens()))
    return ops


def _batches(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def first_token_correct(
    model: object, facts: FactSet, ops: Sequence[WriteOp] = (), *, batch_size: int = 32
) -> Bool[np.ndarray, " fact"]:
    """Whether the gold object's first token is the argmax next token, under ``ops``."""
    return first_token_correct_sets(model, facts, [ops], batch_size=batch_size)[0]


def _check_unrestricted(op_sets: Sequence[Sequence[WriteOp]]) -> None:
    """The set-packing runners restrict each set's ops to its rows: refuse ops that already are."""
    for ops in op_sets:
        for op in ops:
            if getattr(op, "rows", None) is not None:
                raise ConfigError(
                    f"op at {op.site} already has rows={op.rows}; pass ops for every row (rows=None)"
                )


def _packed_set_batches(
    op_sets: Sequence[Sequence[WriteOp]], n: int, batch_size: int
) -> Iterator[tuple[list[tuple[int, int]], list[WriteOp]]]:
    """``(set, item)`` rows packed ``batch_size`` to a forward, each set's ops restricted to its rows.

    Yields ``(rows, ops)``: ``rows[r] = (g, i)`` (item ``i`` under ``op_sets[g]``) and the ops of
    that forward. A batch filled by one set keeps its ops unrestricted.
    """
    pairs = [(g, i) for g in range(len(op_sets)) for i in range(n)]
    for chunk in _batches(len(pairs), batch_size):
        rows = [pairs[k] for k in chunk]
        groups: dict[int, list[int]] = {}
        for row, (g, _) in enumerate(rows):
            groups.setdefault(g, []).append(row)
        whole = len(groups) == 1  # one set fills the batch: its ops need no row restriction
        ops = [
            op if whole else dataclasses.replace(op, rows=tuple(members))
            for g, members in groups.items()
            for op in op_sets[g]
        ]
        yield rows, ops


@torch.inference_mode()
def first_token_correct_sets(
    model: object,
    facts: FactSet,
    op_sets: Sequence[Sequence[WriteOp]],
    *,
    batch_size: int = 32,
    threads: ThreadTuner | None = None,
) -> Bool[np.ndarray, "set fact"]:
    """:func:`first_token_correct` under each of several op sets, many sets per forward pass.

    Every ``(set g, fact i)`` pair is one row; the rows are packed ``batch_size`` to a forward,
    and the rows of set ``g`` get ``g``'s ops restricted to them (``Ablate(rows=...)``; several
    ops at one site run in turn on disjoint rows). Rows do not interact, so entry ``[g, i]`` is
    what a forward of fact ``i`` alone under ``op_sets[g]`` gives. Logits are computed at each
    row's last token only. Each forward runs on the thread count ``threads`` finds fastest now
    (:class:`~probekit.util.threads.ThreadTuner`; default: a new one for this call), so a busy
    core beside the run does not stall every op's barrier.
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    _check_unrestricted(op_sets)
    n = len(facts.tokens)
    gold = np.asarray(facts.gold_first_token, dtype=np.int64)
    out = np.zeros((len(op_sets), n), dtype=bool)
    tuner = threads or ThreadTuner()
    for rows, ops in _packed_set_batches(op_sets, n, batch_size):
        seqs = [list(facts.tokens[i]) for _, i in rows]
        with tuner.run(work=sum(map(len, seqs))):
            logits = run_with_interventions(model, seqs, ops, logits="last").output
        pred = logits.argmax(-1).cpu().numpy()
        g_idx = np.array([g for g, _ in rows])
        f_idx = np.array([i for _, i in rows])
        out[g_idx, f_idx] = pred == gold[f_idx]
    return out


def _cache_safe(op: object) -> bool:
    """Whether ``op`` acts the same at every position, so a KV-cached step applies it exactly.

    Zero ablation and mean ablation with a given ``(*feat)`` mean at :class:`AllTokens` do; a
    batch mean, a resample or a per-position mean depend on the batch or the coordinates.
    """
    if not isinstance(op, Ablate) or not isinstance(op.positions, AllTokens):
        return False
    return op.method == "zero" or (op.method == "mean" and op.mean is not None and op.mean.ndim <= 1)


def _use_cache(model: object, op_sets: Sequence[Sequence[Ablate]], kv_cache: bool | None) -> bool:
    """Resolve ``kv_cache`` (``None``: whenever the model and every op allow it)."""
    safe = all(_cache_safe(op) for ops in op_sets for op in ops)
    return resolve_kv_cache(model, kv_cache,  # type: ignore[arg-type]
                            inexact=None if safe else "position-independent ops (zero, or mean "
                            "with a given mean, at AllTokens)")


def _greedy_rows(
    model: object, seqs: list[list[int]], ops: Sequence[Ablate], steps: int, cached: bool
) -> list[list[int]]:
    """Greedy continuations of one batch of prompts under ``ops`` (applied at every position).

    :func:`~probekit.capture.generate.greedy_decode` with each forward run under the ops
    (cached: the prompts' keys/values are computed under the ops, and each step's new token gets
    them too, so the continuation is that of one forward over prompt + continuation).
    """
    ops = list(ops)

    def forward(batch: TokenBatch, kv_cache: object, kv_mask: Tensor | None) -> Tensor:
        return run_with_interventions(model, batch, ops, logits="last",  # type: ignore[arg-type]
                                      kv_cache=kv_cache, kv_mask=kv_mask).output

    return greedy_decode(as_batch(model, seqs), steps, forward, cached=cached,  # type: ignore[arg-type]
                         pad_id=pad_id_of(model))  # type: ignore[arg-type]


@torch.inference_mode()
def greedy_under(
    model: object,
    tokens: Sequence[Sequence[int]],
    ops: Sequence[Ablate] = (),
    *,
    max_new_tokens: int = 8,
    batch_size: int = 32,
    kv_cache: bool | None = None,
    threads: ThreadTuner | None = None,
) -> list[list[int]]:
    """Greedy continuation ids with ``ops`` applied at every position, generated tokens included.

    ``kv_cache`` (``None``: auto, on for Hugging Face models and position-independent ops, see
    :func:`greedy_under_sets`) runs each prompt once and then one new token per step; off, the
    growing sequence is re-run each step. Either way the ops see every token exactly as in one
    forward pass over prompt + continuation.
    """
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    cached = _use_cache(model, [ops], kv_cache)
    tuner = threads or ThreadTuner()
    out: list[list[int]] = []
    for rows in _batches(len(tokens), batch_size):
        seqs = [list(tokens[i]) for i in rows]
        with tuner.run(work=_decode_work(seqs, max_new_tokens)):
            out.extend(_greedy_rows(model, seqs, ops, max_new_tokens, cached))
    return out


def _decode_work(seqs: Sequence[Sequence[int]], steps: int) -> int:
    """Tokens a greedy batch runs: the prompts plus ``steps`` new tokens per row."""
    return sum(map(len, seqs)) + steps * len(seqs)


@torch.inference_mode()
def greedy_under_sets(
    model: object,
    tokens: Sequence[Sequence[int]],
    op_sets: Sequence[Sequence[Ablate]],
    *,
    max_new_tokens: int = 8,
    batch_size: int = 32,
    kv_cache: bool | None = None,
    threads: ThreadTuner | None = None,
) -> list[list[list[int]]]:
    """:func:`greedy_under` under each of several op sets, many sets per forward pass.

    ``out[g][i]`` is the continuation of prompt ``i`` with ``op_sets[g]`` applied. Rows are
    packed ``(set, prompt)`` pairs, ``batch_size`` to a forward, each set's ops restricted to its
    rows (as :func:`first_token_correct_sets`).

    ``kv_cache`` (``None``: auto) caches each row's keys and values: the prompts run once (the
    ops applied, the cache filled), then each step runs only the new token of each row against
    the cache, with the ops applied to it and the prompt pads masked. This is exact: causal
    attention makes position ``t``'s keys/values a function of tokens ``0..t`` alone, and the
    deactivation ops overwrite each position's units with a constant, independent of the other
    positions, so the cached keys/values are those a forward over prompt + continuation computes
    (equal up to float rounding; a token can differ only at an exact argmax tie). Auto uses the
    cache for Hugging Face models when every op is position-independent (zero, or mean with a
    given per-unit mean, at every token); otherwise (TL-native bridges, other ops) the growing
    sequences are re-run each step. ``True`` refuses where the cache cannot be used.
    """
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    _check_unrestricted(op_sets)
    cached = _use_cache(model, op_sets, kv_cache)
    n = len(tokens)
    out: list[list[list[int]]] = [[[] for _ in range(n)] for _ in op_sets]
    tuner = threads or ThreadTuner()
    for rows, ops in _packed_set_batches(op_sets, n, batch_size):
        seqs = [list(tokens[i]) for _, i in rows]
        with tuner.run(work=_decode_work(seqs, max_new_tokens)):
            conts = _greedy_rows(model, seqs, ops, max_new_tokens, cached)
        for (g, i), cont in zip(rows, conts, strict=True):
            out[g][i] = cont
    return out


@torch.inference_mode()
def generation_correct_sets(
    model: object,
    facts: FactSet,
    op_sets: Sequence[Sequence[Ablate]],
    *,
    max_new_tokens: int = 8,
    batch_size: int = 32,
    kv_cache: bool | None = None,
    threads: ThreadTuner | None = None,
) -> Bool[np.ndarray, "set fact"]:
    """:func:`generation_correct` under each of several op sets (:func:`greedy_under_sets`)."""
    conts = greedy_under_sets(model, facts.tokens, op_sets, max_new_tokens=max_new_tokens,
                              batch_size=batch_size, kv_cache=kv_cache, threads=threads)
    decode = model.tokenizer.decode  # type: ignore[attr-defined]
    return np.array([[is_correct(decode(c), g) for c, g in zip(per_set, facts.golds, strict=True)]
                     for per_set in conts], dtype=bool).reshape(len(op_sets), len(facts.tokens))


def generation_correct(
    model: object,
    facts: FactSet,
    ops: Sequence[Ablate] = (),
    *,
    max_new_tokens: int = 8,
    batch_size: int = 32,
    kv_cache: bool | None = None,
    threads: ThreadTuner | None = None,
) -> tuple[list[str], Bool[np.ndarray, " fact"]]:
    """Greedy answers under ``ops`` and whether each starts with its gold object."""
    conts = greedy_under(
        model, facts.tokens, ops, max_new_tokens=max_new_tokens, batch_size=batch_size,
        kv_cache=kv_cache, threads=threads,
    )
    texts = [model.tokenizer.decode(c) for c in conts]  # type: ignore[attr-defined]
    ok = np.array([is_correct(t, g) for t, g in zip(texts, facts.golds, strict=True)], dtype=bool)
    return texts, ok


def accuracy_by_relation(correct: np.ndarray, facts: FactSet, relations: Sequence[str]) -> Tensor:
    """Mean of ``correct`` over the facts of each relation (NaN where a relation has none)."""
    rel = np.asarray(facts.relations)
    return torch.tensor(
        [float(correct[rel == r].mean()) if (rel == r).any() else float("nan") for r in relations],
        dtype=torch.float64,
    )
