"""Read a marker table from a file: CSV, or JSON records (one row per model).

The table a diagnosis analyses (``markers.csv`` written by ``probekit diagnose``, or any table of
a population measured elsewhere, e.g. ``docs/diagnosis/he_noise/markers.csv``) as the mapping
``column -> list`` that :func:`probekit.diagnosis.marker_analysis` takes.

Types are inferred per column:

- **CSV**: a column whose non-empty cells all parse as numbers is numeric (``int`` when every
  cell is an integer literal, ``float`` otherwise); a column with no number at all is
  categorical (text). An **empty cell** is a missing value (``None``: "not applicable" in a
  marker column). A numeric column with a cell that is not a number, or ``nan`` / ``inf``
  written out, is an error naming ``FILE:LINE`` and the column (write an empty cell for "not
  applicable"); a column that is mostly text keeps its number-like cells as text.
- **Encoding**: UTF-8; a byte-order mark selects UTF-8/16/32 (Excel's "Unicode text" is
  UTF-16); other bytes that are not UTF-8 are read as Latin-1 with a warning
  (:func:`decode_table_text`).
- **JSON**: a list of records (objects), or ``{"records": [...]}``; ``null`` or an absent key is
  a missing value; JSON numbers and strings keep their types; a string in a numeric column is an
  error naming the record.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from probekit.errors import DataError
from probekit.util.integrity import check_sidecar

__all__ = ["decode_table_text", "read_marker_table"]

_FLOAT_MAX = sys.float_info.max


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


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))


def decode_table_text(path: Path) -> str:
    """The text of a table file: UTF-8, or the encoding its byte-order mark names, else Latin-1.

    A byte-order mark selects UTF-8/16/32 (Excel writes UTF-16 "Unicode text" with one). Bytes
    that are not UTF-8 without a mark are read as Latin-1 (every byte is a character there: a
    Western European spreadsheet export) with a warning naming the first such byte, since the
    guess can be wrong for other code pages.

    Raises:
        DataError: a byte-order mark whose encoding the bytes then do not follow.
    """
    data = path.read_bytes()
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError as err:
                raise DataError(f"{path}: starts with a {encoding} byte-order mark but byte "
                                f"{err.start} is not {encoding}; save the file as UTF-8") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        warnings.warn(f"{path}:{line}: byte 0x{data[err.start]:02x} is not UTF-8; read the file "
                      "as Latin-1 (ISO-8859-1); save it as UTF-8 if its text looks wrong",
                      stacklevel=3)
        return data.decode("latin-1")


def _read_csv(path: Path) -> dict[str, list[Any]]:
    with io.StringIO(decode_table_text(path), newline="") as f:
        reader = csv.reader(f)
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
        rows: list[tuple[int, list[str]]] = []
        for cells in reader:
            if not cells or all(not c.strip() for c in cells):
                continue  # a blank line
            if len(cells) != len(header):
                raise DataError(f"{path}:{reader.line_num}: {len(cells)} cells but the header has "
                                f"{len(header)} columns")
            rows.append((reader.line_num, [c.strip() for c in cells]))
    if not rows:
        raise DataError(f"{path}: no rows after the header; expected one row per model")
    table: dict[str, list[Any]] = {}
    for j, name in enumerate(header):
        cells = [(line, r[j]) for line, r in rows]
        present = [(line, c) for line, c in cells if c]
        parsed = {line: _number(c) for line, c in present}
        bad = [(line, c) for line, c in present if parsed[line] is None]
        if present and len(bad) == len(present) or 2 * len(bad) > len(present):
            table[name] = [c or None for _, c in cells]  # categorical
            continue
        if bad:
            line, c = bad[0]
            raise DataError(f"{path}:{line}: column {name!r}: {c!r} is not a number (the column's "
                            f"other cells are numbers); fix the cell, or leave it empty for a "
                            "missing / not-applicable value")
        for line, c in present:
            v = parsed[line]
            if isinstance(v, int) and abs(v) > _FLOAT_MAX:
                raise DataError(f"{path}:{line}: column {name!r}: a {len(c)}-digit number is beyond "
                                "the range of a float (about 1.8e308); rescale the column (e.g. "
                                "write its logarithm)")
            if isinstance(v, float) and not math.isfinite(v):
                raise DataError(f"{path}:{line}: column {name!r}: {c!r} is not a finite number; "
                                "leave the cell empty for a missing / not-applicable value")
        as_float = any(isinstance(v, float) for v in parsed.values())
        table[name] = [(float(parsed[line]) if as_float else parsed[line]) if c else None
                       for line, c in cells]
    return table


def _read_json(path: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(decode_table_text(path))
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
    return table


def _verify_csv(path: Path) -> None:
    """Check a table against the ``<name>.sha256`` probekit wrote beside it (if there is one).

    A table made elsewhere (no sidecar) is read as it is.
    """
    check_sidecar(path, what="marker table", fix=(
        f"rerun the diagnosis that wrote it (its cells are cached: nothing is measured again), or, "
        f"if you edited it on purpose, delete {path.name}.sha256"))


def read_marker_table(path: str | Path) -> dict[str, list[Any]]:
    """The table in ``path`` (``.csv``, or ``.json`` records) as ``column -> list`` (None: missing).

    Raises:
        DataError: a missing file, an unknown extension, a bad header, a ragged row, a bad
            number (``FILE:LINE`` and the column), no rows.
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
