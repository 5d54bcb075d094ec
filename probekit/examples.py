"""The shipped examples: suites, claim files, their data and the embedded checkpoints.

In a clone the examples are the repository's ``probes/`` and ``circuits/`` folders (with the
diagnosis tables under ``docs/diagnosis/*/markers.csv``). A wheel carries the same files as
package data under ``probekit/_examples/``, built from those folders (``pyproject.toml``
``[tool.setuptools.package-dir]``, :mod:`probekit._build`), in the repository's layout: a suite's
relative paths (``checkpoints/modadd-p53``, ``../docs/diagnosis/he_depth/markers.csv``) resolve
inside the package exactly as they do in a clone. They are read with :mod:`importlib.resources`,
so an installation that is not a plain folder (a zip) works too.

``probekit examples list`` names them; ``probekit examples copy NAME|all DIR`` writes an
editable copy of a file and everything it names, in the same layout (``DIR/probes/x.toml`` with
``DIR/probes/checkpoints/...``), so the copy runs where it lands and the README's commands run
from ``DIR`` as from a clone. ``probekit demo`` runs the README demo on the packaged files.
"""

from __future__ import annotations

import difflib
import fnmatch
import glob
import posixpath
import shutil
import tempfile
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from .errors import ConfigError, DataError

#: The folders that hold example files (``*.toml``), in listing order.
EXAMPLE_FOLDERS = ("probes", "circuits")
#: The folders (relative to the examples root) whose files an example may name.
DATA_FOLDERS = ("probes", "circuits", "docs/diagnosis")
#: The suite ``probekit demo`` runs (the README demo, ``make demo``).
DEMO = "modadd_grokked"


@dataclass(frozen=True)
class Example:
    """One shipped example file.

    Attributes:
        name: the file's stem, e.g. ``"modadd_grokked"`` (what ``examples copy`` takes).
        folder: ``"probes"`` (suites, diagnosis files) or ``"circuits"`` (claim files).
        description: the file's ``[suite] description`` (``""`` if it has none).
    """

    name: str
    folder: str
    description: str

    @property
    def relpath(self) -> str:
        """The file's path in the repository layout, e.g. ``"probes/modadd_grokked.toml"``."""
        return f"{self.folder}/{self.name}.toml"

    @property
    def command(self) -> str:
        """The ``probekit`` command that runs it: ``report``, ``test`` (claims) or ``diagnose``."""
        if self.folder == "circuits":
            return "test"
        return "diagnose" if self.name.startswith("diagnose_") else "report"


def examples_root() -> Traversable:
    """The folder holding ``probes/`` and ``circuits/``: the package data, else the clone.

    An installed wheel has them under ``probekit/_examples``; a clone (or an editable install,
    which maps only ``probekit/``) has them at the repository root beside ``probekit/``.

    Raises:
        DataError: neither is present (an installation built without its package data).
    """
    packaged = resources.files("probekit").joinpath("_examples")
    if packaged.is_dir():
        return packaged
    source = Path(__file__).resolve().parent.parent
    if (source / "probes").is_dir() and (source / "pyproject.toml").is_file():
        return source
    raise DataError(
        f"the shipped examples are missing: neither {packaged} nor {source / 'probes'} exists; "
        "reinstall probekit from a wheel built with its package data (pip install probekit-interp)"
    )


def _child(root: Traversable, relpath: str) -> Traversable:
    node = root
    for part in relpath.split("/"):
        node = node.joinpath(part)
    return node


