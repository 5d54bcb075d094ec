"""Power-first design: what a planned population can detect, and what it costs, before training.

:func:`plan_power` lays out the planned population exactly as the diagnosis will analyse it
(the ``[population] grid``'s levels x seeds, one model per cell; the ``[diagnosis]`` covariates
coded as :meth:`~probekit.diagnosis.statistics.table.MarkerTable.design` codes them; the seed as the
groups) and simulates the report's partial test on it (:mod:`.statistics.power`: HC3, Freedman-Lane
within seeds, at ``alpha / K`` for ``K`` markers under Holm) over a grid of planted partial r.
It returns the power curve, the 80 %-power partial r (the MDE) with its Monte Carlo SE, the
check against a target MDE (with the seeds that would reach it) and the training cost.

**Measured covariates.** A covariate that is not a design column (``train_loss``,
``id_accuracy``) does not exist before training. It is simulated as a continuous covariate
correlated with the design knobs: ``c = sqrt(R^2) s + sqrt(1 - R^2) z`` with ``s`` the
standardised sum of the knobs' standardised level indices, ``z`` standard normal and ``R^2 =``
:data:`MEASURED_R2` (0.5), drawn afresh for each of a pool of simulated populations, and coded
by its default coding (a natural spline with ``spline_df`` columns once it has more than 10
distinct values). What matters to the partial test is mostly the degrees of freedom the
covariate's terms take; its correlation with the knobs moves the leverages a little.

**Cost.** Training seconds per model are read from earlier runs with the same task, model and
training configuration (up to the seed and the step count), the seconds per step of their
``history.json`` (``elapsed_s``: training wall time, evaluations included) times the planned
steps; the cells of the grid with no such run take the cost of one timing run (one model of
the first such cell trained for a few steps: the slope of its ``elapsed_s`` over the second
half of them, scaled to the planned steps, plus the first half's excess for the early
evaluations).
Without an exact match, earlier runs of the same task and model (other training settings, e.g.
another weight decay) are used before a timing run. All are wall seconds of training on the machine that ran them (on a busy 2-core box, more
than the CPU seconds of a quiet one). Marker measurement is not included.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from probekit.errors import ConfigError, KeyedValueError

from .statistics.families import family_name
from .statistics.power import PowerCurve, simulated_power

__all__ = ["MEASURED_R2", "PlannedDesign", "PowerPlan", "TrainingCost", "check_target",
           "design_from_spec", "plan_power", "seeds_to_reach", "training_cost"]

#: share of a measured covariate's variance its simulation takes from the design knobs
MEASURED_R2 = 0.5
#: a target within this many Monte Carlo SE above the design's MDE is "borderline" (a warning)
BORDERLINE_SE = 2.0


def _as_level(v: Any) -> Any:
    return len(v) if isinstance(v, (list, tuple)) else v


@dataclass(frozen=True, kw_only=True)
class PlannedDesign:
    """A planned population's layout: design columns per model and the analysis' question.

    Attributes:
        columns: design column -> its value for each planned model (knobs and the seed).
        covariates: the analysis' covariates; those not in ``columns`` are measured after
            training and simulated (module docstring).
        groups: the groups column (the seed), or None (the models are the unit).
        n_markers: ``K``, the markers Holm adjusts over (the level is ``alpha / K``); from a
            file, a family of layers (``NAME@L0..``) counts once: the level of a marker outside
            it (:func:`probekit.diagnosis.mde.unit_levels`).
        alpha: the report's level.
        covariate_coding, spline_df: the ``[diagnosis]`` coding keys.
        measured_r2: :data:`MEASURED_R2`.
        inference: ``"within_groups"`` (the default analysis) or ``"cluster"`` (not simulated).
    """

    columns: dict[str, tuple[Any, ...]]
    covariates: tuple[str, ...]
    groups: str | None
    n_markers: int
    alpha: float = 0.05
    covariate_coding: dict[str, str] = field(default_factory=dict)
    spline_df: int = 4
    measured_r2: float = MEASURED_R2
    inference: str = "within_groups"

    def __post_init__(self) -> None:
        """Check lengths, roles and ranges (each error names the fix)."""
        sizes = {len(v) for v in self.columns.values()}
        if len(sizes) > 1:
            raise ConfigError(f"design columns of unequal lengths {sorted(sizes)}; give one "
                              "value per planned model in every column")
        if self.groups is not None and self.groups not in self.columns:
            raise ConfigError(f"groups {self.groups!r} is not a design column; the columns are "
                              f"{sorted(self.columns)}")
        if self.groups is not None and self.groups in self.covariates:
            raise ConfigError(f"the groups column {self.groups!r} is also a covariate; group "
                              "fixed effects are in the design already")
        if isinstance(self.n_markers, bool) or self.n_markers < 1:
            raise KeyedValueError("n_markers", f"n_markers = {self.n_markers!r}: the number of markers tested "
                              "must be >= 1")
        if not 0.0 < self.alpha < 1.0:
            raise KeyedValueError("alpha", f"alpha = {self.alpha}: must be in (0, 1)")
        if not 0.0 <= self.measured_r2 < 1.0:
            raise KeyedValueError("measured_r2", f"measured_r2 = {self.measured_r2}: must be in [0, 1)")
        if self.inference not in ("within_groups", "cluster"):
            raise KeyedValueError("inference", f"inference = {self.inference!r}: 'within_groups' or 'cluster'")

    @classmethod
    def grid(cls, knobs: Mapping[str, Sequence[Any]], seeds: int | Sequence[Any], *,
             covariates: Sequence[str] | None = None, n_markers: int, **options: Any,
             ) -> PlannedDesign:
        """The Cartesian product of the knobs' levels and the seeds, one model per cell.

        ``seeds``: a count (seeds ``0 .. seeds-1``) or the seed values; the groups column is
        ``seed``. ``covariates`` defaults to the knobs.
        """
        seed_values = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
        keys = list(knobs)
        combos = list(itertools.product(*(list(knobs[k]) for k in keys), seed_values))
        cols = {k: tuple(_as_level(c[i]) for c in combos) for i, k in enumerate(keys)}
        cols["seed"] = tuple(c[-1] for c in combos)
        return cls(columns=cols, covariates=tuple(keys if covariates is None else covariates),
                   groups="seed", n_markers=n_markers, **options)

    @property
    def n_models(self) -> int:
        """Planned models."""
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def n_groups(self) -> int:
        """Distinct groups (models without groups)."""
        return len(set(self.columns[self.groups])) if self.groups else self.n_models

    @property
    def measured(self) -> tuple[str, ...]:
        """Covariates that are not design columns (simulated)."""
        return tuple(c for c in self.covariates if c not in self.columns)

    @property
    def level(self) -> float:
        """``alpha / K``: the level the first Holm rejection needs."""
        return self.alpha / self.n_markers

    def layout(self) -> str:
        """``"train.weight_decay 3 x task.train_fraction 3 x seed 16 = 144 models"``."""
        parts = [f"{k} {len(set(v))}" for k, v in self.columns.items() if len(set(v)) > 1]
        return f"{' x '.join(parts) or 'one cell'} = {self.n_models} models"

    def with_seeds(self, n_seeds: int) -> PlannedDesign:
        """The same knob cells with ``n_seeds`` seeds (``0 .. n_seeds-1``) each."""
        if self.groups is None:
            raise ConfigError("the design has no seed groups to add to")
        keys = [k for k in self.columns if k != self.groups]
        cells = list(dict.fromkeys(tuple(self.columns[k][i] for k in keys)
                                   for i in range(self.n_models)))
        combos = [(*c, s) for c in cells for s in range(n_seeds)]
        cols = {k: tuple(c[i] for c in combos) for i, k in enumerate(keys)}
        cols[self.groups] = tuple(c[-1] for c in combos)
        return replace(self, columns=cols)

    def table(self, rng: np.random.Generator) -> dict[str, list[Any]]:
        """One simulated table of the design's covariates and groups (measured ones drawn)."""
        keep = [c for c in self.covariates if c in self.columns]
        out: dict[str, list[Any]] = {c: list(self.columns[c]) for c in keep}
        if self.groups:
            out[self.groups] = list(self.columns[self.groups])
        if self.measured:
            score = np.zeros(self.n_models)
            for c in keep:
                _, code = np.unique(np.array([str(v) for v in self.columns[c]]),
                                    return_inverse=True)
                if np.ptp(code) > 0:
                    score += (code - code.mean()) / code.std()
            if score.std() > 0:
                score = score / score.std()
            a = math.sqrt(self.measured_r2) if score.std() > 0 else 0.0
            for c in self.measured:
                z = rng.standard_normal(self.n_models)
                out[c] = (a * score + math.sqrt(1.0 - a * a) * z).tolist()
        return out

    def covariate_matrix(self, rng: np.random.Generator) -> np.ndarray:
        """The coded covariate terms of one simulated table (no intercept, no group columns)."""
        from .statistics.table import as_marker_table

        t = as_marker_table(self.table(rng))
        return t.design(self.covariates, coding=self.covariate_coding or None,
                        spline_df=self.spline_df, groups=self.groups)[0]

    def draw(self) -> np.ndarray | Callable[[np.random.Generator], np.ndarray]:
        """What :func:`.statistics.power.simulated_power` takes: the fixed matrix, or a draw per population."""
        if self.measured:
            return self.covariate_matrix
        return self.covariate_matrix(np.random.default_rng(0))

    def group_codes(self) -> np.ndarray | None:
        """Integer group code per model (None without groups)."""
        if not self.groups:
            return None
        values = [str(v) for v in self.columns[self.groups]]
        return np.unique(np.array(values), return_inverse=True)[1]


