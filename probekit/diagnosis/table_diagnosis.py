"""Diagnose a population from an existing marker table: no training, no forward pass.

Two entries, one analysis (the runner's own :func:`~probekit.diagnosis.runner._analyse`: marker
analysis, granulated tau / CMI, level means, early warning when the table has series rows):

- a **table diagnosis file**, whose ``[population]`` names a table instead of models::

      [suite]
      name = "he_noise"
      description = "An & Du's noise sweep, from its table"

      [population]
      table = "../docs/diagnosis/he_noise/markers.csv"   # .csv or .json records, relative to the file
      where = { he_lambda = 0.0 }     # optional: keep rows whose column equals a value (or is in a list)
      knobs = ["noise"]               # optional: the design knobs (default: inferred, see below)

      [diagnosis]
      outcome = "ood_accuracy"
      markers = ["modifier_he", "sequence_he"]   # default: the numeric columns not otherwise used
      covariates = ["noise", "id_accuracy"]      # default: the knobs and id_accuracy
      groups = "seed"                            # default: "seed", else a seed-named column (init, run, rep, ...)
      color_by = "noise"                         # default: the first knob

- ``probekit diagnose FILE.toml --table markers.csv``: a regular diagnosis file (its
  ``[[marker]]`` names and ``[diagnosis]``) re-analysed on a table it wrote before (or any table
  with those columns), e.g. with another ``[diagnosis]``.

Knobs, when not given: every column that varies over the analysed rows and is not the outcome,
a marker, the groups, ``checkpoint / run / step / final``, an outcome-like column (``train_*``,
``id_*``, ``ood*``, ``final_*``) or a text identifier (a different value on every row); when
the markers are not named either, a numeric column is a knob only if it is a covariate (the
other numeric columns are the markers).
Empty cells are missing values: allowed in marker columns (a "not applicable" cell), an error in
the outcome, the covariates and the groups.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError, DataError
from ..report.blocks import Text, strict_json
from ..suites.spec import SuiteError, build_suite, build_table, location, read_toml
from ..util.integrity import write_sidecar
from ..util.io import atomic_write_text, sha256_bytes
from .display import DiagnosisDisplay
from .question import Columns, Settings, resolve_settings
from .spec import (
    CausalPair,
    DiagnosisFile,
    DiagnosisSettings,
    PopulationSpec,
    _plain,
    build_diagnosis_section,
    causal_lines,
    check_causal_pairs,
    check_censored_outcome,
    parse_causal_pairs,
)
from .table_io import marker_frame, read_marker_table, to_columns

__all__ = [
    "TableDiagnosis",
    "TableDiagnosisResult",
    "diagnose_table",
    "is_table_diagnosis",
    "load_table_diagnosis",
    "table_diagnosis_from_file",
]

FIXED = ("checkpoint", "run", "step", "final")
_OUTCOME_PREFIXES = ("train_", "id_", "ood", "final_")
#: the table name of a diagnosis of a DataFrame given in Python (``diagnose_table(..., table=df)``)
_GIVEN = "(DataFrame)"
#: [diagnosis] keys of a computed population only
_COMPUTED_ONLY = ("max_eval_examples", "crossing")


@dataclass(frozen=True, kw_only=True)
class TableDiagnosis:
    """A diagnosis of an existing table.

    Attributes:
        source: the file the question comes from (table diagnosis file or diagnosis file).
        text: its text (``FILE:LINE`` messages).
        name, description: ``[suite]``.
        table: the table file (resolved).
        where: column -> value or list of values; rows kept when every column matches.
        knobs: the design knobs (None: inferred).
        markers: marker columns (None: every numeric column not otherwise used).
        diagnosis: the ``[diagnosis]`` settings (outcome, covariates, groups, color_by, ...).
        interventions: ``[population] interventions`` (knob -> target marker arms).
        origin: ``[population]``, ``[[marker]]`` and ``[data]`` of the diagnosis file whose
            question this is (``probekit diagnose FILE --table``): the report's Population
            section shows the grid and the marker definitions from it.
        marker_flags: marker -> flags known from the diagnosis file's marker definitions
            (``measured_on_outcome_examples``: the marker reads the outcome's split), kept
            when its question is asked of a saved table.
    """

    source: Path
    text: str = field(repr=False)
    name: str
    description: str = ""
    table: Path
    where: dict[str, Any] = field(default_factory=dict)
    knobs: tuple[str, ...] | None = None
    markers: tuple[str, ...] | None = None
    diagnosis: DiagnosisSettings
    interventions: tuple[CausalPair, ...] = ()
    origin: dict[str, Any] | None = None
    marker_flags: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def at(self, section: str, key: str | None = None, index: int = 0) -> str:
        """``FILE:LINE: [section] key`` of a key of the source file (as a diagnosis file's)."""
        return location(self.source, self.text, section, key, index)

    def to_dict(self) -> dict[str, Any]:
        """JSON form mirroring the TOML."""
        return {"suite": {"name": self.name, "description": self.description},
                "population": {"table": _shown(self.table), "where": self.where,
                               "knobs": None if self.knobs is None else list(self.knobs),
                               "interventions": [p.to_dict("target")
                                                 for p in self.interventions]},
                "diagnosis": {**_plain(dataclasses.asdict(self.diagnosis)),
                              "markers": None if self.markers is None else list(self.markers)},
                **({"origin": self.origin} if self.origin else {})}


@dataclass(frozen=True, kw_only=True)
class _PopulationTable:
    """``[population]`` of a table diagnosis file."""

    table: str
    where: dict[str, Any] = field(default_factory=dict)
    knobs: tuple[str, ...] | None = None


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when below it (reports move), else absolute."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def is_table_diagnosis(path: str | Path) -> bool:
    """True when the TOML file's ``[population]`` names a ``table`` (False if unreadable)."""
    try:
        _, _, raw = read_toml(path, what="diagnosis")
    except SuiteError:
        return False
    pop = raw.get("population")
    return isinstance(pop, dict) and "table" in pop


def load_table_diagnosis(path: str | Path) -> TableDiagnosis:
    """Parse a table diagnosis file; errors are ``FILE:LINE: [section] key ...``."""
    path, text, raw = read_toml(path, what="diagnosis")
    valid = ["suite", "population", "diagnosis"]
    unknown = sorted(set(raw) - set(valid))
    if unknown:
        raise SuiteError(f"{location(path, text, unknown[0])}: unknown section in a table "
                         f"diagnosis (the table gives the models and the markers); valid "
                         f"sections are {valid}")
    for section in ("population", "diagnosis"):
        if section not in raw:
            raise SuiteError(f"{path}: missing section [{section}]")
    suite = build_suite(path, text, {"suite": raw.get("suite", {}),
                                     "model": {"train": {"preset": "(population)"}}, "data": {"label": "(table)"}})
    pop_raw = dict(raw["population"]) if isinstance(raw["population"], dict) else raw["population"]
    interventions = (parse_causal_pairs(pop_raw, "interventions", path, text, "population")
                     if isinstance(pop_raw, dict) else ())
    pop = build_table(_PopulationTable, pop_raw, path, text, "population")
    d = dict(raw["diagnosis"])
    markers = d.pop("markers", None)
    for key in _COMPUTED_ONLY:
        if key in d:
            raise SuiteError(f"{location(path, text, 'diagnosis', key)}: only a computed "
                             "population (checkpoints or preset) takes this key; a table is "
                             "analysed as it is")
    if markers is not None and (not isinstance(markers, list) or not markers
                                or not all(isinstance(m, str) for m in markers)):
        raise SuiteError(f"{location(path, text, 'diagnosis', 'markers')} = {markers!r}: expected "
                         "a non-empty list of column names")
    settings = build_diagnosis_section(d, path, text)
    if settings.censor is not None:
        where = location(path, text, "diagnosis", "censor")
        if settings.censor == "next_eval":
            raise SuiteError(f"{where} = \"next_eval\": a table holds no training history to "
                             "find the next evaluation; give the censoring step as a number "
                             "(e.g. one evaluation past the end of training)")
        check_censored_outcome(settings, where)
    for column, value in pop.where.items():
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, (int, float, str)) for v in values):
            raise SuiteError(f"{location(path, text, 'population', 'where')}: {column} = "
                             f"{value!r}: expected a number, a string or a list of them")
    return TableDiagnosis(
        source=path, text=text, name=suite.name, description=suite.description,
        table=(path.parent / pop.table).resolve() if not Path(pop.table).is_absolute()
        else Path(pop.table), where=dict(pop.where),
        knobs=None if pop.knobs is None else tuple(pop.knobs),
        markers=None if markers is None else tuple(markers), diagnosis=settings,
        interventions=interventions,
    )


