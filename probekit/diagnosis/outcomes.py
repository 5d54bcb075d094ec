"""Outcome columns of a checkpoint: accuracy on every split by the testbed's own evaluation.

The evaluation is the trainer's (:func:`probekit.train.trainer.evaluate`: exact match per example,
or the task's ``primary_metric``, e.g. SCAN's token accuracy), on the splits of

* the ``[data]`` task when the file names one: the same examples for every checkpoint;
* otherwise each checkpoint's own training task (its ``config.json``), so that a design knob of
  the task (modular addition's train fraction) keeps its own held-out pairs.

Columns (the naming scheme of the marker table):

==================  ==========================================================================
``train_accuracy``  ``train`` split (``train_loss``: mean cross-entropy per scored token)
``id_accuracy``     ``test_id``, the in-distribution held-out split (``id_loss`` likewise)
``ood:NAME``        every other split ``NAME`` (``ood:ood_len_7``); splits named ``PREFIX_N``
                    also give their unweighted mean ``ood:PREFIX`` (SCAN's ``ood:ood_len``)
``COLUMN__n``       the number of evaluation examples behind each accuracy column (of an
                    ``ood:PREFIX`` mean: the sum over its splits); :func:`examples_column`
==================  ==========================================================================

``max_eval_examples`` evaluates a fixed seeded subset of each split (the same for every
checkpoint with the same task). The train columns are measured by this same evaluation, not read
from the run's history: every row (final or series checkpoint) is then measured the same way,
whatever the run's evaluation schedule was.

**Outcomes from the user's own evaluation file**: ``[outcome]`` of a diagnosis file.

::

    [outcome]
    file = "data/eval.jsonl"          # rows {"prompt": ..., "answer": ..., "split": ...}
    score = ["exact_match", "logprob"]  # one rule or several
    # name = "qa"                     # column prefix (default: the rule's name)
    # prepend_bos = false             # default: the model's own tokenizer default
    # max_per_split = 500             # a fixed seeded subset of each split ([diagnosis] seed)

Each split ``S`` of the file and each rule ``R`` give the outcome column ``R_S`` (``NAME_S`` with
a ``name`` and one rule, ``NAME_R_S`` with several), with the number of examples behind it in
``R_S__n`` (the table's ``COLUMN__n`` convention: the analysis flags an outcome whose
evaluation noise dominates its spread across models). The answer is tokenized on its own, as
written (put the leading space in it: ``" Paris"``), by the shared answer helper
(:func:`probekit.capture.answers.answer_token_ids`); the prompt by the model's tokenizer, never
truncated (:func:`probekit.inputs.tokenize_text`). With ``a = (a_1..a_L)`` the answer's tokens
and ``p`` the prompt's:

* ``exact_match``: 1 when the greedy continuation's first ``L`` tokens are ``a`` (token-level
  exact match; the continuation comes from probekit's one greedy decoder,
  :func:`probekit.capture.generate.greedy_continuations`, ``L_max`` steps for a batch);
* ``first_token``: 1 when the greedy first token is ``a_1`` (argmax of the next-token logits);
* ``logprob``: ``sum_t log p(a_t | p, a_<t)`` from one forward pass over ``p + a`` (nats), its
  mean over the split's examples being the column (per-example mean, not per token).

A column's value is the mean over the split's examples. A Python callable outcome
(``diagnose(..., outcome=fn)``, ``fn(model) -> {column: value}``; a ``COLUMN__n`` key gives its
example count) is computed in the same executor task and cached under the function's module,
name and source text.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..suites.spec import SuiteError, build_table, location
from ..train.history import read_history, read_run_meta
from ..util.io import sha256_bytes, sha256_file

__all__ = ["EvalOutcomeSpec", "EvalRow", "SCORES", "callable_identity", "callable_outcomes", "checkpoint_task", "crossing_column", "crossing_step", "eval_outcome_columns", "eval_outcome_names", "examples_column", "next_eval_step", "outcome_columns", "outcome_fingerprint", "outcome_names", "parse_outcome", "read_eval_rows", "split_column"]

TRAIN, ID = "train", "test_id"


def split_column(split: str, metric: str = "accuracy") -> str:
    """The table column of a split's metric: ``train_accuracy``, ``id_accuracy``, ``ood:NAME``."""
    if split == TRAIN:
        return f"train_{metric}"
    if split == ID:
        return f"id_{metric}"
    return f"ood:{split}" if metric == "accuracy" else f"ood_{metric}:{split}"


