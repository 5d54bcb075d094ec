"""Suites: declarative TOML files (``probes/*.toml``) parsed into frozen dataclasses.

Every section and key is checked: an unknown key, a wrong type or a missing file raises
:class:`SuiteError` naming the file, line, field and the fix.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from ..capture_options import EXAMPLES_PER_SHARD, CaptureOptions, ShardSize
from ..errors import ConfigError, DataError, KeyedValueError
from ..stats.limits import MAX_PERMUTATIONS, MAX_RESAMPLES, MIN_RESAMPLES
from ..textfile import read_text
from ..util.config import close_match_hint
from ..util.constraints import (
    SEED,
    Between,
    ConstraintError,
    Distinct,
    Each,
    Ge,
    Le,
    NonEmpty,
    Validated,
    keys_of,
)


class SuiteError(ConfigError):
    """A suite file or its data is invalid (``FILE:LINE: [section] key ...`` and the fix)."""


@dataclass(frozen=True, kw_only=True)
class TrainSpec(Validated):
    """Train a testbed model when no checkpoint exists yet (deterministic for ``seed``)."""

    preset: Annotated[str, NonEmpty(hint="a training preset, e.g. \"modular_addition\"")]
    steps: Annotated[int | None, Ge(1)] = None
    seed: Annotated[int, SEED] = 0
    task_options: dict[str, Any] = field(default_factory=dict)
    model_options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Exactly one of: ``name`` (named model or path), ``checkpoint`` (dir), ``train``."""

    name: str | None = None
    checkpoint: str | None = None
    train: TrainSpec | None = None
    compatibility_mode: bool = False


_COLUMN = NonEmpty(hint="a column name")
_SPLIT = NonEmpty(hint="a split name")


@dataclass(frozen=True, kw_only=True)
class DataSpec(Validated):
    """Examples and labels: a testbed ``task`` or a JSONL ``file`` (``text``/``tokens`` + columns).

    ``train_split``/``test_split`` are the probe's ID splits; if equal, ``holdout_fraction`` of
    that split is held out (seeded). ``ood_splits`` are scored with the ID-trained probe.
    ``answer_column`` (gold answers, ``|``-separated aliases) makes the runner generate greedy
    answers and add the columns ``greedy_answer`` and ``correct`` (1/0). A row without its label
    is an error naming ``FILE:LINE`` unless ``drop_missing_labels`` drops such rows.
    """

    label: Annotated[str, _COLUMN]
    task: str | None = None
    task_options: dict[str, Any] = field(default_factory=dict)
    file: str | None = None
    split_column: Annotated[str, _COLUMN] = "split"
    train_split: Annotated[str, _SPLIT] = "train"
    test_split: Annotated[str, _SPLIT] = "test_id"
    ood_splits: Annotated[tuple[str, ...], Each(_SPLIT), Distinct()] = ()
    holdout_fraction: Annotated[float, Between(0, 1)] = 0.3
    max_per_split: Annotated[int | None, Ge(1, hint="or unset for every example")] = 2000
    prompt_only: bool = True
    prepend_bos: bool | None = None  # None: each model's own default (its tokenizer's habit)
    control_column: Annotated[str | None, _COLUMN] = None
    answer_column: Annotated[str | None, _COLUMN] = None
    max_new_tokens: Annotated[int, Ge(1)] = 8
    drop_missing_labels: bool = False
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The keys' declared rules; an OOD split that is an ID split (scored as OOD) is refused."""
        super().__post_init__()
        same = [s for s in self.ood_splits if s in (self.train_split, self.test_split)]
        if same:
            role = "train_split" if same[0] == self.train_split else "test_split"
            raise KeyedValueError("ood_splits",
                f"ood_splits = {list(self.ood_splits)}: {same[0]!r} is also the {role}, so its "
                "rows would be scored as out-of-distribution although the probe is trained or "
                "tested on that distribution; name a split the probe never sees"
            )


