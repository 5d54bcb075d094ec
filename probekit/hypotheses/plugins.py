"""Measurement kinds from the user's own code: ``[plugins]`` of a file, entry points.

A claim file or a diagnosis file names the modules that define its kinds::

    [plugins]
    modules = ["my_markers", "lib/extra_markers.py"]   # relative to this file's folder

Each entry is a module name (``my_markers``, ``pkg.markers``: imported from the file's folder
first, then ``sys.path``) or a ``.py`` path (its folder goes on ``sys.path`` and its stem is
the module name). The module registers its kinds on import
(:func:`~probekit.hypotheses.registry.register_measurement`), so they are known before the
claims' or markers' keys are checked. Installed distributions declare kinds in the entry-point
group ``probekit.kinds`` (``[project.entry-points."probekit.kinds"] my_kinds = "my_pkg.kinds"``),
imported by the registry on its first lookup in every process.

Every loaded module is declared to the executors (:func:`probekit.executor.add_worker_import`):
worker processes (``processes``, Ray) import it before their first task, so the user's code
needs no ``if __name__ == "__main__"`` guard for its kinds to exist there.

A broken plug-in is one line: ``plug-in module 'x' (from FILE:LINE): ModuleNotFoundError: No
module named 'x' (...)``, likewise a ``SyntaxError``, an error raised by
its code, a kind name that is already registered (a built-in's, naming both definitions), or a
module that ``defines no measurement kind``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..executor import add_worker_import
from ..suites.spec import SuiteError, location
from .registry import MEASUREMENT_KINDS

__all__ = ["BUILTIN_PACKAGE", "PLUGINS_SECTION", "KindOrigin", "kind_origins", "load_file_plugins",
           "load_plugins", "parse_plugins"]

#: the section naming plug-in modules in claim and diagnosis files
PLUGINS_SECTION = "plugins"
#: the package of the shipped kinds
BUILTIN_PACKAGE = f"{__package__}.kinds"


def _resolve(entry: str, base: Path) -> tuple[str, Path]:
    """``(module name, folder)`` of one ``modules`` entry, relative to the file's folder ``base``."""
    if entry.endswith(".py") or "/" in entry or "\\" in entry:
        path = Path(entry)
        path = path if path.is_absolute() else base / path
        return path.stem, path.parent.resolve()
    return entry, base.resolve()


def parse_plugins(raw: dict[str, Any], path: Path, text: str) -> tuple[str, ...]:
    """The ``[plugins] modules`` entries of a parsed file (``()`` without the section).

    Raises:
        SuiteError: ``FILE:LINE: [plugins] ...``: not a table, an unknown key, or ``modules``
            not a list of non-empty strings.
    """
    table = raw.get(PLUGINS_SECTION)
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise SuiteError(f"{location(path, text, PLUGINS_SECTION)}: expected a table, e.g. "
                         '[plugins] modules = ["my_markers"]')
    unknown = sorted(set(table) - {"modules"})
    if unknown:
        raise SuiteError(f"{location(path, text, PLUGINS_SECTION, unknown[0])}: unknown key; "
                         "the only key is modules (a list of module names or .py paths)")
    modules = table.get("modules")
    if not (isinstance(modules, list) and modules
            and all(isinstance(m, str) and m.strip() for m in modules)):
        raise SuiteError(f"{location(path, text, PLUGINS_SECTION, 'modules')} = {modules!r}: "
                         'expected a non-empty list of module names or .py paths, e.g. '
                         '["my_markers"] (relative to the file\'s folder)')
    return tuple(m.strip() for m in modules)


def load_plugins(entries: tuple[str, ...], path: Path, text: str = "") -> dict[str, tuple[str, ...]]:
    """Import the plug-in modules of a file; returns ``{module: kinds it registered}``.

    Each module is declared to the executors' workers (:func:`probekit.executor.add_worker_import`).

    Raises:
        SuiteError: one line, ``plug-in module 'x' (from FILE:LINE): PROBLEM`` (not found, does not compile, raises, registers nothing or a taken name).
    """
    path = Path(path)
    # "FILE:LINE" of the modules key: where each plug-in was named
    source = location(path, text, PLUGINS_SECTION, "modules").split(": [")[0] if text else str(path)
    out: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        module, folder = _resolve(entry, path.parent)
        if entry.endswith(".py") and not (folder / f"{module}.py").is_file():
            raise SuiteError(f"plug-in module {entry!r} (from {source}): no such file "
                             f"{folder / (module + '.py')}")
        try:
            out[module] = MEASUREMENT_KINDS.load_plugin(module, source=source, folder=str(folder))
        except ConfigError as err:
            raise SuiteError(str(err)) from None
        add_worker_import(module, str(folder))
    return out


def load_file_plugins(path: str | Path) -> dict[str, tuple[str, ...]]:
    """Load the ``[plugins]`` of a claim or diagnosis file without validating the rest of it."""
    from ..suites.spec import read_toml

    path, text, raw = read_toml(path, what="plug-in")
    return load_plugins(parse_plugins(raw, path, text), path, text)


@dataclass(frozen=True, kw_only=True)
class KindOrigin:
    """Where a registered measurement kind comes from (``probekit test --list-kinds``).

    Attributes:
        name: the kind's name.
        builtin: shipped with probekit (:mod:`probekit.hypotheses.kinds`).
        definition: ``module.qualname`` of its measure function.
        source: the file or entry point that named its plug-in module (``""``: registered
            from Python, or built in).
        summary: the first line of its docstring.
    """

    name: str
    builtin: bool
    definition: str
    source: str
    summary: str

    def line(self) -> str:
        """``name  built-in|plug-in MODULE (from SOURCE)  summary``."""
        if self.builtin:
            where = "built-in"
        else:
            module = self.definition.rsplit(".", 1)[0]
            where = f"plug-in {module}" + (f" (from {self.source})" if self.source else "")
        return f"{self.name:<28} {where:<40} {self.summary}".rstrip()


def kind_origins() -> list[KindOrigin]:
    """Every registered kind with its origin, built-in kinds first, each group by name."""
    out = []
    for name, kind in MEASUREMENT_KINDS.items():
        definition = MEASUREMENT_KINDS.origin(name)
        builtin = definition.startswith(BUILTIN_PACKAGE + ".")
        module = getattr(kind.measure, "__module__", "") or ""
        source = ""
        for candidate in (module, *[module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)]):
            source = MEASUREMENT_KINDS.plugin_source(candidate) or ""
            if source:
                break
        out.append(KindOrigin(name=name, builtin=builtin, definition=definition, source=source,
                              summary=kind.summary))
    return sorted(out, key=lambda k: (not k.builtin, k.name))
