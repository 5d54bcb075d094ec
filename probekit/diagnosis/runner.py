"""Run a diagnosis file: population -> one executor task per checkpoint -> table -> analysis -> report.

:func:`diagnose` resolves the population (training a grid on demand), then maps
:func:`checkpoint_cells` over the checkpoints whose cells are not cached yet: each task loads its
checkpoint once (an :class:`~probekit.suites.context.AnalysisContext` whose model is that
checkpoint), computes its outcome columns (:mod:`probekit.diagnosis.outcomes`) and every missing
marker (:mod:`probekit.diagnosis.markers`), recording each finished cell atomically. The table is
written as ``markers.csv`` (one row per checkpoint: ``checkpoint, run, step, final``, the design
columns, the outcomes, the markers; series rows also carry their run's final outcomes as
``final_<column>``) with ``markers.json`` beside it (each cell's CI, and the reason of every
not-applicable cell); :func:`_analyse` is the one place that calls the statistics of
:mod:`probekit.diagnosis` (marker analysis, granulated tau, level means, early warning), whose
blocks make ``report.html`` / ``report.json``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DataError, ProbekitError
from ..progress import progress_settings, track
from ..report.blocks import Column, Table, Text, blocks_to_dicts, strict_json
from ..suites.spec import ModelSpec, Suite
from ..util.integrity import seal, write_sidecar
from ..util.io import atomic_write_json, atomic_write_text, sha256_bytes
from ..util.lock import DirectoryLock
from .answer import with_report_sections
from .block_index import check_block_indices
from .display import DiagnosisDisplay
from .markers import CellStore, MarkerCell, checkpoint_fingerprint, marker_key, measure_marker
from .outcomes import (
    checkpoint_task,
    crossing_column,
    crossing_step,
    examples_column,
    next_eval_step,
    outcome_columns,
    outcome_names,
)
from .population import Checkpoint, grid_runs, population_dir, resolve_population, varying_knobs
from .positions import missing_split, position_column, positioned_examples, reads_capture_positions
from .question import Columns, Settings, resolve_settings
from .spec import DiagnosisFile, MarkerSpec, check_censored_outcome, load_diagnosis
from .table_io import marker_csv

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RECOMPUTE_ALL", "CheckpointTask", "DiagnosisResult", "Settings", "analysis_inputs",
           "check_diagnosis", "check_question", "checkpoint_cells", "diagnose", "models_statement", "population_facts",
           "recompute_set",
           "reference_checkpoints"]

FIXED = ("checkpoint", "run", "step", "final")
#: the fewest models of a population the statistics analyse (leave-one-out)
MIN_MODELS = 3
#: train-time columns measured at each checkpoint's own step (covariates "so far")
STEP_COLUMNS = ("train_accuracy", "train_loss")


@dataclass(frozen=True, kw_only=True)
class CheckpointTask:
    """What one executor task computes for one checkpoint (picklable).

    Attributes:
        checkpoint: the row.
        fingerprint: its :func:`~probekit.diagnosis.markers.checkpoint_fingerprint`.
        suite: the file's suite sections with ``model`` = this checkpoint.
        markers: ``(marker, key)`` pairs still to compute.
        outcome_key: cell key of the outcome columns, ``None`` when they are cached.
        max_eval_examples, eval_seed: the outcome evaluation's subset.
        cells: the :class:`~probekit.diagnosis.markers.CellStore` root.
        cache_dir: activation cache root (``None``: the default).
        references: ``(marker name, checkpoint path)`` of the markers with a ``reference``
            (:func:`reference_checkpoints`).
        eval_outcome: ``[outcome]`` (:mod:`probekit.diagnosis.outcomes`): the outcome
            columns come from the user's evaluation file instead of the testbed's evaluation.
        outcome_fn: a Python callable outcome (``fn(model) -> {column: value}``), merged in.
    """

    checkpoint: Checkpoint
    fingerprint: str
    suite: Suite
    markers: tuple[tuple[MarkerSpec, str], ...]
    outcome_key: str | None
    max_eval_examples: int | None
    eval_seed: int
    cells: str
    cache_dir: str | None = None
    references: tuple[tuple[str, str], ...] = ()
    eval_outcome: Any = None
    outcome_fn: Any = None


def reference_checkpoints(spec: DiagnosisFile, rows: list[Checkpoint]) -> dict[str, list[str]]:
    """Per marker with a ``reference``: each row's reference checkpoint (a final row's path).

    ``reference = {"task.n_noise" = 0, seed = "same"}`` names, for a row, the final checkpoint
    whose design has ``task.n_noise == 0`` and the row's own ``seed``.

    Raises:
        ConfigError: a reference key that is not a design column, or a row for which not
            exactly one final checkpoint matches (naming the row and the values sought).
    """
    finals = [r for r in rows if r.final]
    design = list(dict.fromkeys(k for r in finals for k in r.design))
    out: dict[str, list[str]] = {}
    for i, m in enumerate(spec.markers):
        if m.reference is None:
            continue
        where = spec.at("marker", "reference", i)
        bad = [k for k in m.reference if k not in design]
        if bad:
            raise ConfigError(f"{where}: {bad[0]!r} is not a design column of the population; "
                              f"the design columns are {design}")
        paths = []
        for r in rows:
            want = {k: r.design.get(k) if v == "same" else v for k, v in m.reference.items()}
            hits = [f.path for f in finals if all(f.design.get(k) == v for k, v in want.items())]
            if len(hits) != 1:
                raise ConfigError(f"{where}: {len(hits)} final checkpoints have {want} (row "
                                  f"{r.path}); the reference must name exactly one: add design "
                                  "columns (e.g. seed = \"same\")")
            paths.append(hits[0])
        out[m.name] = paths
    return out


def _reference_context(task: CheckpointTask, ctx: Any, path: str) -> Any:
    """A context on the reference checkpoint holding the same examples as ``ctx``."""
    from ..executor import InProcessExecutor
    from ..suites.context import AnalysisContext

    suite = dataclasses.replace(task.suite, model=_model_spec(path))
    return AnalysisContext(suite, progress=False, executor=InProcessExecutor(progress=False),
                           cache_dir=task.cache_dir, examples=ctx.examples)


def checkpoint_cells(task: CheckpointTask) -> dict[str, Any]:
    """Outcomes and markers of one checkpoint, each recorded in the cell store when done.

    Returns ``{"outcomes": {...} or None, "cells": {key: MarkerCell dict}}``.
    """
    from ..executor import InProcessExecutor
    from ..models.checkpoint import read_checkpoint_meta
    from ..suites.context import AnalysisContext

    ctx = AnalysisContext(task.suite, progress=False, executor=InProcessExecutor(progress=False),
                          cache_dir=task.cache_dir)
    store = CellStore(task.cells)
    outcomes = None
    if task.outcome_key is not None:
        if task.eval_outcome is not None or task.outcome_fn is not None:
            outcomes = user_outcomes(ctx.model, task.eval_outcome, task.outcome_fn,
                                     seed=task.eval_seed)
        else:
            meta = read_checkpoint_meta(task.checkpoint.path)
            outcomes = outcome_columns(ctx.model, checkpoint_task(task.suite.data, meta),
                                       max_examples=task.max_eval_examples, seed=task.eval_seed)
        store.put(task.fingerprint, task.outcome_key, outcomes)
    cells = {}
    where = f"{Path(task.checkpoint.run).name} step {task.checkpoint.step}"
    model = _row_label(task.checkpoint)
    refs = dict(task.references)
    column = position_column(task.suite.capture.positions)
    positioned: Any = None  # the context on the examples with a capture position, built once
    for marker, key in track(task.markers, desc=f"markers of {where}", unit="marker"):
        mctx = ctx
        if column is not None and (marker.reference is not None
                                   or reads_capture_positions(marker.spec)):
            if positioned is None:
                sub = positioned_examples(ctx.examples, column)
                positioned = ctx if sub is None else AnalysisContext(
                    task.suite, progress=False, executor=InProcessExecutor(progress=False),
                    cache_dir=task.cache_dir, examples=sub)
            mctx = positioned
            empty = missing_split(marker.spec, mctx.examples) if mctx is not ctx else None
            if empty is not None:
                cell = MarkerCell(marker=marker.name, value=None, reason=(
                    f"no {empty!r} example has a [capture] position ({column!r} is null for all "
                    "of them, e.g. single-clause SCAN commands have no second primitive)")).to_dict()
                store.put(task.fingerprint, key, cell)
                cells[key] = cell
                continue
        if marker.reference is None:
            cell = measure_marker(marker, mctx, model=model).to_dict()
        else:
            cell = measure_marker(marker, mctx, _reference_context(task, mctx, refs[marker.name]),
                                  model=model).to_dict()
        store.put(task.fingerprint, key, cell)
        cells[key] = cell
    return {"outcomes": outcomes, "cells": cells}


def models_statement(n: int) -> Text:
    """How many models a population of model entries has, and whether it supports a verdict.

    Each entry is one unit of the analysis (a model, not a seed of one design); below
    :data:`MIN_MODELS` no population-level claim is made (as for too few seed groups: the
    leave-one-out statistics need at least that many units), a warning that says why.
    """
    head = f"This population has {n} model entr{'y' if n == 1 else 'ies'} (each one unit of " \
        "the analysis)"
    if n < MIN_MODELS:
        return Text(text=f"{head}: no population-level verdict. {n} model(s) cannot support a "
                    f"claim about models in general: the statistics need at least {MIN_MODELS} "
                    "(leave-one-out), as for seed groups. markers.csv holds the markers and "
                    "outcomes, nothing is tested. Add models to the population.",
                    level="warning")
    return Text(text=f"{head}: population-level verdicts need at least {MIN_MODELS} "
                "(leave-one-out); with few models, one model moves every estimate.")


def _row_label(row: Checkpoint) -> str:
    """How messages name a row: a model entry as written, else its run's folder (+ step)."""
    name = row.run if not Path(row.run).is_absolute() else Path(row.run).name
    return name if row.step is None else f"{name} step {row.step}"


