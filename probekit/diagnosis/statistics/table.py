"""The marker table of a diagnosis: validation and normalisation (docs/diagnosis.md).

A marker table has one row per model (checkpoint) and named columns: design knobs (noise,
seed, ...), outcomes (ID / OOD accuracy) and markers. It is given as a mapping ``column ->
sequence`` or a pandas DataFrame (detected by duck typing; pandas is never imported here).

Columns are **numeric** (ints, floats, bools; ``None`` / NaN mark a missing cell) or
**categorical** (strings). As covariates, columns are coded by what they are
(:meth:`MarkerTable.design`, :mod:`probekit.diagnosis.statistics.coding`): text and few-valued numbers as
factors (one-hot, the first level in sorted order dropped), many-valued numbers as natural cubic
splines. Missing cells are allowed only in marker columns, where they mean "not
applicable to this model"; the outcome, the covariates and the groups must be complete.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Number
from typing import Any, Literal

import numpy as np
from jaxtyping import Bool, Float, Int

from probekit.errors import ConfigError, DataError

__all__ = ["MarkerTable", "as_marker_table"]

Kind = Literal["numeric", "categorical"]


def _is_missing(v: Any) -> bool:
    if v is None or type(v).__name__ == "NAType":  # pandas' NA (nullable Int64 / string columns)
        return True
    try:
        return isinstance(v, Number) and not isinstance(v, bool) and math.isnan(float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # complex, or an int beyond the float range
        return False


def _rows(mask: np.ndarray, limit: int = 8) -> str:
    idx = np.flatnonzero(mask).tolist()
    text = ", ".join(str(i) for i in idx[:limit])
    return text + (f", ... ({len(idx)} rows)" if len(idx) > limit else "")


@dataclass(frozen=True)
class MarkerTable:
    """A validated table: one entry per column, all of one length ``n_rows``.

    Attributes:
        columns: column name -> object array of the cells (``None`` for a missing cell).
        kinds: column name -> ``"numeric"`` or ``"categorical"`` (a column with no value at all
            counts as numeric).
        n_rows: number of rows (models).
    """

    columns: dict[str, np.ndarray]
    kinds: dict[str, Kind]
    n_rows: int

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in table order."""
        return tuple(self.columns)

    def check_distinct_rows(self) -> None:
        """Refuse rows identical in every column: one model given twice is not two models.

        Raises:
            DataError: naming the repeated rows (0-based) and the fix.
        """
        dups = _duplicate_rows(self.columns, self.n_rows) if self.n_rows > 1 else []
        if dups:
            shown = "; ".join(", ".join(str(i) for i in rows) for rows in dups[:3])
            raise DataError(
                f"rows {shown} (0-based) are identical in every column: one model given "
                f"{len(dups[0])} times would be counted as {len(dups[0])} models; drop the "
                f"repeated rows ({sum(len(r) - 1 for r in dups)} in all), or add the column that "
                "tells them apart (e.g. checkpoint or seed)"
            )

    def check_names(self, names: Sequence[str], role: str) -> None:
        """Raise ``ConfigError`` naming the first unknown column and listing the valid ones."""
        for name in names:
            if name not in self.columns:
                raise ConfigError(
                    f"{role} column {name!r} is not in the table; valid columns: "
                    f"{', '.join(repr(c) for c in self.columns)}"
                )

    def missing(self, name: str) -> Bool[np.ndarray, " n"]:
        """True where the cell of ``name`` is missing (``None`` / NaN)."""
        return np.array([_is_missing(v) for v in self.columns[name]], dtype=bool)

    def numeric(self, name: str, role: str, *, allow_missing: bool = False) -> Float[np.ndarray, " n"]:
        """Column ``name`` as float64 (NaN where missing, only when ``allow_missing``).

        Raises:
            ConfigError: unknown column.
            DataError: a categorical column, or missing / infinite cells where none are allowed.
        """
        self.check_names([name], role)
        if self.kinds[name] != "numeric":
            raise DataError(
                f"{role} column {name!r} holds text ({self.columns[name][0]!r}, ...) but a number "
                "per row is needed; use a numeric column, or pass it as a covariate "
                "(one-hot coded)"
            )
        miss = self.missing(name)
        out = np.array([np.nan if m else float(v) for v, m in zip(self.columns[name], miss, strict=True)])
        if miss.any() and not allow_missing:
            raise DataError(
                f"{role} column {name!r} has missing (None/NaN) cells in rows {_rows(miss)}; "
                f"the {role} must be complete: drop those rows or fill them"
            )
        inf = np.isinf(out)
        if inf.any():
            raise DataError(
                f"{role} column {name!r} has infinite values in rows {_rows(inf)}; pass finite "
                "numbers (or None for a not-applicable marker cell)"
            )
        return out

    def codes(self, name: str, role: str) -> tuple[Int[np.ndarray, " n"], tuple[Any, ...]]:
        """Integer codes of a complete column (numeric or text) and its levels in sorted order."""
        self.check_names([name], role)
        miss = self.missing(name)
        if miss.any():
            raise DataError(
                f"{role} column {name!r} has missing (None/NaN) cells in rows {_rows(miss)}; "
                "every row needs a value"
            )
        values = [v.item() if hasattr(v, "item") else v for v in self.columns[name]]
        levels = tuple(sorted(set(values), key=lambda v: (str(type(v)), v)))
        index = {v: i for i, v in enumerate(levels)}
        return np.array([index[v] for v in values], dtype=np.int64), levels

    def design(
        self, names: Sequence[str], coding: Mapping[str, str] | None = None, spline_df: int = 4,
        groups: str | None = None,
    ) -> tuple[Float[np.ndarray, "n p"], tuple[str, ...]]:
        """Covariate matrix (without intercept), each covariate coded by what it is.

        Codings (:mod:`probekit.diagnosis.statistics.coding`): a text column, a numeric column with at most
        10 distinct values some of which repeat, and the seed / ``groups`` column are
        **factors** by default: levels
        ``l_0 < l_1 < ...`` (sorted; numbers by value) give indicator columns ``NAME=l_1,
        NAME=l_2, ...`` (``l_0`` dropped, absorbed by the intercept). A numeric column with more
        distinct values is a centred natural cubic **spline** with ``spline_df`` columns
        ``NAME[spline 1/df] ... NAME[spline df/df]``. ``"linear"`` enters the column as is
        (one term ``NAME``): the default only for a numeric column with at most 10 values, all
        distinct (a measured covariate of a tiny population, which a factor would saturate).

        Args:
            names: the covariates, in order.
            coding: column -> ``"factor" | "linear" | "spline"``, overriding the default.
            spline_df: columns of a spline term (>= 2).
            groups: the resampling groups column (like ``seed``, refused as a number).

        Raises:
            ConfigError: a coding for a column that is not among ``names``, an unknown coding,
                a text column as a number, the seed / groups column as a number (the fix
                named), a spline on too few distinct values.
            DataError: missing or infinite covariate cells.
        """
        from .coding import check_spline_df, resolve_coding, spline_basis

        spline_df = check_spline_df(spline_df)
        coding = dict(coding or {})
        self.check_names(names, "covariate")
        stray = [c for c in coding if c not in names]
        if stray:
            raise ConfigError(f"covariate_coding names {stray[0]!r}, which is not a covariate; "
                              f"the covariates are {list(names)}")
        cols: list[np.ndarray] = []
        labels: list[str] = []
        for name in names:
            kind = self.kinds[name]
            if kind == "categorical":
                code, levels = self.codes(name, "covariate")
                shown = [str(v) for v in levels]
                _note_numbers_as_text(name, levels)
            else:
                x = self.numeric(name, "covariate")
                values, code = np.unique(x, return_inverse=True)
                first = {}
                for v, k in zip(self.columns[name], code.tolist(), strict=True):
                    first.setdefault(k, v)
                shown = [str(first[k].item() if hasattr(first[k], "item") else first[k])
                         for k in range(values.size)]
            how = resolve_coding(name, kind, len(shown), coding, groups=groups,
                                 spline_df=spline_df, n_rows=self.n_rows,
                                 min_level_count=int(np.bincount(code).min()) if len(shown)
                                 else None)
            if how == "factor":
                for k in range(1, len(shown)):
                    cols.append((code == k).astype(np.float64))
                    labels.append(f"{name}={shown[k]}")
            elif how == "linear":
                cols.append(x)
                labels.append(name)
            else:
                basis = spline_basis(x, spline_df)
                for j in range(spline_df):
                    cols.append(basis[:, j])
                    labels.append(f"{name}[spline {j + 1}/{spline_df}]")
        X = np.column_stack(cols) if cols else np.zeros((self.n_rows, 0))
        return X, tuple(labels)