def examples_column(column: str) -> str:
    """The column holding the number of evaluation examples behind ``column``: ``COLUMN__n``."""
    return f"{column}__n"


def checkpoint_task(data: Any, meta: dict[str, Any]) -> Any:
    """The task whose splits are evaluated: ``[data] task`` if given, else the checkpoint's own."""
    from ..errors import ConfigError
    from ..testbeds import get_task, task_from_dict

    if data.task is not None:
        return get_task(data.task, **data.task_options)
    extra = meta.get("extra") or {}
    if "task" not in extra:
        raise ConfigError("checkpoint records no training task (config.json extra.task); name the "
                          "evaluation task in [data] task = \"...\"")
    return task_from_dict(extra["task"], {**extra["task_config"], **data.task_options})


def _subset(ds: Any, name: str, cap: int | None, seed: int) -> Any:
    if cap is None or len(ds) <= cap:
        return ds
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return ds.subset(np.sort(rng.choice(len(ds), size=cap, replace=False)).tolist())


def outcome_columns(
    model: Any, task: Any, *, max_examples: int | None = None, seed: int = 0,
) -> dict[str, float | int]:
    """Accuracy (and loss) of ``model`` on every split of ``task`` (see the module table)."""
    from ..train.trainer import evaluate

    metric = getattr(task, "primary_metric", "acc")
    out: dict[str, float] = {}
    groups: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    for name, ds in task.splits().items():
        if len(ds) == 0:
            continue
        sub = _subset(ds, name, max_examples, seed)
        res = evaluate(model, sub.to_tensors(task.vocab.pad_id))
        out[split_column(name)] = float(res[metric])
        out[examples_column(split_column(name))] = len(sub)
        if name in (TRAIN, ID):
            out[split_column(name, "loss")] = float(res["loss"])
        m = re.match(r"^(.*)_(\d+)$", name)
        if m and name not in (TRAIN, ID):
            groups.setdefault(m.group(1), []).append(float(res[metric]))
            sizes[m.group(1)] = sizes.get(m.group(1), 0) + len(sub)
    for prefix, values in groups.items():
        if len(values) > 1 and f"ood:{prefix}" not in out:
            out[f"ood:{prefix}"] = float(np.mean(values))
            out[examples_column(f"ood:{prefix}")] = sizes[prefix]
    return out


def outcome_names(splits: list[str]) -> set[str]:
    """The columns :func:`outcome_columns` gives for a task with these split names (no model run)."""
    out: set[str] = set()
    groups: dict[str, int] = {}
    for name in splits:
        out.add(split_column(name))
        out.add(examples_column(split_column(name)))
        if name in (TRAIN, ID):
            out.add(split_column(name, "loss"))
            continue
        m = re.match(r"^(.*)_(\d+)$", name)
        if m:
            groups[m.group(1)] = groups.get(m.group(1), 0) + 1
    out |= {c for p, k in groups.items() if k > 1 for c in (f"ood:{p}", examples_column(f"ood:{p}"))}
    return out


def crossing_column(threshold: float) -> str:
    """Name of the crossing-step column: ``id_step_0.9``."""
    return f"id_step_{threshold:g}"


def crossing_step(run_dir: str | Path, threshold: float) -> int | None:
    """First step whose history record has held-out (``test_id``) accuracy >= ``threshold``.

    The accuracy is the task's primary metric (``acc``; SCAN: ``token_acc``) as the trainer logged
    it (``history.json`` of the run). ``None`` when the run never reaches it or has no history.
    """
    from ..testbeds.registry import TASKS

    path = Path(run_dir) / "history.json"
    meta = Path(run_dir) / "run.json"
    if not path.is_file():
        return None
    task = read_run_meta(meta).get("task") if meta.is_file() else None
    metric = getattr(TASKS[task][0], "primary_metric", "acc") if task in TASKS else "acc"
    for rec in read_history(run_dir).get("records", []):
        value = rec.get(f"{ID}/{metric}")
        if value is not None and value >= threshold:
            return int(rec["step"])
    return None