@dataclass(frozen=True, kw_only=True)
class CaptureSpec(CaptureOptions):
    """``[capture]``: the capture's options (:class:`~probekit.capture_options.CaptureOptions`) and what is captured.

    ``sites``: ``["all"]`` (every block of ``kind``) or names like ``"resid_post@3"``.
    ``positions``: ``"last"``, ``"all"``, or ``"column:NAME"`` (token index from a column).
    ``batch_size``, ``padding_side``, ``dtype``: declared once in ``CaptureOptions`` (shared
    with the Python API's ``CaptureConfig`` and ``probekit capture``'s flags). The shard size
    (``ShardOptions``) is not a key here: a suite's capture is one shard, or ``[execution]
    capture_examples_per_shard`` examples per executor task.
    """

    sites: Annotated[tuple[str, ...], NonEmpty(hint='["all"] or names like "resid_post@3"')] = ("all",)
    kind: str = "resid_post"
    include_embed: bool = False
    positions: str = "last"


@dataclass(frozen=True, kw_only=True)
class StatsSpec(Validated):
    """``[stats]``: permutation and bootstrap sizes, CI level, alpha, multiplicity correction.

    Every key's rule is declared (checked when the file loads, before any model loads): sizes
    the statistics can use (percentile intervals need >= 1000 resamples, Efron & Tibshirani
    1993, ch. 19; the bounds of :mod:`probekit.stats.limits`), levels in (0, 1) and a seed
    numpy's and torch's generators take.
    """

    n_permutations: Annotated[int, Ge(1), Le(MAX_PERMUTATIONS, hint="p resolved to 1e-5; more "
                                                                  "only costs time")] = 200
    n_bootstrap: Annotated[int, Ge(MIN_RESAMPLES, hint="percentile intervals need >= 1000 resamples"),
                           Le(MAX_RESAMPLES, hint="more only costs time")] = 1000
    confidence_level: Annotated[float, Between(0, 1)] = 0.95
    alpha: Annotated[float, Between(0, 1)] = 0.05
    correction: Literal["holm", "bh"] = "holm"
    permutation_sites: Literal["all", "best"] = "all"  # "best": only the CV-selected site
    seed: Annotated[int, SEED] = 0


@dataclass(frozen=True, kw_only=True)
class ExecutionSpec(Validated):
    """``[execution]``: which executor runs the suite's independent tasks, with its options.

    ``executor``: a registered executor name (:func:`probekit.executor.available_executors`:
    ``"inprocess"``, the default, and the backends of :mod:`probekit.executors`); ``options``:
    the ``[execution.options]`` table, the backend's own options (its options class checks
    them when the file loads, e.g. ``address = "auto"`` for a cluster backend; written directly
    under ``[execution]`` it is refused, naming the table). The CLI's ``--executor``/``--executor-opt`` (and the
    backends' aliases) override the table. With an executor other than ``"inprocess"`` the suite's activation
    capture runs as executor tasks too (:func:`~probekit.capture.capture_sharded`, one task per
    shard of ``capture_examples_per_shard`` examples rounded up to whole batches; the cache
    directory must be on a filesystem every worker mounts).
    """

    executor: str = "inprocess"
    options: dict[str, Any] = field(default_factory=dict)
    capture_examples_per_shard: ShardSize = EXAMPLES_PER_SHARD

    def __post_init__(self) -> None:
        """Refuse an unknown executor, options its backend refuses, a shard size < 1."""
        from ..executor import available_executors, executor_options

        super().__post_init__()
        if self.executor not in available_executors():
            raise KeyedValueError("executor",
                f"executor = {self.executor!r}: must be one of {available_executors()}"
            )
        try:
            executor_options(self.executor, self.options)
        except ConfigError as err:
            raise ValueError(str(err)) from None

    def make_executor(self, *, progress: bool = True) -> Any:
        """The configured :class:`~probekit.executor.Executor` (no connection made yet)."""
        from ..executor import make_executor

        return make_executor(self.executor, self.options, progress=None if progress else False)