def _as_number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _note_numbers_as_text(name: str, levels: Sequence[Any]) -> None:
    """Warn when a text covariate holds numbers written as text (coded as a factor, not a number).

    ``["0.1", "0.2", ...]`` from a JSON file, or a CSV column where a few cells are text, would
    otherwise be one-hot coded without a word: a dose as unordered levels.
    """
    numbers = [v for v in levels if _as_number(str(v)) is not None]
    if not numbers:
        return
    if len(numbers) == len(levels):
        warnings.warn(
            f"covariate {name!r} holds numbers written as text ({', '.join(repr(v) for v in levels[:3])}"
            f"{', ...' if len(levels) > 3 else ''}): coded as a factor of {len(levels)} unordered "
            "levels; write them as numbers to code the column as a number", stacklevel=4)
    else:
        text = [v for v in levels if _as_number(str(v)) is None]
        warnings.warn(
            f"covariate {name!r} is mostly text ({len(text)} text level(s), e.g. {text[0]!r}) but "
            f"{len(numbers)} level(s) are numbers (e.g. {numbers[0]!r}): the whole column is coded "
            "as a factor; fix the cells if it is a number column", stacklevel=4)


def _cells(table: Any) -> dict[str, list[Any]]:
    if hasattr(table, "columns") and hasattr(table, "to_dict") and hasattr(table, "__getitem__") \
            and not isinstance(table, Mapping):  # a pandas DataFrame, by duck typing
        return {str(c): [None if m else v for v, m in zip(table[c].tolist(), table[c].isna().tolist(),
                                                           strict=True)]
                for c in table.columns}  # NA / NaN -> None
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"table must be a mapping column -> sequence or a pandas DataFrame, got "
            f"{type(table).__name__}"
        )
    out: dict[str, list[Any]] = {}
    for name, values in table.items():
        if not isinstance(name, str):
            raise ConfigError(f"column names must be strings, got {name!r}")
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise DataError(
                f"column {name!r} must be a sequence of one value per row, got "
                f"{type(values).__name__}"
            )
        arr = np.asarray(values, dtype=object)
        if arr.ndim != 1:
            raise DataError(f"column {name!r} must be one-dimensional, got shape {arr.shape}")
        out[name] = list(values.tolist() if hasattr(values, "tolist") else values)
    return out


