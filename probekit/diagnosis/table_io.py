"""Read a marker table from a file (CSV, or JSON records) into a pandas DataFrame.

The table a diagnosis analyses (``markers.csv`` written by ``probekit diagnose``, or any table of
a population measured elsewhere, e.g. ``docs/diagnosis/he_noise/markers.csv``) as the
``pandas.DataFrame`` that :func:`probekit.diagnosis.marker_analysis` takes (one row per model;
a mapping ``column -> list`` is accepted there too).

Types are inferred per column, and give the column's dtype:

- **CSV**: a column whose non-empty cells all parse as numbers (Python's ``int()`` /
  ``float()``) is numeric: ``Int64`` (pandas' nullable integer, missing = ``pd.NA``) when every
  cell is an integer literal, ``float64`` (missing = NaN) otherwise; a column with no number at
  all is categorical (text): ``object`` holding ``str``, missing = ``None``. An **empty cell** is
  a missing value ("not applicable" in a marker column); a column with no value at all is an
  all-NaN ``float64`` column. A numeric column with a cell that is not a number, or ``nan`` /
  ``inf`` written out, is an error naming ``FILE:LINE`` and the column (write an empty cell for
  "not applicable"); a column that is mostly text keeps its number-like cells as text.
  Integers beyond the range of a float are refused; integer columns beyond int64 (but within
  the float range) stay ``object`` columns of Python ints.
- **Encoding**: the one decoder of user text files (:func:`probekit.textfile.read_text`): UTF-8;
  a byte-order mark selects UTF-8/16/32 (Excel's "Unicode text" is UTF-16); UTF-16/32 without
  a mark is told by its NUL bytes; other bytes that are not UTF-8 are read as Latin-1 with a
  warning (``fallback="latin-1"``: a Western European spreadsheet export).
- **JSON**: a list of records (objects), or ``{"records": [...]}``; ``null`` or an absent key is
  a missing value; JSON numbers and strings keep their types (:func:`marker_frame`); a string
  in a numeric column is an error naming the record.

:func:`to_columns` turns a DataFrame back into ``column -> list`` (None for every missing cell,
Python ints / floats / strings): the form the report's ``table`` and the runner's analysis
read. :func:`marker_csv` writes a table as CSV text, byte-identical to ``csv.writer`` on the
cells (empty for missing; floats as ``repr``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from probekit.errors import DataError
from probekit.textfile import read_text
from probekit.util.integrity import check_sidecar

__all__ = ["marker_csv", "marker_frame", "read_marker_table", "to_columns"]

_FLOAT_MAX = sys.float_info.max
_INT64_MAX = 2**63 - 1
#: the integer literals Python's ``int()`` takes (``\d`` is any Unicode decimal digit, as there)
_INT_LITERAL = r"[+-]?\d+(?:_\d+)*"


def _number(text: str) -> int | float | None:
    """``int`` / ``float`` of a CSV cell, or None when it is not a number."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _record_lines(path: Path, text: str) -> tuple[list[str], list[int]]:
    """The header and, per non-blank record, the line where it starts (the csv module, one pass).

    ``pandas.read_csv`` gives no source line numbers (and a record's quoted cell may span lines),
    so the ``FILE:LINE`` of the errors comes from this map; it also refuses the header and
    ragged-row faults before pandas sees the text.
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: empty file; expected a header line of column names") from None
    header = [h.strip() for h in header]
    if not all(header):
        raise DataError(f"{path}:1: empty column name in the header ({header})")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise DataError(f"{path}:1: column {dup[0]!r} appears twice in the header")
    lines: list[int] = []
    end = reader.line_num
    for cells in reader:
        start, end = end + 1, reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue  # a blank line
        if len(cells) != len(header):
            raise DataError(f"{path}:{start}: {len(cells)} cells but the header has "
                            f"{len(header)} columns")
        lines.append(start)
    if not lines:
        raise DataError(f"{path}: no rows after the header; expected one row per model")
    return header, lines


def _read_csv(path: Path) -> pd.DataFrame:
    text = read_text(path, fallback="latin-1")
    header, lines = _record_lines(path, text)
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, index_col=False,
                          skip_blank_lines=True)
    except pd.errors.ParserError as err:  # the csv module reads an open quote to the end
        raise DataError(f"{path}:{lines[-1]}: the record starting here does not parse ({err}); "
                        "most likely a quoted cell is not closed (an unmatched '\"'): close "
                        "the quote or remove it") from None
    raw = raw.fillna("")  # the missing trailing cells of a whitespace-only line
    cells = pd.DataFrame({h: raw.iloc[:, j].str.strip() for j, h in enumerate(header)})
    cells = cells[(cells != "").any(axis=1)].reset_index(drop=True)  # blank lines, as above
    if len(cells) != len(lines):
        raise DataError(f"{path}: pandas read {len(cells)} rows but the csv module "
                        f"{len(lines)}; check the file's quoting (an unmatched '\"')")
    line_of = np.asarray(lines)
    return pd.DataFrame({name: _typed_column(path, name, cells[name], line_of)
                         for name in header})


def _typed_column(path: Path, name: str, cells: pd.Series, line_of: np.ndarray) -> pd.Series:
    """One CSV column typed by the module's rules; errors name ``FILE:LINE`` and the column.

    Vectorised: ``pd.to_numeric`` finds the cells that are numbers; the few it does not read
    (text, ``nan`` / ``inf`` words, numbers beyond the float range, ``1_000``) are decided by
    Python's ``int()`` / ``float()`` as before. The values come from ``Series.astype(float)``,
    which is correctly rounded like ``float()``; ``pd.to_numeric``'s own parser is not (it
    changed the last bit of 30% of 80,000 random ``repr`` floats, pandas 2.3), and a shipped
    table must read back to the numbers that were written.
    """
    present = cells != ""
    if not present.any():
        return pd.Series(np.nan, index=cells.index, dtype="float64")
    s = cells[present]
    parsed = pd.to_numeric(s, errors="coerce")
    is_number = parsed.notna()
    unread = s[~is_number]
    if len(unread):
        is_number[unread.index] = unread.map(lambda c: _number(c) is not None).astype(bool)
    n_bad = int((~is_number).sum())
    if n_bad == len(s) or 2 * n_bad > len(s):  # categorical: every cell kept as text
        return cells.astype(object).where(present, None)
    if n_bad:
        i = s.index[~is_number][0]
        raise DataError(f"{path}:{line_of[i]}: column {name!r}: {s[i]!r} is not a number (the "
                        "column's other cells are numbers); fix the cell, or leave it empty for a "
                        "missing / not-applicable value")
    values = pd.Series(np.nan, index=s.index, dtype="float64")
    try:
        values[:] = s.astype("float64").to_numpy()
    except (ValueError, OverflowError):  # `1_000`, other digit scripts: Python's float(), per cell
        for i in s.index:
            try:
                values[i] = float(_number(s[i]))  # type: ignore[arg-type]
            except OverflowError:  # an integer literal beyond the float range
                values[i] = math.inf
    bad = ~np.isfinite(values.to_numpy())
    if bad.any():
        i = s.index[bad][0]
        if re.fullmatch(_INT_LITERAL, s[i]):
            raise DataError(f"{path}:{line_of[i]}: column {name!r}: a {len(s[i])}-digit number "
                            "is beyond the range of a float (about 1.8e308); rescale the column "
                            "(e.g. write its logarithm)")
        raise DataError(f"{path}:{line_of[i]}: column {name!r}: {s[i]!r} is not a finite number; "
                        "leave the cell empty for a missing / not-applicable value")
    v = values.to_numpy()
    all_int = parsed.dtype.kind in "iu" or (  # pandas read every cell as an integer, or:
        bool((v == np.floor(v)).all()) and bool(s.str.fullmatch(_INT_LITERAL).all()))
    if not all_int:
        out = pd.Series(np.nan, index=cells.index, dtype="float64")
        out[present] = values
        return out
    out = pd.Series(pd.NA, index=cells.index, dtype="Int64")
    if parsed.dtype.kind == "i":  # int64 already: exact
        out[present] = parsed.to_numpy()
        return out
    ints = [int(c) for c in s]
    if max(abs(k) for k in ints) > _INT64_MAX:
        col = pd.Series([None] * len(cells), index=cells.index, dtype=object)
        col[present] = pd.Series(ints, index=s.index, dtype=object)
        return col
    out[present] = np.asarray(ints, dtype=np.int64)
    return out


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) or (
        isinstance(v, np.floating) and bool(np.isnan(v)))


def _column(values: Sequence[Any]) -> pd.Series:
    """A column of cells as a typed Series (the dtypes of :func:`read_marker_table`).

    Every present cell an integer (not a bool) -> ``Int64`` (``object`` of Python ints beyond
    int64); every present cell a float -> ``float64``; every present cell a string -> ``object``
    with None for missing; anything else (ints mixed with floats, bools, a column mixing
    numbers and text) -> ``object`` keeping each cell as it is, so that writing it back gives
    the same text and :func:`~probekit.diagnosis.statistics.table.as_marker_table` judges it as before.
    """
    cells = [None if _missing(v) else (v.item() if isinstance(v, np.generic) else v)
             for v in values]
    present = [v for v in cells if v is not None]
    if not present:
        return pd.Series(np.nan, index=range(len(cells)), dtype="float64")
    if all(isinstance(v, Integral) and not isinstance(v, bool) for v in present):
        if max(abs(int(v)) for v in present) <= _INT64_MAX:
            return pd.Series(cells, dtype="Int64")
    elif all(isinstance(v, float) for v in present):
        return pd.Series([np.nan if v is None else v for v in cells], dtype="float64")
    return pd.Series(cells, dtype=object)


def marker_frame(table: Mapping[str, Any] | pd.DataFrame) -> pd.DataFrame:
    """A marker table (mapping ``column -> sequence``, or a DataFrame) as a typed DataFrame.

    A DataFrame is returned as it is; a mapping's columns are typed by :func:`_column`.
    """
    if isinstance(table, pd.DataFrame):
        return table
    return pd.DataFrame({str(name): _column(list(values)) for name, values in table.items()})


def to_columns(frame: pd.DataFrame | Mapping[str, Any]) -> dict[str, list[Any]]:
    """``column -> list`` of a table: None for a missing cell (NA / NaN), Python scalars.

    The inverse of :func:`marker_frame` on its typed columns (``to_columns(marker_frame(t)) ==
    t`` for a table of ints, floats, strings and None).
    """
    if not isinstance(frame, pd.DataFrame):
        return {k: [None if _missing(v) else v for v in vs] for k, vs in frame.items()}
    out: dict[str, list[Any]] = {}
    for name in frame.columns:
        col = frame[name]
        missing = col.isna().to_numpy()
        out[str(name)] = [None if m else v for v, m in zip(col.tolist(), missing, strict=True)]
    return out


def marker_csv(table: pd.DataFrame | Mapping[str, Any]) -> str:
    """The table as CSV text: a header line, one line per row, LF line ends, empty = missing.

    ``DataFrame.to_csv`` of :func:`marker_frame`: the same bytes ``csv.writer`` gives for the
    cells (floats by ``repr``, minimal quoting), so a rewritten ``markers.csv`` keeps its digest.
    """
    return marker_frame(table).to_csv(index=False, lineterminator="\n")


def _read_json(path: Path) -> pd.DataFrame:
    try:
        data = json.loads(read_text(path, fallback="latin-1"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: invalid JSON: {err.msg}") from None
    if isinstance(data, dict) and "records" in data:
        data = data["records"]
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        raise DataError(f"{path}: expected a non-empty list of records (objects, one per model) "
                        "or {\"records\": [...]}")
    names = list(dict.fromkeys(k for r in data for k in r))
    table: dict[str, list[Any]] = {}
    for name in names:
        values = [r.get(name) for r in data]
        for i, v in enumerate(values):
            if isinstance(v, bool) or not (v is None or isinstance(v, (int, float, str))):
                raise DataError(f"{path}: record {i}, key {name!r}: {v!r} is not a number, a "
                                "string or null")
            if isinstance(v, float) and not math.isfinite(v):
                raise DataError(f"{path}: record {i}, key {name!r}: {v!r} is not finite; use "
                                "null for a missing / not-applicable value")
        kinds = {isinstance(v, str) for v in values if v is not None}
        if len(kinds) == 2:
            i = next(i for i, v in enumerate(values) if isinstance(v, str))
            raise DataError(f"{path}: record {i}, key {name!r}: {values[i]!r} is text but the "
                            "column's other values are numbers; write a number or null")
        table[name] = values
    return marker_frame(table)


def _verify_csv(path: Path) -> None:
    """Check a table against the ``<name>.sha256`` probekit wrote beside it (if there is one).

    A table made elsewhere (no sidecar) is read as it is.
    """
    check_sidecar(path, what="marker table", fix=(
        f"rerun the diagnosis that wrote it (its cells are cached: nothing is measured again), or, "
        f"if you edited it on purpose, delete {path.name}.sha256"))


def read_marker_table(path: str | Path) -> pd.DataFrame:
    """The table in ``path`` (``.csv``, or ``.json`` records) as a typed DataFrame.

    One row per model (index ``0..n-1``); the dtypes of the module docstring (``Int64``,
    ``float64``, ``object`` text; missing = NA / NaN / None). :func:`to_columns` gives the
    ``column -> list`` form.

    Raises:
        DataError: a missing file, an unknown extension, a bad header, a ragged row, a quoted
            cell never closed, a bad number (``FILE:LINE`` where the record starts, and the
            column), no rows.
        CorruptFileError: a table that differs from the sha256 its ``.sha256`` sidecar records.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"marker table {path} not found (expected a .csv or .json file of one "
                        "row per model, e.g. the markers.csv a probekit diagnose run wrote)")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        _verify_csv(path)
        return _read_csv(path)
    if suffix == ".json":
        return _read_json(path)
    raise DataError(f"{path}: unknown table format {suffix!r}; give a .csv or a .json file")
