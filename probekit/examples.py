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

import contextlib
import difflib
import errno
import fnmatch
import glob
import os
import posixpath
import shutil
import stat
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


def check_destination(dest: str | Path) -> Path:
    """``dest`` as a path, refused if it is empty, a symbolic link or a file.

    An empty string would silently mean the current folder; a symbolic link (dangling or not)
    would send the copy somewhere other than the folder named. Checked with ``lstat``, which
    never follows a link.

    Raises:
        ConfigError: naming the value and the fix.
    """
    if not str(dest).strip():
        raise ConfigError(
            f"examples copy DIR is empty ({str(dest)!r}); name a folder, e.g. `probekit examples "
            "copy all my-examples` (write `.` for the current folder)"
        )
    path = Path(dest).expanduser()
    _refuse_link(path, path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"examples copy DIR {path} is a file, not a folder; give a folder (it "
                          "is created)")
    return path


def _refuse_link(path: Path, dest: Path) -> None:
    """Refuse ``path`` if ``lstat`` finds a symbolic link there (a missing path passes)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:  # e.g. a component that is a file: the conflict check names it
        if err.errno == errno.ENOTDIR:
            return
        raise
    if stat.S_ISLNK(mode):
        where = "" if path == dest else f" inside {dest}"
        raise ConfigError(
            f"examples copy: {path}{where} is a symbolic link (to {os.readlink(path)!r}); "
            "nothing was copied (remove the link, or copy into another folder)"
        )


def _components(dest: Path, rel: str) -> Iterator[Path]:
    """``dest`` and every path from it down to ``dest/rel``."""
    node = dest
    yield node
    for part in rel.split("/"):
        node = node / part
        yield node


class _Journal:
    """What one copy created (folders, files), so that an error can remove exactly that."""

    def __init__(self) -> None:
        self.dirs: list[Path] = []
        self.files: list[Path] = []

    def mkdirs(self, folder: Path) -> None:
        missing = []
        node = folder
        while not os.path.lexists(node):
            missing.append(node)
            node = node.parent
        for node in reversed(missing):
            node.mkdir()
            self.dirs.append(node)

    def write(self, source: Traversable, target: Path) -> None:
        """Copy ``source`` to a temporary sibling of ``target``, then rename it into place."""
        self.mkdirs(target.parent)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        try:
            with source.open("rb") as src, open(tmp, "xb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self.files.append(target)

    def undo(self) -> None:
        for file in reversed(self.files):
            file.unlink(missing_ok=True)
        for folder in reversed(self.dirs):
            with contextlib.suppress(OSError):
                folder.rmdir()


def copy_examples(names: Sequence[str], dest: str | Path) -> CopyResult:
    """Copy examples and the files they name into ``dest``, in the repository's layout.

    ``names`` are example names (:func:`find_example`) or ``["all"]``. Relative paths inside the
    copied files stay valid because the files they name are copied beside them, in the same
    relative places (``dest/probes/checkpoints/...``, ``dest/docs/diagnosis/...``). Nothing
    existing is overwritten: a destination file with the same bytes is left alone, and any
    other existing file stops the copy before a byte is written. Every path is checked with
    ``lstat``: a symbolic link at or inside ``dest`` (dangling or not) stops the copy too, so
    nothing is ever written outside ``dest``. Each file is written to a temporary sibling and
    renamed into place; an error part-way (a ``PermissionError``, a full disk) removes every
    file and folder this copy created, so the copy is all or nothing.

    Raises:
        ConfigError: an unknown name, an empty ``dest``, ``dest`` is a file, a symbolic link at
            or inside ``dest``, files in ``dest`` would be replaced (all of them named), or a
            write failed (the copy undone).
    """
    if not names:
        raise ConfigError("examples copy needs a NAME (or `all`); `probekit examples list` names them")
    dest = check_destination(dest)
    examples = (list_examples() if list(names) == ["all"]
                else list(dict.fromkeys(find_example(n) for n in names)))
    root = examples_root()
    relpaths = sorted({p for e in examples for p in example_files(e, root)})
    sources = {rel: _child(root, rel) for rel in relpaths}
    unchanged, conflicts = [], []
    for rel, source in sources.items():
        for node in _components(dest, rel):
            _refuse_link(node, dest)
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
    journal, target = _Journal(), dest
    try:
        for rel, source in sources.items():
            target = dest.joinpath(*rel.split("/"))
            if target not in unchanged:
                journal.write(source, target)
    except OSError as err:
        journal.undo()
        raise ConfigError(
            f"examples copy: cannot write {target} ({err.strerror or err}); nothing was copied "
            f"(the {len(journal.files)} file(s) written before were removed); choose a folder "
            "you can write to"
        ) from None
    except BaseException:
        journal.undo()
        raise
    return CopyResult(
        written=tuple(p.resolve() for p in journal.files),
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