def design_from_spec(spec: Any) -> PlannedDesign:
    """The planned layout of a diagnosis file's ``[population] grid`` (nothing is trained).

    Columns: every grid key (a list-valued knob as ``len(KEY)``, as the table has it), with
    ``[diagnosis] covariates`` (default: the varying knobs, plus ``id_accuracy`` unless it is the
    outcome), ``groups`` (default ``seed`` when the grid has seeds) and ``K`` = the number of
    ``[[marker]]`` columns (a family counts each member).

    Raises:
        ConfigError: a population that is not a grid trained on demand.
    """
    from .population import grid_runs

    if not spec.population.trained:
        raise ConfigError(f"{spec.source}: --plan plans a grid population ([population] preset + "
                          "grid); this population exists already: its report simulates the MDE "
                          "on the real table")
    runs = grid_runs(spec)
    cols: dict[str, tuple[Any, ...]] = {}
    keys = []
    for k, values in spec.population.grid.items():  # a list knob enters as len(KEY), as in the table
        name = f"len({k})" if any(isinstance(v, (list, tuple)) for v in values) else k
        keys.append(name)
        cols[name] = tuple(_as_level(r.design.get(k)) for r in runs)
    d = spec.diagnosis
    knobs = [k for k in keys if k != "seed" and len(set(map(str, cols[k]))) > 1]
    if d.covariates is not None:
        covariates = tuple(d.covariates)
    else:
        covariates = tuple(knobs) + (("id_accuracy",) if d.outcome != "id_accuracy" else ())
    groups = ("seed" if "seed" in cols else None) if d.groups is None else (d.groups or None)
    if groups is not None and groups not in cols:
        raise ConfigError(f"{spec.at('diagnosis', 'groups')} = {groups!r}: not a grid key; the "
                          f"grid keys are {keys}")
    return PlannedDesign(columns=cols, covariates=covariates, groups=groups,
                         n_markers=len({family_name(m.name) or m.name for m in spec.markers}),
                         alpha=d.alpha,
                         covariate_coding=dict(d.covariate_coding),
                         spline_df=d.spline_df or 4, inference=d.inference or "within_groups")


