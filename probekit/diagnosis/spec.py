"""Diagnosis files (``probes/diagnose_*.toml``): a population, its markers and the question.

A diagnosis file is a suite's fixed sections (``[suite]``, ``[data]``, ``[capture]``,
``[stats]``, ``[execution]``; no ``[model]``: the population gives the models) plus::

    [population]                 # existing checkpoints ...
    checkpoints = "runs/*/checkpoints/step_0003000"     # a glob or a list (relative to the file)
    # ... or a grid trained on demand (cached by config; an interrupted run resumes)
    preset = "modular_addition"
    grid = { "train.weight_decay" = [0.3, 1.0], "task.train_fraction" = [0.4, 0.6], seed = [0, 1, 2] }
    sets = ["task.p=23"]         # fixed --set overrides of every run
    steps = 300                  # training steps (default: the preset's)
    every = 50                   # or series = [30, 75]: intermediate checkpoints (early warning)
    interventions = [{ knob = "train.weight_decay", target = "gini" }]   # optional: causal arms

    [[marker]]
    name = "gini"
    measure = "fourier_gini"     # a registered measurement kind; its own keys follow
    source = "embed"

    [diagnosis]
    outcome = "id_accuracy"      # a column of the table (see probekit.diagnosis.outcomes)
    covariates = ["train.weight_decay", "task.train_fraction", "train_loss"]

The population may instead be pretrained LMs, Hugging Face directories (a glob expands to every
model directory it matches) or probekit checkpoints with the design columns the user states
(:mod:`probekit.diagnosis.real_models`), scored on the user's own evaluation file
(:mod:`probekit.diagnosis.outcomes`)::

    [population]
    models = ["smollm2-135m", "runs/ft-a", "runs/ft-b"]
    design = "design.csv"        # or [population.design] "runs/ft-a" = { lr = 1e-4, seed = 0 }

    [outcome]
    file = "data/eval.jsonl"     # prompt / answer / split rows
    score = ["exact_match", "logprob"]

``[plugins] modules = ["my_markers"]`` names modules of the user's own code (relative to the
file's folder) that define measurement kinds (:mod:`probekit.hypotheses.plugins`), imported
before the markers are checked.

A ``[[marker]]`` read at several layers is a **family** (:mod:`probekit.diagnosis.statistics.families`)::

    [[marker]]
    name = "probe_primitive"
    measure = "probe_accuracy"
    site = "resid_post@3"        # the layer is replaced by each of the family's layers
    layers = [0, 1, 2, 3]        # or "all" (every block of the population's models: model_layers)
    # sites = ["resid_post@1", "attn_out@1"]   # or explicit sites

expands into the markers ``probe_primitive@L0`` .. ``probe_primitive@L3`` (``NAME@<site>`` for
``sites``): one column each in ``markers.csv``, tested as one family that counts once across
markers. ``layers`` sets a kind's ``layer`` key when it has one, else the layer of its ``site``.

Every key is validated like suite sections (``FILE:LINE: [section] key`` errors); a marker's
keys by its kind's spec class (an unknown ``measure`` lists the registered kinds).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from ..errors import ConfigError, KeyedValueError
from ..stats.limits import MAX_SIMULATIONS
from ..suites.spec import Suite, SuiteError, build_suite, build_table, location, read_toml
from ..util.config import close_match_hint
from ..util.constraints import Between, Ge, Validated, keys_of
from ..util.io import sha256_bytes
from .statistics.options import DEFAULTS, option_type

__all__ = [
    "CausalPair",
    "DiagnosisFile",
    "DiagnosisSettings",
    "MarkerSpec",
    "PopulationSpec",
    "check_analysis_keys",
    "causal_lines",
    "check_causal_pairs",
    "load_diagnosis",
    "parse_causal_pairs",
]

#: the suite sections a diagnosis file shares with suites (no [model]: the population)
SUITE_SECTIONS = ("suite", "data", "capture", "stats", "execution")
#: measurement kinds a [[marker]] can point at another checkpoint of the population
REFERENCE_KINDS = ("representational_similarity",)
#: the [model] placeholder of the suite part: each checkpoint replaces it
_PLACEHOLDER_MODEL = {"train": {"preset": "(population)"}}


@dataclass(frozen=True, kw_only=True)
class CausalPair:
    """A knob and a marker of a causal question (:mod:`probekit.diagnosis.statistics.causal`).

    ``[population] interventions = [{ knob = "he_lambda", target = "modifier_he" }]`` marks the
    knob as an intervention on the target marker (an instrument for it); ``[diagnosis]
    mediation = [{ knob = "noise", marker = "modifier_he" }]`` asks how much of the knob's
    effect on the outcome goes through the marker. ``marker`` holds ``target`` for an arm.
    """

    knob: str
    marker: str

    def to_dict(self, marker_key: str = "marker") -> dict[str, str]:
        """JSON form mirroring the TOML (``target`` for an intervention)."""
        return {"knob": self.knob, marker_key: self.marker}


#: TOML key of the marker of each causal list: [population] interventions, [diagnosis] mediation
CAUSAL_KEYS = {"interventions": "target", "mediation": "marker"}


def parse_causal_pairs(raw: dict[str, Any], key: str, path: Path, text: str,
                       section: str) -> tuple[CausalPair, ...]:
    """Pop ``key`` (``interventions`` / ``mediation``) from a raw TOML table and validate it.

    A list of tables, each with exactly ``knob`` and the marker key (``target`` for an
    intervention, ``marker`` for a mediation), both non-empty strings; no pair twice.

    Raises:
        SuiteError: ``FILE:LINE: [section] key`` naming the bad entry and the fix.
    """
    value = raw.pop(key, None)
    if value is None:
        return ()
    where = location(path, text, section, key)
    mkey = CAUSAL_KEYS[key]
    example = f'[{{ knob = "he_lambda", {mkey} = "modifier_he" }}]'
    if not isinstance(value, list):
        raise SuiteError(f"{where} = {value!r}: expected a list of tables, e.g. {example}")
    pairs: list[CausalPair] = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise SuiteError(f"{where}: entry {i} = {entry!r}: expected a table, e.g. {example}")
        unknown = [k for k in entry if k not in ("knob", mkey)]
        if unknown:
            raise SuiteError(f"{where}: entry {i}: unknown key{close_match_hint(unknown[0], ['knob', mkey])} "
                             f"{unknown[0]!r}; valid keys are ['knob', {mkey!r}]")
        for k in ("knob", mkey):
            if not isinstance(entry.get(k), str) or not entry[k]:
                raise SuiteError(f"{where}: entry {i}: missing or empty {k!r} (a column name), "
                                 f"e.g. {example}")
        pair = CausalPair(knob=entry["knob"], marker=entry[mkey])
        if pair in pairs:
            raise SuiteError(f"{where}: entry {i}: {pair.knob} -> {pair.marker} is given twice")
        if pair.knob == pair.marker:
            raise SuiteError(f"{where}: entry {i}: the knob and the {mkey} are the same column "
                             f"{pair.knob!r}")
        pairs.append(pair)
    return tuple(pairs)


def check_causal_pairs(pairs: tuple[CausalPair, ...], key: str, knobs: Any, markers: Any,
                       where: str, *, measured: Any = ()) -> None:
    """Every pair's knob a design knob among ``knobs``, its marker among ``markers``.

    ``None``: unchecked. The treatment of an intervention arm (2SLS) or a mediation must be a
    knob the design sets: both estimands read the knob's variation as assigned, independent of
    whatever else drives the outcome (Angrist & Pischke 2009, ch. 4; Imai et al. 2010, sequential
    ignorability). A ``measured`` column (an outcome of training such as ``id_accuracy``, or a
    marker) is not assigned, so its "effect" is confounded by construction and is refused rather
    than reported under a causal heading.

    Raises:
        ConfigError: ``where`` + the measured or unknown column, the valid ones and the fix.
    """
    from ..errors import ConfigError

    mkey = CAUSAL_KEYS[key]
    for p in pairs:
        if p.knob in measured or (markers is not None and p.knob in markers):
            valid = f"; the design knobs are {sorted(knobs)}" if knobs is not None else ""
            raise ConfigError(f"{where}: knob {p.knob!r} is a measured column, not a design knob: "
                              "a causal estimate needs a knob the design sets (a manipulated "
                              f"treatment){valid}; study {p.knob!r} as a covariate or a marker "
                              "instead")
        if knobs is not None and p.knob not in knobs:
            raise ConfigError(f"{where}: knob {p.knob!r} is not a design knob of the population; "
                              f"the knobs are {sorted(knobs)}")
        if markers is not None and p.marker not in markers:
            raise ConfigError(f"{where}: {mkey} {p.marker!r} is not a marker; the markers are "
                              f"{sorted(markers)}")


def causal_lines(interventions: Any, mediation: Any) -> list[str]:
    """``--check`` lines naming the declared intervention arms and mediations."""
    out = []
    if interventions:
        out.append("  intervention arms: " + ", ".join(f"{p.knob} -> {p.marker}"
                                                      for p in interventions))
    if mediation:
        out.append("  mediations: " + ", ".join(f"{p.knob} -> {p.marker}" for p in mediation))
    return out


@dataclass(frozen=True, kw_only=True)
class PopulationSpec:
    """``[population]``: existing checkpoints, or a grid of trainings of one preset.

    Attributes:
        checkpoints: a glob or a list of globs / paths (relative to the file) of checkpoint
            directories (``.../checkpoints/step_N``) or run directories (their last checkpoint,
            plus the ``series`` / ``every`` steps).
        preset: training preset of a grid (:data:`probekit.train.presets.PRESETS`).
        grid: ``--set`` key -> list of values (``"task.noise"``, ``"train.weight_decay"``), plus
            ``seed``; the population is their Cartesian product.
        sets: fixed ``--set`` overrides applied to every run of the grid.
        steps: training steps of every run (default: the preset's).
        series: intermediate checkpoint steps whose markers are measured too (early warning).
        every: a series every ``every`` steps (instead of ``series``).
        out: population directory (runs and cached cells; default under the probekit cache,
            keyed by the population's config).
        device: training device override of the grid's runs.
        curves: keep the preset's evaluation schedule (learning curves in each run's history).
            ``False`` (default): a grid's runs evaluate only where the diagnosis reads an
            evaluation (:func:`probekit.diagnosis.population.grid_runs`); the models, hence the
            marker table, are the same either way.
        interventions: knobs that intervene on a marker during training, each with its target
            marker (:class:`CausalPair`; the report's "Causal evidence" section).
        models: model entries as written (:mod:`probekit.diagnosis.real_models`): named
            offline LMs, Hugging Face directories, probekit checkpoints.
        model_sources: each entry resolved (the name, or the absolute directory).
        design: entry -> its design columns (``[population.design]`` or ``design = "x.csv"``).
        target_mde: the partial r a grid must detect with 80 % power (:mod:`.plan`): checked
            before any training, a design that cannot reach it is refused; None: no check.
    """

    checkpoints: str | tuple[str, ...] | None = None
    preset: str | None = None
    grid: dict[str, Any] = field(default_factory=dict)
    sets: tuple[str, ...] = ()
    steps: int | None = None
    series: tuple[int, ...] | None = None
    every: int | None = None
    out: str | None = None
    device: str | None = None
    curves: bool = False
    interventions: tuple[CausalPair, ...] = ()
    models: tuple[str, ...] | None = None
    model_sources: tuple[str, ...] = ()
    design: dict[str, dict[str, Any]] = field(default_factory=dict)
    target_mde: float | None = None

    def __post_init__(self) -> None:
        """Refuse a target that is no partial correlation."""
        if self.target_mde is not None and not 0.0 < self.target_mde < 1.0:
            raise KeyedValueError("target_mde", f"target_mde = {self.target_mde}: a partial "
                                  "correlation in (0, 1), e.g. 0.3")

    @property
    def trained(self) -> bool:
        """True for a grid trained on demand (``preset``), False for existing checkpoints."""
        return self.preset is not None

    def series_steps(self, final: int) -> tuple[int, ...]:
        """The intermediate steps (< ``final``) of the series, ascending."""
        if self.every is not None:
            return tuple(range(self.every, final, self.every))
        return tuple(sorted(s for s in set(self.series or ()) if s < final))


@dataclass(frozen=True, kw_only=True)
class MarkerSpec:
    """One ``[[marker]]``: a name and a registered measurement kind with its keys.

    Attributes:
        name: the marker's column in ``markers.csv``.
        measure: the registered measurement kind (:mod:`probekit.hypotheses.registry`).
        spec: that kind's spec dataclass instance (the table's other keys).
        reference: ``representational_similarity`` only: design column -> value (or
            ``"same"``: the row's own value) naming one other final checkpoint of the
            population, e.g. ``{"task.n_noise" = 0, seed = "same"}``; ``site_b`` is then read on
            that checkpoint, on the same inputs as ``site_a`` (:mod:`probekit.diagnosis.markers`).
    """

    name: str
    measure: str
    spec: Any
    reference: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form mirroring the TOML table."""
        ref = {} if self.reference is None else {"reference": dict(self.reference)}
        return {"name": self.name, "measure": self.measure, **_plain(dataclasses.asdict(self.spec)),
                **ref}


# the [diagnosis] keys that are options of the marker analysis: type, rule and default declared
# once (probekit.diagnosis.statistics.options.AnalysisOptions); unset (None) ones keep its default
_NPermutations = option_type("n_permutations")
_NBootstrap = option_type("n_bootstrap")
_Alpha = option_type("alpha")
_Seed = option_type("seed")
_SplineDf = option_type("spline_df", optional=True)
_Inference = option_type("inference", optional=True)
_EquivalenceMargin = option_type("equivalence_margin", optional=True)
_MaxPermutations = option_type("max_permutations", optional=True)


@dataclass(frozen=True, kw_only=True)
class DiagnosisSettings(Validated):
    """``[diagnosis]``: which column is the outcome and what is already known.

    Attributes:
        outcome: the outcome column (``"id_accuracy"``, ``"ood:NAME"``; see
            :mod:`probekit.diagnosis.outcomes`).
        covariates: the known predictors (default: the varying design knobs and
            ``id_accuracy``, the outcome itself left out).
        groups: the resampling / leave-one-out unit (default ``"seed"`` when the population
            has seeds; ``""`` for none: models are then the unit).
        color_by: the design knob colouring the scatter plots (default: the first varying one).
        n_permutations, n_bootstrap, alpha, seed: of :func:`probekit.diagnosis.marker_analysis`.
            These and ``covariate_coding``, ``spline_df``, ``inference``,
            ``equivalence_margin``, ``max_permutations`` are the analysis options, whose types,
            rules and defaults are declared once in
            :class:`~probekit.diagnosis.statistics.options.AnalysisOptions`.
        max_eval_examples: outcome accuracies use at most this many examples per split (a fixed
            seeded subset, the same for every checkpoint); ``None``: all.
        crossing: also record each run's first step at which its held-out (``test_id``)
            accuracy in the training history reaches this value, as the column
            ``id_step_<crossing>`` (empty when it never does); ``None``: no such column.
        censor: with ``outcome = "id_step_<crossing>"``, the step given to runs that never
            cross (:mod:`probekit.diagnosis.statistics.survival`): a number, or ``"next_eval"`` (one
            evaluation past the last logged one, from the runs' histories); ``None``: refused
            when some run never crosses.
        covariate_coding: covariate -> ``"factor" | "linear" | "spline"`` (default: by what it
            is, :mod:`probekit.diagnosis.statistics.coding`); the seed / groups column only as a factor.
        spline_df: columns of each spline covariate (>= 2; unset: 4).
        inference: ``"within_groups"`` or ``"cluster"`` (unset: ``marker_analysis``'s default).
        equivalence_margin: the partial correlation below which a marker counts as adding
            nothing (in (0, 1); unset: ``marker_analysis``'s default, 0.2).
        max_permutations: cap on the permutations of the resampling tests (unset: the default).
        calibration_simulations: simulated populations per effect in the report's calibration
            section (:func:`probekit.diagnosis.calibrate`; unset: 200; 0 leaves it out).
        mde_simulations: simulated populations behind each marker's MDE (:mod:`.mde`: the
            80 %-power partial r of the test the report runs; unset: 400; 0: the noncentral-t
            formula instead).
        mediation: knob -> marker pairs whose mediation of the knob's effect on the outcome
            the "Causal evidence" section estimates (:class:`CausalPair`).
    """

    outcome: str
    covariates: tuple[str, ...] | None = None
    groups: str | None = None
    color_by: str | None = None
    n_permutations: _NPermutations = DEFAULTS.n_permutations
    n_bootstrap: _NBootstrap = DEFAULTS.n_bootstrap
    alpha: _Alpha = DEFAULTS.alpha
    seed: _Seed = DEFAULTS.seed
    max_eval_examples: Annotated[int, Ge(1)] | None = None
    crossing: Annotated[float, Between(0, 1, closed="right", hint="an accuracy")] | None = None
    censor: float | str | None = None
    covariate_coding: dict[str, str] = field(default_factory=dict)
    spline_df: _SplineDf = None
    inference: _Inference = None
    equivalence_margin: _EquivalenceMargin = None
    max_permutations: _MaxPermutations = None
    calibration_simulations: Annotated[int, Between(0, MAX_SIMULATIONS, closed="both", hint=(
        "0 leaves the calibration out"))] | None = None
    mde_simulations: Annotated[int, Between(0, MAX_SIMULATIONS, closed="both", hint=(
        "0: the noncentral-t formula"))] | None = None
    mediation: tuple[CausalPair, ...] = ()

    def __post_init__(self) -> None:
        """The declared rules (:class:`~probekit.util.constraints.Validated`), then the rest.

        ``censor`` (a step or ``"next_eval"``) and the covariates (none twice).
        """
        super().__post_init__()
        if isinstance(self.censor, str) and self.censor != "next_eval":
            raise KeyedValueError("censor", f"censor = {self.censor!r}: a step number or \"next_eval\"")
        if self.censor is not None and not isinstance(self.censor, str):
            from ..errors import DataError
            from .statistics.survival import check_censor

            try:  # the value-only part of the rule; the crossings are checked where known
                check_censor(self.censor)
            except DataError as err:
                raise KeyedValueError("censor", str(err)) from None
        if self.covariates is not None:  # the list-option rule: a covariate twice is collinear
            from ..util.list_option import check_list_option

            try:
                check_list_option("covariates", self.covariates, what="covariate")
            except ConfigError as err:
                raise KeyedValueError("covariates", str(err)) from None


@dataclass(frozen=True, kw_only=True)
class DiagnosisFile:
    """A validated diagnosis file.

    Attributes:
        suite: the fixed sections (its ``model`` is a placeholder: each checkpoint replaces it).
        population: ``[population]``.
        markers: the ``[[marker]]`` tables, in file order.
        diagnosis: ``[diagnosis]``.
        text: the file's text (for ``FILE:LINE`` messages of later checks).
        outcome: ``[outcome]``, the user's evaluation file and scoring rules
            (:class:`~probekit.diagnosis.outcomes.EvalOutcomeSpec`), or ``None``.
    """

    suite: Suite
    population: PopulationSpec
    markers: tuple[MarkerSpec, ...]
    diagnosis: DiagnosisSettings
    plugins: tuple[str, ...] = ()
    outcome: Any = None
    text: str = field(default="", repr=False, compare=False)

    @property
    def name(self) -> str:
        """The file's ``[suite] name`` (default: the file stem)."""
        return self.suite.name

    @property
    def source(self) -> Path:
        """The diagnosis file's path."""
        return Path(self.suite.source)

    def at(self, section: str, key: str | None = None, index: int = 0) -> str:
        """``FILE:LINE: [section] key`` of a key of this file (as a table diagnosis's ``at``)."""
        return location(self.source, self.text, section, key, index)

    def where(self, *args: Any, **kwargs: Any) -> str:
        """Refused: ``where`` is the row selector of a table diagnosis; a key's line is :meth:`at`.

        Raises:
            AttributeError: naming the replacement.
        """
        raise AttributeError("DiagnosisFile.where(section, key) is now DiagnosisFile.at(section, "
                             "key), as on a table diagnosis; `where` is the row selector of "
                             "[population] where = {...} only")

    def to_dict(self) -> dict[str, Any]:
        """JSON form mirroring the TOML (the suite sections without the placeholder model)."""
        out = self.suite.to_dict()
        out.pop("model", None)
        out["population"] = _plain(dataclasses.asdict(self.population))
        out["population"]["interventions"] = [p.to_dict("target")
                                              for p in self.population.interventions]
        out["marker"] = [m.to_dict() for m in self.markers]
        out["diagnosis"] = _plain(dataclasses.asdict(self.diagnosis))
        if self.plugins:
            out["plugins"] = {"modules": list(self.plugins)}
        if self.outcome is not None:
            out["outcome"] = {k: v for k, v in _plain(dataclasses.asdict(self.outcome)).items()
                              if k != "base"}
        return out

    def population_key(self) -> str:
        """Digest of what defines the population's models (12 hex digits): its default directory."""
        pop = dataclasses.asdict(self.population)
        pop.pop("out")
        pop.pop("interventions")  # which knob is an intervention does not change the models
        pop.pop("design")  # nor do the design columns the user states for model entries
        pop.pop("target_mde")  # nor does the power the plan is checked against
        pop.pop("curves")  # nor does the evaluation schedule (the same weights, other history)
        if not self.population.trained:  # the same globs from another file are other models
            pop["base"] = str(self.source.parent.resolve())
        return sha256_bytes(json.dumps(_plain(pop), sort_keys=True).encode())[:12]


def _plain(value: Any) -> Any:
    """Tuples -> lists, recursively (JSON form)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _population(raw: Any, path: Path, text: str) -> PopulationSpec:
    if "population" not in raw:
        raise SuiteError(f"{path}: missing section [population] (checkpoints = \"GLOB\", or "
                         "preset = \"...\" with a grid)")
    table = dict(raw["population"]) if isinstance(raw["population"], dict) else raw["population"]
    interventions = (parse_causal_pairs(table, "interventions", path, text, "population")
                     if isinstance(table, dict) else ())
    from .real_models import parse_models

    models, sources, design = (parse_models(table, path, text) if isinstance(table, dict)
                               else (None, (), {}))
    pop = build_table(PopulationSpec, table, path, text, "population")
    pop = dataclasses.replace(pop, interventions=interventions, models=models,
                              model_sources=sources, design=design)
    where = location(path, text, "population")
    if sum(x is not None for x in (pop.checkpoints, pop.preset, pop.models)) != 1:
        raise SuiteError(f"{where}: give exactly one of checkpoints (existing testbed checkpoints), "
                         "models (named LMs, Hugging Face directories, checkpoints) or preset "
                         "(+ grid: a population trained on demand)")
    if pop.models is not None:
        given = [k for k in ("grid", "sets", "steps", "device", "series", "every", "interventions",
                             "target_mde", "curves") if getattr(pop, k) not in ({}, (), None, False)]
        if given:
            raise SuiteError(f"{location(path, text, 'population', given[0])}: a population of "
                             f"model entries takes no {given[0]} (it trains nothing and has no "
                             "series); remove it")
    if pop.checkpoints is not None:
        given = [k for k in ("grid", "sets", "steps", "device", "target_mde", "curves")
                 if getattr(pop, k) not in ({}, (), None, False)]
        if given:
            raise SuiteError(f"{location(path, text, 'population', given[0])}: only a trained "
                             "population (preset = ...) takes grid, sets, steps, device, "
                             "target_mde and curves")
        if isinstance(pop.checkpoints, tuple) and not pop.checkpoints:
            raise SuiteError(f"{location(path, text, 'population', 'checkpoints')}: empty list")
    if pop.preset is not None:
        from ..train.training_preset import PRESETS

        known = list(PRESETS)  # testbed and fine-tune presets: one registry
        if pop.preset not in known:
            raise SuiteError(f"{location(path, text, 'population', 'preset')} = {pop.preset!r}: "
                             f"unknown preset{close_match_hint(pop.preset, known)}; valid "
                             f"presets are {sorted(known)}")
        for pair in pop.interventions:
            values = pop.grid.get(pair.knob)
            if pair.knob == "seed" or not isinstance(values, list) or len(values) < 2 or any(
                    isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
                raise SuiteError(
                    f"{location(path, text, 'population', 'interventions')}: knob {pair.knob!r} "
                    "must be a grid key with >= 2 numeric values (the intervention's strength); "
                    f"the grid keys are {sorted(k for k in pop.grid if k != 'seed')}")
        for key, values in pop.grid.items():
            if not isinstance(values, list) or not values:
                raise SuiteError(f"{location(path, text, 'population', 'grid')}: grid key {key!r} "
                                 f"= {values!r}: expected a non-empty list of values")
            if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
                raise SuiteError(f"{location(path, text, 'population', 'grid')}: grid key {key!r} "
                                 f"repeats a value in {values}; give each value once")
        if "seed" in pop.grid and any(isinstance(s, bool) or not isinstance(s, int)
                                      for s in pop.grid["seed"]):
            raise SuiteError(f"{location(path, text, 'population', 'grid')}: seed values must be "
                             f"integers, got {pop.grid['seed']}")
    if pop.series is not None and pop.every is not None:
        raise SuiteError(f"{location(path, text, 'population', 'every')}: give series or every, "
                         "not both")
    if pop.every is not None and pop.every < 1:
        raise SuiteError(f"{location(path, text, 'population', 'every')} = {pop.every}: must be >= 1")
    if pop.series is not None and any(s < 1 for s in pop.series):
        raise SuiteError(f"{location(path, text, 'population', 'series')} = {list(pop.series)}: "
                         "steps must be >= 1")
    if pop.series is not None:  # the list-option rule: a step twice would be measured twice
        from ..util.list_option import check_list_option

        try:
            check_list_option("series", pop.series, what="step")
        except ConfigError as err:
            raise SuiteError(f"{location(path, text, 'population', 'series')}: {err}") from None
    if pop.steps is not None and pop.steps < 1:
        raise SuiteError(f"{location(path, text, 'population', 'steps')} = {pop.steps}: must be >= 1")
    return pop


#: the [[marker]] keys that make a family (one marker per layer or site)
FAMILY_KEYS = ("layers", "sites")


def model_layers(pop: PopulationSpec, where: str, base: Path | None = None) -> int:
    """The number of blocks every model of a population shares (``layers = "all"``).

    Read from configs, never from weights: a testbed preset's ``ModelConfig.n_layers`` under
    its ``sets`` (per value of a grid key varying ``n_layers``); a fine-tune preset's base model
    (per value of a grid key varying ``base_model``); each ``models`` entry; each checkpoint
    matched by ``checkpoints`` (globs relative to ``base``, the file's folder; a run directory:
    its last checkpoint). A registered name's depth is the registry's
    (:data:`probekit.models.named.REGISTRY`), a directory's its ``config.json``'s
    (:func:`probekit.diagnosis.real_models.model_depth`).

    Raises:
        SuiteError: ``WHERE = "all"``: models of different depths (each depth named, and the
            fix: a list within the smallest depth), or a depth that cannot be read.
    """
    depths = _population_depths(pop, where, base or Path.cwd())
    by_depth: dict[int, list[str]] = {}
    for label, depth in depths.items():
        by_depth.setdefault(depth, []).append(label)
    if len(by_depth) > 1:
        smallest = min(by_depth)

        def names(labels: list[str]) -> str:
            more = f" and {len(labels) - 3} more" if len(labels) > 3 else ""
            return ", ".join(labels[:3]) + more

        each = "; ".join(f"{names(labels)}: {d} block{'s' * (d != 1)}"
                         for d, labels in sorted(by_depth.items(), reverse=True))
        example = sorted({round(i * (smallest - 1) / 3) for i in range(4)})
        raise SuiteError(f"{where} = \"all\": the population's models differ in depth ({each}); "
                         f"give the layers as a list within the smallest depth (indices 0 .. "
                         f"{smallest - 1}), e.g. layers = {example}")
    return next(iter(by_depth))


def _population_depths(pop: PopulationSpec, where: str, base: Path) -> dict[str, int]:
    """Model label -> its number of blocks (:func:`model_layers`), from configs only."""
    from ..errors import ConfigError
    from .real_models import model_depth

    label = ""
    try:
        if pop.models is not None:
            out = {}
            for label, source in zip(pop.models, pop.model_sources, strict=True):
                out[label] = model_depth(source)
            return out
        if pop.checkpoints is not None:
            return _checkpoint_depths(pop.checkpoints, where, base)
        from ..train.finetune_presets import base_model_of, is_finetune_preset

        finetune = is_finetune_preset(pop.preset)
        knob = "base_model" if finetune else "n_layers"
        keys = [k for k in pop.grid if k.rpartition(".")[2] == knob]
        out = {}
        for combo in itertools.product(*(pop.grid[k] for k in keys)):
            sets = [*pop.sets, *(f"{k}={json.dumps(v)}" for k, v in zip(keys, combo))]
            if finetune:
                model = base_model_of(str(pop.preset), sets)
                label = f"base model {model!r}"
                out[label] = model_depth(model)
            else:
                from ..train.build import build_run

                label = (", ".join(f"{k} = {v}" for k, v in zip(keys, combo))
                         or f"preset {pop.preset!r}")
                out[label] = int(build_run(str(pop.preset), sets=sets)[1].n_layers)
        return out
    except (ConfigError, ValueError, TypeError, KeyError) as err:
        whose = f" of {label}" if label else ""
        raise SuiteError(f"{where} = \"all\": cannot read the block count{whose} ({err}); give "
                         "the layers as a list, e.g. layers = [0, 1, 2, 3]") from None


def _checkpoint_depths(checkpoints: str | tuple[str, ...], where: str, base: Path) -> dict[str, int]:
    """Checkpoint -> its saved model config's block count, for ``checkpoints`` globs.

    A match that is a run directory (``checkpoints/step_*``) counts by its last checkpoint,
    a testbed one or a fine-tune's Hugging Face directory.
    """
    import glob

    from ..errors import ConfigError
    from ..train.finetune import list_finetune_checkpoints
    from ..train.trainer import list_checkpoints
    from .real_models import model_depth

    patterns = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    out: dict[str, int] = {}
    for pattern in patterns:
        full = Path(pattern).expanduser()
        full = full if full.is_absolute() else Path(os.path.normpath(base / full))
        for hit in sorted(Path(h) for h in glob.glob(str(full))):
            if (hit / "config.json").is_file():
                final = hit
            else:
                series = list_checkpoints(hit) or list_finetune_checkpoints(hit)
                if not series:
                    continue
                final = series[-1][1]
            try:
                label = hit.relative_to(base).as_posix()
            except ValueError:
                label = str(hit)
            out[label] = model_depth(str(final))
    if not out:
        raise ConfigError(f"checkpoints {patterns} match no checkpoint or run directory yet "
                          f"(relative to {base}), so their depth is unknown")
    return out


def _family(table: dict[str, Any], i: int, path: Path, text: str,
            pop: PopulationSpec | None) -> list[dict[str, Any]]:
    """A ``[[marker]]`` with ``layers`` / ``sites``: one marker table per member.

    Member names ``NAME@L<k>`` (layers) or ``NAME@<site>`` (sites); the member's ``layer``
    key (when its kind has one) or the layer of its ``site`` is the member's.
    """
    from ..hypotheses.registry import find_kind
    from .statistics.families import member_name

    given = _family_keys(table)
    if len(given) == 2:
        raise SuiteError(f"{location(path, text, 'marker', 'sites', i)}: give layers or sites, "
                         "not both")
    key = given[0]
    where = location(path, text, "marker", key, i)
    value = table[key]
    kind = find_kind(table.get("measure"))
    fields = keys_of(kind.spec) if kind is not None else []
    base = {k: v for k, v in table.items() if k not in given}
    name = str(table.get("name"))
    if key == "layers":
        if value == "all":
            value = list(range(model_layers(pop, where, path.parent))) if pop is not None else value
        if (not isinstance(value, list) or not value or len(set(value)) != len(value)
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value)):
            raise SuiteError(f"{where} = {value!r}: expected \"all\" or a list of distinct "
                             "layer indices >= 0, e.g. [0, 1, 2, 3]")
        if "layer" not in fields and "site" not in fields:
            raise SuiteError(f"{where}: measure {table.get('measure')!r} has neither a layer nor "
                             "a site key; it cannot be read per layer")
        out = []
        for layer in value:
            member = dict(base, name=member_name(name, int(layer)))
            if "layer" in fields:
                member["layer"] = int(layer)
            else:
                site = str(base.get("site", "resid_post"))
                member["site"] = f"{site.rpartition('@')[0] or site}@{layer}"
            out.append(member)
        return out
    if (not isinstance(value, list) or not value or len(set(map(str, value))) != len(value)
            or any(not isinstance(v, str) or not v for v in value)):
        raise SuiteError(f"{where} = {value!r}: expected a list of distinct site strings, e.g. "
                         "[\"resid_post@1\", \"resid_post@2\"]")
    if "site" not in fields:
        raise SuiteError(f"{where}: measure {table.get('measure')!r} has no site key; use "
                         "layers, or a measure read at a site")
    return [dict(base, name=member_name(name, site), site=site) for site in value]


def _family_keys(table: dict[str, Any]) -> list[str]:
    """The family keys (``layers`` / ``sites``) a ``[[marker]]`` table gives.

    ``sites`` of a kind that has its own ``sites`` key (``neuron_deactivation``) is that kind's
    key, not a family.
    """
    from ..hypotheses.registry import find_kind

    kind = find_kind(table.get("measure"))
    own = keys_of(kind.spec) if kind is not None else []
    return [k for k in FAMILY_KEYS if k in table and k not in own]


def _markers(tables: list[Any], path: Path, text: str,
             pop: PopulationSpec | None = None) -> tuple[MarkerSpec, ...]:
    """The ``[[marker]]`` tables, families expanded into one marker per member."""
    out: list[MarkerSpec] = []
    for i, table in enumerate(tables):
        if isinstance(table, dict) and isinstance(table.get("name"), str) and "@" in table["name"]:
            raise SuiteError(f"{location(path, text, 'marker', 'name', i)} = {table['name']!r}: "
                             "'@' is reserved for the members of a family (NAME@L<k>); rename "
                             "the marker, or give layers = [...] to make a family")
        if isinstance(table, dict) and _family_keys(table):
            out.extend(_marker(m, i, path, text) for m in _family(table, i, path, text, pop))
        else:
            out.append(_marker(table, i, path, text))
    plain = {m.name for m in out if "@" not in m.name}
    for i, table in enumerate(tables):
        if (isinstance(table, dict) and _family_keys(table)
                and table.get("name") in plain):
            raise SuiteError(f"{location(path, text, 'marker', 'name', i)} = {table['name']!r}: "
                             "a family and a single marker share this name; rename one")
    return tuple(out)


def _marker(table: Any, i: int, path: Path, text: str) -> MarkerSpec:
    from ..hypotheses.registry import find_kind, registered_kinds, unknown_kind_note

    head = location(path, text, "marker", index=i)
    if not isinstance(table, dict):
        raise SuiteError(f"{head}: expected a table ([[marker]])")
    name, measure = table.get("name"), table.get("measure")
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{head}: missing key 'name' (the marker's column in markers.csv)")
    if measure is None:
        raise SuiteError(f"{head}: missing required key 'measure'; registered kinds are "
                         f"{sorted(registered_kinds())}")
    kind = find_kind(measure)  # installed plug-ins imported only for a kind no other defines
    if kind is None:
        kinds = registered_kinds()
        raise SuiteError(
            f"{location(path, text, 'marker', 'measure', i)} = {measure!r}: unknown measurement "
            f"kind{close_match_hint(str(measure), kinds)}; registered kinds are {sorted(kinds)}"
            f"{unknown_kind_note()}"
        )
    spec_cls = kind.spec
    fields = keys_of(spec_cls)
    reference = table.get("reference")
    if reference is not None:
        where = location(path, text, "marker", "reference", i)
        if measure not in REFERENCE_KINDS:
            raise SuiteError(f"{where}: a reference checkpoint is read by {list(REFERENCE_KINDS)} "
                             f"only, not {measure!r}; remove reference")
        if not isinstance(reference, dict) or not reference:
            raise SuiteError(f"{where} = {reference!r}: expected a table of design columns, e.g. "
                             "{ \"task.n_noise\" = 0, seed = \"same\" }")
    for key in table:
        if key not in ("name", "measure", "reference") and key not in fields:
            valid = sorted({"name", "measure", "reference", *fields})
            raise SuiteError(
                f"{location(path, text, 'marker', key, i)}: unknown key{close_match_hint(key, valid)} "
                f"for measure {measure!r}; valid keys are {valid}"
            )
    spec = build_table(spec_cls, {k: v for k, v in table.items() if k in fields},
                       path, text, "marker", index=i)
    return MarkerSpec(name=name, measure=measure, spec=spec, reference=reference)


def check_analysis_keys(settings: DiagnosisSettings, path: Path, text: str) -> None:
    """``FILE:LINE: [diagnosis] key`` errors for the analysis keys the type check lets through.

    ``covariate_coding`` values in ``factor / linear / spline`` and the seed (or the ``groups``
    column) never as a number (the bounds of the other keys are declared rules of
    :class:`DiagnosisSettings`). Whether each coded column is a covariate is checked when the
    covariates are resolved (:func:`probekit.diagnosis.runner.resolve_settings`).
    """
    from ..errors import ConfigError
    from .statistics.coding import CODINGS, check_label_coding

    def at(key: str) -> str:
        return location(path, text, "diagnosis", key)

    for column, how in settings.covariate_coding.items():
        if how not in CODINGS:
            raise SuiteError(f"{at('covariate_coding')}: {column} = {how!r}: must be one of "
                             f"{list(CODINGS)}")
        try:  # the seed / groups as a number: refused before any work
            check_label_coding(column, how, settings.groups or None)
        except ConfigError as err:
            raise SuiteError(f"{at('covariate_coding')}: {err}") from None


def check_censored_outcome(settings: DiagnosisSettings, where: str) -> None:
    """``censor`` is given only with a crossing-step outcome (``id_step_<crossing>``).

    Raises:
        SuiteError: ``where`` (the ``censor`` key's ``FILE:LINE``) + the outcome and the fix.
    """
    if settings.censor is not None and not settings.outcome.startswith("id_step_"):
        raise SuiteError(f"{where}: only a crossing-step outcome (outcome = \"id_step_<crossing>\") "
                         f"is censored, not {settings.outcome!r}; remove censor")


#: ``[stats]`` keys a diagnosis refuses: key -> what it would drive, and the key that does
STATS_NOT_IN_DIAGNOSIS = {
    "n_permutations": ("a claim's control permutations (a shuffled-label probe, shuffled CKA "
                       "rows), which a diagnosis never measures: its markers are measured "
                       "without controls", "[diagnosis] n_permutations"),
}


def check_stats_section(stats: Any, path: Path, text: str) -> None:
    """Refuse a ``[stats]`` key that sets nothing in a diagnosis (:data:`STATS_NOT_IN_DIAGNOSIS`).

    ``[stats] n_permutations`` (default 200) sizes a claim's permutation control; the markers of
    a diagnosis are measured without one, so the key changed only the markers' cache keys,
    while the permutations of the analysis are ``[diagnosis] n_permutations`` (default 1000).
    Two keys of one name, one of them inert, read as one setting: the inert one is refused.

    Raises:
        SuiteError: ``FILE:LINE: [stats] n_permutations: ...; set [diagnosis] n_permutations``.
    """
    if not isinstance(stats, dict):
        return
    for key, (drives, instead) in STATS_NOT_IN_DIAGNOSIS.items():
        if key in stats:
            raise SuiteError(f"{location(path, text, 'stats', key)}: [stats] {key} sizes {drives}; "
                             f"the analysis's permutations are {instead}: set that key instead "
                             f"and remove this one")


def build_diagnosis_section(raw: Any, path: Path, text: str) -> DiagnosisSettings:
    """``[diagnosis]`` validated: its keys (``FILE:LINE``), ``mediation`` and the analysis keys."""
    table = dict(raw) if isinstance(raw, dict) else raw
    mediation = (parse_causal_pairs(table, "mediation", path, text, "diagnosis")
                 if isinstance(table, dict) else ())
    settings = build_table(DiagnosisSettings, table, path, text, "diagnosis")
    settings = dataclasses.replace(settings, mediation=mediation)
    check_analysis_keys(settings, path, text)
    return settings


def load_diagnosis(path: str | Path) -> DiagnosisFile:
    """Parse and validate a diagnosis file; errors are ``FILE:LINE: [section] key ...``.

    Only what the file itself states is checked here; :func:`probekit.diagnosis.runner.check_diagnosis`
    also checks the population (grid keys against the preset, checkpoints that exist and agree).
    """
    from ..hypotheses.plugins import PLUGINS_SECTION, load_plugins, parse_plugins

    path, text, raw = read_toml(path, what="diagnosis")
    valid = [*SUITE_SECTIONS, "population", "marker", "diagnosis", "outcome", PLUGINS_SECTION]
    unknown = sorted(set(raw) - set(valid))
    if unknown:
        extra = (" (a diagnosis file has no [model]: [population] gives the models)"
                 if unknown[0] == "model" else close_match_hint(unknown[0], valid))
        raise SuiteError(f"{location(path, text, unknown[0])}: unknown section{extra}; valid "
                         f"sections are {valid}")
    population = _population(raw, path, text)
    plugins = parse_plugins(raw, path, text)
    load_plugins(plugins, path, text)  # the kinds of the user's modules, before the markers
    tables = raw.get("marker")
    if not tables:
        raise SuiteError(f"{path}: no [[marker]]; add at least one (name, measure and its keys)")
    if not isinstance(tables, list):
        raise SuiteError(f"{location(path, text, 'marker')}: write markers as [[marker]] tables")
    markers = _markers(tables, path, text, population)
    names = [m.name for m in markers]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SuiteError(f"{location(path, text, 'marker', 'name', [i for i, n in enumerate(names) if n == dup[0]][1])}: "
                         f"marker name {dup[0]!r} is used twice; names are column names")
    if "diagnosis" not in raw:
        raise SuiteError(f"{path}: missing section [diagnosis] (outcome = \"ood:NAME\" at least)")
    settings = build_diagnosis_section(raw["diagnosis"], path, text)
    from ..errors import ConfigError

    try:
        check_causal_pairs(population.interventions, "interventions", None, names,
                           location(path, text, "population", "interventions"))
        check_causal_pairs(settings.mediation, "mediation", None, names,
                           location(path, text, "diagnosis", "mediation"))
    except ConfigError as err:
        raise SuiteError(str(err)) from None
    fixed = {k: v for k, v in raw.items() if k in SUITE_SECTIONS}
    check_stats_section(fixed.get("stats"), path, text)
    suite = build_suite(path, text, {**fixed, "model": _PLACEHOLDER_MODEL})
    from .outcomes import parse_outcome
    from .real_models import check_marker_kinds, check_prepend_bos, check_real_data

    outcome = parse_outcome(raw.get("outcome"), path, text)
    check_marker_kinds(markers, population, path, text)
    check_real_data(population, suite, settings, path, text)
    mixed_bos = check_prepend_bos(population, suite, outcome, path, text)
    if mixed_bos is not None:
        import warnings

        warnings.warn(mixed_bos, stacklevel=2)
    return DiagnosisFile(suite=suite, population=population, markers=markers,
                         diagnosis=settings, plugins=plugins, text=text, outcome=outcome)
