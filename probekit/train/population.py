"""Populations of trainings (seeds x configs) as independent executor tasks.

One :class:`TrainRun` per model; :func:`train_population` maps :func:`train_run` over them with
any executor (in-process by default, a cluster backend of :mod:`probekit.executors`). Each run writes its own
``out_dir`` (on a shared filesystem when workers are on other nodes) and returns its
:class:`~probekit.train.history.History`. On CPU with a fixed seed the histories are identical
whichever executor ran them (up to the wall-clock column ``elapsed_s``), as long as torch uses
the same number of intra-op threads (Ray tasks get one per reserved CPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..executor import Executor, get_executor
from .build import loss_terms
from .history import History
from .training_preset import PRESETS

__all__ = ["TrainRun", "planned_steps", "train_population", "train_run"]


@dataclass(frozen=True, kw_only=True)
class TrainRun:
    """One training of a population (a picklable executor task).

    Attributes:
        preset: a training preset (:data:`probekit.train.training_preset.PRESETS`).
        out_dir: this run's directory (checkpoints, history); distinct per run.
        seed: seeds task data, model init and batch order (:func:`probekit.train.build_run`);
            ``None``: the preset's own seeds.
        steps: override of the preset's step count.
        sets: ``--set``-style overrides, e.g. ``("task.p=23", "train.eval_every=5")``.
        device: training device override (``None``: the preset's).
        resume: continue from the last checkpoint in ``out_dir`` when there is one.
    """

    preset: str
    out_dir: str
    seed: int | None = 0
    steps: int | None = None
    sets: tuple[str, ...] = ()
    device: str | None = None
    resume: bool = True


def train_run(run: TrainRun) -> History:
    """Train one model of the population and return its evaluation history.

    The run directory is locked while it trains (:class:`~probekit.util.lock.DirectoryLock`):
    a second training of the same directory (another ``probekit train`` or ``probekit
    diagnose``) is refused with one line naming the holder. The preset trains it
    (:meth:`~probekit.train.training_preset.TrainingPreset.train_run`), with the loss terms of
    :func:`~probekit.train.build.loss_terms`.
    """
    return PRESETS.get(run.preset).train_run(run, loss_terms=loss_terms)


def planned_steps(
    preset: str, *, steps: int | None = None, seed: int | None = None,
    sets: list[str] | None = None, device: str | None = None,
) -> int:
    """The final step of a run of ``preset`` with these overrides (validated; nothing trains).

    Raises:
        ConfigError: an unknown key or a refused value (from the preset's configs).
    """
    return PRESETS.get(preset).planned_steps(preset, steps=steps, seed=seed, sets=sets,
                                             device=device)


def train_population(
    runs: Sequence[TrainRun], executor: str | Executor | None = None, **options: Any
) -> list[History]:
    """Train every run as an independent task of ``executor``; histories in the order of ``runs``.

    Args:
        runs: the population, one :class:`TrainRun` each (distinct ``out_dir`` values).
        executor: a name (:func:`~probekit.executor.available_executors`) or an executor; ``None``: in-process.
        options: options of a named executor (its options class checks them).
    """
    dirs = [r.out_dir for r in runs]
    if len(set(dirs)) != len(dirs):
        dup = sorted({d for d in dirs if dirs.count(d) > 1})
        raise ConfigError(f"train_population: out_dir {dup[0]!r} used by several runs; give each "
                          "run its own directory")
    return get_executor(executor, **options).map(train_run, list(runs), desc="trainings")