def _execution_table(table: Any, path: Path, text: str) -> Any:
    """``[execution]`` as written; a backend option directly under it is refused with the fix.

    The backend's options belong in the ``[execution.options]`` table (one way to write them);
    other unknown keys are left for :func:`_build` to refuse.
    """
    from ..executor import available_executors, executor_option_names

    if not isinstance(table, dict):
        return table
    name = table.get("executor", "inprocess")
    if not isinstance(name, str) or name not in available_executors():
        return table
    own = {f.name for f in dataclasses.fields(ExecutionSpec)}
    misplaced = [k for k in table if k not in own and k in (executor_option_names(name) or ())]
    if misplaced:
        raise SuiteError(
            f"{_where(path, text, 'execution', misplaced[0])}: an option of the {name!r} backend; "
            f"write it in an [execution.options] table (e.g. [execution.options] {misplaced[0]} = ...)"
        )
    return table


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A validated suite: fixed sections plus the analysis specs in file order."""

    name: str
    model: ModelSpec
    data: DataSpec
    capture: CaptureSpec = field(default_factory=CaptureSpec)
    analyses: tuple[Any, ...] = ()  # spec dataclass instances of registered analyses, in order
    stats: StatsSpec = field(default_factory=StatsSpec)
    execution: ExecutionSpec = field(default_factory=ExecutionSpec)
    description: str = ""
    device: str = "auto"  # model forwards, probe fits, permutation refits ("auto": CUDA if any)
    source: str = ""

    def resolve(self, relative: str | None) -> Path | None:
        """A path from the suite, relative to the suite file's directory (``..`` collapsed)."""
        if relative is None:
            return None
        path = Path(relative).expanduser()
        return path if path.is_absolute() else Path(os.path.normpath(Path(self.source).parent / path))

    def sections(self, section: str) -> tuple[Any, ...]:
        """The specs of one analysis section (e.g. every ``[[probe]]``), in file order."""
        from .registry import analysis_for_spec

        return tuple(a for a in self.analyses if analysis_for_spec(a).section == section)

    def to_dict(self) -> dict[str, Any]:
        """JSON form mirroring the TOML: fixed sections, then one list per analysis section."""
        from .registry import analysis_for_spec

        out = {f.name: dataclasses.asdict(self)[f.name] for f in dataclasses.fields(self)
               if f.name != "analyses"}
        for spec in self.analyses:
            out.setdefault(analysis_for_spec(spec).section, []).append(dataclasses.asdict(spec))
        return out


_SECTIONS = {
    "suite": None, "model": ModelSpec, "data": DataSpec, "capture": CaptureSpec,
    "stats": StatsSpec, "execution": ExecutionSpec,
}


_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.]+)\s*\]\]?")


def _line_of(text: str, section: str, key: str | None, index: int = 0) -> int | None:
    """1-based line of ``key`` in the ``index``-th ``[section]`` / ``[[section]]`` table.

    With ``key=None``: the line of that table's header.
    """
    current, seen = None, -1
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            current = m.group(1)
            if current == section:
                seen += 1
                if key is None and seen == index:
                    return lineno
            continue
        if (
            key is not None and current == section and seen == index
            and re.match(rf"^\s*{re.escape(key)}\s*=", line)
        ):
            return lineno
    return None


def _where(path: Path, text: str, section: str, key: str | None = None, index: int = 0) -> str:
    line = _line_of(text, section, key, index)
    loc = f"{path}:{line}" if line else str(path)
    return f"{loc}: [{section}]" + (f" {key}" if key else "")


def _sections_in_order(text: str, raw: dict[str, Any], analyses: Any) -> list[tuple[str, int]]:
    """``(section, index)`` of every analysis table, in file order."""
    order: list[tuple[str, int]] = []
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m and m.group(1) in analyses:
            name = m.group(1)
            counts[name] = counts.get(name, 0) + 1
            order.append((name, counts[name] - 1))
    for name in analyses:  # tables written inline (e.g. `probe = [{...}]`) come last
        if name in raw:
            n = len(raw[name]) if isinstance(raw[name], list) else 1
            order += [(name, i) for i in range(counts.get(name, 0), n)]
    return order