def user_outcomes(model: Any, eval_outcome: Any, fn: Any, *, seed: int = 0) -> dict[str, Any]:
    """The ``[outcome]`` file's columns and a callable's, merged (a column given twice refused).

    Raises:
        DataError: the callable returns a column the evaluation file already gives.
    """
    from .outcomes import callable_outcomes, eval_outcome_columns

    out: dict[str, Any] = {}
    if eval_outcome is not None:
        out.update(eval_outcome_columns(model, eval_outcome, seed=seed))
    if fn is not None:
        extra = callable_outcomes(fn, model)
        clash = [k for k in extra if k in out]
        if clash:
            raise DataError(f"outcome function {getattr(fn, '__qualname__', fn)!r} returns column "
                            f"{clash[0]!r}, which [outcome] already gives; rename it")
        out.update(extra)
    return out


def _model_spec(path: str) -> ModelSpec:
    """How a row's model is loaded: a probekit checkpoint, else a named LM or HF directory."""
    from .real_models import entry_model_spec

    return entry_model_spec(path)


def _fingerprint(spec: DiagnosisFile, path: str) -> str:
    """A row's cache identity: checkpoint config + weights; a model entry's or fine-tune's own digest."""
    from .real_models import entry_fingerprint, entry_kind, finetune_grid

    if (spec.population.models is not None or finetune_grid(spec.population)) \
            and entry_kind(path) != "checkpoint":
        return entry_fingerprint(path)
    return checkpoint_fingerprint(path)


def _model_shape(path: str) -> tuple[int, int]:
    """``(n_layers, d_model)`` of a row's model from its config file (``(0, 0)``: unknown)."""
    from .real_models import entry_kind, model_config

    kind = entry_kind(path)
    if kind == "checkpoint":
        from ..models.checkpoint import read_checkpoint_meta

        model = read_checkpoint_meta(path)["model"]
        return int(model.get("n_layers", 0)), int(model.get("d_model", 0))
    config = model_config(Path(path)) if kind == "hf" else None
    if config is None:
        return 0, 0
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = text.get("num_hidden_layers", text.get("n_layer", 0))
    width = text.get("hidden_size", text.get("n_embd", 0))
    return int(layers or 0), int(width or 0)


def _outcome_key(spec: DiagnosisFile, fn: Any = None) -> str:
    from .outcomes import outcome_fingerprint

    d = spec.diagnosis
    payload = {"data": dataclasses.asdict(spec.suite.data), "max": d.max_eval_examples,
               "seed": d.seed, "version": 1, **outcome_fingerprint(spec.outcome, fn)}
    return "outcomes-" + sha256_bytes(json.dumps(payload, sort_keys=True, default=str).encode())[:16]


def _task_signature(name: Any, config: dict[str, Any]) -> str:
    """Tasks differing only in their seed have the same split names (so one is built for all)."""
    rest = {k: v for k, v in config.items() if k != "seed"}
    return json.dumps([name, rest], sort_keys=True, default=str)


def _expected_columns(spec: DiagnosisFile, rows: list[Checkpoint],
                      fn: Any = None) -> dict[str, set[str]]:
    """Outcome columns each final checkpoint will have (from its task's split names).

    With ``[outcome]`` the evaluation file's columns; a callable outcome's columns are known
    only once it ran, so the file's outcome and covariates are taken on trust until then.

    Raises:
        ConfigError: a population of real LMs with no ``[outcome]`` (nor callable).
    """
    from ..models.checkpoint import read_checkpoint_meta

    if spec.outcome is not None:
        from .real_models import entry_kind

        bare = [r.path for r in rows if r.final and entry_kind(r.path) == "checkpoint"]
        if bare:
            raise ConfigError(f"{spec.at('outcome', 'file')}: {bare[0]} is a probekit testbed "
                              "checkpoint, which has no tokenizer for the evaluation file's text "
                              "prompts; remove [outcome] (its task's own evaluation gives the "
                              "outcomes) or diagnose it apart from the language models")
    if spec.outcome is not None or fn is not None:
        from .outcomes import eval_outcome_names

        names = eval_outcome_names(spec.outcome) if spec.outcome is not None else set()
        if fn is not None:  # taken on trust until fn ran (a design covariate is the design's)
            design = {k for r in rows for k in r.design}
            names |= {spec.diagnosis.outcome,
                      *(c for c in spec.diagnosis.covariates or () if c not in design)}
        return {r.path: set(names) for r in rows if r.final}
    from .real_models import finetune_grid, real_entries

    real = real_entries(spec.population)
    if real or finetune_grid(spec.population):
        what = (f"{spec.at('population', 'models')}: model {real[0]!r} is a pretrained LM"
                if real else f"{spec.at('population', 'preset')}: the fine-tunes of preset "
                f"{spec.population.preset!r} are pretrained LMs")
        raise ConfigError(f"{what} with no testbed evaluation; name its outcome: an [outcome] "
                          "section (file = \"eval.jsonl\", score = \"exact_match\") or, "
                          "from Python, diagnose(..., outcome=fn)")

    cache: dict[str, set[str]] = {}
    out = {}
    for r in rows:
        if not r.final:
            continue
        meta = read_checkpoint_meta(r.path)
        extra = meta.get("extra") or {}
        sig = _task_signature(extra.get("task"), extra.get("task_config") or {})
        if spec.suite.data.task is not None:
            sig = "data"
        if sig not in cache:
            cache[sig] = outcome_names(list(checkpoint_task(spec.suite.data, meta).splits()))
        out[r.path] = cache[sig]
    return out


