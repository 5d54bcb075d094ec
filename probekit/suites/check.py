"""Checks of a suite's data file before its model loads: ``FILE:LINE`` errors in milliseconds.

A JSONL ``[data] file`` must parse line by line, hold ``text`` or ``tokens`` in every row, a
split column naming the suite's splits, and every label column the probes use (a row without
its label is an error naming the row, unless ``[data] drop_missing_labels = true``). Columns the
suite names (``answer_column``, ``control_column``, a ``column:NAME`` position) must exist.
"""

from __future__ import annotations

import logging

from ..inputs import JsonlRow, position_column, read_jsonl, require_columns, token_ids
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
            if "tokens" not in row.data and "text" not in row.data:
                raise SuiteError(f"{row.where}: row has neither 'text' nor 'tokens'")
            if "tokens" in row.data:
                token_ids(row)
        if data.split_column not in {k for r in rows for k in r.data}:
            raise SuiteError(
                f"{suite.source}: [data] split_column {data.split_column!r} is not a column of "
                f"{path}"
            )
        wanted = {data.train_split, data.test_split, *data.ood_splits}
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
        if suite.capture.positions.startswith("column:"):
            name = suite.capture.positions.split(":", 1)[1]
            if name not in columns:
                raise SuiteError(
                    f"{suite.source}: [capture] positions column {name!r} is not a column of "
                    f"{path}; columns: {sorted(columns)}"
                )
            position_column(kept, name)
    except SuiteError:
        raise
    except ValueError as err:
        raise SuiteError(str(err)) from None
    dropped_ids = {id(r) for r in dropped}
    return [r for r in rows if id(r) not in dropped_ids]
