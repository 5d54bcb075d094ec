"""One generic name -> object registry, with one rule for every plug-in point of probekit.

Suite analyses, measurement kinds, probe kinds, similarity measures and executors are each a
:class:`Registry`: a plug-in registers itself under a name when its module is imported, and
the registry imports its plug-in package (every module of it) on the first lookup::

    PROBE_KINDS: Registry[ProbeKind] = Registry("probe kind", plugins="probekit.probes.kinds")
    PROBE_KINDS.register("ridge", Ridge(), origin=Ridge)
    PROBE_KINDS.get("ridge")

The rules, the same everywhere:

* a name registered twice by two different definitions is refused, with a
  :class:`~probekit.errors.ConfigError` naming both (``module.qualname`` of each). The same
  definition registered again (its module re-imported or reloaded) replaces the entry;
* an unknown name is a :class:`~probekit.errors.ConfigError` listing the registered names and
  suggesting the close ones (:func:`difflib.get_close_matches`).

A registry with an entry-point ``group`` also imports the installed entry points of that
group (:func:`~probekit.util.plugins.entry_point_modules`), lazily: only when a name is not
registered by the package or a file's own plug-ins (the entry point of that name first, then the
others, stopping at the first that registers it), or when every name is listed. One broken
installed plug-in therefore stops only the files that need a name it might define: its one-line
error is kept and given with the unknown-name error (and by :meth:`Registry.broken`), never raised
at a lookup that the other entries answer. :meth:`Registry.load_plugin` imports a module of the
user's own code named by a file; a plug-in that registers nothing, or fails to import, is one
``ConfigError`` line.

A registry also reads like a mapping (``reg[name]``, ``name in reg``, ``list(reg)``,
``{**reg}``, ``reg.get(name, default)``), and ``reg[name] = obj`` is :meth:`Registry.register`
(so ``monkeypatch.setitem`` works on it). A registry of data entries (models, presets) may allow
names that are not identifiers (``identifiers=False``: ``"smollm2-135m"``) and raise a subclass
of ``ConfigError`` for an unknown name (``error=``).
"""

from __future__ import annotations

import difflib
from collections.abc import ItemsView, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from ..errors import ConfigError
from .plugins import entry_point_modules, import_plugin_module, import_submodules, plugin_error

__all__ = ["Registry", "qualified_name"]

T = TypeVar("T")

_MISSING: Any = object()