def next_eval_step(run_dir: str | Path) -> int | None:
    """One evaluation past the run's last held-out evaluation: ``last + (last - previous)``.

    From the steps of the ``history.json`` records with a held-out (``test_id``) metric; the
    censoring value ``"next_eval"`` of a crossing-step outcome. ``None`` with fewer than two.
    """
    path = Path(run_dir) / "history.json"
    if not path.is_file():
        return None
    steps = sorted({int(rec["step"]) for rec in read_history(run_dir).get("records", [])
                    if any(k.startswith(f"{ID}/") for k in rec)})
    return 2 * steps[-1] - steps[-2] if len(steps) >= 2 else None


#: the scoring rules of ``[outcome] score``
SCORES = ("exact_match", "first_token", "logprob")
SECTION = "outcome"


@dataclass(frozen=True, kw_only=True)
class EvalOutcomeSpec:
    """``[outcome]``: the evaluation file and its scoring rules.

    Attributes:
        file: JSONL of prompt/answer/split rows (relative to the diagnosis file).
        score: one of :data:`SCORES` or a list of them.
        name: column prefix (default: each rule's name).
        prompt_column, answer_column, split_column: the row keys.
        prepend_bos: passed to the tokenizer for the prompt (``None``: the model's default).
        max_per_split: evaluate a fixed seeded subset of at most this many rows per split.
        batch_size: prompts per forward pass.
        base: the diagnosis file's folder (set by :func:`parse_outcome`; ``file`` is relative to it).
    """

    file: str
    score: str | tuple[str, ...] = "exact_match"
    name: str | None = None
    prompt_column: str = "prompt"
    answer_column: str = "answer"
    split_column: str = "split"
    prepend_bos: bool | None = None
    max_per_split: int | None = None
    batch_size: int = 16
    base: str = ""

    @property
    def scores(self) -> tuple[str, ...]:
        """The rules as a tuple."""
        return (self.score,) if isinstance(self.score, str) else tuple(self.score)

    @property
    def path(self) -> Path:
        """The evaluation file's absolute path."""
        p = Path(self.file)
        return p if p.is_absolute() else Path(self.base) / p

    def column(self, score: str, split: str) -> str:
        """The outcome column of ``score`` on ``split`` (see the module docstring)."""
        if self.name is None:
            return f"{score}_{split}"
        return f"{self.name}_{split}" if len(self.scores) == 1 else f"{self.name}_{score}_{split}"


@dataclass(frozen=True)
class EvalRow:
    """One evaluation example: its split, prompt, answer and ``FILE:LINE``."""

    split: str
    prompt: str
    answer: str
    where: str


def parse_outcome(raw: Any, path: Path, text: str) -> EvalOutcomeSpec | None:
    """``[outcome]`` validated (``FILE:LINE: [outcome] key`` errors), its file read once.

    Raises:
        SuiteError: an unknown rule, a missing file, or a row without a string prompt, answer
            or split (``FILE:LINE:COLUMN`` of the row).
    """
    if raw is None:
        return None
    spec = build_table(EvalOutcomeSpec, raw, path, text, SECTION)
    spec = dataclasses.replace(spec, base=str(path.parent.resolve()))
    scores = spec.scores
    bad = [s for s in scores if s not in SCORES]
    if not scores or bad:
        raise SuiteError(f"{location(path, text, SECTION, 'score')} = {spec.score!r}: "
                         f"{'no rule' if not scores else f'unknown rule {bad[0]!r}'}; choose from "
                         f"{list(SCORES)}")
    if len(set(scores)) != len(scores):
        raise SuiteError(f"{location(path, text, SECTION, 'score')}: a rule is given twice in "
                         f"{list(scores)}")
    if spec.max_per_split is not None and spec.max_per_split < 1:
        raise SuiteError(f"{location(path, text, SECTION, 'max_per_split')} = "
                         f"{spec.max_per_split}: must be >= 1 or unset")
    if spec.batch_size < 1:
        raise SuiteError(f"{location(path, text, SECTION, 'batch_size')} = {spec.batch_size}: "
                         "must be >= 1")
    from ..errors import DataError

    try:
        read_eval_rows(spec)
    except DataError as err:
        raise SuiteError(f"{location(path, text, SECTION, 'file')}: {err}") from None
    return spec


