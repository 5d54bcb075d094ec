"""The user cache root: ``$PROBEKIT_CACHE`` if set, else ``~/.cache/probekit``.

One layout under it: ``models/`` holds converted offline LMs (:mod:`probekit.models.real`),
``runs/`` holds suite training runs keyed by their spec (:mod:`probekit.suites`).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "cache_root"]

CACHE_ENV = "PROBEKIT_CACHE"


def cache_root() -> Path:
    """``$PROBEKIT_CACHE`` (``~`` expanded) if set and non-empty, else ``~/.cache/probekit``.

    Raises:
        ConfigError: the path is an existing regular file.
    """
    env = os.environ.get(CACHE_ENV)
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "probekit"
    if root.exists() and not root.is_dir():
        from ..errors import ConfigError

        source = f"{CACHE_ENV}={env}" if env else f"the cache folder {root}"
        raise ConfigError(f"{source} is a file, not a folder; point {CACHE_ENV} to a folder "
                          "(created if missing)")
    return root


def cache_dir(*parts: str) -> Path:
    """``cache_root() / parts...`` (not created), e.g. ``cache_dir("models")``."""
    return cache_root().joinpath(*parts)
