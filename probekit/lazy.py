"""Lazy package exports (PEP 562): a name is imported from its module on first access.

``import probekit`` then costs milliseconds instead of importing torch, transformers and
scikit-learn (~4 s, ~400 MB), so ``probekit --help``, ``probekit models`` and spec validation
answer at once. ``from probekit import LogisticProbe`` works unchanged.

Example:
    >>> __getattr__, __dir__ = lazy_exports(__name__, {"Site": ".capture", "capture": "."})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` for ``package`` exporting ``exports`` lazily.

    Args:
        package: the package's ``__name__``.
        exports: public name -> relative module holding it (``"."`` for a subpackage or module
            of that name, e.g. ``{"capture": "."}`` imports ``package.capture``).

    Returns:
        ``(__getattr__, __dir__)`` to assign at module level.
    """

    def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562 hook
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if where == ".":
            value = importlib.import_module(f"{package}.{name}")
        else:
            value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this hook
        return value

    def __dir__() -> list[str]:  # noqa: N807 - PEP 562 hook
        return sorted(exports)

    return __getattr__, __dir__
