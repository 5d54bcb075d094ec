"""A suite's examples: token sequences, per-example columns and named splits.

This is the dataset view analyses read; it is built from a testbed task or a JSONL file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..inputs import tokenize_text
from ..models.protocol import HookedModel
from .check import check_suite_data
from .check import data_task as _data_task
from .spec import Suite, SuiteError

__all__ = ["Examples", "build_examples", "leaked_rows", "warn_leakage"]

log = logging.getLogger("probekit")

AnswerFn = Callable[[list[list[int]], list[str]], tuple[list[str], list[bool]]]


@dataclass
class Examples:
    """The examples of a suite: what analyses see of the data.

    Attributes:
        tokens: one token-id sequence per example (row).
        columns: per-example metadata columns (labels, operands, greedy answers ...).
        splits: ``"train"``, ``"test"`` and ``"ood:<name>"`` -> example indices.
        vocab: the testbed's vocabulary (None for JSONL data).
    """

    tokens: list[list[int]]
    columns: dict[str, list[Any]]
    splits: dict[str, np.ndarray]
    vocab: Any = None

    def __len__(self) -> int:
        """Number of examples."""
        return len(self.tokens)

    def column(self, name: str) -> list[Any]:
        """One metadata column; the error lists the available ones."""
        if name not in self.columns:
            raise SuiteError(f"column {name!r} not found; available columns: {sorted(self.columns)}")
        return self.columns[name]

    def split(self, name: str) -> np.ndarray:
        """Indices of a split (``"train"``, ``"test"``, ``"ood:NAME"`` or a bare OOD name)."""
        for key in (name, f"ood:{name}"):
            if key in self.splits:
                return self.splits[key]
        raise SuiteError(f"no split {name!r}; splits are {sorted(self.splits)}")

    @property
    def ood_splits(self) -> dict[str, np.ndarray]:
        """Named OOD splits (without the ``ood:`` prefix)."""
        return {k.split(":", 1)[1]: v for k, v in self.splits.items() if k.startswith("ood:")}

    def pairs(
        self, *, pair_column: str = "pair_id", role_column: str = "role",
        clean: str = "clean", corrupt: str = "corrupt",
    ) -> tuple[np.ndarray, np.ndarray]:
        """Matched (clean, corrupt) example indices for patching-style analyses.

        Examples sharing a value of ``pair_column`` form a pair; ``role_column`` says which is
        the clean and which the corrupted prompt. Returns two index arrays of equal length,
        ordered by first appearance of the pair.
        """
        ids, roles = self.column(pair_column), self.column(role_column)
        by_pair: dict[Any, dict[str, int]] = {}
        for i, (pid, role) in enumerate(zip(ids, roles)):
            if pid is None:
                continue
            if role not in (clean, corrupt):
                raise SuiteError(
                    f"row {i}: {role_column}={role!r}; expected {clean!r} or {corrupt!r}"
                )
            slot = by_pair.setdefault(pid, {})
            if role in slot:
                raise SuiteError(f"rows {slot[role]} and {i} are both {role!r} of pair {pid!r}")
            slot[role] = i
        incomplete = [p for p, s in by_pair.items() if len(s) != 2]
        if incomplete:
            raise SuiteError(
                f"pair {incomplete[0]!r} has no {corrupt if clean in by_pair[incomplete[0]] else clean!r}"
                f" example ({len(incomplete)} incomplete pairs); give each {pair_column} one "
                f"{clean!r} and one {corrupt!r} row"
            )
        clean_idx = np.array([s[clean] for s in by_pair.values()], dtype=np.int64)
        corrupt_idx = np.array([s[corrupt] for s in by_pair.values()], dtype=np.int64)
        return clean_idx, corrupt_idx


def _subsample(n: int, cap: int | None, rng: np.random.Generator) -> np.ndarray:
    idx = np.arange(n)
    if cap is not None and n > cap:
        idx = np.sort(rng.choice(n, size=cap, replace=False))
    return idx


def build_examples(
    suite: Suite, model: HookedModel, *, answers: AnswerFn | None = None,
    required_columns: Sequence[str] = (), progress: bool = False,
) -> Examples:
    """Collect the examples of every split the suite names, with labels and metadata.

    ``model`` tokenizes ``text`` rows and, with ``[data] answer_column``, generates the greedy
    answers (``answers(tokens, golds)`` replaces that step, e.g. with a cached one).
    ``required_columns`` (labels of the analyses) must exist.
    """
    data = suite.data
    rng = np.random.default_rng(data.seed)
    wanted = [data.train_split, data.test_split, *data.ood_splits]
    per_split: dict[str, tuple[list[list[int]], dict[str, list[Any]]]] = {}
    vocab = None
    if data.task is not None or data.file is None:
        task = _data_task(suite)
        vocab = task.vocab
        splits = task.splits()
        for name in dict.fromkeys(wanted):
            if name not in splits:
                raise SuiteError(
                    f"{suite.source}: [data] split {name!r} is not a split of the task; "
                    f"it has {sorted(splits)}"
                )
            ds = splits[name]
            idx = _subsample(len(ds), data.max_per_split, rng)
            toks = [ds.prompt(i) if data.prompt_only else ds.tokens[i] for i in idx]
            cols = {k: [v[i] for i in idx] for k, v in ds.metadata.items()}
            per_split[name] = (toks, cols)
    else:
        jsonl = check_suite_data(suite) or []
        rows = [r.data for r in jsonl]
        where = {id(r.data): r.at("text") for r in jsonl}
        for name in dict.fromkeys(wanted):
            chosen = [r for r in rows if r.get(data.split_column) == name]
            if not chosen:
                have = sorted({str(r.get(data.split_column)) for r in rows})
                raise SuiteError(
                    f"{suite.source}: [data] split {name!r} has no rows in {data.file} "
                    f"(column {data.split_column!r} holds {have})"
                )
            idx = _subsample(len(chosen), data.max_per_split, rng)
            chosen = [chosen[i] for i in idx]
            toks = []
            for r in chosen:
                if "tokens" in r:
                    toks.append([int(t) for t in r["tokens"]])
                else:
                    toks.append(tokenize_text(model, r["text"], prepend_bos=data.prepend_bos,
                                              where=where[id(r)]))
            keys = sorted({k for r in chosen for k in r} - {"tokens"})
            per_split[name] = (toks, {k: [r.get(k) for r in chosen] for k in keys})

    tokens: list[list[int]] = []
    columns: dict[str, list[Any]] = {}
    split_idx: dict[str, np.ndarray] = {}
    for name, (toks, cols) in per_split.items():
        start = len(tokens)
        tokens.extend(toks)
        for k, v in cols.items():
            columns.setdefault(k, [None] * start).extend(v)
        for k in columns:
            if len(columns[k]) < len(tokens):
                columns[k].extend([None] * (len(tokens) - len(columns[k])))
        split_idx[name] = np.arange(start, len(tokens))
    if data.answer_column is not None:
        if data.answer_column not in columns:
            raise SuiteError(
                f"{suite.source}: [data] answer_column {data.answer_column!r} not in {sorted(columns)}"
            )
        golds = [str(g) for g in columns[data.answer_column]]
        if answers is None:
            from ..capture.generate import answer_correctness

            texts, correct = answer_correctness(
                model, tokens, golds, max_new_tokens=data.max_new_tokens, progress=progress
            )
        else:
            texts, correct = answers(tokens, golds)
        columns["greedy_answer"] = texts
        columns["correct"] = [int(c) for c in correct]
    for label in dict.fromkeys([data.label, *required_columns]):
        if label not in columns:
            raise SuiteError(
                f"{suite.source}: label column {label!r} not found; available columns: {sorted(columns)}"
            )
    out: dict[str, np.ndarray] = {}
    if data.train_split == data.test_split:
        idx = rng.permutation(split_idx[data.train_split])
        n_test = max(1, int(round(data.holdout_fraction * len(idx))))
        out["test"], out["train"] = np.sort(idx[:n_test]), np.sort(idx[n_test:])
    else:
        out["train"], out["test"] = split_idx[data.train_split], split_idx[data.test_split]
    for name in data.ood_splits:
        out[f"ood:{name}"] = split_idx[name]
    warn_leakage(tokens, out, source=str(suite.source))
    return Examples(tokens=tokens, columns=columns, splits=out, vocab=vocab)


def leaked_rows(tokens: Sequence[Sequence[int]], splits: dict[str, np.ndarray]) -> dict[str, int]:
    """Per evaluation split, how many of its prompts are token-for-token a training prompt."""
    train = {tuple(tokens[i]) for i in splits.get("train", ())}
    return {name: sum(tuple(tokens[i]) in train for i in idx)
            for name, idx in splits.items() if name != "train"}


def warn_leakage(tokens: Sequence[Sequence[int]], splits: dict[str, np.ndarray], *,
                 source: str) -> dict[str, int]:
    """Warn, naming the count, when held-out prompts are identical to training prompts.

    Such a row is not held out: a probe (or a memorising model) is scored on a prompt it was
    fit on. Returns the counts (splits with none left out).
    """
    counts = {k: v for k, v in leaked_rows(tokens, splits).items() if v}
    for name, count in counts.items():
        log.warning("%s: %d of the %d %r prompts are identical to a training prompt, so they "
                    "are not held out (leakage); remove them from the split or deduplicate the "
                    "data", source, count, len(splits[name]), name)
    return counts
