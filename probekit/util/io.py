"""Atomic, durable file writes and sha256 digests.

A write goes to a temp file in the destination's directory, is flushed and fsynced, renamed over
the destination (atomic on POSIX) and the directory is fsynced so the rename itself survives a
crash. A reader therefore sees the old file or the new one, never a torn one.

``PROBEKIT_FSYNC=0`` in the environment skips the fsyncs (the writes stay atomic: temp file and
rename), for throwaway files where durability buys nothing: the test suite sets it
(``tests/conftest.py``), since thousands of fsyncs of files under ``tmp_path`` cost minutes of
I/O wait on a slow disk. Unset or any other value: fsync.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "fsync_dir",
    "sha256_bytes",
    "sha256_file",
]

_CHUNK = 1 << 22


def _fsync_enabled() -> bool:
    """False iff ``PROBEKIT_FSYNC=0`` (read on every call, so a test can switch it)."""
    return os.environ.get("PROBEKIT_FSYNC") != "0"


def fsync_dir(directory: str | Path) -> None:
    """Fsync ``directory`` so renames and creations inside it are durable (no-op where unsupported)."""
    if not _fsync_enabled():
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    if not _fsync_enabled():
        return
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path next to ``path``; on normal exit fsync it, rename it to ``path``, fsync the dir.

    For writers that take a file name (``safetensors.torch.save_file``)::

        with atomic_path(directory / "model.safetensors") as tmp:
            save_file(state, str(tmp))

    On an exception the temp file is removed and ``path`` is left untouched. Temp names are
    ``.<name>.tmp-<pid>``, so a resuming writer can sweep leftovers with ``glob(".*.tmp-*")``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _write_with(path: str | Path, write: Callable[[Any], object], mode: str) -> None:
    with atomic_path(path) as tmp, open(tmp, mode) as fh:
        write(fh)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (see the module docstring)."""
    _write_with(path, lambda fh: fh.write(data), "wb")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically and durably."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any, *, indent: int | None = 1, **kwargs: Any) -> None:
    """Write ``json.dumps(obj, indent=indent, **kwargs)`` to ``path`` atomically and durably."""
    atomic_write_text(path, json.dumps(obj, indent=indent, **kwargs))


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 digest of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex sha256 digest of the file at ``path``, read in 4 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