def _check_type(value: Any, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in args:
            if option is type(None):
                if value is None:
                    return None
                continue
            try:
                return _check_type(value, option, where)
            except SuiteError as err:
                errors.append(str(err))
        raise SuiteError(errors[0] if errors else f"{where}: invalid value {value!r}")
    if origin is Literal:
        if value not in args:
            raise SuiteError(f"{where} = {value!r}: must be one of {list(args)}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise SuiteError(f"{where} = {value!r}: expected a list, e.g. [\"a\", \"b\"]")
        return tuple(_check_type(v, args[0], where) for v in value)
    if origin is list or annotation is list:
        if not isinstance(value, list):
            raise SuiteError(f"{where} = {value!r}: expected a list, e.g. [\"a\", \"b\"]")
        return [_check_type(v, args[0], where) for v in value] if args else list(value)
    if origin is dict or annotation is dict:
        if not isinstance(value, dict):
            raise SuiteError(f"{where} = {value!r}: expected a table, e.g. {{ key = 1 }}")
        return dict(value)
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SuiteError(f"{where} = {value!r}: expected a number")
        if not math.isfinite(value):
            raise SuiteError(f"{where} = {value!r}: expected a finite number (TOML allows nan "
                             "and inf; probekit cannot use them)")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SuiteError(f"{where} = {value!r}: expected an integer")
        return value
    if annotation in (str, bool):
        if not isinstance(value, annotation):
            raise SuiteError(f"{where} = {value!r}: expected {annotation.__name__}")
        return value
    if dataclasses.is_dataclass(annotation):
        return value  # handled by _build
    raise SuiteError(f"{where}: unsupported field type {annotation}")


def _build(
    cls: type, table: dict[str, Any], path: Path, text: str, section: str, *, index: int = 0
) -> Any:
    """Instantiate the dataclass ``cls`` from a TOML table, checking it against the fields.

    Unknown keys (with a close match), types, ``Literal`` choices and required keys are checked
    here; the rules ``cls`` declares on its fields (:mod:`probekit.util.constraints`) by its own
    constructor, reported at the offending key's line, as is a ``__post_init__`` check raising
    :class:`~probekit.errors.KeyedValueError` (its ``key``). ``init=False`` fields are not keys.
    """
    if not isinstance(table, dict):
        raise SuiteError(f"{_where(path, text, section, index=index)}: expected a table")
    hints = typing.get_type_hints(cls)
    keys = set(keys_of(cls))
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name in keys}
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        if key not in fields:
            hint = close_match_hint(key, fields)
            raise SuiteError(
                f"{_where(path, text, section, key, index)}: unknown key{hint}; valid keys are "
                f"{sorted(fields)}"
            )
        annotation = hints[key]
        nested = next(
            (a for a in (typing.get_args(annotation) or (annotation,)) if dataclasses.is_dataclass(a)),
            None,
        )
        if nested is not None and isinstance(value, dict):
            kwargs[key] = _build(nested, value, path, text, f"{section}.{key}")
        else:
            kwargs[key] = _check_type(value, annotation, _where(path, text, section, key, index))
    missing = [
        n for n, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        and n not in kwargs
    ]
    if missing:
        raise SuiteError(
            f"{_where(path, text, section, index=index)}: missing required key(s) {missing}"
        )
    try:
        return cls(**kwargs)
    except ConstraintError as err:  # a declared rule (probekit.util.constraints), at its key's line
        shown = table.get(err.key, err.value)  # as written in the file (a list, not a tuple)
        raise SuiteError(f"{_where(path, text, section, err.key, index)} = {shown!r}: must be "
                         f"{err.rule}") from None
    except KeyedValueError as err:  # a __post_init__ check naming its key: at that key's line
        key = err.key if err.key in kwargs else None
        raise SuiteError(f"{_where(path, text, section, key, index)}: {err}") from None
    except (TypeError, ValueError) as err:  # a check across keys, or a type error: the section
        raise SuiteError(f"{_where(path, text, section, index=index)}: {err}") from None


def read_toml(path: str | Path, what: str = "suite") -> tuple[Path, str, dict[str, Any]]:
    """``(path, text, table)`` of a TOML file; a missing file or bad TOML is a :class:`SuiteError`."""
    path = Path(path)
    if not path.is_file():
        raise SuiteError(f"{what} file {path} not found")
    try:
        text = read_text(path)
    except DataError as err:  # UTF-16 without a mark that is no text, a byte not UTF-8
        raise SuiteError(str(err)) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"^(.*) \(at line (\d+), column (\d+)\)$", str(err))
        if m:  # FILE:LINE:COLUMN first, as for data files
            raise SuiteError(f"{path}:{m.group(2)}:{m.group(3)}: invalid TOML: {m.group(1)}") from None
        raise SuiteError(f"{path}: invalid TOML: {err}") from None
    return path, text, raw


