"""The code identity of a plug-in's measurement kind, for cache keys.

A cached marker cell is valid only for the code that computed it: after a plug-in is edited, a
rerun must measure it again rather than mix values from both sides of the edit. The identity of
a plug-in kind is the sha256 of its source files (the module defining ``measure``; for a
package, every ``.py`` file of its top-level package), else, when its source cannot be read,
the version of the distribution that installs it. Built-in kinds have none (their cells are
keyed by their specs, as before).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from ..util.io import sha256_bytes, sha256_file
from .calls import kind_plugin
from .registry import MeasurementKind

__all__ = ["kind_version", "module_version"]


def kind_version(kind: MeasurementKind) -> str | None:
    """``"sha256:<16 hex>"`` / ``"dist:NAME==VERSION"`` of a plug-in kind; ``None``: built in."""
    module = kind_plugin(kind)
    return None if module is None else module_version(module)


def module_version(module: str) -> str:
    """The identity of plug-in module ``module`` (imported): its source digest, else its version.

    The digest is recomputed whenever a file's size or modification time changes (an edit
    within one process included). ``"unknown"`` when neither its source nor an installing
    distribution is found.
    """
    top = sys.modules.get(module.split(".")[0])
    own = sys.modules.get(module)
    files: list[Path] = []
    folders = list(getattr(top, "__path__", None) or [])
    if folders:  # a package: all of its code
        for folder in folders:
            files += sorted(Path(folder).rglob("*.py"))
    elif getattr(own, "__file__", None):
        files = [Path(own.__file__)]  # type: ignore[union-attr, arg-type]
    stats = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        stats.append((str(f), st.st_size, st.st_mtime_ns))
    if stats:
        return _digest(tuple(stats))
    from importlib.metadata import packages_distributions, version

    for dist in packages_distributions().get(module.split(".")[0], []):
        return f"dist:{dist}=={version(dist)}"
    return "unknown"


@functools.lru_cache(maxsize=256)
def _digest(stats: tuple[tuple[str, int, int], ...]) -> str:
    """``sha256:<16 hex>`` of the files (name and content), cached by their size and mtime."""
    parts = [f"{Path(path).name}:{sha256_file(path)}" for path, _, _ in stats]
    return "sha256:" + sha256_bytes("|".join(parts).encode())[:16]
