"""Output folders: checked before any work, owned by a marker, locked while written.

Every command that writes a folder (``capture``, ``train``, ``report``, ``test``, ``diagnose``,
``patch``, ``demo``) calls :func:`check_out_dir` before it loads a model or reads a large file;
the Python entries that write a folder check it too (``train()`` through
:func:`probekit.train.run_dir.check_run_dir`; ``write_report``, ``hypotheses.run(out=)``,
``diagnose(out=)`` and ``diagnose_table(out=)`` through
:func:`probekit.report.write.check_report_dir`, which refuses only files named like their
outputs). It refuses, with one :class:`~probekit.errors.ConfigError` naming the path and the fix:

* ``--out`` that is an existing regular file (or one of the command's own input files);
* a folder whose nearest existing ancestor cannot be written (read-only mount, permissions):
  probed by creating and removing a temporary file there, which also works for root, for whom
  ``os.access`` always answers yes;
* a non-empty folder that is not probekit's own output (e.g. the user's folder holding files
  named ``run.json`` and ``history.csv``): the files are named, and ``--force`` (write into it
  anyway) or another folder is the fix;
* probekit's own output of *another* command or suite (``report --out`` where another suite's
  report lies) unless ``--force``: a rerun of the same suite replaces its own report silently.

Ownership is recorded by :data:`MARKER` (``.probekit-output``, JSON ``{"command", "name"}``),
written by :func:`claim_out_dir` into the folder. Folders written before the marker existed are
recognised by a ``legacy`` callback of the command (e.g. a ``report.json`` with a ``suite``
key). :func:`claim_out_dir` also holds the folder's write lock (:class:`~.lock.DirectoryLock`,
the one the activation stores use), so a second run into the same folder is refused naming the
first instead of interleaving their files.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .lock import HOLDER_NAME, LOCK_NAME, DirectoryLock

__all__ = ["MARKER", "OwnerInfo", "check_out_dir", "check_writable", "claim_out_dir", "read_marker",
           "report_owner", "sealed_json", "write_marker"]

MARKER = ".probekit-output"
#: probekit's bookkeeping files, never counted as the user's content of a folder
_OWN = frozenset({MARKER, LOCK_NAME, HOLDER_NAME})
#: at most this many file names in a message
_LISTED = 5

OwnerInfo = dict[str, Any]


def _resolved(path: str | Path) -> Path:
    return Path(os.path.abspath(Path(path).expanduser()))


def check_writable(path: str | Path, *, flag: str = "--out", inputs: Sequence[str | Path] = ()) -> Path:
    """Refuse ``path`` as an output folder if it is a file, an input, or cannot be written.

    Returns the absolute path. Nothing is created.

    Raises:
        ConfigError: naming ``flag``, the path and the fix.
    """
    out = _resolved(path)
    for given in inputs:
        if _resolved(given) == out:
            raise ConfigError(
                f"{flag} {path} is the input file itself; give a new folder for the output "
                "(the input is never overwritten)"
            )
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"{flag} {path} is an existing file, not a folder; give a new folder or one "
            "probekit wrote"
        )
    existing = out
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {path}: {existing} is a file, not a folder; give another path")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".probekit-probe-"):
            pass
    except OSError as err:
        raise ConfigError(
            f"{flag} {path}: cannot write in {existing} ({err.strerror or err}); choose a "
            "folder you can write to"
        ) from None
    return out


def read_marker(folder: str | Path) -> OwnerInfo | None:
    """The ownership record of ``folder`` (None if absent or unreadable)."""
    try:
        info = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def write_marker(folder: str | Path, command: str, name: str | None = None) -> None:
    """Record that probekit's ``command`` (for ``name``: a suite, a preset) wrote ``folder``."""
    path = Path(folder) / MARKER
    path.write_text(json.dumps({"command": command, "name": name}) + "\n")


def sealed_json(path: str | Path, *keys: str, sealed: bool = True) -> dict[str, Any] | None:
    """``path`` parsed if it is a JSON object sealed by probekit (``sha256`` key) holding ``keys``.

    For ``legacy`` callbacks: a ``run.json`` or ``report.json`` written before the marker existed.
    """
    from .integrity import CHECKSUM_KEY

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or (sealed and CHECKSUM_KEY not in data):
        return None
    if any(k not in data for k in keys):
        return None
    return data