def load_suite(path: str | Path) -> Suite:
    """Parse and validate a probe-suite TOML file."""
    path, text, raw = read_toml(path)
    from .registry import registered

    analyses = registered()
    unknown = sorted(set(raw) - set(_SECTIONS) - set(analyses))
    if unknown:
        raise SuiteError(
            f"{_where(path, text, unknown[0])}: unknown section; valid sections are "
            f"{sorted(_SECTIONS)} and the analyses {sorted(analyses)}"
        )
    if not any(name in raw for name in analyses):
        raise SuiteError(
            f"{path}: no analysis section; add at least one of "
            + ", ".join(f"[[{name}]]" for name in analyses)
        )
    specs: list[Any] = []
    order = _sections_in_order(text, raw, analyses)
    for name, i in order:
        tables = raw[name] if isinstance(raw[name], list) else [raw[name]]
        specs.append(_build(analyses[name].spec, tables[i], path, text, name, index=i))
    suite = build_suite(path, text, raw, analyses=tuple(specs))
    for spec, (name, i) in zip(specs, order, strict=True):
        check_split_keys(spec, suite.data,
                         lambda key, name=name, i=i: _where(path, text, name, key, i))
    return suite


def split_names(data: DataSpec) -> tuple[str, ...]:
    """The splits of the examples an analysis or claim reads (:meth:`.data.Examples.split`).

    ``train`` and ``test`` (the probe's ID splits, whatever ``[data]`` calls them) and each
    ``ood_splits`` entry, bare or as ``ood:NAME``: known when the file loads.
    """
    return ("train", "test", *data.ood_splits, *(f"ood:{n}" for n in data.ood_splits))


def check_split_keys(spec: Any, data: DataSpec, where: Any) -> None:
    """Every split-naming key of an analysis or claim spec names a split of the examples.

    The keys ``split`` and ``*_split`` holding a string (``"all"`` and ``""`` mean every row /
    none where a spec allows them; ``Literal`` keys such as ``group_split`` choose a method).
    The run would refuse the name only when the examples are built, after the model loaded.
    ``where(key)``: the ``FILE:LINE: [section] key`` of the key.

    Raises:
        SuiteError: ``FILE:LINE: [claim] split = 'tset': not a split of the examples; the
            splits are [...]``.
    """
    if not dataclasses.is_dataclass(spec):
        return
    hints = typing.get_type_hints(type(spec))
    names = split_names(data)
    for f in dataclasses.fields(spec):
        if not (f.init and (f.name == "split" or f.name.endswith("_split"))):
            continue
        value = getattr(spec, f.name)
        if typing.get_origin(hints.get(f.name)) is Literal or not isinstance(value, str):
            continue
        if value in ("", "all") or value in names:
            continue
        hint = close_match_hint(value, names)
        raise SuiteError(f"{where(f.name)} = {value!r}: not a split of the examples{hint}; the "
                         f"splits are {list(names)} (train and test are [data] train_split and "
                         "test_split; add other names to [data] ood_splits)")