# --------------------------------------------------------------------------- training cost


@dataclass(frozen=True, kw_only=True)
class TrainingCost:
    """Training seconds of a planned population.

    Attributes:
        per_model: mean seconds per planned model.
        total: seconds for every planned model (``n_models x per_model`` up to rounding).
        n_models: planned models.
        recorded_cells, timed_cells: grid cells (seeds pooled) costed from earlier runs / from
            a timing run.
        detail: where the figures come from, in words.
    """

    per_model: float
    total: float
    n_models: int
    recorded_cells: int
    timed_cells: int
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_NOT_COST = {"seed", "steps", "checkpoint_steps", "n_checkpoints", "device"}


def _signature(task_name: str, task_config: Mapping[str, Any], model_config: Mapping[str, Any],
               train_config: Mapping[str, Any] | None) -> str:
    """What a run's cost per step depends on: its configs without seed, steps and checkpoints.

    ``train_config=None``: the coarse signature (task name and model only), matched when no
    earlier run has the exact configuration.
    """
    import json

    def strip(d: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k not in _NOT_COST}

    if train_config is None:
        return json.dumps([task_name, strip(model_config)], sort_keys=True, default=str)
    return json.dumps([task_name, strip(task_config), strip(model_config), strip(train_config)],
                      sort_keys=True, default=str)


