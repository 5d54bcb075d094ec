"""Modular-addition checkpoints on disk: their task split and the series of one training run.

The progress measures of Nanda et al. (2023, arXiv 2301.05217, §5.1) are defined for a model
of the ``modular_addition`` testbed only, and split the ``p x p`` input pairs into the training
pairs and the held-out ones. A probekit checkpoint records its task and task config (the
``extra`` of its ``config.json``); this module reads them back (:func:`train_mask`), refuses other
tasks with :class:`~probekit.errors.NotApplicableError`, and finds the checkpoints of one run
ordered by training step (:func:`checkpoint_series`).
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any

import numpy as np
from jaxtyping import Bool

from ..errors import ConfigError, NotApplicableError

__all__ = ["check_modadd_model", "checkpoint_series", "run_series_pattern", "train_mask"]


def train_mask(checkpoint: str | Path) -> Bool[np.ndarray, "p p"]:
    """``(p, p)`` bool grid of the training pairs ``(a, b)`` recorded in a checkpoint's task config.

    Rebuilds the ``modular_addition`` testbed from the recorded config (same seed, same split),
    so ``mask[a, b]`` is True iff ``a + b`` was a training pair. Raises
    :class:`~probekit.errors.NotApplicableError` for a checkpoint of another (or no) task.
    """
    from ..models.checkpoint import read_checkpoint_meta
    from ..testbeds import get_task

    extra = read_checkpoint_meta(checkpoint).get("extra", {})
    if extra.get("task") != "modular_addition" or "task_config" not in extra:
        task = extra.get("task")
        raise NotApplicableError(
            f"{checkpoint} was trained on {'task ' + repr(task) if task else 'no recorded task'}"
            ", not the modular_addition testbed: the Fourier / progress measures are defined for "
            "modular addition only (train one with `probekit train modular_addition`)"
        )
    task = get_task("modular_addition", **extra["task_config"])
    train = task.splits()["train"]
    p = task.config.p
    mask = np.zeros((p, p), dtype=bool)
    mask[train.metadata["a"], train.metadata["b"]] = True
    return mask


def check_modadd_model(model: Any, *, kind: str, p: int | None = None) -> None:
    """NotApplicableError when ``model`` is a checkpoint trained on a task other than modadd.

    A model that is no probekit checkpoint (or records no task) passes: nothing says otherwise.
    With ``p`` (a claim's modulus), a checkpoint recording another ``p`` is refused (residues
    ``0..p-1`` of a ``p = 53`` model scored as ``p = 7`` would be a wrong answer), as is a ``p``
    above the model's vocabulary.

    Raises:
        NotApplicableError: another task.
        ConfigError: ``p`` differs from the checkpoint's, is not an integer >= 2, or exceeds
            ``d_vocab``.
    """
    from ..models.checkpoint import read_checkpoint_meta

    path = getattr(model, "probekit_checkpoint", None)
    extra = {} if path is None else read_checkpoint_meta(path).get("extra", {})
    task = extra.get("task")
    if task is not None and task != "modular_addition":
        raise NotApplicableError(f"{kind}: {path} was trained on task {task!r}; the "
                                 "Fourier key frequencies are defined for modular addition only")
    if p is None:
        return
    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        raise ConfigError(f"{kind}: p = {p!r}; the modulus must be an integer >= 2")
    recorded = (extra.get("task_config") or {}).get("p") if task is not None else None
    if recorded is not None and int(recorded) != p:
        raise ConfigError(f"{kind}: p = {p} but {path} was trained on modular addition with "
                          f"p = {recorded}; set p = {recorded} in the claim (or drop the claim)")
    d_vocab = getattr(getattr(model, "cfg", None), "d_vocab", None)
    if d_vocab is not None and p > int(d_vocab):
        raise ConfigError(f"{kind}: p = {p} exceeds the model's vocabulary ({d_vocab} tokens); "
                          "residue tokens 0..p-1 must exist")


def run_series_pattern(checkpoint: str | Path) -> Path:
    """Glob of every checkpoint of the run ``checkpoint`` belongs to (``<run>/step_*``).

    Checks first that it is a modular-addition checkpoint (:func:`train_mask`), so another
    task is refused before a series is searched for.
    """
    train_mask(checkpoint)
    return Path(checkpoint).parent / "step_*"


def checkpoint_series(pattern: str | Path, *, key: str = "checkpoints") -> list[tuple[int, Path]]:
    """``(step, directory)`` of the checkpoints matching a glob, ascending step (>= 2 of them).

    The step is the checkpoint's recorded ``extra.step``, else the trailing number of its name
    (``step_0001000``). ``key``: the setting the pattern came from, for messages.
    """
    from ..models.checkpoint import read_checkpoint_meta

    found = sorted(Path(p) for p in glob.glob(str(pattern)) if (Path(p) / "config.json").is_file())
    if len(found) < 2:
        raise ConfigError(f"{key} matched {len(found)} checkpoint "
                          f"director{'y' if len(found) == 1 else 'ies'} under {pattern}; a series "
                          "needs >= 2")
    out = []
    for d in found:
        step = read_checkpoint_meta(d).get("extra", {}).get("step")
        if step is None:
            m = re.search(r"(\d+)$", d.name)
            if m is None:
                raise ConfigError(f"{d}: no step in its config.json or name (step_0001000)")
            step = int(m.group(1))
        out.append((int(step), d))
    return sorted(out)