def table_diagnosis_from_file(spec: DiagnosisFile, table: str | Path) -> TableDiagnosis:
    """A regular diagnosis file's question (its marker names, ``[diagnosis]``) on ``table``."""
    from .options import marker_flags

    return TableDiagnosis(source=spec.source, text=spec.text, name=spec.name,
                          description=spec.suite.description, table=Path(table),
                          markers=tuple(m.name for m in spec.markers), diagnosis=spec.diagnosis,
                          interventions=spec.population.interventions,
                          origin={k: v for k, v in spec.to_dict().items()
                                  if k in ("population", "marker", "data")},
                          marker_flags=marker_flags(spec.markers, spec.diagnosis.outcome,
                                                    spec.suite.data))


def _select_rows(spec: TableDiagnosis, table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` that ``[population] where`` keeps (index ``0..k-1``).

    A cell matches a wanted number by value (``2 == 2.0``; a missing cell matches nothing) and a
    wanted string by equality (the rule of :func:`_same`).
    """
    if not spec.where:
        return table
    keep = np.ones(len(table), dtype=bool)
    for column, value in spec.where.items():
        if column not in table.columns:
            raise ConfigError(f"{spec.at('population', 'where')}: column {column!r} is not in "
                              f"{spec.table}; columns are {list(table.columns)}")
        wanted = value if isinstance(value, list) else [value]
        keep &= _matches(table[column], wanted)
    if not keep.any():
        raise ConfigError(f"{spec.at('population', 'where')}: no row of {spec.table} matches "
                          f"{spec.where}")
    return table[keep].reset_index(drop=True)


def _matches(column: pd.Series, wanted: list[Any]) -> np.ndarray:
    """Per cell, whether it equals one of ``wanted`` (:func:`_same`, vectorised)."""
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        numbers = [float(w) for w in wanted if isinstance(w, (int, float))]
        return column.astype("float64").isin(numbers).to_numpy()
    return column.isin(wanted).to_numpy()


def _same(cell: Any, wanted: Any) -> bool:
    if isinstance(cell, (int, float)) and isinstance(wanted, (int, float)):
        return float(cell) == float(wanted)
    return cell == wanted


def _outcome_like(name: str) -> bool:
    return name.startswith(_OUTCOME_PREFIXES)


def _varies(values: list[Any]) -> bool:
    return len({repr(v) for v in values}) > 1


def _censored(spec: TableDiagnosis, table: dict[str, list[Any]]) -> Any:
    """The crossing outcome with its empty cells (runs that never cross) set to ``censor``.

    None without ``[diagnosis] censor``. The table's rows are models (``final`` = 1); the raw
    column stays in markers.csv, the analysis and the survival curve read this one
    (:func:`probekit.diagnosis.statistics.survival.censor_crossing`).
    """
    from .statistics.survival import censor_crossing

    d = spec.diagnosis
    if d.censor is None:
        return None
    if d.outcome not in table:
        return None  # table_question names the missing column
    try:
        return censor_crossing(table, d.outcome, float(d.censor))
    except DataError as err:
        raise ConfigError(f"{spec.at('diagnosis', 'censor')}: {err}") from err


def _auto_groups(spec: TableDiagnosis, table: dict[str, list[Any]], finals: list[int]) -> str | None:
    """``[diagnosis] groups`` unset: ``seed``, else a seed-named column (:mod:`.statistics.grouping`)."""
    from .statistics.grouping import resolve_groups
    from .statistics.table import as_marker_table

    d = spec.diagnosis
    cols = [c for c in table if c not in FIXED]
    rows = finals or list(range(len(table[cols[0]]) if cols else 0))
    try:
        t = as_marker_table({c: [table[c][i] for i in rows] for c in cols})
    except DataError:  # an unusable table: the checks below name what is wrong with it
        return "seed" if "seed" in table else None
    named = [c for c in (spec.markers or ()) if c in table]
    covs = tuple(c for c in (d.covariates or ()) if c in table)
    try:
        return resolve_groups(t, "auto", taken=(d.outcome, *covs, *named), covariates=covs,
                              none='""')[0]
    except ConfigError as err:
        raise ConfigError(f"{spec.at('diagnosis', 'groups')}: {err}") from None


def _question(spec: TableDiagnosis, frame: pd.DataFrame) -> tuple[Any, ...]:
    """The rules of a table diagnosis on its rows, shared by ``--check`` and the run.

    Returns ``(rows, internal, censored, settings, markers)``: the rows as column lists, the
    same with final flags, the censored crossing outcome (None without ``censor``), the
    resolved question and the marker columns.
    """
    # the seam: the runner's analysis reads column lists (None = missing), as of its own table;
    # its statistics turn them into arrays where they read them
    rows = to_columns(frame)
    internal = dict(rows)
    # a table without final flags, or rows chosen by `where` among which none is a final
    # checkpoint (e.g. where = { step = 300 }: each run's early checkpoint): every row is a model
    if "final" not in internal or not any(_same(f, 1) for f in internal["final"]):
        internal["final"] = [1] * len(frame)
    censored = _censored(spec, internal)
    outcome = spec.diagnosis.outcome  # the column checks see the outcome as analysed
    settings, markers = table_question(spec, rows if censored is None
                                  else {**rows, outcome: censored.table[outcome]})
    return rows, internal, censored, settings, markers


def table_question(spec: TableDiagnosis, table: dict[str, list[Any]]) -> tuple[Settings, list[str]]:
    """The table's question (the one resolver, :func:`.question.resolve_settings`) and markers.

    What a table offers: every column may be a design column; groups default to ``seed`` or
    the one seed-named column (:func:`_auto_groups`); the knobs are ``[population] knobs``, else
    the varying columns that are neither the outcome, the groups, a marker nor outcome-like;
    the markers are ``[diagnosis] markers``, else the numeric varying columns left over.
    """
    d = spec.diagnosis
    columns = list(table)
    finals = ([i for i, f in enumerate(table["final"]) if f] if "final" in table
              else list(range(len(table[columns[0]]))))
    analysed = finals or list(range(len(table[columns[0]])))  # no final row: every row a model

    def need(name: str, key: str, role: str) -> None:
        if name not in table:
            raise ConfigError(f"{spec.at('diagnosis', key)}: {role} {name!r} is not a column of "
                              f"{spec.table}; columns are {columns}")

    need(d.outcome, "outcome", "the outcome")
    if spec.markers is not None:
        for m in spec.markers:
            need(m, "markers", "marker")
    if spec.knobs is not None:
        for k in spec.knobs:
            if k not in table:
                raise ConfigError(f"{spec.at('population', 'knobs')}: knob {k!r} is not a column "
                                  f"of {spec.table}; columns are {columns}")

    def knobs_of(groups: str | None) -> tuple[str, ...]:
        if spec.knobs is not None:
            return tuple(spec.knobs)
        taken = {d.outcome, *FIXED, *([groups] if groups else [])}
        chosen = set(spec.markers or ())
        return tuple(
            c for c in columns if c not in taken and c not in chosen and not _outcome_like(c)
            and (spec.markers is not None or not _numeric(table[c]) or c in (d.covariates or ()))
            and _varies([table[c][i] for i in finals])
            and not (not _numeric(table[c]) and len({table[c][i] for i in finals}) == len(finals)))

    cols = Columns(names=columns, design=columns, knobs=knobs_of, source=str(spec.table),
                   levels=lambda c: [table[c][i] for i in analysed],
                   default_groups=lambda: _auto_groups(spec, table, finals))
    s = resolve_settings(d, cols, lambda key: spec.at("diagnosis", key))
    taken = {d.outcome, *FIXED, *([s.groups] if s.groups else [])}
    if spec.markers is not None:
        markers = list(spec.markers)
    else:
        used = taken | set(s.covariates) | set(s.knobs)
        markers = [c for c in columns if c not in used and not _outcome_like(c)
                   and _numeric(table[c]) and _varies([table[c][i] for i in finals])]
        if not markers:
            raise ConfigError(f"{spec.at('diagnosis')}: no marker column left in {spec.table} "
                              f"(columns {columns}); name them: markers = [...]")
    numeric = [c for c in columns if _numeric(table[c]) and c not in taken]
    # a treatment is a design knob: the declared knobs, else a numeric column that is neither a
    # marker nor outcome-like (id_*, ood*, train_*, final_*: measured after training)
    measured = {c for c in columns if _outcome_like(c)} | {d.outcome}
    treatable = list(spec.knobs) if spec.knobs is not None else [
        c for c in numeric if c not in measured and c not in markers]
    check_causal_pairs(spec.interventions, "interventions", treatable, markers,
                       spec.at("population", "interventions"), measured=measured)
    check_causal_pairs(d.mediation, "mediation", treatable, markers,
                       spec.at("diagnosis", "mediation"), measured=measured)
    return s, markers


def _numeric(values: list[Any]) -> bool:
    return all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values)


@dataclass(frozen=True, kw_only=True, repr=False)
class TableDiagnosisResult(DiagnosisDisplay):
    """A diagnosis of a table; ``to_dict()`` is ``report.json`` (the suite-report layout).

    Attributes:
        spec: the question.
        settings: the resolved outcome, covariates, groups, knobs.
        table: the analysed rows (after ``where``), column -> values: what ``markers.csv`` holds.
        markers: the marker columns.
        analysis: the :class:`~probekit.diagnosis.statistics.analysis.MarkerAnalysis`.
        extras: granulated tau / CMI, level means, early warning.
        blocks: the report blocks.
        provenance: timestamp, run time, the table file and its digest.
    """

    spec: TableDiagnosis
    settings: Any
    table: dict[str, list[Any]]
    markers: tuple[str, ...]
    analysis: Any
    extras: dict[str, Any] = field(default_factory=dict)
    blocks: tuple[Any, ...] = ()
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Strict JSON: the layout of :meth:`probekit.diagnosis.runner.DiagnosisResult.to_dict`."""
        from ..report.blocks import blocks_to_dicts
        from .answer import with_report_sections

        n = len(next(iter(self.table.values())))
        return with_report_sections(strict_json({
            "suite": {**self.spec.to_dict(), "name": self.spec.name,
                      "description": self.spec.description},
            "model": {"id": f"population of {n} models (from the table {self.spec.table.name})",
                      "fingerprint": self.provenance.get("table_sha256", "")[:12],
                      "n_layers": 0, "d_model": 0, "compatibility_mode": False,
                      "source": _shown(self.spec.table)},
            "data": {"n_examples": n, "splits": {"models": n}, "positions": "",
                     "probe_device": "cpu",
                     "source": {"file": _shown(self.spec.table),
                                "sha256": self.provenance.get("table_sha256", ""),
                                "where": self.spec.where}},
            "provenance": self.provenance,
            "hypotheses": [],
            "diagnosis": {"settings": dataclasses.asdict(self.settings),
                          "markers": list(self.markers),
                          "analysis": self.analysis.to_dict(), **self.extras},
            "table": self.table,
            "not_applicable": [],
            "analyses": [{"section": "diagnosis", "title": "Diagnosis: which markers predict "
                          f"{self.settings.outcome}", "data": {}, "warnings": [],
                          "hypotheses": [], "blocks": blocks_to_dicts(list(self.blocks))}],
        }))


def _sidecar_cis(table_path: Path, table: dict[str, list[Any]],
                 markers: list[str]) -> dict[str, list[Any]] | None:
    """Each row's own marker CIs from the ``markers.json`` beside the table (by checkpoint).

    That file is what :func:`~probekit.diagnosis.runner.write_outputs` writes; None when there
    is no such file or no ``checkpoint`` column.
    """
    from .runner import cell_cis

    path = Path(table_path).with_name("markers.json")
    if not path.is_file() or "checkpoint" not in table:
        return None
    try:
        cells = {c["checkpoint"]: c for c in json.loads(path.read_text()).get("cells", [])}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    rows = [cells.get(cp, {}) for cp in table["checkpoint"]]
    return cell_cis(rows, markers) or None


def diagnose_table(spec_or_path: str | Path | TableDiagnosis, *, out: str | Path | None = None,
                   table: str | Path | pd.DataFrame | Mapping[str, Any] | None = None,
                   ) -> TableDiagnosisResult:
    """Analyse a marker table; with ``out``, write markers.csv, report.json and report.html there.

    Args:
        spec_or_path: a table diagnosis file or a loaded :class:`TableDiagnosis`.
        out: output directory (nothing written when None).
        table: another table file instead of the spec's; or the table itself, a DataFrame
            (e.g. :func:`~probekit.diagnosis.read_marker_table`, edited) or a mapping column ->
            list, converted once (:func:`~probekit.diagnosis.table_io.marker_frame`); the report
            then names it "(DataFrame)" and records the sha256 of its ``markers.csv`` text.

    Raises:
        DataError: an unreadable table (``FILE:LINE``), missing cells in the outcome /
            covariates / groups.
        ConfigError: a column named in ``[diagnosis]`` / ``[population]`` that the table lacks.
    """
    from ..report.write import check_report_dir
    from .runner import _analyse, _csv

    if out is not None:  # the user's own files are refused before the table is read
        check_report_dir(out, flag="out", also=("markers.csv",))
    spec = (spec_or_path if isinstance(spec_or_path, TableDiagnosis)
            else load_table_diagnosis(spec_or_path))
    given = table is not None and not isinstance(table, (str, Path))
    if table is not None and not given:
        spec = dataclasses.replace(spec, table=Path(table))
    start = time.perf_counter()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    if given:
        full = marker_frame(table)  # type: ignore[arg-type]
        spec = dataclasses.replace(spec, table=Path(_GIVEN))
        digest = sha256_bytes(_csv(full).encode())
    else:
        full = read_marker_table(spec.table)
        digest = sha256_bytes(spec.table.read_bytes())
    frame = _select_rows(spec, full)
    n = len(frame)
    rows, raw, censored, settings, markers = _question(spec, frame)
    internal = raw if censored is None else censored.table
    host = DiagnosisFile(  # the runner's analysis reads only the [diagnosis] settings
        suite=build_suite(spec.source, spec.text, {"model": {"train": {"preset": "(table)"}}, "data": {"label": "(table)"}}),
        population=PopulationSpec(interventions=spec.interventions), markers=(),
        diagnosis=spec.diagnosis, text=spec.text)
    facts = ({"marker_flags": {m: f for m, f in spec.marker_flags.items() if m in markers}}
             if spec.marker_flags else None)
    analysis, extras, blocks = _analyse(host, settings, internal, markers, facts,
                                        marker_cis=None if given
                                        else _sidecar_cis(spec.table, internal, markers),
                                        censor=censored.censor if censored is not None
                                        and censored.n_censored else None)
    if censored is not None and censored.n_censored:
        from .runner import _survival

        blocks = (Text(text=censored.warning(), level="warning"), *blocks,
                  *_survival(host, settings, raw, censored.censor, markers, extras))
    result = TableDiagnosisResult(
        spec=spec, settings=settings, table=rows, markers=tuple(markers), analysis=analysis,
        extras=extras, blocks=tuple(blocks),
        provenance={"timestamp": stamp, "run_seconds": round(time.perf_counter() - start, 2),
                    "table": _shown(spec.table), "rows_in_table": len(full),
                    "rows_analysed": n, "where": spec.where,
                    "table_sha256": digest},
    )
    if out is not None:
        from ..report.write import write_report

        out = Path(out)
        if not given and (out / "markers.csv").resolve() == spec.table.resolve() \
                and n != len(full):
            raise ConfigError(f"--out {out} would overwrite the input table {spec.table} with "
                              f"the {n} rows kept by where = {spec.where}; write elsewhere")
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "markers.csv", _csv(frame))
        write_sidecar(out / "markers.csv")
        write_report(result, out)
    return result


def check_table_diagnosis(spec: TableDiagnosis) -> list[str]:
    """Read the table and resolve the question (every named column checked); one line each."""
    return checked_table_question(spec)[2]


def checked_table_question(spec: TableDiagnosis) -> tuple[Any, list[str], list[str]]:
    """:func:`check_table_diagnosis`'s checks: the resolved question, the markers, the lines."""
    from .options import analysis_kwargs

    full = read_marker_table(spec.table)
    frame = _select_rows(spec, full)
    s, markers = _question(spec, frame)[3:]
    n = len(frame)
    return s, list(markers), [f"{spec.source}: table diagnosis is valid",
            f"  table: {spec.table} ({n} of {len(full)} rows"
            + (f" where {spec.where})" if spec.where else ")"),
            f"  markers: {', '.join(markers)}; knobs: {list(s.knobs)}",
            f"  outcome {s.outcome!r}, covariates {list(s.covariates)}, groups {s.groups!r}",
            *([f"  analysis options: {options}"] if (options := analysis_kwargs(spec.diagnosis))
              else []),
            *causal_lines(spec.interventions, spec.diagnosis.mediation)]



def run_table_cli(args: Any) -> int:
    """``probekit diagnose`` on a table (a table diagnosis file, or ``FILE --table PATH``)."""
    if is_table_diagnosis(args.file):
        spec = load_table_diagnosis(args.file)
        if args.table is not None:
            spec = dataclasses.replace(spec, table=Path(args.table))
    else:
        from .spec import load_diagnosis

        spec = table_diagnosis_from_file(load_diagnosis(args.file), args.table)
    if args.check:
        print("\n".join(check_table_diagnosis(spec)))  # noqa: T201
        return 0
    out = Path(args.out) if args.out is not None else None
    result = diagnose_table(spec, out=out)
    n = len(next(iter(result.table.values())))
    finals = sum(_same(f, 1) for f in result.table.get("final", []))
    rows = (f"{n} rows ({finals} final models)" if 0 < finals < n else f"{n} models")
    print(f"{args.file}: {rows} from {_shown(spec.table)}, outcome {result.settings.outcome!r}, "  # noqa: T201
          f"covariates {list(result.settings.covariates)}")
    levels = {r["marker"]: r for r in result.extras.get("level_mean_r2", []) if r["degree"] == 1}
    for stats in result.analysis.markers:
        print(f"  {result.analysis.sentence(stats.marker)}")  # noqa: T201
        lv = levels.get(stats.marker)
        if lv is not None and math.isfinite(lv["r2_level_means"]):
            print(f"    beside it, in An & Du's unit: R^2 (linear) over the {lv['n_levels']} "  # noqa: T201
                  f"{lv['knob']} level means {lv['r2_level_means']:.2f}, over the "
                  f"{lv['n_models']} models {lv['r2_models']:.2f}")
    for sentence in (result.extras.get("causal") or {}).get("sentences", []):
        print(f"  causal: {sentence}")  # noqa: T201
    if out is not None:
        print(f"  wrote {out / 'markers.csv'}, {out / 'report.html'} and {out / 'report.json'}")  # noqa: T201
    return 0
