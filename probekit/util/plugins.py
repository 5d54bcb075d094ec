"""Plug-in discovery: import modules so that each registers itself on import.

Two sources of plug-ins, besides a registry's own package (:func:`import_submodules`):

* a module of the user's own code, named by a file (``[plugins] modules = ["my_markers"]``)
  and imported from that file's folder (:func:`import_plugin_module`);
* an installed distribution's entry point of a registry's group (``probekit.kinds``), the
  Python packaging convention for plug-ins (:func:`entry_point_modules`; PyPA, "Entry points
  specification", https://packaging.python.org/en/latest/specifications/entry-points/).

A plug-in that cannot be imported is one :class:`~probekit.errors.ConfigError` line naming the
module, where it was named, and the problem (``plug-in module 'x' (from FILE): SyntaxError:
...``), never a traceback from deep inside the import machinery. A plug-in calling
``sys.exit()`` at import is such an error too (``SystemExit`` is caught like any exception), so
it cannot end probekit with its own exit status and nothing checked.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..errors import ConfigError

__all__ = ["EntryPointPlugin", "entry_point_modules", "import_plugin_module", "import_submodules",
           "first_line", "plugin_error"]


def import_submodules(package: ModuleType | str) -> None:
    """Import every module of ``package`` (its registration decorators run on import).

    A plain module (no submodules) is imported itself.

    A registry passes its plug-in package by name (``f"{__package__}.kinds"``), so that the
    static import graph has the plug-ins depending on the registry and no circle back
    (the ``acyclic`` import contract of ``pyproject.toml``).
    """
    if isinstance(package, str):
        package = importlib.import_module(package)
    if not hasattr(package, "__path__"):
        return
    for info in pkgutil.iter_modules(package.__path__, prefix=package.__name__ + "."):
        importlib.import_module(info.name)


def plugin_error(module: str, source: str, problem: str) -> ConfigError:
    """The one-line error of a broken plug-in: ``plug-in module 'x' (from SOURCE): PROBLEM``."""
    return ConfigError(f"plug-in module {module!r} (from {source}): {problem}")


def first_line(err: BaseException) -> str:
    """``TYPE: first line of the message`` of an exception raised by a plug-in's code."""
    if isinstance(err, SystemExit):
        return f"SystemExit: the plug-in called sys.exit({err.code!r}) (a plug-in must not exit)"
    text = str(err).strip()
    if isinstance(err, SyntaxError) and err.filename:  # str() drops the file for some errors
        text = f"{err.msg} ({Path(err.filename).name}, line {err.lineno})"
    return f"{type(err).__name__}: {text.splitlines()[0] if text else '(no message)'}"


def _imported_from(module: ModuleType) -> Path | None:
    """The folder a top-level module or package was imported from (None: built in, namespace)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    return path.parent.parent if path.name == "__init__.py" else path.parent


def import_plugin_module(name: str, *, source: str, folder: str | Path | None = None) -> ModuleType:
    """Import the plug-in module ``name`` (from ``folder`` when given); one-line errors.

    ``folder`` is put at the front of ``sys.path`` (kept there: worker processes and a pickled
    spec of the module's classes import it again by name), as running a script from that
    folder would. A module already imported under the same top-level name from another
    folder is refused rather than silently used instead of the file's own.

    Args:
        name: a module name (``my_markers``, ``mypkg.markers``).
        source: where it was named (``FILE:LINE`` or ``entry point 'x' of group 'g'``), for errors.
        folder: the folder to import it from (``None``: the current ``sys.path``).

    Raises:
        ConfigError: ``plug-in module 'x' (from SOURCE): TYPE: MESSAGE`` when it is not found,
            does not compile, or raises on import (a refused registration included).
    """
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise plugin_error(name, source, "not a module name (give NAME, PKG.NAME or a .py path)")
    if folder is not None:
        folder = str(Path(folder).resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        top = sys.modules.get(name.split(".")[0])
        where = None if top is None else _imported_from(top)
        if top is not None and where is not None and where != Path(folder):
            raise plugin_error(name, source, f"a different module {top.__name__!r} is already "
                               f"imported from {where}; rename the plug-in module")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if missing and missing != name and not name.startswith(missing + "."):
            where = " (a module the plug-in imports: install it)"  # found, but a dependency is not
        else:
            where = f" (looked in {folder} and sys.path)" if folder is not None else ""
        raise plugin_error(name, source, f"{first_line(err)}{where}") from None
    except (Exception, SystemExit) as err:  # SyntaxError, a refused registration, its own errors
        raise plugin_error(name, source, first_line(err)) from None


@dataclass(frozen=True)
class EntryPointPlugin:
    """One installed entry point of a plug-in group.

    Attributes:
        name: the entry point's name.
        module: the module it names (imported: its registrations run).
        attr: ``module:attr`` names a function called with no arguments after the import
            (a registration hook), ``None`` when the value is a bare module.
        dist: the distribution that declares it (``None`` if unknown).
        group: the entry-point group.
    """

    name: str
    module: str
    attr: str | None
    dist: str | None
    group: str

    @property
    def source(self) -> str:
        """Where it was named, for messages and listings."""
        dist = f" of distribution {self.dist!r}" if self.dist else ""
        return f"entry point {self.name!r} in group {self.group!r}{dist}"

    def load(self) -> ModuleType:
        """Import the module (and call the hook); one-line :class:`ConfigError` if broken."""
        module = import_plugin_module(self.module, source=self.source)
        if self.attr is not None:
            hook = getattr(module, self.attr, None)
            if not callable(hook):
                raise plugin_error(self.module, self.source, f"has no function {self.attr!r} "
                                   "(the entry point's value is MODULE or MODULE:FUNCTION)")
            try:
                hook()
            except (Exception, SystemExit) as err:
                raise plugin_error(self.module, self.source,
                                   f"{self.attr}() raised {first_line(err)}") from None
        return module


def entry_point_modules(group: str) -> list[EntryPointPlugin]:
    """The installed entry points of ``group`` (``importlib.metadata``), sorted by name."""
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=group):
        module, _, attr = ep.value.partition(":")
        dist = getattr(getattr(ep, "dist", None), "name", None)
        out.append(EntryPointPlugin(name=ep.name, module=module.strip(),
                                    attr=attr.strip() or None, dist=dist, group=group))
    return sorted(out, key=lambda p: (p.name, p.module))