def _grid_expected(spec: DiagnosisFile, fn: Any = None) -> tuple[list[Checkpoint], dict[str, set[str]], list[int]]:
    """Rows (final only, not trained yet), their outcome columns and depths of a grid (``--check``)."""
    from ..testbeds import get_task
    from ..train.build import build_run
    from .real_models import finetune_grid

    if finetune_grid(spec.population):
        return _finetune_grid_expected(spec, fn)
    rows, cols, cache, depths = [], {}, {}, []
    for r in grid_runs(spec):
        task, mcfg, _ = build_run(r.run.preset, steps=r.run.steps, seed=r.run.seed,
                                  sets=list(r.run.sets), device=r.run.device)
        depths.append(int(mcfg.n_layers))
        if spec.suite.data.task is not None:
            task = get_task(spec.suite.data.task, **spec.suite.data.task_options)
        sig = _task_signature(task.name, dataclasses.asdict(task.config))
        if sig not in cache:
            cache[sig] = outcome_names(list(task.splits()))
        rows.append(Checkpoint(path=r.run.out_dir, run=r.run.out_dir, step=r.final_step,
                               final=True, design=r.design))
        cols[r.run.out_dir] = cache[sig]
    return rows, cols, depths


def _finetune_grid_expected(spec: DiagnosisFile, fn: Any = None
                            ) -> tuple[list[Checkpoint], dict[str, set[str]], list[int]]:
    """:func:`_grid_expected` of a fine-tune grid: ``[outcome]``'s columns, the base model's depth.

    The depth is the base model's: a named model's from the registry, a directory's from its
    ``config.json`` (nothing is converted by ``--check``; 0: unknown).
    """
    from ..train.finetune_presets import build_finetune

    rows, depths = [], []
    for r in grid_runs(spec):
        rows.append(Checkpoint(path=r.run.out_dir, run=r.run.out_dir, step=r.final_step,
                               final=True, design=r.design))
        config = build_finetune(r.run.preset, steps=r.run.steps, seed=r.run.seed,
                                sets=list(r.run.sets), device=r.run.device).config
        depths.append(_entry_depth(config.base_model))
    return rows, _expected_columns(spec, rows, fn), depths


def _entry_depth(source: str) -> int:
    """Blocks of a model entry or base model (:func:`~.real_models.model_depth`; 0: unknown)."""
    from .real_models import model_depth

    try:
        return model_depth(source)
    except ConfigError:
        return 0


def population_facts(spec: DiagnosisFile, rows: list[Checkpoint], refs: dict[str, list[str]],
                     outcome: str) -> dict[str, Any]:
    """``exclude_rows`` and ``marker_flags`` of the final models (:mod:`.options`).

    ``exclude_rows``: per marker read against a reference checkpoint, the positions among the
    final rows (the analysed table's rows) whose reference is the row itself (a comparison of a
    model with itself). ``marker_flags``: ``measured_on_outcome_examples`` for a marker reading
    the outcome's split.
    """
    from .options import marker_flags

    finals = [r for r in rows if r.final]
    position = {id(r): k for k, r in enumerate(finals)}
    exclude = {}
    for name, paths in refs.items():
        own = [position[id(r)] for r, p in zip(rows, paths, strict=True)
               if r.final and p == r.path]
        if own:
            exclude[name] = own
    out: dict[str, Any] = {}
    if exclude:
        out["exclude_rows"] = exclude
    flags = marker_flags(spec.markers, outcome, spec.suite.data)
    if flags:
        out["marker_flags"] = flags
    return out


def check_question(spec: DiagnosisFile, rows: list[Checkpoint],
                   expected: dict[str, set[str]]) -> Settings:
    """The population's question: its outcome on every checkpoint, then the one resolver.

    The crossing-step and censoring rules and the outcome split on every final checkpoint
    come first; the covariates, groups and ``color_by`` are then resolved and checked by
    :func:`.question.resolve_settings` on the population's design columns (groups default:
    ``seed``), then the causal pairs.

    Raises:
        ConfigError: the outcome split missing on some checkpoints (naming them), an unknown
            covariate / groups / color_by column, or fewer than 3 groups.
    """
    d = spec.diagnosis
    if d.outcome.startswith("id_step_") and (d.crossing is None
                                             or d.outcome != crossing_column(d.crossing)):
        raise ConfigError(f"{spec.at('diagnosis', 'outcome')} = {d.outcome!r}: a crossing-step "
                          f"outcome needs [diagnosis] crossing = {d.outcome[len('id_step_'):]} "
                          f"(now {d.crossing}), which records that column")
    check_censored_outcome(d, spec.at("diagnosis", "censor"))
    if d.crossing is not None:
        expected = {k: v | {crossing_column(d.crossing)} for k, v in expected.items()}
    finals = [r for r in rows if r.final]
    lacking = [r.path for r in finals if d.outcome not in expected[r.path]]
    if lacking:
        having = [r.path for r in finals if d.outcome in expected[r.path]]
        some = sorted(c for c in set().union(*expected.values()) - {"train_loss", "id_loss"}
                      if c != examples_column(c.removesuffix("__n")))  # not the example counts
        if having:
            raise ConfigError(
                f"{spec.at('diagnosis', 'outcome')} = {d.outcome!r}: the outcome split is "
                f"missing on {len(lacking)} of {len(finals)} checkpoints (e.g. {lacking[0]}; "
                f"present on {having[0]}); evaluate every checkpoint on the same splits: name the "
                "task in [data] task = ... (the same examples for all)"
            )
        raise ConfigError(f"{spec.at('diagnosis', 'outcome')} = {d.outcome!r}: no such outcome "
                          f"column; the checkpoints have {some}")
    design = list(dict.fromkeys(k for r in finals for k in r.design))
    check_columns(spec, design, expected)
    knobs = tuple(varying_knobs(rows))
    columns = set(design) | set().union(*expected.values())
    cols = Columns(names=sorted(columns), design=design, knobs=lambda groups: knobs,
                   levels=lambda c: [r.design.get(c) for r in finals], source="the table",
                   default_groups=lambda: "seed" if "seed" in design else None)
    s = resolve_settings(d, cols, lambda key: spec.at("diagnosis", key))
    from .spec import check_causal_pairs

    markers = [m.name for m in spec.markers]
    measured = set().union(*expected.values()) - set(design)  # outcomes of training
    check_causal_pairs(spec.population.interventions, "interventions", design, markers,
                       spec.at("population", "interventions"), measured=measured)
    check_causal_pairs(d.mediation, "mediation", design, markers,
                       spec.at("diagnosis", "mediation"), measured=measured)
    return s


