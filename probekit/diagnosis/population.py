"""The population of a diagnosis: which checkpoints, their design columns, training on demand.

Two sources (``[population]`` of :mod:`probekit.diagnosis.spec`):

* **existing checkpoints** (a glob or a list): each checkpoint's saved config (``config.json``
  ``extra``: task, task/model/train configs) is flattened to ``task.X`` / ``model.X`` /
  ``train.X`` keys; the design columns are ``seed`` (the train seed) and every key whose value
  varies across the population (bookkeeping keys such as evaluation schedules left out);
* **a grid** of one preset: the Cartesian product of ``grid`` values (``--set`` keys of
  :func:`probekit.train.build_run`, plus ``seed``), each run trained through
  :func:`probekit.train.population.train_population` on the executor into
  ``<population dir>/runs/run-<hash of its config>``. A run whose final checkpoint exists trains
  nothing; an interrupted one resumes from its last checkpoint (the trainer's own resume).

A series (``series = [...]`` / ``every = N``) adds each run's intermediate checkpoints at those
steps (passed to a grid's trainings as ``train.checkpoint_steps``).
"""

from __future__ import annotations

import glob
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..suites.spec import SuiteError
from ..util.cache import cache_dir
from ..util.io import atomic_write_text, sha256_bytes
from .spec import DiagnosisFile

__all__ = [
    "Checkpoint",
    "GridRun",
    "design_columns",
    "grid_runs",
    "list_lengths",
    "model_rows",
    "population_dir",
    "resolve_population",
    "train_grid",
    "varying_knobs",
]

#: flattened config keys that describe how a run was logged, not what was trained
_BOOKKEEPING = {
    "train.n_evals", "train.eval_every", "train.eval_steps", "train.eval_at_start",
    "train.n_checkpoints", "train.checkpoint_steps", "train.eval_max_examples",
    "train.eval_batch_size", "train.device", "train.stop_metric", "train.stop_threshold",
}
_DONE = "DONE"


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """One model of the population (a row of the marker table).

    Attributes:
        path: the checkpoint directory (absolute).
        run: the training run it belongs to (its run directory, or the checkpoint itself).
        step: its training step (``None`` when the checkpoint records none).
        final: True for the run's last checkpoint (the model whose outcome is diagnosed).
        design: the design columns (``preset`` for a grid, ``seed`` and the varying knobs).
    """

    path: str
    run: str
    step: int | None
    final: bool
    design: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class GridRun:
    """One training of a grid: the :class:`~probekit.train.population.TrainRun` and its design."""

    run: Any
    design: dict[str, Any]
    final_step: int


def population_dir(spec: DiagnosisFile) -> Path:
    """``[population] out`` (relative to the file), else ``<cache>/diagnosis/<name>-<key>``.

    A population of model entries is cached per model: its cells are keyed by each model's
    own fingerprint, so its default folder leaves the model list and design out of the key
    (``<name>-models-<key>``): adding a model to ``[population] models`` measures only it.
    """
    if spec.population.out is not None:
        return spec.suite.resolve(spec.population.out)
    if spec.population.models is not None:
        import dataclasses

        pop = dataclasses.replace(spec.population, models=(), model_sources=(), design={})
        key = dataclasses.replace(spec, population=pop).population_key()
        return cache_dir("diagnosis", f"{spec.name}-models-{key}")
    return cache_dir("diagnosis", f"{spec.name}-{spec.population_key()}")


def list_lengths(design: dict[str, Any]) -> dict[str, Any]:
    """``design`` plus a numeric ``len(KEY)`` column for every list-valued design column.

    A grid's list knob (``task.train_clauses = [1, 2, 3]``, the coverage knob of An & Du 2026)
    names its run but is no number: the statistics (covariates, knob levels, colours) take its length
    instead, ``len(task.train_clauses) = 3``. The list column itself stays (run identity,
    ``reference`` tables) and is never a knob (:func:`varying_knobs`).
    """
    out = dict(design)
    for k, v in design.items():
        if isinstance(v, (list, tuple)):
            out[f"len({k})"] = len(v)
    return out


def _set_text(key: str, value: Any) -> str:
    return f"{key}={json.dumps(value)}"


