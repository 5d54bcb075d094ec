"""Plug-in discovery: import every module of a package so each registers itself on import."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def import_submodules(package: ModuleType) -> None:
    """Import every module of ``package`` (its registration decorators run on import)."""
    for info in pkgutil.iter_modules(package.__path__, prefix=package.__name__ + "."):
        importlib.import_module(info.name)