def _planned_signature(run: Any) -> tuple[str, str]:
    """The exact and the coarse signature of a planned run (configs built, nothing trained)."""
    import dataclasses
    import json

    from ..train.build import build_run

    task, mcfg, tcfg = build_run(run.preset, steps=run.steps, seed=run.seed, sets=list(run.sets),
                                 device=run.device)
    plain = json.loads(json.dumps(
        [dataclasses.asdict(task.config), mcfg.to_dict(), tcfg.to_dict()], default=str))
    return _signature(task.name, *plain), _signature(task.name, plain[0], plain[1], None)


def recorded_seconds_per_step(roots: Sequence[Path]) -> dict[str, list[float]]:
    """Signature (exact and coarse) -> seconds per step of every earlier run under ``roots``.

    A run is a directory with ``run.json`` and ``history.json``; its cost per step is the last
    history record's ``elapsed_s`` over its ``step``. Each run counts under both signatures.
    """
    import json

    out: dict[str, list[float]] = {}
    seen: set[Path] = set()
    for root in roots:
        for meta in sorted(Path(root).glob("*/runs/*/run.json")) + sorted(
                Path(root).glob("runs/*/run.json")):
            run_dir = meta.parent.resolve()
            if run_dir in seen or not (run_dir / "history.json").is_file():
                continue
            seen.add(run_dir)
            try:
                m = json.loads(meta.read_text())
                records = json.loads((run_dir / "history.json").read_text())["records"]
                last = records[-1]
                rate = float(last["elapsed_s"]) / float(last["step"])
                sigs = (_signature(m["task"], m["task_config"], m["model_config"],
                                   m["train_config"]),
                        _signature(m["task"], m["task_config"], m["model_config"], None))
            except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError):
                continue
            if math.isfinite(rate) and rate > 0:
                for sig in sigs:
                    out.setdefault(sig, []).append(rate)
    return out


def _timed_cost(run: Any, steps: int) -> tuple[float, float]:
    """``(overhead, seconds per step)`` of one model of ``run`` trained ``steps`` steps now.

    From its history (a temp directory; one checkpoint instead of the run's series): the rate is
    the slope of ``elapsed_s`` over the second half of the steps (evaluations every
    ``eval_every`` included), the overhead what the first half cost beyond that rate (the
    log-spaced early evaluations); model building is excluded, as in a recorded run.
    """
    import tempfile

    from ..train.build import build_run, loss_terms
    from ..train.history import History
    from ..train.trainer import train

    # one checkpoint; a lean evaluation schedule (eval_steps at the planned steps) moves to the
    # timing run's own last step
    lean = any(s.startswith("train.eval_steps=") for s in run.sets)
    sets = [s for s in run.sets
            if not s.startswith(("train.checkpoint_steps=", "train.eval_steps="))]
    sets.append("train.n_checkpoints=1")
    if lean:
        sets.append(f"train.eval_steps=[{steps}]")
    task, mcfg, tcfg = build_run(run.preset, steps=steps, seed=run.seed, sets=sets,
                                 device=run.device)
    with tempfile.TemporaryDirectory(prefix="probekit-plan-") as tmp:
        train(task, mcfg, tcfg, Path(tmp) / "run", progress=False, resume=False, plot=False,
              loss_terms=loss_terms(task, tcfg))
        records = History.read(Path(tmp) / "run").records
    last = records[-1]
    mid = next((r for r in records if r["step"] >= last["step"] / 2 and r["step"] > 0), last)
    if mid["step"] >= last["step"]:
        return 0.0, float(last["elapsed_s"]) / max(float(last["step"]), 1.0)
    rate = (float(last["elapsed_s"]) - float(mid["elapsed_s"])) / (last["step"] - mid["step"])
    return max(float(mid["elapsed_s"]) - rate * mid["step"], 0.0), rate