def grid_runs(spec: DiagnosisFile, out: Path | None = None) -> list[GridRun]:
    """The trainings of a grid population, each validated by ``build_run`` (no training).

    Raises:
        SuiteError: a grid key unknown to the preset's configs, or a value they refuse
            (``FILE:LINE: [population] grid``).
    """
    from ..train.population import TrainRun, planned_steps

    pop = spec.population
    if not pop.trained:
        raise ConfigError("grid_runs needs a [population] preset (a grid trained on demand)")
    root = (out or population_dir(spec)) / "runs"
    keys = list(pop.grid)
    combos = list(itertools.product(*(pop.grid[k] for k in keys))) if keys else [()]
    runs = []
    for combo in combos:
        design = list_lengths({"preset": pop.preset, **dict(zip(keys, combo))})
        seed = design.get("seed", 0)
        sets = list(pop.sets) + [_set_text(k, v) for k, v in design.items()
                                 if k in keys and k != "seed"]
        try:
            final = planned_steps(pop.preset, steps=pop.steps, seed=seed, sets=sets,
                                  device=pop.device)
        except (ConfigError, ValueError, TypeError) as err:
            where = spec.at("population", "grid" if keys else "sets")
            raise SuiteError(f"{where}: run {design}: {err}") from None
        steps = pop.series_steps(final)
        if steps:
            sets.append(_set_text("train.checkpoint_steps", list(steps)))
        key = sha256_bytes(json.dumps(
            {"preset": pop.preset, "seed": seed, "steps": pop.steps, "sets": sets},
            sort_keys=True).encode())[:12]
        sets += _eval_sets(spec, sets, seed, final, steps)  # not in the key: the same weights
        run = TrainRun(preset=pop.preset, out_dir=str(root / f"run-{key}"), seed=seed,
                       steps=pop.steps, sets=tuple(sets), device=pop.device)
        runs.append(GridRun(run=run, design=design, final_step=final))
    return runs


def _eval_sets(spec: DiagnosisFile, sets: list[str], seed: int, final: int,
               series: tuple[int, ...]) -> list[str]:
    """``--set`` items that evaluate a grid run only where the diagnosis reads an evaluation.

    The diagnosis measures its outcomes on the checkpoints themselves
    (:mod:`probekit.diagnosis.outcomes`); a run's history is read only for a crossing step
    (``[diagnosis] crossing``: the held-out accuracy curve, and ``censor = "next_eval"``). So
    unless the file asks for ``crossing`` or ``[population] curves = true``, the run evaluates at
    the ``series`` steps and its final step only (no step 0). Kept as the preset has them: an
    early stop (``train.stop_metric``, which reads the evaluations), an explicit
    ``train.eval_steps`` among ``sets``, and fine-tune presets. Evaluation draws no random
    number and leaves the weights as they are, so the trained models are the same
    (``tests/diagnosis/test_population_evals.py``).
    """
    from ..train.build import build_run
    from ..train.finetune_presets import is_finetune_preset

    pop = spec.population
    if (pop.curves or spec.diagnosis.crossing is not None or is_finetune_preset(pop.preset)
            or any(s.partition("=")[0].strip() == "train.eval_steps" for s in sets)):
        return []
    config = build_run(pop.preset, steps=pop.steps, seed=seed, sets=sets, device=pop.device)[2]
    if config.stop_metric is not None:
        return []
    return [_set_text("train.eval_steps", [*series, final]), "train.eval_at_start=false"]


def run_complete(run: GridRun) -> bool:
    """True when the run has finished (its final checkpoint, or the DONE mark of an early stop)."""
    from ..train.trainer import step_dir

    out = Path(run.run.out_dir)
    return (out / _DONE).is_file() or (step_dir(out, run.final_step) / "config.json").is_file()


def train_grid(runs: list[GridRun], executor: Any = None) -> int:
    """Train the runs that are not complete (executor tasks); returns how many were trained."""
    from ..executor import check_worker_paths, get_executor
    from ..train.population import train_population

    todo = [r for r in runs if not run_complete(r)]
    if todo:
        ex = get_executor(executor)
        root = Path(todo[0].run.out_dir).parent
        root.mkdir(parents=True, exist_ok=True)
        check_worker_paths(ex, write=[root])
        train_population([r.run for r in todo], ex)
        for r in todo:
            atomic_write_text(Path(r.run.out_dir) / _DONE, "ok\n")
    return len(todo)


