"""Files probekit writes and later reads carry a sha256 and are verified when read.

A JSON file probekit writes (checkpoint ``config.json``, store ``manifest.json``, diagnosis
cells, ``history.json``, ``report.json``) is *sealed*: :func:`seal` adds the key ``"sha256"``,
the digest of the object's canonical JSON (sorted keys, no whitespace) without that key, and
:func:`read_sealed` recomputes it. A data file has its sha256 recorded in a sealed JSON beside it
(checkpoint weights) or in a ``sha256sum``-format sidecar ``NAME.sha256`` (``markers.csv``; check it
by hand with ``sha256sum -c markers.csv.sha256``) and is checked with :func:`check_digest` (once per
process and file version: path, size, mtime). A flipped byte or a truncated file is a
:class:`~probekit.errors.CorruptFileError` naming the file and the fix, never a silently different
model or table. A file written before checksums existed is read with one warning (logged once per
file), not an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from ..errors import CorruptFileError
from .io import sha256_file

__all__ = ["CHECKSUM_KEY", "check_digest", "check_sidecar", "content_digest", "read_sealed", "seal",
           "verify_sealed", "write_sidecar"]

log = logging.getLogger("probekit")

CHECKSUM_KEY = "sha256"
# files whose digest was checked in this process: (path, sha256, size, mtime_ns)
_VERIFIED: set[tuple[str, str, int, int]] = set()
_WARNED: set[str] = set()


def content_digest(obj: Any) -> str:
    """Hex sha256 of the canonical JSON of ``obj`` (sorted keys, compact separators)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with ``"sha256"`` = :func:`content_digest` of the rest (replaces an older one)."""
    body = {k: v for k, v in obj.items() if k != CHECKSUM_KEY}
    return {**body, CHECKSUM_KEY: content_digest(body)}


def _warn_unsealed(path: Path, what: str) -> None:
    key = str(path.resolve())
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning("%s %s has no checksum (written by an older probekit): read unverified", what, path)


def verify_sealed(path: str | Path, data: Any, *, what: str, fix: str) -> Any:
    """Check the ``"sha256"`` of the parsed ``data`` of ``path``; return ``data`` without it.

    Data without the key (an older file, or not a JSON object) is returned as is, with one
    logged warning for an object.

    Raises:
        CorruptFileError: the recorded digest differs from the content's.
    """
    path = Path(path)
    if not isinstance(data, dict):
        return data
    if CHECKSUM_KEY not in data:
        _warn_unsealed(path, what)
        return data
    body = {k: v for k, v in data.items() if k != CHECKSUM_KEY}
    if content_digest(body) != data[CHECKSUM_KEY]:
        raise CorruptFileError(
            f"{what} {path} fails its checksum (the file was modified or damaged after probekit "
            f"wrote it); {fix}"
        )
    return body


def read_sealed(path: str | Path, *, what: str, fix: str) -> Any:
    """Parse the JSON file ``path`` and verify its seal (see :func:`verify_sealed`).

    Raises:
        CorruptFileError: not UTF-8 JSON (e.g. truncated) or failing its checksum.
        FileNotFoundError: ``path`` does not exist (callers name what is missing).
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        where = f":{err.lineno}:{err.colno}" if isinstance(err, json.JSONDecodeError) else ""
        reason = err.msg if isinstance(err, json.JSONDecodeError) else "not UTF-8"
        raise CorruptFileError(
            f"{what} {path}{where} is not valid JSON ({reason}; {len(raw)} bytes: truncated or "
            f"damaged); {fix}"
        ) from None
    return verify_sealed(path, data, what=what, fix=fix)


def check_digest(path: str | Path, expected: str | None, *, what: str, fix: str) -> None:
    """Check the sha256 of the file ``path`` against ``expected``.

    ``expected`` None (an older file) passes: the sealed JSON that would hold the digest warns
    once for both. The digest is computed once per process and file version (path, size, mtime).

    Raises:
        CorruptFileError: the file's bytes differ from the recorded digest.
    """
    path = Path(path)
    if expected is None:
        return
    stat = path.stat()
    key = (str(path.resolve()), expected, stat.st_size, stat.st_mtime_ns)
    if key in _VERIFIED:
        return
    if sha256_file(path) != expected:
        raise CorruptFileError(
            f"{what} {path} fails its checksum (recorded sha256 {expected[:12]}..., the file was "
            f"modified, truncated or damaged); {fix}"
        )
    _VERIFIED.add(key)


def write_sidecar(path: str | Path) -> Path:
    """Write ``path``'s sha256 to ``<path>.sha256`` (``sha256sum`` format), atomically."""
    from .io import atomic_write_text

    path = Path(path)
    side = path.with_name(path.name + ".sha256")
    atomic_write_text(side, f"{sha256_file(path)}  {path.name}\n")
    return side


def check_sidecar(path: str | Path, *, what: str, fix: str) -> None:
    """Check ``path`` against its ``<path>.sha256`` sidecar, if there is one.

    Raises:
        CorruptFileError: the file's bytes differ from the digest the sidecar records.
    """
    path = Path(path)
    side = path.with_name(path.name + ".sha256")
    if not side.is_file():
        return
    want = side.read_text(encoding="utf-8", errors="replace").split(maxsplit=1)
    if not want or sha256_file(path) != want[0]:
        raise CorruptFileError(
            f"{what} {path} fails its checksum ({side.name} records sha256 "
            f"{(want or ['?'])[0][:12]}...: the file was edited or damaged after probekit wrote "
            f"it); {fix}"
        )