def training_cost(spec: Any, *, timing_steps: int = 100,
                  roots: Sequence[Path] | None = None) -> TrainingCost:
    """Training seconds of a grid population (module docstring: recorded, else one timing run).

    Args:
        spec: a loaded diagnosis file with a ``[population] grid``.
        timing_steps: steps of the timing run of a cell with no earlier run (at most the
            planned steps).
        roots: where to look for earlier runs (default: the diagnosis cache and the
            population's own directory).
    """
    from ..util.cache import cache_dir
    from .population import grid_runs, population_dir

    runs = grid_runs(spec)
    if roots is None:
        roots = [cache_dir("diagnosis"), population_dir(spec)]
    recorded = recorded_seconds_per_step([r for r in roots if Path(r).is_dir()])
    rates: dict[str, float] = {}
    how: dict[str, str] = {}
    overhead = 0.0
    timed_rate: float | None = None
    total = 0.0
    for r in runs:
        exact, coarse = _planned_signature(r.run)
        if exact not in rates:
            if exact in recorded or coarse in recorded:
                how[exact] = "exact" if exact in recorded else "coarse"
                rates[exact] = float(np.median(recorded[exact if exact in recorded else coarse]))
            else:  # one timing run, of the first cell without a record, serves every such cell
                if timed_rate is None:
                    steps = max(1, min(int(timing_steps), int(r.final_step)))
                    overhead, timed_rate = _timed_cost(r.run, steps)
                how[exact], rates[exact] = "timed", timed_rate
        total += rates[exact] * r.final_step + (overhead if how[exact] == "timed" else 0.0)
    cells = len(rates)
    count = {k: sum(v == k for v in how.values()) for k in ("exact", "coarse", "timed")}
    parts = []
    if count["exact"]:
        parts.append(f"{count['exact']} of {cells} grid cells from earlier runs with the same "
                     "configuration")
    if count["coarse"]:
        parts.append(f"{count['coarse']} of {cells} from earlier runs of the same task and model "
                     "(other training settings)")
    if count["exact"] or count["coarse"]:
        parts[-1] += " (their history elapsed_s: wall seconds per step)"
    if count["timed"]:
        parts.append(f"{count['timed']} of {cells} cells from one model trained "
                     f"{max(1, min(int(timing_steps), runs[0].final_step))} steps now (wall "
                     "seconds per step over its second half, scaled to the planned steps, plus "
                     f"its first half's overhead {overhead:.1f} s)")
    return TrainingCost(per_model=total / len(runs), total=total, n_models=len(runs),
                        recorded_cells=count["exact"] + count["coarse"],
                        timed_cells=count["timed"], detail="; ".join(parts))


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True, kw_only=True)
class PowerPlan:
    """Result of :func:`plan_power`.

    Attributes:
        design: the planned layout.
        curve: the simulated power curve at ``alpha / K`` (:class:`.statistics.power.PowerCurve`).
        target_mde: the stated target partial r (None: none).
        status: ``"no_target"``, ``"reaches"`` (MDE <= target), ``"borderline"`` (the MDE
            above the target by at most :data:`BORDERLINE_SE` Monte Carlo SE: a warning) or
            ``"misses"`` (refused).
        fix: what reaches the target (e.g. ``"add seeds: 12 seeds (192 models) reach 0.29"``).
        cost: the training cost (None: not estimated).
        seconds: wall time of the plan.
    """

    design: PlannedDesign
    curve: PowerCurve
    target_mde: float | None
    status: str
    fix: str = ""
    cost: TrainingCost | None = None
    seconds: float = 0.0

    @property
    def mde(self) -> float:
        """The design's 80 %-power partial r."""
        return self.curve.mde

    def refusal(self) -> str | None:
        """One line when the design misses its target (the CLI's exit-2 message), else None."""
        if self.status != "misses":
            return None
        return (f"target_mde {self.target_mde:g} is out of reach: the planned design "
                f"({self.design.layout()}) detects a partial r of {_mde_text(self.curve)} with "
                f"80% power; {self.fix or 'add models'}")

    def warning(self) -> str | None:
        """One line when the MDE is within Monte Carlo error above the target."""
        if self.status != "borderline":
            return None
        return (f"target_mde {self.target_mde:g} is borderline: the design's MDE "
                f"{_mde_text(self.curve)} lies within {BORDERLINE_SE:g} Monte Carlo SE of it; "
                f"{self.fix or 'add models for a margin'}")

    def lines(self) -> list[str]:
        """The ``--plan`` printout."""
        d, c = self.design, self.curve
        given = ", ".join(d.covariates) or "none"
        measured = (f"; simulated (measured after training, R^2 {d.measured_r2:g} with the "
                    f"knobs): {', '.join(d.measured)}" if d.measured else "")
        out = [f"planned design: {d.layout()}, {d.n_groups} {d.groups or 'model'} groups, "
               f"{c.df} residual df",
               f"  covariates: {given}{measured}",
               f"  test: {c.inference} (HC3, Freedman-Lane {c.n_permutations} permutations"
               f"{' within ' + d.groups if d.groups else ''}) at alpha/K = {d.alpha:g}/"
               f"{d.n_markers} = {d.level:.4g}; {c.n_simulations} simulations "
               f"({c.seconds:.1f} s)",
               "  power by true partial r (Monte Carlo SE at most "
               f"{max(c.power_se):.1%}):"]
        pairs = [f"{e:.2f}: {p:.0%}" for e, p in zip(c.effects, c.power, strict=True)]
        out += ["    " + "  ".join(pairs[i:i + 7]) for i in range(0, len(pairs), 7)]
        out.append(f"  80%-power partial r (MDE): {_mde_text(c)} (classical t formula: "
                   f"{c.classical_mde:.3f})")
        if self.target_mde is not None:
            word = {"reaches": "reached", "borderline": "borderline", "misses": "NOT reached"}
            out.append(f"  target_mde {self.target_mde:g}: {word[self.status]}"
                       + (f"; {self.fix}" if self.fix else ""))
        if self.cost is not None:
            k = self.cost
            out.append(f"  training cost: {d.n_models} models x {k.per_model:.1f} s = "
                       f"{_duration(k.total)} ({k.detail}; marker measurement not included)")
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (``plan.json``)."""
        d = self.design
        return {"design": {"layout": d.layout(), "n_models": d.n_models,
                           "n_groups": d.n_groups, "groups": d.groups,
                           "covariates": list(d.covariates), "measured": list(d.measured),
                           "measured_r2": d.measured_r2, "n_markers": d.n_markers,
                           "alpha": d.alpha, "level": d.level},
                "power": self.curve.to_dict(), "mde": _finite(self.mde),
                "mde_se": _finite(self.curve.mde_se), "target_mde": self.target_mde,
                "status": self.status, "fix": self.fix,
                "cost": None if self.cost is None else self.cost.to_dict(),
                "seconds": self.seconds}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _mde_text(c: PowerCurve) -> str:
    if not math.isfinite(c.mde):
        top = c.effects[-1]
        return f"> {top:.2f} (80% power not reached up to {top:.2f})"
    return f"{c.mde:.3f} +- {c.mde_se:.3f}" if math.isfinite(c.mde_se) else f"{c.mde:.3f}"


def _curve(design: PlannedDesign, n_simulations: int, n_permutations: int | None,
           seed: int) -> PowerCurve:
    if design.inference == "cluster":
        raise ConfigError("[diagnosis] inference = \"cluster\": the planner simulates the "
                          "within-groups test only; plan with inference unset (within_groups)")
    return simulated_power(design.draw(), design.group_codes(), level=design.level,
                           n_simulations=n_simulations, n_permutations=n_permutations, seed=seed)


def seeds_to_reach(design: PlannedDesign, target: float, curve: PowerCurve, *,
                   n_simulations: int = 200, seed: int = 0, max_seeds: int = 200,
                   tries: int = 4) -> tuple[int, float] | None:
    """Seeds per cell whose simulated MDE reaches ``target``, and that MDE (None: none found).

    The classical MDE times the simulated / classical ratio of the last simulated design (1.1
    when its curve never reached 80 %) predicts the seed count; the prediction is simulated
    (``n_simulations``), and a miss is predicted again from its own ratio (one more seed at
    least), ``tries`` times.
    """
    from .statistics.inference import mde_partial_r

    if design.groups is None:
        return None
    g0 = design.n_groups
    cells = design.n_models // g0
    rank = design.n_models - curve.df - 1  # terms of the design: one more per seed

    def predict(ratio: float, start: int) -> int | None:
        for g in range(start, max_seeds + 1):
            df = cells * g - (rank + g - g0) - 1
            if df >= 2 and ratio * mde_partial_r(df, design.level) <= target:
                return g
        return None

    ratio = curve.mde / curve.classical_mde if math.isfinite(curve.mde) else 1.1
    g = predict(ratio, g0 + 1)
    for _ in range(tries):
        if g is None:
            return None
        trial = _curve(design.with_seeds(g), n_simulations, None, seed)
        if math.isfinite(trial.mde) and trial.mde <= target:
            return g, trial.mde
        ratio = max(trial.mde / trial.classical_mde if math.isfinite(trial.mde) else 1.1 * ratio,
                    ratio)
        g = predict(ratio, g + 1)
    return None


def _status(curve: PowerCurve, target: float | None) -> str:
    if target is None:
        return "no_target"
    if math.isfinite(curve.mde) and curve.mde <= target:
        return "reaches"
    se = curve.mde_se if math.isfinite(curve.mde_se) else 0.0
    if math.isfinite(curve.mde) and curve.mde - BORDERLINE_SE * se <= target:
        return "borderline"
    return "misses"


def plan_power(
    target: Any, *, target_mde: float | None = None, n_simulations: int = 400,
    n_permutations: int | None = None, seed: int = 0, cost: bool = True,
    timing_steps: int = 100,
) -> PowerPlan:
    """Simulated power, MDE, target check and training cost of a planned population.

    Args:
        target: a diagnosis file (path or loaded) with a ``[population] grid``, or a
            :class:`PlannedDesign` (no cost then).
        target_mde: the partial r the design must detect with 80 % power (default: the file's
            ``[population] target_mde``; None: no check).
        n_simulations: simulated populations (Monte Carlo SE of a power near 80 %: 2 points).
        n_permutations: permutations per test (default: enough to resolve ``alpha / K``).
        seed: seeds the simulation.
        cost: estimate the training cost (a file only; may train one model a few steps).
        timing_steps: steps of that timing run.

    Raises:
        ConfigError: a population that is not a grid, a target outside (0, 1), a design with no
            residual degree of freedom, ``inference = "cluster"``.
    """
    start = time.perf_counter()
    spec = None
    if isinstance(target, PlannedDesign):
        design = target
    else:
        from .spec import DiagnosisFile, load_diagnosis

        spec = target if isinstance(target, DiagnosisFile) else load_diagnosis(target)
        design = design_from_spec(spec)
        if target_mde is None:
            target_mde = spec.population.target_mde
    if target_mde is not None and not 0.0 < target_mde < 1.0:
        raise ConfigError(f"target_mde = {target_mde}: a partial correlation in (0, 1), e.g. 0.3")
    curve = _curve(design, n_simulations, n_permutations, seed)
    status = _status(curve, target_mde)
    fix = ""
    if status in ("misses", "borderline") and target_mde is not None:
        found = seeds_to_reach(design, target_mde, curve, seed=seed,
                               n_simulations=min(200, n_simulations))
        if found is not None:
            g, mde = found
            fix = (f"add seeds: {g} seeds ({design.n_models // design.n_groups * g} models) "
                   f"reach {mde:.2f}")
        else:
            fix = "add knob levels or models, or drop covariates (no seed count up to 200 reaches it)"
    training = training_cost(spec, timing_steps=timing_steps) if cost and spec is not None else None
    return PowerPlan(design=design, curve=curve, target_mde=target_mde, status=status, fix=fix,
                     cost=training, seconds=round(time.perf_counter() - start, 2))


#: simulated populations of the check a run with ``target_mde`` makes before training
CHECK_SIMULATIONS = 400


def check_target(spec: Any, *, n_simulations: int | None = None) -> str:
    """The one-line verdict of a grid's ``[population] target_mde``, before any training.

    Returns the line to show (reached, or a borderline warning).

    Raises:
        ConfigError: the design cannot reach the target (the refusal names the target, the
            design's MDE and the seeds that would reach it).
    """
    plan = plan_power(spec, n_simulations=CHECK_SIMULATIONS if n_simulations is None
                      else n_simulations, cost=False)
    refusal = plan.refusal()
    if refusal is not None:
        raise ConfigError(f"{spec.at('population', 'target_mde')}: {refusal}"
                          if plan.target_mde == spec.population.target_mde else refusal)
    return (f"warning: {plan.warning()}" if plan.status == "borderline" else
            f"plan: the design ({plan.design.layout()}) detects a partial r of "
            f"{_mde_text(plan.curve)} with 80% power; target_mde {plan.target_mde:g} reached")