def _check_data_task_vocab(spec: DiagnosisFile, rows: list[Checkpoint]) -> None:
    """``[data] task`` (every checkpoint's evaluation) within each final checkpoint's vocabulary."""
    from ..models.checkpoint import read_checkpoint_meta
    from ..suites.check import check_vocab_fits
    from .outcomes import checkpoint_task

    task = None  # the [data] task is the same for every checkpoint: built once
    for r in rows:
        if not r.final:
            continue
        meta = read_checkpoint_meta(r.path)
        d_vocab = (meta.get("model") or {}).get("d_vocab")
        if isinstance(d_vocab, int):
            task = checkpoint_task(spec.suite.data, meta) if task is None else task
            check_vocab_fits(task, spec.suite.data, d_vocab, spec.at("data", "task").split(": [")[0],
                             model=f"checkpoint {r.path}")


def check_columns(spec: DiagnosisFile, design: list[str], expected: dict[str, set[str]]) -> None:
    """The marker table's full column set (:func:`.columns.check_table_columns`), before any run.

    The table's own columns, the design columns, every outcome column (with its counts) and the
    markers: a design or marker column named like an outcome (or like another group's column)
    is refused at the key that names it.
    """
    from .columns import check_table_columns

    design_at = (spec.at("population", "design") if spec.population.design
                 else spec.at("population", "grid"))
    check_table_columns(
        {"table": ("checkpoint", "run", "step", "final"), "outcome": sorted(set().union(*expected.values())),
         "design": design, "marker": [m.name for m in spec.markers]},
        {"design": design_at, "marker": spec.at("marker", "name")})


def check_diagnosis(spec_or_path: str | Path | DiagnosisFile, *, outcome: Any = None) -> list[str]:
    """Validate everything knowable without training or forward passes; one line per finding.

    The file, a grid's keys and values against its preset, the marker specs, that the
    checkpoints exist and agree (task, vocabulary), the outcome split on every checkpoint, the
    covariates and the number of groups.

    ``outcome``: a Python callable outcome (:func:`diagnose`); its columns are checked when it ran.

    Raises:
        ConfigError: the first problem (``FILE:LINE`` where it comes from the file).
    """
    return checked_question(spec_or_path, outcome=outcome)[1]


def checked_question(spec_or_path: str | Path | DiagnosisFile, *,
                     outcome: Any = None) -> tuple[Settings, list[str]]:
    """:func:`check_diagnosis`'s checks; returns the resolved question and the report lines."""
    spec = spec_or_path if isinstance(spec_or_path, DiagnosisFile) else load_diagnosis(spec_or_path)
    from ..models.checkpoint import read_checkpoint_meta

    if spec.population.models is not None:
        rows = resolve_population(spec, train=False)
        expected = _expected_columns(spec, rows, outcome)
        depths = [_entry_depth(r.path) for r in rows]
        what = f"{len(rows)} model entries"
    elif spec.population.trained:
        rows, expected, depths = _grid_expected(spec, outcome)
        what = f"grid of {len(rows)} runs of preset {spec.population.preset!r} (not trained by --check)"
    else:
        rows = resolve_population(spec, train=False)
        expected = _expected_columns(spec, rows, outcome)
        depths = [int(read_checkpoint_meta(r.path)["model"].get("n_layers", 0))
                  for r in rows if r.final]
        what = f"{sum(r.final for r in rows)} checkpoints ({len(rows)} rows with the series)"
    s = check_question(spec, rows, expected)
    if spec.suite.data.task is not None and spec.population.models is None and not spec.population.trained:
        _check_data_task_vocab(spec, rows)
    if (spec.diagnosis.crossing is not None and not spec.population.trained
            and s.outcome == crossing_column(spec.diagnosis.crossing)):
        check_crossing_censor(spec, rows)  # existing runs: their crossings are known now
    reference_checkpoints(spec, rows)
    check_block_indices(spec.markers, [d for d in depths if d > 0], spec.at)
    from .options import analysis_kwargs
    from .spec import causal_lines

    options = analysis_kwargs(spec.diagnosis)
    return s, [f"{spec.source}: diagnosis file is valid", f"  population: {what}",
               f"  markers: {', '.join(m.name for m in spec.markers)}",
               f"  outcome {s.outcome!r}, covariates {list(s.covariates)}, groups {s.groups!r}",
               *([f"  analysis options: {options}"] if options else []),
               *causal_lines(spec.population.interventions, spec.diagnosis.mediation)]


@dataclass(frozen=True, kw_only=True, repr=False)
class DiagnosisResult(DiagnosisDisplay):
    """A diagnosis: the table, the analysis and the report; ``to_dict()`` is ``report.json``.

    Attributes:
        spec: the diagnosis file.
        settings: the resolved question (outcome, covariates, groups).
        table: column -> values, one entry per checkpoint (what ``markers.csv`` holds).
        cells: per row, marker name -> :class:`MarkerCell` (CI, not-applicable reason).
        analysis: the :class:`~probekit.diagnosis.statistics.analysis.MarkerAnalysis` of the final models
            (``None`` when no marker is applicable).
        extras: further statistics (granulated tau, level means, early warning) for the report.
        blocks: the report blocks.
        provenance: timestamp, run time, trained runs, computed cells.
    """

    spec: DiagnosisFile
    settings: Settings
    table: dict[str, list[Any]]
    cells: tuple[dict[str, MarkerCell], ...]
    analysis: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    blocks: tuple[Any, ...] = ()
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def not_applicable(self) -> list[dict[str, Any]]:
        """Every not-applicable cell: checkpoint, marker and reason."""
        return [{"checkpoint": self.table["checkpoint"][i], "marker": name, "reason": c.reason}
                for i, row in enumerate(self.cells) for name, c in row.items() if c.value is None]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON report: the suite-report layout plus ``diagnosis`` and ``table``."""
        n = len(self.table["checkpoint"])
        n_final = sum(bool(f) for f in self.table["final"])
        analysis = self.analysis.to_dict() if self.analysis is not None else None
        return with_report_sections(strict_json({
            "suite": {**self.spec.to_dict(), "name": self.spec.name,
                      "description": self.spec.suite.description},
            "model": {"id": _population_id(self.spec, n_final, n),
                      "fingerprint": self.provenance.get("population_key", ""),
                      "n_layers": self.provenance.get("n_layers", 0),
                      "d_model": self.provenance.get("d_model", 0),
                      "compatibility_mode": False,
                      "source": str(self.provenance.get("population_dir", ""))},
            "data": {"n_examples": n, "splits": {"final checkpoints": n_final,
                                                 "series checkpoints": n - n_final},
                     "positions": self.spec.suite.capture.positions, "probe_device": "cpu",
                     "source": _data_source(self.spec)},
            "provenance": self.provenance,
            "hypotheses": [],
            "diagnosis": {"settings": dataclasses.asdict(self.settings), "analysis": analysis,
                          **self.extras},
            "table": self.table,
            "not_applicable": self.not_applicable,
            "analyses": [{"section": "diagnosis", "title": "Diagnosis: which markers predict "
                          f"{self.settings.outcome}", "data": {}, "warnings": [], "hypotheses": [],
                          "blocks": blocks_to_dicts(list(self.blocks))}],
        }))


def _population_id(spec: DiagnosisFile, n_final: int, n: int) -> str:
    """The report header's model line: how many models, and what kind of population."""
    from .real_models import finetune_grid

    if spec.population.models is not None:
        return (f"population of {n_final} model entr{'y' if n_final == 1 else 'ies'} "
                "(pretrained or saved models, not trained here)")
    if finetune_grid(spec.population):
        return f"population of {n_final} fine-tunes of preset {spec.population.preset!r}"
    return f"population of {n_final} models ({n} checkpoints with the series)"


