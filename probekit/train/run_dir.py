"""The run directory of a training: checked before any work, by the rules of output folders.

:func:`check_run_dir` is :func:`probekit.util.outdir.check_out_dir` for ``train``: the folder
may be new, empty, or a probekit training run (the ownership marker, or a run written before the
marker existed: a sealed ``run.json`` naming a task, ``seed*/run.json`` of a population, or
``checkpoints/step_*``). A folder of the user's own files (e.g. their ``run.json`` and
``history.csv``) is refused naming the files, so they are never overwritten; so are a regular
file, an unwritable location and the output of another probekit command.
"""

from __future__ import annotations

from pathlib import Path

from ..util.outdir import OwnerInfo, check_out_dir, sealed_json

__all__ = ["check_run_dir", "legacy_run"]


def legacy_run(out: Path) -> OwnerInfo | None:
    """A training run written before the ownership marker (None if ``out`` holds none)."""
    if sealed_json(out / "run.json", "task") is not None:
        return {"command": "train", "name": None}
    if any(sealed_json(p, "task") is not None for p in out.glob("seed*/run.json")):  # a population
        return {"command": "train", "name": None}
    if any((p / "config.json").is_file() for p in out.glob("checkpoints/step_*")):  # interrupted
        return {"command": "train", "name": None}
    return None


def check_run_dir(out_dir: str | Path, *, force: bool = False, flag: str = "out_dir",
                  force_flag: str | None = None) -> Path:
    """Raise :class:`~probekit.errors.ConfigError` unless ``out_dir`` can hold a training run.

    Args:
        out_dir: the run directory (need not exist; nothing is created).
        force: accept a non-empty folder probekit did not write (``probekit train --force``).
        flag: the argument named in the message (``--out`` for the command line).
        force_flag: the override named in the message (None: the caller has none).

    Returns:
        The absolute path.
    """
    return check_out_dir(out_dir, command="train", force=force, legacy=legacy_run, flag=flag,
                         force_flag=force_flag)