def _flatten(extra: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scope, key in (("task", "task_config"), ("model", "model_config"), ("train", "train_config")):
        for name, value in (extra.get(key) or {}).items():
            out[f"{scope}.{name}"] = json.dumps(value) if isinstance(value, (list, dict)) else value
    return out


def design_columns(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Design columns of checkpoints from their saved configs (``config.json`` ``extra``).

    ``seed`` (the train seed) and every flattened ``task.X`` / ``model.X`` / ``train.X`` key
    whose value varies across the population; per-config seeds equal to ``seed`` and
    bookkeeping keys (evaluation / checkpoint schedules, device) are left out.
    """
    flat = [_flatten(c) for c in configs]
    seeds = [f.get("train.seed") for f in flat]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    varying = []
    for k in keys:
        if k in _BOOKKEEPING:
            continue
        values = [f.get(k) for f in flat]
        if len({json.dumps(v, sort_keys=True) for v in values}) < 2:
            continue
        if k.endswith(".seed") and values == seeds:
            continue
        varying.append(k)
    return [{"seed": s, **{k: f.get(k) for k in varying}} for s, f in zip(seeds, flat)]


def _is_checkpoint(path: Path) -> bool:
    return (path / "config.json").is_file()


def _step_of(path: Path, meta: dict[str, Any]) -> int | None:
    import re

    step = (meta.get("extra") or {}).get("step")
    if step is None:
        m = re.search(r"step_(\d+)$", path.name)
        step = int(m.group(1)) if m else None
    return None if step is None else int(step)


def _expand(spec: DiagnosisFile) -> list[Path]:
    """Checkpoint or run directories named by ``checkpoints`` (globs relative to the file)."""
    pop = spec.population
    patterns = [pop.checkpoints] if isinstance(pop.checkpoints, str) else list(pop.checkpoints)
    found: list[Path] = []
    for pattern in patterns:
        full = spec.suite.resolve(pattern)
        hits = sorted(Path(p) for p in glob.glob(str(full)))
        hits = [h for h in hits if _is_checkpoint(h) or (h / "checkpoints").is_dir()]
        if not hits:
            raise SuiteError(f"{spec.at('population', 'checkpoints')}: {pattern!r} matches no "
                             f"checkpoint or run directory ({full}); check the path (relative to "
                             "the diagnosis file)")
        found += hits
    return list(dict.fromkeys(p.resolve() for p in found))


def _series_of(run_dir: Path, spec: DiagnosisFile) -> list[tuple[int, Path]]:
    from ..train.finetune import list_finetune_checkpoints
    from ..train.trainer import list_checkpoints

    ckpts = list_checkpoints(run_dir) or list_finetune_checkpoints(run_dir)  # HF dirs of a fine-tune
    if not ckpts:
        raise SuiteError(f"{spec.at('population')}: run directory {run_dir} holds no complete "
                         "checkpoint")
    return ckpts


def _rows_of_run(run_dir: Path, spec: DiagnosisFile, design: dict[str, Any],
                 *, final_step: int | None = None) -> list[Checkpoint]:
    ckpts = _series_of(run_dir, spec)
    last_step, last_dir = ckpts[-1]
    if final_step is not None and last_step != final_step and not (run_dir / _DONE).is_file():
        raise ConfigError(f"run {run_dir} ends at step {last_step}, not {final_step}: it has not "
                          "finished; rerun `probekit diagnose` to resume its training")
    wanted = set(spec.population.series_steps(last_step))
    have = {s for s, _ in ckpts}
    missing = sorted(wanted - have)
    if missing:
        raise SuiteError(f"{spec.at('population', 'every' if spec.population.every else 'series')}"
                         f": run {run_dir} has no checkpoint at step(s) {missing[:5]} (it has "
                         f"{sorted(have)[:12]}); choose steps it saved")
    rows = [Checkpoint(path=str(d), run=str(run_dir), step=s, final=False, design=dict(design))
            for s, d in ckpts if s in wanted]
    rows.append(Checkpoint(path=str(last_dir), run=str(run_dir), step=last_step, final=True,
                           design=dict(design)))
    return rows


def check_agreement(paths: list[Path], metas: list[dict[str, Any]]) -> None:
    """Every checkpoint was trained on the same task with the same vocabulary.

    Raises:
        ConfigError: naming two checkpoints that disagree and what differs.
    """
    def sig(meta: dict[str, Any]) -> tuple[Any, Any]:
        extra = meta.get("extra") or {}
        return extra.get("task"), json.dumps(extra.get("vocab"), sort_keys=True)

    first = sig(metas[0])
    for path, meta in zip(paths[1:], metas[1:]):
        task, vocab = sig(meta)
        if task != first[0]:
            raise ConfigError(f"checkpoints of different tasks in one population: {paths[0]} "
                              f"({first[0]!r}) and {path} ({task!r}); a population shares one "
                              "task: diagnose them in separate files")
        if vocab != first[1]:
            n0 = len((metas[0].get("extra") or {}).get("vocab", {}).get("tokens", []))
            n1 = len((meta.get("extra") or {}).get("vocab", {}).get("tokens", []))
            raise ConfigError(f"checkpoints with different vocabularies in one population: "
                              f"{paths[0]} ({n0} tokens) and {path} ({n1} tokens); markers and "
                              "outcomes need the same tokens: diagnose them separately")


def resolve_population(
    spec: DiagnosisFile, *, out: Path | None = None, train: bool = True, executor: Any = None,
) -> list[Checkpoint]:
    """The checkpoints (rows) of the population; a grid is trained first when ``train``.

    With ``train=False`` a grid's runs must already be complete (``--check`` uses
    :func:`grid_runs` instead and trains nothing).
    """
    from ..models.checkpoint import read_checkpoint_meta

    pop = spec.population
    rows: list[Checkpoint] = []
    if pop.models is not None:
        return model_rows(spec)
    if pop.trained:
        runs = grid_runs(spec, out)
        if train:
            train_grid(runs, executor)
        for r in runs:
            rows += _rows_of_run(Path(r.run.out_dir), spec, r.design, final_step=r.final_step)
    else:
        entries = _expand(spec)
        finals: list[tuple[Path, list[tuple[int | None, Path]]]] = []
        for e in entries:
            if _is_checkpoint(e):
                finals.append((e, []))
            else:
                rows_e = _rows_of_run(e, spec, {})
                finals.append((Path(rows_e[-1].path),
                               [(c.step, Path(c.path)) for c in rows_e[:-1]]))
        metas = [read_checkpoint_meta(p) for p, _ in finals]
        check_agreement([p for p, _ in finals], metas)
        designs = design_columns([m.get("extra") or {} for m in metas])
        for (path, series), meta, design, entry in zip(finals, metas, designs, entries):
            run = str(entry)
            rows += [Checkpoint(path=str(p), run=run, step=s, final=False, design=dict(design))
                     for s, p in series]
            rows.append(Checkpoint(path=str(path), run=run, step=_step_of(path, meta), final=True,
                                   design=dict(design)))
    from ..train.finetune_presets import is_finetune_preset

    if not pop.trained or is_finetune_preset(pop.preset):  # fine-tunes: HF dirs, no probekit meta
        return rows
    metas = [read_checkpoint_meta(c.path) for c in rows if c.final]
    check_agreement([Path(c.path) for c in rows if c.final], metas)
    return rows


def model_rows(spec: DiagnosisFile) -> list[Checkpoint]:
    """One final row per ``[population] models`` entry, with its design columns.

    ``path`` is the entry resolved (a registered name, or the absolute directory), ``run`` the
    entry as written; a probekit checkpoint keeps its step. Nothing is loaded or downloaded: a
    named model's GGUF package is only looked up (its digest is the cache identity).

    Raises:
        ConfigError: ``FILE:LINE: [population] models`` naming an entry that is no longer a
            model directory, or a named model whose package is missing (with its install command).
    """
    from ..models.checkpoint import read_checkpoint_meta
    from ..models.named import REGISTRY, MissingExtraError
    from .real_models import entry_kind

    pop = spec.population
    where = spec.at("population", "models")
    rows = []
    for entry, source in zip(pop.models or (), pop.model_sources, strict=True):
        kind = entry_kind(source)
        if kind is None:
            raise ConfigError(f"{where}: model entry {entry!r} ({source}) is no longer a model "
                              "directory (config.json + weights); check the path")
        step = None
        if kind == "named":
            try:
                REGISTRY[source].sha256()
            except MissingExtraError as err:
                raise ConfigError(f"{where}: {err}") from None
        elif kind == "checkpoint":
            step = _step_of(Path(source), read_checkpoint_meta(source))
        rows.append(Checkpoint(path=source, run=entry, step=step, final=True,
                               design=dict(pop.design.get(entry, {}))))
    return rows


def varying_knobs(rows: list[Checkpoint]) -> list[str]:
    """Design columns (other than ``seed``, ``preset`` and lists) with more than one value.

    A list-valued column is represented by its ``len(KEY)`` column (:func:`list_lengths`).
    """
    finals = [r for r in rows if r.final] or rows
    keys = list(dict.fromkeys(k for r in finals for k in r.design))
    keys = [k for k in keys if not any(isinstance(r.design.get(k), (list, tuple)) for r in finals)]
    return [k for k in keys if k not in ("seed", "preset")
            and len({json.dumps(r.design.get(k), sort_keys=True) for r in finals}) > 1]