def build_suite(
    path: Path, text: str, raw: dict[str, Any], *, analyses: tuple[Any, ...] = ()
) -> Suite:
    """Validate the fixed sections (``[suite]``, model, data, capture, stats) of a parsed file.

    Shared by suites and hypothesis files (:mod:`probekit.hypotheses`); ``analyses`` are the
    already built analysis specs. Other top-level tables of ``raw`` are the caller's to check.
    """
    meta = raw.get("suite", {})
    for key in meta:
        if key not in ("name", "description", "device"):
            raise SuiteError(
                f"{_where(path, text, 'suite', key)}: unknown key; valid: name, description, device"
            )
    device = meta.get("device", "auto")
    if not isinstance(device, str) or not re.fullmatch(r"auto|cpu|cuda(:\d+)?", device):
        raise SuiteError(
            f"{_where(path, text, 'suite', 'device')} = {device!r}: use 'auto' (CUDA when "
            "available), 'cpu', 'cuda' or 'cuda:N'"
        )
    for required in ("model", "data"):
        if required not in raw:
            raise SuiteError(f"{path}: missing section [{required}]")
    model = _build(ModelSpec, raw["model"], path, text, "model")
    given = [k for k in ("name", "checkpoint", "train") if getattr(model, k) is not None]
    if len(given) != 1:
        raise SuiteError(
            f"{_where(path, text, 'model')}: give exactly one of name, checkpoint, train "
            f"(got {given or 'none'})"
        )
    data = _build(DataSpec, raw["data"], path, text, "data")
    if data.task is not None and data.file is not None:
        raise SuiteError(f"{_where(path, text, 'data')}: give one of task, file (not both)")
    if data.task is None and data.file is None and model.name is not None:
        raise SuiteError(
            f"{_where(path, text, 'data')}: give task or file (a checkpoint or [model.train] "
            "suite may omit both: it then probes the model's training task)"
        )
    suite = Suite(
        name=str(meta.get("name", path.stem)),
        description=str(meta.get("description", "")),
        device=device,
        model=model,
        data=data,
        capture=_build(CaptureSpec, raw.get("capture", {}), path, text, "capture"),
        analyses=analyses,
        stats=_build(StatsSpec, raw.get("stats", {}), path, text, "stats"),
        execution=_build(ExecutionSpec, _execution_table(raw.get("execution", {}), path, text),
                         path, text, "execution"),
        source=str(path),
    )
    for rel, key in ((model.checkpoint, "checkpoint"), (data.file, "file")):
        resolved = suite.resolve(rel)
        if resolved is not None and not resolved.exists():
            section = "model" if key == "checkpoint" else "data"
            raise SuiteError(f"{_where(path, text, section, key)} = {rel!r}: {resolved} does not exist")
    checkpoint = suite.resolve(model.checkpoint)
    if checkpoint is not None and not (checkpoint / "config.json").is_file():
        what = "a file" if checkpoint.is_file() else "a folder without config.json"
        raise SuiteError(
            f"{_where(path, text, 'model', 'checkpoint')} = {model.checkpoint!r}: {checkpoint} is "
            f"{what}; give a checkpoint folder (config.json and model.safetensors, written by "
            "probekit train or probekit.save_checkpoint)"
        )
    check_capture_sites(suite.capture, path, text)
    if suite.capture.positions not in ("last", "all") and not suite.capture.positions.startswith("column:"):
        raise SuiteError(
            f"{_where(path, text, 'capture', 'positions')} = {suite.capture.positions!r}: use "
            "'last', 'all' or 'column:NAME'"
        )
    return suite


def check_capture_sites(capture: CaptureSpec, path: Path, text: str) -> None:
    """``[capture] sites``/``kind``: known site kinds, each site once (``FILE:LINE`` errors).

    The run would refuse both after the model loaded; here they fail with the file's line.
    """
    from ..sites import Site

    where = _where(path, text, "capture", "sites")
    if tuple(capture.sites) == ("all",):
        try:
            Site.parse(f"{capture.kind}@0")
        except (ValueError, KeyError) as err:
            raise SuiteError(f"{_where(path, text, 'capture', 'kind')} = {capture.kind!r}: "
                             f"{err.args[0] if err.args else err}") from None
        return
    seen: dict[str, str] = {}
    for given in capture.sites:
        try:
            site = Site.parse(given)
        except (ValueError, KeyError) as err:
            raise SuiteError(f"{where}: {given!r}: {err.args[0] if err.args else err}") from None
        if site.name in seen:
            same = "given twice" if seen[site.name] == given else f"the same site as {seen[site.name]!r}"
            raise SuiteError(f"{where}: {given!r} is {same} ({site.name}); give each site once")
        seen[site.name] = given


def build_table(
    cls: type, table: dict[str, Any], path: Path, text: str, section: str, *, index: int = 0
) -> Any:
    """The dataclass ``cls`` from the ``index``-th ``[section]`` table, checked field by field.

    Public entry to the suite validator for other TOML formats (hypothesis files): unknown keys,
    types, ``Literal`` choices and required keys raise ``FILE:LINE: [section] key`` errors.
    """
    return _build(cls, table, path, text, section, index=index)


def location(path: Path, text: str, section: str, key: str | None = None, index: int = 0) -> str:
    """``FILE:LINE: [section] key`` prefix of an error about the ``index``-th ``[section]``."""
    return _where(path, text, section, key, index)
