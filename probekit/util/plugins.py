"""Plug-in discovery: import every module of a package so each registers itself on import."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def import_submodules(package: ModuleType | str) -> None:
    """Import every module of ``package`` (its registration decorators run on import).

    A registry passes its plug-in package by name (``f"{__package__}.kinds"``), so that the
    static import graph has the plug-ins depending on the registry and no circle back
    (the ``acyclic`` import contract of ``pyproject.toml``).
    """
    if isinstance(package, str):
        package = importlib.import_module(package)
    for info in pkgutil.iter_modules(package.__path__, prefix=package.__name__ + "."):
        importlib.import_module(info.name)