def qualified_name(obj: object) -> str:
    """``module.qualname`` of a class or function (of its type for any other object)."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


class Registry(Generic[T]):
    """Named plug-ins of one kind (see the module docstring for the rules).

    Args:
        what: what an entry is, in words (``"probe kind"``): the error messages' subject.
        plugins: the package whose modules register the built-in entries (or several modules,
            each a package or a plain module), imported by name (so the import graph has the
            plug-ins depending on the registry) on first lookup.
        hint: how to add an entry, appended to the unknown-name error.
        group: the entry-point group of installed plug-ins (``"probekit.kinds"``), loaded on
            first lookup after ``plugins``; ``None``: none.
        identifiers: names must be identifiers (``False``: any non-empty name without
            whitespace, e.g. a model's ``"smollm2-135m"``).
        error: the :class:`~probekit.errors.ConfigError` subclass raised for an unknown name.
    """

    def __init__(
        self, what: str, *, plugins: str | Sequence[str] | None = None, hint: str = "",
        group: str | None = None, identifiers: bool = True,
        error: type[ConfigError] = ConfigError,
    ) -> None:
        self.what = what
        self.hint = hint
        self.group = group
        self.identifiers = identifiers
        self.error = error
        self._plugins = plugins
        self._loaded = plugins is None
        self._pending: list[Any] | None = None  # entry points not imported yet (None: not listed)
        self._broken: dict[str, str] = {}  # entry point source -> its one-line error
        self._sources: dict[str, str] = {}
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}

    def register(self, name: str, obj: T, *, origin: object | None = None) -> T:
        """Register ``obj`` under ``name``; returns ``obj``.

        Args:
            name: the registry name (an identifier).
            obj: the entry.
            origin: the definition that identifies the entry (the decorated class or function;
                default ``obj`` itself): registering ``name`` again from another definition is
                refused, from the same one (a re-imported module) replaces the entry.

        Raises:
            ConfigError: ``name`` is not an identifier (not a word, with ``identifiers=False``),
                or is registered by another definition.
        """
        if not isinstance(name, str) or not (
                name.isidentifier() if self.identifiers else name and name.split() == [name]):
            rule = "an identifier (letters, digits, _)" if self.identifiers else \
                "a non-empty name without whitespace"
            raise ConfigError(f"{self.what} name {name!r} must be {rule}")
        new = qualified_name(obj if origin is None else origin)
        old = self._origins.get(name)
        if old is not None and old != new:
            raise ConfigError(
                f"{self.what} {name!r} is already registered by {old}; {new} cannot register "
                "the same name: choose another name"
            )
        self._entries[name] = obj
        self._origins[name] = new
        return obj

    def unregister(self, name: str) -> T:
        """Remove ``name`` (e.g. a test's toy entry); returns what it held."""
        self._origins.pop(name, None)
        return self._entries.pop(name)

    def _load(self) -> None:
        """Import the registry's own package (once); entry points wait for :meth:`_load_entry_points`."""
        if not self._loaded:
            self._loaded = True
            plugins = [self._plugins] if isinstance(self._plugins, str) else self._plugins or ()
            for package in plugins:
                import_submodules(package)

    def _load_entry_points(self, wanted: str | None = None) -> None:
        """Import installed entry points until ``wanted`` is registered (``None``: all of them).

        The entry point named ``wanted`` goes first. A broken one is recorded (:meth:`broken`)
        and skipped, so it stops only a lookup no other entry answers.
        """
        self._load()
        if self.group is None:
            return
        if self._pending is None:
            self._pending = list(entry_point_modules(self.group))
        if wanted is not None:
            self._pending.sort(key=lambda ep: ep.name != wanted)
        while self._pending and (wanted is None or wanted not in self._entries):
            ep = self._pending.pop(0)
            try:
                self.load_plugin(ep.module, source=ep.source, importer=ep.load)
            except ConfigError as err:
                self._broken[ep.source] = str(err)

    def broken(self) -> tuple[str, ...]:
        """The one-line errors of the installed plug-ins that failed to import (so far)."""
        return tuple(self._broken.values())

    def rescan(self) -> None:
        """Import the plug-in package and list the entry points again on the next lookup."""
        self._loaded = self._plugins is None
        self._pending = None
        self._broken = {}

    def origin(self, name: str) -> str:
        """``module.qualname`` of the definition that registered ``name``."""
        self._load()
        return self._origins[name]

    def plugin_source(self, module: str) -> str | None:
        """Where the plug-in module ``module`` was named (a file, an entry point), if it was."""
        return self._sources.get(module)

    def defined_by(self, module: str) -> tuple[str, ...]:
        """The registered names whose definition lives in ``module`` or one of its submodules."""
        return tuple(sorted(n for n, o in self._origins.items()
                            if o.startswith(f"{module}.") and o[len(module) + 1:]))

    def load_plugin(
        self, module: str, *, source: str, folder: str | None = None, importer: object = None,
    ) -> tuple[str, ...]:
        """Import the user's plug-in module ``module``; returns the names it registered.

        The registry's own plug-ins load first, so a plug-in reusing a built-in name is refused
        at its import (naming both definitions). A module imported before whose entries were
        dropped since (a test's :meth:`temporary` block) is re-imported.

        Args:
            module: the module name.
            source: where it was named (``FILE:LINE``, an entry point), for errors and listings.
            folder: the folder to import it from (put on ``sys.path``).
            importer: a zero-argument callable doing the import instead (an entry point's load).

        Raises:
            ConfigError: one line, ``plug-in module 'x' (from SOURCE): PROBLEM``: the import
                failed, or the module registers no entry (``defines no measurement kind``).
        """
        import importlib
        import sys

        self._load()  # built-ins first (a name clash names both)
        before = set(self._entries)
        if importer is not None:
            importer()  # type: ignore[operator]
        else:
            import_plugin_module(module, source=source, folder=folder)
        names = tuple(sorted(set(self._entries) - before)) or self.defined_by(module)
        if not names and module in sys.modules:  # imported before, its entries dropped since
            try:
                importlib.reload(sys.modules[module])
            except (Exception, SystemExit) as err:
                raise plugin_error(module, source, f"{type(err).__name__}: {err}") from None
            names = self.defined_by(module)
        if not names:
            article = "an" if self.what[:1] in "aeiou" else "a"
            raise plugin_error(module, source, f"defines no {self.what} (register {article} "
                               f"{self.what} in it{f'; {self.hint}' if self.hint else ''})")
        self._sources.setdefault(module, source)
        return names

    def find(self, name: object) -> T | None:
        """The entry registered as ``name``, or ``None`` (installed plug-ins imported only if needed)."""
        self._load()
        if isinstance(name, str) and name not in self._entries:
            self._load_entry_points(name)
        return self._entries.get(name) if isinstance(name, str) else None

    def get(self, name: object, default: Any = _MISSING) -> T:
        """The entry registered as ``name`` (``object``: names come from files).

        ``default``, when given, is returned for an unknown name instead (as ``dict.get``).

        Raises:
            ConfigError: unknown name (of the registry's ``error`` class); the message lists the
                registered names and the close ones, and the error of every installed plug-in
                that failed to import.
        """
        found = self.find(name)
        if found is not None:
            return found
        if default is not _MISSING:
            return default  # type: ignore[no-any-return]
        names = self.names()
        close = difflib.get_close_matches(name, names, n=3) if isinstance(name, str) else []
        maybe = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        hint = f"; {self.hint}" if self.hint else ""
        raise self.error(
            f"unknown {self.what} {name!r}{maybe}; registered {self.what}s are {list(names)}{hint}"
            f"{self.broken_note()}"
        )

    def broken_note(self) -> str:
        """``"; installed plug-ins that failed to import: ERROR | ERROR"`` (``""``: none failed)."""
        errors = self.broken()
        return f"; installed plug-ins that failed to import: {' | '.join(errors)}" if errors else ""

    def names(self) -> tuple[str, ...]:
        """Every registered name (every plug-in that imports loaded), sorted."""
        self._load_entry_points()
        return tuple(sorted(self._entries))

    def items(self) -> ItemsView[str, T]:
        """``(name, entry)`` pairs (every plug-in that imports loaded), sorted by name."""
        self._load_entry_points()
        return dict(sorted(self._entries.items())).items()

    def values(self) -> list[T]:
        """The entries (every plug-in that imports loaded), sorted by name."""
        return [entry for _, entry in self.items()]

    def keys(self) -> tuple[str, ...]:
        """:meth:`names` (so ``{**registry}`` and ``dict(registry)`` work)."""
        return self.names()

    def __contains__(self, name: object) -> bool:
        return self.find(name) is not None

    def __getitem__(self, name: object) -> T:
        return self.get(name)

    def __setitem__(self, name: str, obj: T) -> None:
        self.register(name, obj)

    def __delitem__(self, name: str) -> None:
        self.unregister(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    @contextmanager
    def temporary(self) -> Iterator[Registry[T]]:
        """Entries registered inside the block are removed at its end (tests' toy entries).

        The package's plug-ins are loaded first: a module imported inside the block would
        otherwise be dropped at its end and, already in ``sys.modules``, never register again.
        Installed entry points imported inside the block are pending again after it (their
        modules are re-imported by :meth:`load_plugin` when next needed).
        """
        self._load()
        saved = (dict(self._entries), dict(self._origins), dict(self._sources),
                 None if self._pending is None else list(self._pending), dict(self._broken))
        try:
            yield self
        finally:
            self._entries, self._origins = dict(saved[0]), dict(saved[1])
            self._sources = dict(saved[2])
            self._pending = None if saved[3] is None else list(saved[3])
            self._broken = dict(saved[4])

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {sorted(self._entries)})"