def _walk(node: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        rel = f"{prefix}/{child.name}"
        if child.is_dir():
            if child.name != "__pycache__":
                yield from _walk(child, rel)
        else:
            yield rel, child


def _all_files(root: Traversable) -> dict[str, Traversable]:
    """Every file of :data:`DATA_FOLDERS` under ``root``, by its posix path relative to it."""
    files: dict[str, Traversable] = {}
    for folder in DATA_FOLDERS:
        node = _child(root, folder)
        if node.is_dir():
            files.update(_walk(node, folder))
    return files


def _description(text: str) -> str:
    try:
        meta = tomllib.loads(text).get("suite", {})
    except tomllib.TOMLDecodeError:
        return ""
    description = meta.get("description", "") if isinstance(meta, dict) else ""
    return " ".join(str(description).split())


def list_examples() -> list[Example]:
    """The shipped example files (suites, diagnosis files, claim files), sorted by folder, name."""
    root = examples_root()
    found = []
    for folder in EXAMPLE_FOLDERS:
        node = root.joinpath(folder)
        if not node.is_dir():
            continue
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name.endswith(".toml") and child.is_file():
                found.append(Example(child.name.removesuffix(".toml"), folder,
                                     _description(child.read_text(encoding="utf-8"))))
    return found


def find_example(name: str) -> Example:
    """The example called ``name``: a stem (``modadd_grokked``), with ``.toml``, or with its folder.

    Raises:
        ConfigError: no such example (the message suggests the closest names).
    """
    key = name.strip().removesuffix(".toml")
    examples = list_examples()
    for example in examples:
        if key in (example.name, f"{example.folder}/{example.name}"):
            return example
    names = [e.name for e in examples]
    close = difflib.get_close_matches(key.rsplit("/", 1)[-1], names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(
        f"no shipped example named {name!r}{hint} (`probekit examples list` names them all)"
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def example_files(example: Example, root: Traversable | None = None) -> list[str]:
    """The example's file and every file it names, as posix paths relative to the root.

    A string value of the TOML (any table, any depth) that names a file, a folder or a glob of
    them relative to the file's folder (as the suite loaders resolve it) is a dependency: a
    checkpoint folder brings all its files, ``checkpoints/run/step_*`` every matching one.
    """
    root = examples_root() if root is None else root
    files = _all_files(root)
    raw = tomllib.loads(_child(root, example.relpath).read_text(encoding="utf-8"))
    needed = {example.relpath}
    for value in _strings(raw):
        if "/" not in value or "\n" in value or value.startswith(("/", "~")):
            continue  # names, labels and sentences are no paths
        target = posixpath.normpath(posixpath.join(example.folder, value))
        if target.startswith("../"):
            continue  # outside the examples: not shipped
        if glob.has_magic(target):
            needed.update(p for p in files
                          if fnmatch.fnmatch(p, target) or fnmatch.fnmatch(p, target + "/*"))
        else:
            needed.update(p for p in files if p == target or p.startswith(target + "/"))
    return sorted(needed)


@dataclass(frozen=True)
class CopyResult:
    """What :func:`copy_examples` did.

    Attributes:
        written: files written (absolute paths).
        unchanged: files already present with the same bytes (left as they were).
        examples: the examples copied (each at ``dest / example.relpath``).
    """

    written: tuple[Path, ...]
    unchanged: tuple[Path, ...]
    examples: tuple[Example, ...]


def copy_examples(names: Sequence[str], dest: str | Path) -> CopyResult:
    """Copy examples and the files they name into ``dest``, in the repository's layout.

    ``names`` are example names (:func:`find_example`) or ``["all"]``. Relative paths inside the
    copied files stay valid because the files they name are copied beside them, in the same
    relative places (``dest/probes/checkpoints/...``, ``dest/docs/diagnosis/...``). Nothing
    existing is overwritten: a destination file with the same bytes is left alone, and any
    other existing file stops the copy before a byte is written.

    Raises:
        ConfigError: an unknown name, ``dest`` is a file, or files in ``dest`` would be replaced
            (all of them named).
    """
    if not names:
        raise ConfigError("examples copy needs a NAME (or `all`); `probekit examples list` names them")
    dest = Path(dest).expanduser()
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"examples copy: {dest} is a file; give a folder (it is created)")
    examples = (list_examples() if list(names) == ["all"]
                else list(dict.fromkeys(find_example(n) for n in names)))
    root = examples_root()
    relpaths = sorted({p for e in examples for p in example_files(e, root)})
    sources = {rel: _child(root, rel) for rel in relpaths}
    unchanged, conflicts = [], []
    for rel, source in sources.items():
        target = dest.joinpath(*rel.split("/"))
        if target.is_dir() or any(p.is_file() for p in target.parents if dest in p.parents):
            conflicts.append(target)
        elif target.exists():
            (unchanged if target.read_bytes() == source.read_bytes() else conflicts).append(target)
    if conflicts:
        listed = ", ".join(str(p) for p in conflicts[:8])
        more = f" and {len(conflicts) - 8} more" if len(conflicts) > 8 else ""
        raise ConfigError(
            f"examples copy: {len(conflicts)} file(s) in {dest} differ from the examples and "
            f"would be replaced: {listed}{more}; nothing was copied (move them, or copy into "
            "another folder)"
        )
    written = []
    for rel, source in sources.items():
        target = dest.joinpath(*rel.split("/"))
        if target in unchanged:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with source.open("rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        written.append(target.resolve())
    return CopyResult(
        written=tuple(written),
        unchanged=tuple(p.resolve() for p in unchanged),
        examples=tuple(examples),
    )


@contextmanager
def example_path(name: str) -> Iterator[Path]:
    """A filesystem path to the example ``name``, with the files it names beside it.

    The packaged file itself when the installation is a plain folder (the usual case: a
    wheel installed by pip, or a clone); otherwise (a zip) a temporary copy, removed on exit.
    """
    example = find_example(name)
    root = examples_root()
    if isinstance(root, Path):
        yield root.joinpath(*example.relpath.split("/"))
        return
    with tempfile.TemporaryDirectory(prefix="probekit-example-") as tmp:
        copy_examples([name], tmp)
        yield Path(tmp).joinpath(*example.relpath.split("/"))