def _data_source(spec: DiagnosisFile) -> dict[str, Any]:
    """The report header's data line: the ``[data] file`` of real LMs, else the testbed task.

    A population of model entries or fine-tunes has no training task: its markers read the
    JSONL file (tokenized by each model), which the header names with its digest.
    """
    from ..util.io import sha256_file
    from .real_models import finetune_grid

    data = spec.suite.data
    if data.file is not None and (spec.population.models is not None
                                  or finetune_grid(spec.population)):
        path = spec.suite.resolve(data.file)
        return {"file": str(path), "sha256": sha256_file(path) if path.is_file() else ""}
    if data.task is None and (spec.population.models is not None
                              or finetune_grid(spec.population)):
        return {"task": "(none: the markers read no examples)", "task_options": {}}
    return {"task": data.task or "(each checkpoint's training task)",
            "task_options": dict(data.task_options)}


def _csv(table: pd.DataFrame | Mapping[str, Any]) -> str:
    """``markers.csv`` text of a table: written from its DataFrame (:func:`.table_io.marker_csv`).

    The runner's column lists become a typed DataFrame once here (:func:`.table_io.marker_frame`);
    the bytes are those ``csv.writer`` gave for the cells, so a shipped table keeps its digest.
    """
    return marker_csv(table)


def _table(rows: list[Checkpoint], outcomes: list[dict[str, float]],
           cells: list[dict[str, MarkerCell]], markers: tuple[MarkerSpec, ...],
           final_outcome_cols: list[str]) -> dict[str, list[Any]]:
    """The marker table: fixed, design, outcome, marker and ``final_*`` columns."""
    design = list(dict.fromkeys(k for r in rows for k in r.design))
    ocols = list(dict.fromkeys(k for o in outcomes for k in o))
    table: dict[str, list[Any]] = {
        "checkpoint": [r.path for r in rows], "run": [r.run for r in rows],
        "step": [r.step for r in rows], "final": [int(r.final) for r in rows],
    }
    for k in design:
        table[k] = [r.design.get(k) for r in rows]
    for k in ocols:
        table[k] = [o.get(k) for o in outcomes]
    for m in markers:
        table[m.name] = [c[m.name].value for c in cells]
    if any(not r.final for r in rows):
        final_of = {r.run: i for i, r in enumerate(rows) if r.final}
        for k in final_outcome_cols:
            table[f"final_{k}"] = [outcomes[final_of[r.run]].get(k) for r in rows]
    return table


def _run_dir(row: Checkpoint) -> Path:
    """The training-run directory of a row (a checkpoint's ``<run>/checkpoints/step_N``)."""
    run = Path(row.run)
    return run.parent.parent if run.parent.name == "checkpoints" else run


def _subtable(table: dict[str, list[Any]], keep: list[int], columns: list[str]) -> dict[str, list[Any]]:
    return {c: [table[c][i] for i in keep] for c in columns}


def point_labels(table: dict[str, list[Any]]) -> list[str] | None:
    """A short name per row: the scatter plots' hover text.

    The checkpoint's run and step (``run-3bff5a75 step_0000500``), else the table's ``name``
    column, else None.
    """
    if "checkpoint" in table:
        out = []
        for path in table["checkpoint"]:
            parts = [p for p in str(path).split("/") if p and p != "checkpoints"]
            out.append(" ".join(parts[-2:]) if parts else str(path))
        return out
    if "name" in table:
        return [str(v) for v in table["name"]]
    return None


def cell_cis(cells: Sequence[Mapping[str, Any]],
             markers: list[str]) -> dict[str, list[tuple[float, float] | None]]:
    """Per marker, each row's own CI ``(low, high)`` from its cell (None where it has none)."""
    def ci(c: Any) -> tuple[float, float] | None:
        if not isinstance(c, (dict, MarkerCell)):
            return None
        low, high = (c.get("low"), c.get("high")) if isinstance(c, dict) else (c.low, c.high)
        if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
            return None
        return (float(low), float(high))

    out = {m: [ci(row[m]) if m in row else None for row in cells] for m in markers}
    return {m: v for m, v in out.items() if any(x is not None for x in v)}