def read_eval_rows(spec: EvalOutcomeSpec, *, seed: int = 0) -> list[EvalRow]:
    """The file's rows (at most ``max_per_split`` per split, a seeded subset), in file order.

    Raises:
        DataError: a missing file, or a row whose prompt, answer or split is not a non-empty
            string (``FILE:LINE:COLUMN``).
    """
    from ..errors import DataError
    from ..inputs import read_jsonl

    if not spec.path.is_file():
        raise DataError(f"evaluation file {spec.file!r} not found ({spec.path}); give a JSONL of "
                        f"{{\"{spec.prompt_column}\": ..., \"{spec.answer_column}\": ..., "
                        f"\"{spec.split_column}\": ...}} rows, relative to the diagnosis file")
    rows = []
    for r in read_jsonl(spec.path):
        values = []
        for col in (spec.split_column, spec.prompt_column, spec.answer_column):
            v = r.data.get(col)
            if not isinstance(v, str) or not v.strip():
                raise DataError(f"{r.at(col)}: {col!r} = {v!r}; every row needs a non-empty "
                                f"string {col!r}")
            values.append(v)
        rows.append(EvalRow(values[0], values[1], values[2], r.where))
    if spec.max_per_split is None:
        return rows
    keep: list[int] = []
    for split in dict.fromkeys(r.split for r in rows):
        idx = [i for i, r in enumerate(rows) if r.split == split]
        if len(idx) > spec.max_per_split:
            rng = np.random.default_rng([seed, zlib.crc32(split.encode())])
            idx = sorted(rng.choice(idx, size=spec.max_per_split, replace=False).tolist())
        keep += idx
    return [rows[i] for i in sorted(keep)]


def eval_outcome_names(spec: EvalOutcomeSpec) -> set[str]:
    """The columns (and ``__n`` columns) :func:`eval_outcome_columns` gives (no model run).

    Built in full and checked (:func:`probekit.diagnosis.columns.check_generated`): a split
    whose column would coincide with another column (``capitals__n`` is the example count of
    ``capitals``) is refused, naming both.
    """
    return set(_generated(spec, dict.fromkeys(r.split for r in read_eval_rows(spec))))


def _generated(spec: EvalOutcomeSpec, splits: Iterable[str]) -> list[str]:
    """Every column of ``spec``'s scores on ``splits``, in order, checked for collisions."""
    from .columns import check_generated

    cols = []
    for s in spec.scores:
        for split in splits:
            col = spec.column(s, split)
            what = f"score {s!r} on split {split!r}"
            cols += [(col, what, False), (examples_column(col), f"the example count of {what}", True)]
    return check_generated(cols, f"{spec.file}: [outcome]")


def _answer_logprobs(model: Any, prompts: list[list[int]], answers: list[list[int]],
                     batch_size: int) -> list[float]:
    """``sum_t log p(a_t | p, a_<t)`` per example, one right-padded forward over ``p + a``."""
    import torch

    from ..capture.batching import iter_batches, model_device, pad_id_of
    from ..capture.runner import run_batch

    seqs = [p + a for p, a in zip(prompts, answers, strict=True)]
    out: list[float] = []
    device = model_device(model)
    with torch.inference_mode():
        for batch in iter_batches(seqs, batch_size=batch_size, pad_id=pad_id_of(model), side="right"):
            logp = torch.log_softmax(run_batch(model, batch.to(device)).double(), dim=-1)
            for row, i in enumerate(batch.example_ids.tolist()):
                n_p, ans = len(prompts[i]), answers[i]
                pos = torch.arange(n_p - 1, n_p - 1 + len(ans), device=logp.device)
                out.append(float(logp[row, pos, torch.tensor(ans, device=logp.device)].sum()))
    return out


