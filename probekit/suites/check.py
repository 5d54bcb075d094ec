"""Checks of a suite's data file before its model loads: ``FILE:LINE`` errors in milliseconds.

A JSONL ``[data] file`` must parse line by line, hold ``text`` or ``tokens`` in every row, a
split column naming the suite's splits, and every label column the probes use (a row without
its label is an error naming the row, unless ``[data] drop_missing_labels = true``). Columns the
suite names (``answer_column``, ``control_column``, a ``column:NAME`` position) must exist.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..inputs import (
    JsonlRow,
    check_positions,
    check_scalar_column,
    position_column,
    prompt_column,
    read_jsonl,
    require_columns,
    token_ids,
)
from .spec import Suite, SuiteError

log = logging.getLogger("probekit")

GENERATED_COLUMNS = ("greedy_answer", "correct")  # added by the runner when answer_column is set


def check_suite_data(suite: Suite) -> list[JsonlRow] | None:
    """Validate the suite's JSONL data file; return its usable rows (None for task data).

    Raises:
        SuiteError: naming the suite file and the data ``FILE:LINE`` of the first problem.
    """
    data = suite.data
    if data.file is None:
        return None
    path = suite.resolve(data.file)
    try:
        rows = read_jsonl(path)
    except ValueError as err:
        raise SuiteError(f"{suite.source}: [data] file: {err}") from None
    try:
        for row in rows:
            if prompt_column(row) == "tokens":
                token_ids(row)
        if data.split_column not in {k for r in rows for k in r.data}:
            raise SuiteError(
                f"{suite.source}: [data] split_column {data.split_column!r} is not a column of "
                f"{path}"
            )
        wanted = {data.train_split, data.test_split, *data.ood_splits}
        _normalise_splits(rows, data.split_column, wanted, path)
        used = [r for r in rows if r.data.get(data.split_column) in wanted]
        generated = set(GENERATED_COLUMNS) if data.answer_column is not None else set()
        spec_labels = (getattr(a, "label", None) for a in suite.analyses)
        labels = sorted({data.label, *(c for c in spec_labels if isinstance(c, str))} - generated)
        required = [*labels, *([data.answer_column] if data.answer_column else [])]
        columns = {k for r in rows for k in r.data}
        for name, key in ((data.control_column, "control_column"),
                          (data.answer_column, "answer_column"), *((c, "label") for c in labels)):
            if name is not None and name not in columns:
                raise SuiteError(
                    f"{suite.source}: [data] {key} {name!r} is not a column of {path}; "
                    f"columns: {sorted(columns)}"
                )
        for name in dict.fromkeys([data.train_split, data.test_split, *data.ood_splits]):
            if not any(r.data.get(data.split_column) == name for r in rows):
                have = sorted({str(r.data.get(data.split_column)) for r in rows})
                raise SuiteError(
                    f"{suite.source}: [data] split {name!r} has no rows in {path} (column "
                    f"{data.split_column!r} holds {have}); fix the split names"
                )
        kept, dropped = require_columns(
            used, required, drop=data.drop_missing_labels,
            flag="[data] drop_missing_labels = true",
        )
        if dropped:
            log.warning("dropped %d rows of %s without a label (first: %s)",
                        len(dropped), path, dropped[0].where)
        for name in labels:
            check_scalar_column(kept, name, what="a class label or a number")
            _normalise_numbers(kept, name, path)
        if suite.capture.positions.startswith("column:"):
            name = suite.capture.positions.split(":", 1)[1]
            if name not in columns:
                raise SuiteError(
                    f"{suite.source}: [capture] positions column {name!r} is not a column of "
                    f"{path}; columns: {sorted(columns)}"
                )
            positions = position_column(kept, name)
            with_tokens = [(p, r) for p, r in zip(positions, kept) if "tokens" in r.data]
            check_positions([p for p, _ in with_tokens],  # text rows: checked once tokenized
                            [len(token_ids(r)) for _, r in with_tokens],
                            [r.at(name) for _, r in with_tokens], name)
    except SuiteError:
        raise
    except ValueError as err:
        raise SuiteError(str(err)) from None
    dropped_ids = {id(r) for r in dropped}
    return [r for r in rows if id(r) not in dropped_ids]


def _normalise_numbers(rows: Sequence[JsonlRow], column: str, path: Path) -> None:
    """Write whole floats of a label column as ints when the column also holds ints (a warning).

    ``1`` and ``1.0`` are one number, but as class names (``str``) they are two classes: a
    label column mixing them would score three classes for two. Only a column holding both
    spellings is changed (a column of floats keeps ``"1.0"`` as its class name).
    """
    ints = [r for r in rows if type(r.data.get(column)) is int]
    whole = [r for r in rows if isinstance(r.data.get(column), float)
             and r.data[column].is_integer()]
    if not ints or not whole:
        return
    values = sorted({int(r.data[column]) for r in whole} & {r.data[column] for r in ints})
    for r in whole:
        r.data[column] = int(r.data[column])
    shown = ", ".join(f"{v} and {float(v)!r}" for v in values[:3]) or "none shared yet"
    log.warning("%s: label column %r holds whole numbers written both as ints and as floats "
                "(%s; first float: %s); each float is read as its int, so they are one class "
                "each", path, column, shown, whole[0].at(column))


def _normalise_splits(rows: Sequence[JsonlRow], column: str, wanted: set[str], path: Path) -> None:
    """Rename split values that differ from a suite split only in case or spaces, with a warning.

    ``"Test"`` or ``" test"`` for the split ``"test"`` would otherwise leave the row out without
    a word. A value matching two suite splits case-insensitively is refused; values that match
    none are listed in a warning (their rows are not used).

    Raises:
        SuiteError: a value that matches two suite splits up to case.
    """
    by_fold: dict[str, list[str]] = {}
    for name in wanted:
        by_fold.setdefault(name.strip().casefold(), []).append(name)
    renamed: dict[str, tuple[str, int, str]] = {}
    unused: dict[str, int] = {}
    for row in rows:
        value = row.data.get(column)
        if value in wanted or value is None:
            continue
        text = str(value)
        match = by_fold.get(text.strip().casefold(), [])
        if len(match) > 1:
            raise SuiteError(f"{row.at(column)}: split {text!r} matches the splits {sorted(match)} "
                             "up to case; write the split name exactly")
        if match and isinstance(value, str):
            row.data[column] = match[0]
            first = renamed.setdefault(text, (match[0], 0, row.where))
            renamed[text] = (first[0], first[1] + 1, first[2])
        else:
            unused[text] = unused.get(text, 0) + 1
    for text, (name, count, where) in renamed.items():
        log.warning("%s: %d rows have split %r, read as the split %r (case or spaces differ; "
                    "first: %s); write %r to silence this", path, count, text, name, where, name)
    if unused:
        shown = ", ".join(f"{v!r} ({n} rows)" for v, n in sorted(unused.items()))
        log.warning("%s: rows with split values the suite does not name are not used: %s "
                    "(the suite's splits: %s)", path, shown, sorted(wanted))


def model_config_limits(suite: Suite) -> dict[str, int]:
    """The suite model's ``d_vocab``/``n_ctx``/``n_layers``/``n_heads`` from its ``config.json``.

    Empty when the model is not a local directory yet (a registered name before its first
    conversion, or ``[model.train]`` before training).
    """
    from ..inputs import peek_model_limits

    ref = suite.model.checkpoint or suite.model.name
    if ref is None:
        return {}
    path = suite.resolve(ref) if suite.model.checkpoint else Path(ref).expanduser()
    return peek_model_limits(path) if path is not None and path.is_dir() else {}


def _layer_refs(spec: Any) -> list[tuple[str, int]]:
    """``(key = value, layer)`` for every layer a spec names (``layer``, ``layers``, ``site[s]``)."""
    from ..sites import Site

    out: list[tuple[str, int]] = []
    for key in ("layer", "layers", "site", "sites"):
        value = getattr(spec, key, None)
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool):
                out.append((f"{key} = {v}", v))
            elif isinstance(v, str) and v != "all":
                try:
                    site = Site.parse(v)
                except (ValueError, KeyError):
                    continue  # the spec's own validation names a malformed site
                if site.layer is not None:
                    out.append((f"{key} = {v!r}", site.layer))
    return out


def data_task(suite: Suite) -> Any:
    """The task named in [data], else the model's training task.

    That is ``[model.train]``'s, or the task a probekit checkpoint records in its config.json.
    """
    from ..models.checkpoint import read_checkpoint_meta
    from ..testbeds import get_task, task_from_dict
    from .model import training_task

    if suite.data.task is not None:
        return get_task(suite.data.task, **suite.data.task_options)
    if suite.model.train is not None:
        return training_task(suite.model.train)
    extra = read_checkpoint_meta(suite.resolve(suite.model.checkpoint))["extra"]
    if "task" not in extra:
        raise SuiteError(
            f"{suite.source}: [data] names no task or file and checkpoint "
            f"{suite.model.checkpoint} records no training task; add [data] task = \"...\""
        )
    return task_from_dict(extra["task"], {**extra["task_config"], **suite.data.task_options})


def check_task_vocab(suite: Suite, limits: dict[str, int] | None = None) -> None:
    """A testbed task's vocabulary fits the model's embedding (``d_vocab``).

    The examples of a ``[data] task`` (or of the checkpoint's own task with ``task_options``,
    e.g. a larger ``p``) hold token ids up to the task's vocabulary size; the run would refuse
    the first id beyond the model's ``d_vocab`` only when it captures, after the model loaded.
    Checked from ``config.json`` and the task's definition; a JSONL file's ids are checked row
    by row instead (:func:`probekit.inputs.check_vocab`).

    Raises:
        SuiteError: ``FILE: [data] task 'modular_addition' {'p': 113}: 115 tokens, but the
            model's vocabulary has 55 (ids 0..54) ...``.
    """
    limits = model_config_limits(suite) if limits is None else limits
    data = suite.data
    if "d_vocab" not in limits or (data.task is None and (data.file is not None
                                                          or not data.task_options)):
        return  # a file, or the checkpoint's own task unchanged: its vocabulary is the model's
    check_vocab_fits(data_task(suite), data, limits["d_vocab"], str(suite.source))


def check_vocab_fits(task: Any, data: Any, d_vocab: int, where: str, *,
                     model: str = "the model") -> None:
    """The rule of :func:`check_task_vocab`: ``task``'s vocabulary within ``d_vocab`` ids.

    Shared by the suites and claim files and the diagnosis (``[data] task`` on checkpoints).

    Raises:
        SuiteError: ``WHERE: [data] task 'modular_addition': 115 tokens, but the model's
            vocabulary has 55 (ids 0..54); ...``.
    """
    vocab = getattr(task, "vocab", None)
    size = len(vocab) if vocab is not None else None
    if size is not None and size > d_vocab:
        name = repr(data.task) if data.task else "(the checkpoint's task)"
        options = f" with {dict(data.task_options)}" if data.task_options else ""
        raise SuiteError(f"{where}: [data] task {name}{options}: {size} tokens, but the vocabulary "
                         f"of {model} has {d_vocab} (ids 0..{d_vocab - 1}); use the task the "
                         "model was trained on (its options) or a model with a larger vocabulary")


def check_suite_model(
    suite: Suite, rows: list[JsonlRow] | None, *, claims: Sequence[tuple[str, Any]] = (),
) -> list[str]:
    """Everything checkable against the model's ``config.json`` and the data, without a forward.

    Layers named by ``[capture] sites``, every analysis and every claim (``claims``: ``(name,
    spec)``) must exist; token rows must fit the vocabulary and the context; each classification
    probe's label must have >= 2 training classes and a class with >= ``cv`` examples
    (:func:`~probekit.probes.splits.check_class_splits`). Returns the warnings (degenerate
    splits that would make a test "not testable").

    Raises:
        SuiteError: naming the suite file and the bad value.
    """
    import numpy as np

    from ..errors import DataError
    from ..inputs import check_vocab, token_ids

    limits = model_config_limits(suite)
    n_layers = limits.get("n_layers")
    if n_layers is not None:
        named = [("[capture]", suite.capture)]
        named += [(f"[[{type(a).__name__.removesuffix('Spec').lower()}]]", a) for a in suite.analyses]
        named += [(f"[[claim]] {name!r}", spec) for name, spec in claims]
        for where, spec in named:
            for text, layer in _layer_refs(spec):
                if not 0 <= layer < n_layers:
                    raise SuiteError(
                        f"{suite.source}: {where} {text}: layer {layer} out of range; the model "
                        f"({suite.model.checkpoint or suite.model.name}) has {n_layers} layers "
                        f"(0..{n_layers - 1})"
                    )
    check_task_vocab(suite, limits)
    warnings: list[str] = []
    if rows is None:
        return warnings
    data = suite.data
    token_rows = [r for r in rows if "tokens" in r.data]
    try:
        seqs = [token_ids(r) for r in token_rows]
        if "d_vocab" in limits:
            check_vocab(seqs, limits["d_vocab"], [r.at("tokens") for r in token_rows])
        for r, seq in zip(token_rows, seqs):
            if "n_ctx" in limits and len(seq) > limits["n_ctx"]:
                raise SuiteError(f"{r.at('tokens')}: {len(seq)} tokens but the model's context is "
                                 f"{limits['n_ctx']}; shorten the example")
        if data.train_split != data.test_split:
            from ..probes.kind import probe_kind, registered_probe_kinds
            from ..probes.splits import check_class_splits

            for spec in suite.analyses:
                kind = getattr(spec, "kind", None)  # a [[probe]] table's classifier kinds only
                if kind not in registered_probe_kinds() or not probe_kind(kind).is_classifier:
                    continue
                label = getattr(spec, "label", None) or data.label
                use = [r for r in rows if r.data.get(data.split_column) in
                       (data.train_split, data.test_split) and label in r.data]
                y = [r.data[label] for r in use]
                train = [i for i, r in enumerate(use)
                         if r.data.get(data.split_column) == data.train_split]
                test = [i for i, r in enumerate(use)
                        if r.data.get(data.split_column) == data.test_split]
                split = check_class_splits(y, np.asarray(train, dtype=np.int64),
                                           np.asarray(test, dtype=np.int64),
                                           cv=getattr(spec, "cv", None),
                                           name=f"[[probe]] label {label!r}")
                warnings += [*split.problems, *split.warnings]
    except DataError as err:
        raise SuiteError(f"{suite.source}: {err}") from None
    return warnings