def report_owner(command: str) -> Callable[[Path], OwnerInfo | None]:
    """``legacy`` callback for folders holding a ``report.json`` (report, test, diagnose).

    A report written before the marker existed names its suite; the command cannot be told
    from it, so it is taken to be ``command``'s.
    """

    def owner(out: Path) -> OwnerInfo | None:
        report = sealed_json(out / "report.json", "suite", "versions", sealed=False)
        if report is None or not isinstance(report["suite"], dict):
            return None
        return {"command": command, "name": report["suite"].get("name")}

    return owner


def _describe(info: OwnerInfo) -> str:
    name = info.get("name")
    return f"`probekit {info.get('command')}`" + (f" of {name!r}" if name else "")


def check_out_dir(
    path: str | Path,
    *,
    command: str | None,
    name: str | None = None,
    inputs: Sequence[str | Path] = (),
    force: bool = False,
    legacy: Callable[[Path], OwnerInfo | None] | None = None,
    flag: str = "--out",
    force_flag: str | None = "--force",
) -> Path:
    """Check ``path`` before any work: writable, not an input, empty or probekit's own output.

    Args:
        path: the output folder (need not exist).
        command: the command writing it (``"report"``, ``"train"`` ...); None accepts the
            output of any probekit command (a Python entry such as ``write_report``).
        name: what it writes (a suite name, a preset); output of the same ``command`` for another
            ``name`` needs ``force``.
        inputs: the command's input files (``--out`` must not be one of them).
        force: write into a foreign or non-empty folder, replace another suite's output.
        legacy: recognises probekit output written before the marker existed (returns the
            ``{"command", "name"}`` record, or None).
        flag: the option (or Python argument) named in messages.
        force_flag: how the caller overrides the check, named in messages (None: the entry
            has no override; the fix is another folder or moving the files away).

    Returns:
        The absolute path (not created).

    Raises:
        ConfigError: one line naming the path, the files in the way and the fix.
    """
    out = check_writable(path, flag=flag, inputs=inputs)
    if not out.is_dir() or force:
        return out
    content = sorted(p.name for p in out.iterdir() if p.name not in _OWN)
    if not content:
        return out
    info = read_marker(out) or (legacy(out) if legacy is not None else None)
    if info is None:
        listed = ", ".join(content[:_LISTED]) + (f" and {len(content) - _LISTED} more"
                                                  if len(content) > _LISTED else "")
        fix = (f"choose a new folder, or pass {force_flag} to write into it (files of the same "
               "names are replaced)" if force_flag else
               "choose a new folder (or move those files away); nothing was written")
        raise ConfigError(
            f"{flag} {path} is not empty and was not written by probekit (it holds {listed}); {fix}"
        )
    if command is None:
        return out
    if info.get("command") != command or (name is not None and info.get("name") not in (None, name)):
        fix = (f"pass {force_flag} to replace it or choose another folder" if force_flag
               else "choose another folder")
        raise ConfigError(f"{flag} {path} holds the output of {_describe(info)}; {fix}")
    return out


@contextmanager
def claim_out_dir(
    path: str | Path,
    *,
    command: str,
    name: str | None = None,
    inputs: Sequence[str | Path] = (),
    force: bool = False,
    legacy: Callable[[Path], OwnerInfo | None] | None = None,
    lock: bool = True,
) -> Iterator[Path]:
    """:func:`check_out_dir`, then create the folder, take its write lock and mark it as ours.

    The lock (``lock=True``) is held for the body: a second run into the same folder is refused
    at once with :class:`~probekit.util.lock.LockedError` naming the holder. The check runs
    again under the lock, so two runs that checked together cannot both write.
    """
    check_out_dir(path, command=command, name=name, inputs=inputs, force=force, legacy=legacy)
    out = Path(path)
    created = not out.exists()
    held = DirectoryLock(out, what="output folder") if lock else None
    if held is not None:
        held.acquire()  # creates the folder
    else:
        out.mkdir(parents=True, exist_ok=True)
    try:
        if held is not None:  # the folder may have changed between the check and the lock
            check_out_dir(path, command=command, name=name, inputs=inputs, force=force,
                          legacy=legacy)
        write_marker(out, command, name)
        yield out
    except BaseException:
        if held is not None:
            held.release()
            held = None
        if created:  # a run that failed before writing anything leaves no folder behind
            _remove_if_bookkeeping_only(out)
        raise
    finally:
        if held is not None:
            held.release()


def _remove_if_bookkeeping_only(out: Path) -> None:
    """Delete ``out`` if it holds nothing but probekit's marker and lock files."""
    try:
        entries = list(out.iterdir())
        if all(p.name in _OWN and p.is_file() for p in entries):
            for p in entries:
                p.unlink(missing_ok=True)
            out.rmdir()
    except OSError:
        pass