def eval_outcome_columns(model: Any, spec: EvalOutcomeSpec, *, seed: int = 0) -> dict[str, float | int]:
    """Every rule on every split of the file for ``model`` (see the module docstring).

    Raises:
        DataError: a prompt longer than the model's context, or an answer with no tokens
            (``FILE:LINE``).
    """
    from ..capture.answers import answer_token_ids
    from ..capture.generate import greedy_continuations
    from ..errors import DataError
    from ..inputs import tokenize_text

    rows = read_eval_rows(spec, seed=seed)
    _generated(spec, dict.fromkeys(r.split for r in rows))  # the load-time rule, on these rows
    prompts = [tokenize_text(model, r.prompt, prepend_bos=spec.prepend_bos, where=r.where)
               for r in rows]
    answers = []
    for r in rows:
        ids = answer_token_ids(model, r.answer)
        if not ids:
            raise DataError(f"{r.where}: answer {r.answer!r} has no tokens; give a non-empty answer")
        answers.append(ids)
    per: dict[str, list[float]] = {}
    if {"exact_match", "first_token"} & set(spec.scores):
        steps = max(len(a) for a in answers) if "exact_match" in spec.scores else 1
        conts = greedy_continuations(model, prompts, max_new_tokens=steps,
                                     batch_size=spec.batch_size)
        per["exact_match"] = [float(c[:len(a)] == a) for c, a in zip(conts, answers, strict=True)]
        per["first_token"] = [float(c[0] == a[0]) for c, a in zip(conts, answers, strict=True)]
    if "logprob" in spec.scores:
        per["logprob"] = _answer_logprobs(model, prompts, answers, spec.batch_size)
    out: dict[str, float | int] = {}
    for score in spec.scores:
        for split in dict.fromkeys(r.split for r in rows):
            idx = [i for i, r in enumerate(rows) if r.split == split]
            col = spec.column(score, split)
            out[col] = float(np.mean([per[score][i] for i in idx]))
            out[examples_column(col)] = len(idx)
    return out


def callable_identity(fn: Callable[..., Any]) -> str:
    """Cache identity of a callable outcome: module, qualified name and source digest."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = repr(fn)
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
    return f"{name}:{sha256_bytes(source.encode())[:12]}"


def callable_outcomes(fn: Callable[..., Any], model: Any) -> dict[str, float | int]:
    """``fn(model)`` checked: a mapping of column names to finite numbers.

    Raises:
        DataError: not a mapping, a key that is not a non-empty string, or a value that is not a
            finite number (naming the function and the key).
    """
    import math

    from ..errors import DataError

    name = getattr(fn, "__qualname__", repr(fn))
    res = fn(model)
    if not isinstance(res, Mapping):
        raise DataError(f"outcome function {name} returned {type(res).__name__}; return a dict "
                        "{column: value}, e.g. {\"my_acc\": 0.8, \"my_acc__n\": 200}")
    out: dict[str, float | int] = {}
    for k, v in res.items():
        if not isinstance(k, str) or not k:
            raise DataError(f"outcome function {name}: column {k!r} is not a non-empty string")
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not math.isfinite(float(v)):
            raise DataError(f"outcome function {name}: column {k!r} = {v!r}; give a finite number")
        out[k] = int(v) if k.endswith("__n") else float(v)
    return out


def outcome_fingerprint(spec: EvalOutcomeSpec | None, fn: Callable[..., Any] | None) -> dict[str, Any]:
    """What the user outcomes depend on besides the model (part of the outcome cell key)."""
    out: dict[str, Any] = {}
    if spec is not None:
        out["eval"] = {**dataclasses.asdict(spec), "base": None, "sha256": sha256_file(spec.path)}
    if fn is not None:
        out["callable"] = callable_identity(fn)
    return out