def _analyse(spec: DiagnosisFile, s: Settings, table: dict[str, list[Any]],
             markers: list[str], facts: dict[str, Any] | None = None,
             marker_cis: dict[str, list[Any]] | None = None, censor: float | None = None,
             ) -> tuple[Any, dict[str, Any], tuple[Any, ...]]:
    """The statistics of :mod:`probekit.diagnosis` on the table and their report blocks.

    The one place that calls the analysis layer: ``marker_analysis`` on the final models;
    granulated Kendall tau over the varying knobs; level-mean R^2 over ``color_by``; early
    warning over the series steps when there is a series; the calibration section
    (:func:`.statistics.calibration.calibration_section`). ``marker_analysis`` also gets the
    ``[diagnosis]`` analysis keys the file sets and ``outcome_examples`` (from the table), plus
    ``facts`` (``exclude_rows`` / ``marker_flags`` of :func:`population_facts`, restricted to
    the analysed markers): :func:`analysis_inputs`. ``marker_cis`` (marker -> per row of
    ``table`` its own CI, :func:`cell_cis`) gives the scatter plots' error bars; ``censor``
    (the value given to runs that never cross, :mod:`.statistics.survival`) marks those points censored.
    """
    from . import (
        conditional_mutual_information,
        diagnosis_blocks,
        early_warning,
        granulated_kendall_tau,
        level_mean_r2,
        marker_analysis,
    )
    from .options import analysis_kwargs, base_kwargs
    from .statistics.options import DEFAULTS

    d = spec.diagnosis
    finals = [i for i, f in enumerate(table["final"]) if f]
    pairs = (*spec.population.interventions, *d.mediation)
    cols = list(dict.fromkeys([s.outcome, *s.covariates, *([s.groups] if s.groups else []),
                               *s.knobs, *([s.color_by] if s.color_by else []), *markers,
                               *[c for c in (examples_column(s.outcome),) if c in table],
                               *[c for p in pairs for c in (p.knob, p.marker) if c in table]]))
    final_table = _subtable(table, finals, cols)
    options = base_kwargs(d)
    extra, dropped = analysis_inputs(spec, final_table, s.outcome, markers, facts)
    extras: dict[str, Any] = {}
    # what this population can detect (size, power, CI coverage simulated on its design); run
    # first so that the few-groups flag can say the coverage measured for this design
    from .statistics.calibration import calibration_section, coverage_note

    # a constant outcome: the degenerate warning says it all; no power simulation (whose refusal
    # would suggest dropping a covariate) and no granulated tau (a table of zeros)
    constant = len({v for v in final_table[s.outcome] if v is not None and v == v}) <= 1  # NaN: missing
    calibration = (() if constant else
                   calibration_section(final_table, s.outcome, s.covariates, s.groups, d, extras,
                                       analysis_options=analysis_kwargs(d)))
    note = coverage_note(extras.get("calibration"))
    if note:
        extra["coverage_note"] = note
    analysis = marker_analysis(final_table, s.outcome, markers=markers, covariates=s.covariates,
                               groups=s.groups, **options, **extra)
    # each marker's MDE: the 80%-power partial r of this very test, simulated on its design
    from .mde import MDE_SIMULATIONS, with_simulated_mde

    given = getattr(d, "mde_simulations", None)
    analysis, extras["power"] = with_simulated_mde(
        analysis, final_table, covariate_coding=extra.get("covariate_coding"),
        spline_df=int(extra.get("spline_df", DEFAULTS.spline_df)), seed=d.seed,
        n_simulations=MDE_SIMULATIONS if given is None else int(given))
    extras["analysis_inputs"] = {"passed": _plain_inputs(extra), "not_taken_yet": dropped}
    notes: list[Any] = []

    def each(fn: Any, *args: Any) -> list[Any]:
        """``fn(final_table, outcome, marker, *args)`` per marker; a refusal becomes a warning."""
        out = []
        for m in markers:
            try:
                out.append(fn(final_table, s.outcome, m, *args))
            except ProbekitError as err:
                notes.append(Text(text=f"{fn.__name__} of {m}: {err}", level="warning"))
        return out

    granulated: list[Any] = []
    levels: list[Any] = []
    early = None
    if s.knobs and not constant:
        granulated = each(granulated_kendall_tau, list(s.knobs), s.groups)
        granulated += each(conditional_mutual_information, list(s.knobs), 2, s.groups)
        extras["granulated"] = [r for g in granulated for r in g.to_records()]
    if s.color_by is not None and s.color_by in s.knobs:
        levels = each(level_mean_r2, s.color_by)
        extras["level_mean_r2"] = [r for v in levels for r in v.to_records()]
    if any(not f for f in table["final"]):
        ecols = list(dict.fromkeys(["step", f"final_{s.outcome}", *s.covariates,
                                    *([s.groups] if s.groups else []), *markers]))
        coding = {k: extra[k] for k in ("covariate_coding", "spline_df") if k in extra}
        early = early_warning(_subtable(table, list(range(len(table["step"]))), ecols),
                              f"final_{s.outcome}", step="step", markers=markers,
                              covariates=s.covariates, groups=s.groups, **options, **coding)
        extras["early_warning"] = early.to_dict()
    labels = point_labels(table)
    shape_by = s.groups if s.groups and s.groups != s.color_by else None
    blocks = diagnosis_blocks(analysis, final_table, color_by=s.color_by, levels=levels or None,
                              granulated=granulated or None, early=early, shape_by=shape_by,
                              labels=None if labels is None else [labels[i] for i in finals],
                              marker_cis={m: [v[i] for i in finals]
                                          for m, v in (marker_cis or {}).items()},
                              censored=None if censor is None else
                              [v is not None and float(v) == censor for v in final_table[s.outcome]])
    from .statistics.causal.arms import causal_section

    causal = causal_section(final_table, s.outcome, interventions=spec.population.interventions,
                            mediations=d.mediation, covariates=s.covariates, knobs=s.knobs,
                            groups=s.groups, settings=d, extras=extras)
    from .mde import mde_sentence
    from .population_section import state_units

    power_text = None if constant else mde_sentence(extras["power"])
    if power_text:
        calibration = (*calibration, Text(text=power_text))
    blocks = state_units((*blocks, *causal, *calibration),
                         analysis.settings.get("unit") or "models")
    return analysis, extras, (*blocks, *notes)


def analysis_inputs(spec: Any, final_table: dict[str, list[Any]], outcome: str,
                    markers: list[str], facts: dict[str, Any] | None = None,
                    ) -> tuple[dict[str, Any], list[str]]:
    """The kwargs of ``marker_analysis`` beyond the question, and the derived ones it lacks.

    ``[diagnosis]`` keys the file sets (:func:`~probekit.diagnosis.options.analysis_kwargs`),
    ``outcome_examples`` from the table's ``OUTCOME__n`` column, and ``facts`` restricted to
    ``markers``; checked against the installed ``marker_analysis``'s signature
    (:func:`~probekit.diagnosis.options.supported_kwargs`).
    """
    from .options import analysis_kwargs, outcome_examples, supported_kwargs
    from .statistics.analysis import marker_analysis

    kwargs = analysis_kwargs(spec.diagnosis)
    n = outcome_examples(final_table, outcome)
    if n is not None:
        kwargs["outcome_examples"] = n
    for key, per_marker in (facts or {}).items():
        kept = {m: v for m, v in per_marker.items() if m in markers}
        if kept:
            kwargs[key] = kept
    return supported_kwargs(marker_analysis, kwargs, lambda k: spec.at("diagnosis", k))


def _plain_inputs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """JSON form of the analysis inputs (tuples -> lists)."""
    return {k: ({m: list(v) if isinstance(v, (list, tuple)) else v for m, v in val.items()}
                if isinstance(val, dict) else val) for k, val in kwargs.items()}


def _na_blocks(spec: DiagnosisFile, table: dict[str, list[Any]],
               cells: list[dict[str, MarkerCell]]) -> list[Any]:
    """A table of not-applicable markers (checkpoints and reason), or nothing."""
    rows = []
    for m in spec.markers:
        bad = [i for i, c in enumerate(cells) if c[m.name].value is None]
        if bad:
            rows.append({"marker": m.name, "measure": m.measure,
                         "n": f"{len(bad)} of {len(cells)}",
                         "reason": cells[bad[0]][m.name].reason})
    if not rows:
        return []
    return [Table(title="Markers not applicable", collapsed=True, columns=(
        Column(key="marker", header="marker", fmt="", align="left"),
        Column(key="measure", header="kind", fmt="", align="left"),
        Column(key="n", header="checkpoints", fmt="", align="left"),
        Column(key="reason", header="reason", fmt="", align="left")), rows=tuple(rows),
        caption="These cells are empty in markers.csv (reasons in markers.json); a marker not "
        "applicable to every final model is left out of the analysis.")]


def _censor(spec: DiagnosisFile, rows: list[Checkpoint], table: dict[str, list[Any]]) -> Any:
    """The crossing-step outcome censored by ``[diagnosis] censor`` (:mod:`.statistics.survival`).

    Raises:
        ConfigError: some run never crosses and ``censor`` is unset, or ``"next_eval"`` with a
            run lacking a history of two held-out evaluations.
    """
    from .statistics.survival import censor_crossing

    d = spec.diagnosis
    column = crossing_column(d.crossing)
    censor = check_crossing_censor(spec, rows, dict(zip((r.run for r in rows), table[column])))
    try:
        return censor_crossing(table, column, censor)
    except DataError as err:
        raise ConfigError(f"{spec.at('diagnosis', 'censor')}: {err}") from err


