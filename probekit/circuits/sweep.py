"""Patching sweeps over prompt batches as executor tasks (in-process or on a Ray cluster).

:func:`patching_sweep` cuts the prompt pairs into batches of ``pairs_per_task`` and maps
:func:`patch_batch` over them with any executor: each task loads the model once per worker
process (:func:`~probekit.models.load_model_cached`), runs :func:`activation_patching` on its
pairs (the metric sees dataset pair indices, so per-pair answers bound with
``functools.partial`` work unchanged) and returns its grid; the driver stacks the per-pair
grids (NaN-padded to the longest prompt) and averages and normalises them exactly as
:func:`activation_patching` does over all pairs. The same partition gives the same numbers on
any executor; against one :func:`activation_patching` call over all pairs the per-pair cells
differ only by float rounding of the different batch compositions (tested to 1e-5 relative).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError
from ..executor import Executor, check_worker_paths, get_executor, map_resumable
from ..models.cached import load_model_cached, model_paths
from .metrics import as_pair_metric
from .patch_grid import Metric, PatchingResult, PatchOptions, grid_result, grid_shape, prepare_grid
from .patching import activation_patching

__all__ = ["PatchBatch", "patch_batch", "patching_sweep"]


@dataclass(frozen=True, kw_only=True)
class PatchBatch:
    """One task of a patching sweep: the pairs ``pair_ids`` of the dataset.

    Attributes:
        model: model name or path, loaded on the worker with ``load_model``.
        device: the worker's torch device.
        clean: the batch's clean prompts.
        corrupt: the batch's corrupted prompts.
        pair_ids: dataset index of each pair (what ``metric`` receives).
        metric: a picklable metric (module-level function or ``functools.partial`` of one).
        options: the grid's options (axes and layers resolved against the model).
    """

    model: str
    device: str
    clean: tuple[tuple[int, ...], ...]
    corrupt: tuple[tuple[int, ...], ...]
    pair_ids: tuple[int, ...]
    metric: Metric
    options: PatchOptions


def _on_dataset_pairs(metric: Metric, ids: Tensor, logits: Tensor, pair: Tensor) -> Tensor:
    """``metric(logits, ids[pair])``: batch-local pair indices mapped to dataset indices."""
    return metric(logits, ids.to(pair.device)[pair])


def patch_batch(task: PatchBatch) -> PatchingResult:
    """:func:`activation_patching` on one batch of pairs (the metric sees dataset pair indices)."""
    model, _ = load_model_cached(task.model, task.device)
    metric = partial(_on_dataset_pairs, task.metric, torch.tensor(task.pair_ids))
    return activation_patching(
        model, [list(t) for t in task.clean], [list(t) for t in task.corrupt], metric, task.options,
    )


def patching_sweep(
    model: str | Path,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    options: PatchOptions | None = None,
    /,
    *,
    pairs_per_task: int = 16,
    executor: str | Executor | None = None,
    device: str = "cpu",
    resume_dir: str | Path | None = None,
    **keywords: Any,
) -> PatchingResult:
    """:func:`activation_patching` over many prompt pairs, one executor task per batch of pairs.

    Args:
        model: a name or path :func:`~probekit.models.load_model` accepts (workers load it; on
            a cluster it must be visible to every node).
        clean_tokens: the clean prompts, one per pair.
        corrupt_tokens: the corrupted prompts (same length as their clean partner).
        metric: as for :func:`activation_patching`, and picklable (a module-level function or
            a ``functools.partial`` of one, e.g. ``partial(logit_diff, answer=a, foil=f)``).
        pairs_per_task: pairs per task.
        executor: a name (:func:`~probekit.executor.available_executors`) or an executor; ``None``: in-process.
        device: torch device of the model on every worker.
        options: the grid's :class:`~probekit.circuits.PatchOptions` (``batch_size``: rows per
            forward pass inside a task), as for :func:`activation_patching`.
        resume_dir: records of finished batches (:func:`~probekit.executor.map_resumable`):
            the same call after a killed driver runs only the unfinished batches.
        **keywords: fields of :class:`~probekit.circuits.PatchOptions` (``kind``, ``by``,
            ``direction``, ``layers``, ``window``, ``batch_size``, ``padding_side``), replacing
            those of ``options``.

    Returns:
        The :class:`PatchingResult` over all pairs (``per_pair`` in the order of the pairs).
    """
    if pairs_per_task < 1:
        raise ConfigError(f"pairs_per_task must be >= 1, got {pairs_per_task}")
    metric = as_pair_metric(metric)  # a TransformerLens-style metric(logits) is adapted
    ref = str(model)
    loaded, _ = load_model_cached(ref, device)  # validation and labels; reused in-process
    opts = PatchOptions.build(options, **keywords)
    grid = prepare_grid(loaded, clean_tokens, corrupt_tokens, opts)
    resolved = replace(opts, by=grid.by, layers=tuple(grid.layers))
    clean, corrupt = ((grid.source, grid.base) if opts.direction == "denoise"
                      else (grid.base, grid.source))
    tasks = [
        PatchBatch(model=ref, device=device,
                   clean=tuple(map(tuple, clean[lo:lo + pairs_per_task])),
                   corrupt=tuple(map(tuple, corrupt[lo:lo + pairs_per_task])),
                   pair_ids=tuple(range(lo, min(lo + pairs_per_task, len(clean)))),
                   metric=metric, options=resolved)
        for lo in range(0, len(clean), pairs_per_task)
    ]
    runner = get_executor(executor)
    check_worker_paths(runner, read=model_paths([ref]))  # before any task starts
    parts = map_resumable(runner, patch_batch, tasks, resume_dir, desc="patching batches")
    per_pair = torch.full((len(clean), *grid_shape(loaded, grid)), float("nan"))
    for task, part in zip(tasks, parts):
        lo = task.pair_ids[0]
        cells = tuple(slice(0, n) for n in part.per_pair.shape[1:])
        per_pair[(slice(lo, lo + len(task.pair_ids)), *cells)] = part.per_pair
    base = torch.cat([p.base for p in parts])
    source = torch.cat([p.source for p in parts])
    return grid_result(loaded, grid, per_pair, base, source)