def _kind(name: str, values: list[Any]) -> Kind:
    present = [v for v in values if not _is_missing(v)]
    text = [isinstance(v, str) for v in present]
    if all(text) and present:
        return "categorical"
    if any(text):
        i = next(i for i, v in enumerate(values) if not _is_missing(v) and not isinstance(v, str))
        j = next(i for i, v in enumerate(values) if isinstance(v, str))
        raise DataError(
            f"column {name!r} mixes numbers and text (row {i}: {values[i]!r}, row {j}: "
            f"{values[j]!r}); use one type per column"
        )
    for i, v in enumerate(values):
        if _is_missing(v):
            continue
        if not isinstance(v, (Number, np.number)) or isinstance(v, (complex, np.complexfloating)):
            raise DataError(
                f"column {name!r} row {i} has a value of type {type(v).__name__} ({_shown(v)}); "
                "cells must be real numbers, strings or None"
            )
        try:
            finite = math.isfinite(float(v))  # type: ignore[arg-type]
        except OverflowError:
            finite = False
        if not finite and not isinstance(v, (float, np.floating)):
            raise DataError(
                f"column {name!r} row {i} holds {_shown(v)}, beyond the range of a float "
                "(about 1.8e308); rescale the column (e.g. write its logarithm)"
            )
    return "numeric"


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} characters)"


def _duplicate_rows(columns: dict[str, np.ndarray], n_rows: int) -> list[list[int]]:
    """Groups (>= 2) of rows equal in every column (numbers by value)."""
    seen: dict[tuple[Any, ...], list[int]] = {}
    for i in range(n_rows):
        key = tuple(float(c[i]) if isinstance(c[i], (Number, np.number)) and not isinstance(
            c[i], bool) else c[i] for c in columns.values())
        seen.setdefault(key, []).append(i)
    return [rows for rows in seen.values() if len(rows) > 1]


def as_marker_table(table: Any) -> MarkerTable:
    """Validate ``table`` (mapping column -> sequence, or a pandas DataFrame).

    Raises:
        ConfigError: not a mapping / DataFrame, or non-string column names.
        DataError: ragged columns (both lengths named), an empty table, mixed-type columns,
            complex numbers or integers beyond the float range.
    """
    if isinstance(table, MarkerTable):
        return table
    cells = _cells(table)
    if not cells:
        raise DataError("the table has no columns; pass one column per design knob, outcome and marker")
    lengths = {name: len(v) for name, v in cells.items()}
    first = next(iter(lengths))
    for name, n in lengths.items():
        if n != lengths[first]:
            raise DataError(
                f"ragged table: column {first!r} has {lengths[first]} rows but column {name!r} "
                f"has {n}; every column needs one value per model (None for a not-applicable "
                "marker cell)"
            )
    n_rows = lengths[first]
    if n_rows == 0:
        raise DataError("the table has no rows; pass one row per model")
    kinds = {name: _kind(name, v) for name, v in cells.items()}
    columns = {}
    for name, v in cells.items():
        arr = np.empty(n_rows, dtype=object)
        arr[:] = [None if _is_missing(x) else x for x in v]
        columns[name] = arr
    return MarkerTable(columns=columns, kinds=kinds, n_rows=n_rows)