def check_crossing_censor(spec: DiagnosisFile, rows: list[Checkpoint],
                          steps: Mapping[str, Any] | None = None) -> float:
    """The censoring step of a crossing-step outcome, checked against the runs' crossings.

    The rule shared by ``--check`` (existing runs: their histories) and the run (its table):
    runs that never cross need ``censor``; ``"next_eval"`` needs two held-out evaluations per
    run; a number must exceed every observed crossing (:func:`.statistics.survival.check_censor`).
    ``steps``: run -> crossing step (``None``: never), read from the histories when not given.
    Returns the step (``inf`` when no run needs censoring and none is given).

    Raises:
        ConfigError: at ``[diagnosis] censor`` (or ``outcome``), naming the run and the fix.
    """
    from .statistics.survival import check_censor

    d = spec.diagnosis
    column = crossing_column(d.crossing)
    if steps is None:
        steps = {r.run: crossing_step(_run_dir(r), d.crossing) for r in rows}
    never = {run for run, v in steps.items() if v in (None, "")}
    if never and d.censor is None:
        raise ConfigError(
            f"{spec.at('diagnosis', 'outcome')} = {column!r}: {len(never)} of {len(steps)} runs "
            f"never reach held-out accuracy {d.crossing:g} (e.g. {sorted(never)[0]}); set "
            "[diagnosis] censor = \"next_eval\" (one evaluation past the end) or a step number "
            "to censor them there")
    censor = d.censor
    if censor == "next_eval":
        nxt = {r.run: next_eval_step(_run_dir(r)) for r in rows}
        lacking = sorted(k for k, v in nxt.items() if v is None)
        if lacking:
            raise ConfigError(f"{spec.at('diagnosis', 'censor')} = \"next_eval\": run "
                              f"{lacking[0]} has no history of two held-out evaluations; give "
                              "the censoring step as a number")
        censor = max(v for v in nxt.values() if v is not None)
    if censor is None:
        return math.inf
    try:
        return check_censor(censor, [float(v) for v in steps.values() if v not in (None, "")])
    except DataError as err:
        raise ConfigError(f"{spec.at('diagnosis', 'censor')}: {err}") from None


def _survival(spec: DiagnosisFile, s: Settings, table: dict[str, list[Any]], censor: float,
              markers: list[str], extras: dict[str, Any]) -> list[Any]:
    """Cox hazards and the censoring-sensitivity curve of a censored crossing outcome.

    :func:`~probekit.diagnosis.statistics.survival.censoring_sensitivity` over ``censor_grid(censor)`` on
    the final rows of ``table`` (its raw crossing column: empty for a run that never crosses),
    then on the rows of each series step held by every run (markers and step covariates at
    that step, as in the early warning); stores ``extras["survival"]`` (final) and
    ``extras["survival_by_step"]`` and returns the blocks (a warning instead when it refuses,
    e.g. lifelines not installed).
    """
    from .options import analysis_kwargs
    from .statistics.survival import censor_grid, censoring_sensitivity

    cols = list(dict.fromkeys([s.outcome, *s.covariates, *([s.groups] if s.groups else []),
                               *markers]))
    n_runs = sum(bool(f) for f in table["final"])
    subsets = [("", [i for i, f in enumerate(table["final"]) if f])]
    for step in sorted({v for v, f in zip(table["step"], table["final"], strict=True) if not f}):
        rows = [i for i, v in enumerate(table["step"]) if v == step and not table["final"][i]]
        if len(rows) == n_runs:
            subsets.append((f"markers at step {step}", rows))
    blocks: list[Any] = []
    for label, rows in subsets:
        try:
            surv = censoring_sensitivity(
                _subtable(table, rows, cols), s.outcome, markers=markers,
                censors=censor_grid(censor), covariates=s.covariates, groups=s.groups,
                n_permutations=spec.diagnosis.n_permutations, seed=spec.diagnosis.seed,
                label=label, **analysis_kwargs(spec.diagnosis))
        except ProbekitError as err:
            blocks.append(Text(text=f"survival analysis of {s.outcome}{f' ({label})' if label else ''}: "
                               f"{err}", level="warning"))
            continue
        if label:
            extras.setdefault("survival_by_step", {})[label.rsplit(" ", 1)[-1]] = surv.to_dict()
        else:
            extras["survival"] = surv.to_dict()
        blocks += list(surv._blocks())
    return blocks


#: ``recompute`` value meaning every marker and the outcomes
RECOMPUTE_ALL = "*"


def recompute_set(spec: DiagnosisFile, recompute: Sequence[str] | None) -> tuple[set[str], bool]:
    """The marker names whose cached cells ``--recompute`` discards, and whether the outcomes too.

    ``"*"`` (``--recompute`` alone): every marker and the outcome columns; a marker name: that
    marker (a family's name: every member, ``NAME@...``).

    Raises:
        ConfigError: a name that is no marker of the file (the markers listed).
    """
    if not recompute:
        return set(), False
    if RECOMPUTE_ALL in recompute:
        return {m.name for m in spec.markers}, True
    names: set[str] = set()
    for name in recompute:
        hit = {m.name for m in spec.markers if m.name == name or m.name.split("@", 1)[0] == name}
        if not hit:
            bases = list(dict.fromkeys(m.name.split("@", 1)[0] for m in spec.markers))
            raise ConfigError(f"--recompute {name!r}: no marker of {spec.source} is named so; its "
                              f"markers are {bases} (--recompute alone: all of them)")
        names |= hit
    return names, False


def _diagnose_locked(spec: DiagnosisFile, ex: Any, pop_dir: Path, cache_dir: str | Path | None,
                     start: float, stamp: str, progress: bool = False,
                     outcome_fn: Any = None, recompute: Sequence[str] | None = None
                     ) -> DiagnosisResult:
    """The body of :func:`diagnose` run while ``pop_dir`` is locked."""
    from ..executor import check_worker_paths

    rows = resolve_population(spec, train=True, executor=ex)
    settings = check_question(spec, rows, _expected_columns(spec, rows, outcome_fn))
    store = CellStore(pop_dir / "cells")
    okey = _outcome_key(spec, outcome_fn)
    fps = [_fingerprint(spec, r.path) for r in rows]
    refs = reference_checkpoints(spec, rows)
    ref_fps = {p: _fingerprint(spec, p) for paths in refs.values() for p in paths}
    base_keys = {m.name: marker_key(m, spec.suite) for m in spec.markers}
    # a marker read against another checkpoint is keyed by that checkpoint's identity too
    mkeys = [{m.name: base_keys[m.name] if m.name not in refs else
              f"{base_keys[m.name]}-{ref_fps[refs[m.name][i]]}" for m in spec.markers}
             for i in range(len(rows))]
    again, outcomes_again = recompute_set(spec, recompute)
    tasks, where = [], []
    for i, (r, fp) in enumerate(zip(rows, fps)):
        todo = tuple((m, mkeys[i][m.name]) for m in spec.markers
                     if m.name in again or store.get(fp, mkeys[i][m.name]) is None)
        need_outcomes = outcomes_again or store.get(fp, okey) is None
        if todo or need_outcomes:
            suite = dataclasses.replace(spec.suite, model=_model_spec(r.path))
            tasks.append(CheckpointTask(
                checkpoint=r, fingerprint=fp, suite=suite, markers=todo,
                outcome_key=okey if need_outcomes else None,
                max_eval_examples=spec.diagnosis.max_eval_examples, eval_seed=spec.diagnosis.seed,
                cells=str(store.root), cache_dir=None if cache_dir is None else str(cache_dir),
                references=tuple((name, paths[i]) for name, paths in refs.items()),
                eval_outcome=spec.outcome, outcome_fn=outcome_fn))
            where.append(i)
    if tasks:
        store.root.mkdir(parents=True, exist_ok=True)
        check_worker_paths(ex, read=[r.path for r in rows if Path(r.path).is_dir()][:1],
                           write=[store.root])
        with progress_settings(enabled=progress):
            results = ex.map(checkpoint_cells, tasks, desc="checkpoints")
        for task, res in zip(tasks, results):
            if res["outcomes"] is not None:  # the worker's store may be on another node
                store.put(task.fingerprint, okey, res["outcomes"])
            for key, cell in res["cells"].items():
                store.put(task.fingerprint, key, cell)
    outcomes = [store.get(fp, okey) for fp in fps]
    if outcome_fn is not None:  # its columns are known now: check the question against them
        settings = check_question(spec, rows, {r.path: set(o) for r, o in zip(rows, outcomes)
                                                 if r.final})
    cells = [{m.name: MarkerCell.from_dict(store.get(fp, mkeys[i][m.name])) for m in spec.markers}
             for i, fp in enumerate(fps)]
    final_cols = [c for c in dict.fromkeys(k for o in outcomes for k in o)
                  if c not in STEP_COLUMNS and not c.endswith("__n")]
    table = _table(rows, outcomes, cells, spec.markers, final_cols)
    if spec.diagnosis.crossing is not None:
        steps = {r.run: crossing_step(_run_dir(r), spec.diagnosis.crossing) for r in rows}
        table[crossing_column(spec.diagnosis.crossing)] = [steps[r.run] for r in rows]
    censored, analysed = None, table
    if spec.diagnosis.crossing is not None and settings.outcome == crossing_column(spec.diagnosis.crossing):
        # markers.csv keeps the raw crossing column (empty: never crosses); final_<column> and
        # the analysis use the censored one
        censored = _censor(spec, rows, table)
        analysed = censored.table
        table[f"final_{settings.outcome}"] = analysed[f"final_{settings.outcome}"]
    finals = [i for i, r in enumerate(rows) if r.final]
    usable = [m.name for m in spec.markers
              if all(cells[i][m.name].value is not None for i in finals)]
    blocks: list[Any] = []
    if censored is not None and censored.n_censored:
        blocks.append(Text(text=censored.warning(), level="warning"))
    analysis, extras = None, {}
    few = spec.population.models is not None and len(finals) < MIN_MODELS
    if spec.population.models is not None:
        blocks.append(models_statement(len(finals)))
    # a couple of pretrained LMs (few): their table and outcomes, no statistics (stated above)
    if not few and usable:
        facts = population_facts(spec, rows, refs, settings.outcome)
        analysis, extras, stat_blocks = _analyse(
            spec, settings, analysed, usable, facts, marker_cis=cell_cis(cells, usable),
            censor=censored.censor if censored is not None and censored.n_censored else None)
        blocks += list(stat_blocks)
        if censored is not None and censored.n_censored:
            blocks += _survival(spec, settings, table, censored.censor, usable, extras)
    elif not few:
        blocks.append(Text(text="No marker is applicable to every final model: nothing to "
                           "analyse (see the table below).", level="warning"))
    blocks += _na_blocks(spec, table, cells)
    n_layers, d_model = _model_shape(rows[0].path)
    return DiagnosisResult(
        spec=spec, settings=settings, table=table, cells=tuple(cells), analysis=analysis,
        extras=extras, blocks=tuple(blocks),
        provenance={"timestamp": stamp, "run_seconds": round(time.perf_counter() - start, 2),
                    "checkpoint_tasks": len(tasks), "population_dir": str(pop_dir),
                    "population_key": spec.population_key(),
                    "n_layers": n_layers, "d_model": d_model},
    )


def diagnose(
    spec_or_path: str | Path | DiagnosisFile, *, out: str | Path | None = None,
    executor: Any = None, check: bool = False, progress: bool = False,
    cache_dir: str | Path | None = None, outcome: Any = None,
    recompute: Sequence[str] | None = None, checked: bool = False,
) -> DiagnosisResult | None:
    """Run a diagnosis file; with ``out``, write markers.csv/json and report.html/json there.

    Args:
        spec_or_path: a ``probes/diagnose_*.toml`` path or a loaded :class:`DiagnosisFile`.
        out: output directory (nothing written when None).
        executor: runs the trainings and the per-checkpoint tasks (name or executor; default:
            the file's ``[execution]``).
        check: only validate (:func:`check_diagnosis`; nothing trained, no forward pass); returns None.
        progress: progress bars.
        cache_dir: activation cache root of the markers (default ``PROBEKIT_CACHE``).
        outcome: a Python callable outcome, ``fn(model) -> {column: value}`` (a module-level
            function, so that process / Ray workers can import it); a ``COLUMN__n`` key gives
            the number of examples behind ``COLUMN``. Its columns join ``[outcome]``'s (or
            replace the testbed evaluation) and are cached per model under the function's name
            and source text (:mod:`probekit.diagnosis.outcomes`).
        recompute: marker names whose cached cells are measured again (``"*"``: every marker
            and the outcomes; :func:`recompute_set`), e.g. after editing what a plug-in calls.
        checked: the caller has just run :func:`check_diagnosis` on this very spec (the CLI
            does, to print its lines): not run a second time.
    """
    from ..executor import get_executor
    from ..report.write import check_report_dir

    if out is not None and not check:  # the user's own files are refused before any training
        check_report_dir(out, flag="out", also=OUTPUT_FILES)
    spec = spec_or_path if isinstance(spec_or_path, DiagnosisFile) else load_diagnosis(spec_or_path)
    if outcome is not None and not callable(outcome):
        raise ConfigError(f"outcome = {outcome!r}: pass a function fn(model) -> {{column: value}}, "
                          "or name the evaluation file in the diagnosis file's [outcome]")
    recompute_set(spec, recompute)  # an unknown marker name: refused before any work
    if not checked:  # the --check rules, before any training or forward
        check_diagnosis(spec, outcome=outcome)
    if check:
        return None
    start = time.perf_counter()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    ex = (get_executor(executor) if executor is not None
          else spec.suite.execution.make_executor(progress=progress))
    pop_dir = population_dir(spec)
    # one diagnosis per population directory at a time: a second one is refused naming the holder
    lock = DirectoryLock(pop_dir, what="population directory")
    lock.acquire()
    try:
        result = _diagnose_locked(spec, ex, pop_dir, cache_dir, start, stamp, progress, outcome,
                                  recompute)
    finally:
        lock.release()
    if out is not None:
        write_outputs(result, out)
    return result


#: what :func:`write_outputs` writes besides the report (never over the user's own files)
OUTPUT_FILES = ("markers.csv", "markers.json")


def write_outputs(result: DiagnosisResult, out: str | Path) -> dict[str, Path]:
    """``markers.csv`` + ``markers.json`` + ``report.html`` / ``report.json`` in ``out``."""
    from ..report.write import check_report_dir, write_report

    check_report_dir(out, flag="out", also=OUTPUT_FILES)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "markers.csv", "cells": out / "markers.json"}
    text = _csv(result.table)
    atomic_write_text(paths["csv"], text)
    write_sidecar(paths["csv"])
    atomic_write_json(paths["cells"], seal(strict_json({
        "columns": list(result.table),
        "cells": [{"checkpoint": result.table["checkpoint"][i], **{n: c.to_dict() for n, c in row.items()}}
                  for i, row in enumerate(result.cells)],
        "not_applicable": result.not_applicable,
    })))
    paths.update(write_report(result, out))
    return paths
