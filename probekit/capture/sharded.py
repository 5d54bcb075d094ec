"""Sharded capture: one executor task per range of store shards, merged into one store.

:func:`capture_sharded` cuts the dataset into the shards :func:`capture_to_store` would write
(``shard_examples`` examples each, whole batches) and maps :func:`capture_shard_range` over
ranges of ``shards_per_task`` missing shards with any executor (in-process or a cluster backend). Each
task loads the model once (cached per worker process), runs the same batches as the in-process
capture, writes its shard files atomically and records each finished shard
(:mod:`probekit.store.parts`); the driver then writes the manifest once, atomically. The store
is byte-identical to the one :func:`capture_to_store` writes (same shard files, same manifest):
each shard's batches are the same, whichever process runs them.

Resuming: rerunning the same call (after a failed task, or a killed driver) skips every shard
that is already recorded and passes its sha256 check, and captures only the rest.

Workers load the model by name or path (``load_model``) and write into ``directory``: both must
be visible on every node (a shared filesystem, the same probekit cache). A worker that loads
different weights is refused (its model fingerprint must equal the driver's).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..executor import Executor, check_worker_paths, get_executor
from ..models.cached import load_model_cached, model_paths
from ..sites import Site, as_sites
from ..store import ActivationStore, StoreWriter
from ..store.manifest import ShardInfo, StoreMismatchError
from ..store.parts import (
    finished_shards,
    identity_digest,
    merge_manifest,
    record_shard,
    shard_bounds,
)
from ..store.writer import write_shard_file
from .collect import CaptureConfig, iter_shard_rows, store_template
from .positions import slice_rule

__all__ = ["ShardRange", "capture_shard_range", "capture_sharded"]

log = logging.getLogger("probekit")

@dataclass(frozen=True, kw_only=True)
class ShardRange:
    """One task of a sharded capture: shards ``first_shard, ...`` over examples ``[first_example, first_example + len(tokens))``.

    Attributes:
        model: model name or path, loaded on the worker with ``load_model``.
        device: the worker's torch device.
        directory: the store directory (visible to every worker).
        config: the capture's config with the position rule sliced to this range and
            ``key_width`` fixed to the whole dataset's.
        tokens: the examples of this range.
        metadata: the metadata columns sliced to this range.
        first_example: dataset index of ``tokens[0]`` (a shard boundary).
        first_shard: index of the range's first shard.
        model_fingerprint: the driver's model fingerprint (the worker's must equal it).
        identity: digest of the store's identity fields, written into each shard record.
    """

    model: str
    device: str
    directory: str
    config: CaptureConfig
    tokens: tuple[tuple[int, ...], ...]
    metadata: dict[str, list[Any]]
    first_example: int
    first_shard: int
    model_fingerprint: str
    identity: str


def capture_shard_range(task: ShardRange) -> list[ShardInfo]:
    """Capture one range of shards into ``task.directory``; return their infos, in order.

    Raises:
        StoreMismatchError: the worker loaded a model with another fingerprint than the driver.
    """
    model, fingerprint = load_model_cached(task.model, task.device)
    if fingerprint != task.model_fingerprint:
        raise StoreMismatchError(
            f"worker {socket.gethostname()}: model {task.model!r} loads with fingerprint "
            f"{fingerprint}, the driver's with {task.model_fingerprint}; every node must see the "
            "same weights at that path (shared filesystem, same probekit cache)"
        )
    directory = Path(task.directory)
    infos: list[ShardInfo] = []
    rows_iter = iter_shard_rows(model, task.tokens, task.config, 0, len(task.tokens),
                                example_offset=task.first_example)
    for index, rows in enumerate(rows_iter, start=task.first_shard):
        info = write_shard_file(
            directory, index, rows.site_rows, rows.examples, rows.positions, task.metadata,
            first_example=rows.first_example, end_example=rows.end_example,
            metadata_offset=task.first_example,
        )
        record_shard(directory, info, task.identity)
        infos.append(info)
    return infos


def _runs(indices: Sequence[int], size: int) -> list[list[int]]:
    """Consecutive runs of ``indices`` (sorted), each cut to at most ``size`` items."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1 and len(runs[-1]) < size:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def capture_sharded(
    model: str | Path,
    tokens: Sequence[Sequence[int]],
    directory: str | Path,
    sites: Sequence[Site | str],
    *,
    executor: str | Executor | None = None,
    shards_per_task: int = 1,
    device: str = "cpu",
    metadata: Mapping[str, Sequence[Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
    repair: bool = False,
    **options: Any,
) -> ActivationStore:
    """:func:`~probekit.capture.capture_to_store` as executor tasks, one per range of shards.

    Args:
        model: a name or path :func:`~probekit.models.load_model` accepts (workers load it).
        tokens: token ids per example.
        directory: the store (on a filesystem every worker mounts at the same path).
        sites: sites to capture.
        executor: a name (:func:`~probekit.executor.available_executors`) or an executor; ``None``: in-process.
        shards_per_task: consecutive shards per task (more: fewer tasks; fewer: finer resume).
        device: torch device of the model, in the driver and on every worker.
        metadata: per-example columns stored with the rows.
        extra: free-form fields of the manifest.
        repair: as in ``capture_to_store`` (damaged listed shards are captured again).
        options: :class:`CaptureConfig` fields (positions, batch_size, examples_per_shard ...).

    The result equals ``capture_to_store(load_model(model), tokens, directory, sites, ...)``
    byte for byte. Rerunning after an interruption captures only the missing shards.
    """
    if shards_per_task < 1:
        raise DataError(f"shards_per_task must be >= 1, got {shards_per_task}")
    ref = str(model)
    loaded, fingerprint = load_model_cached(ref, device)
    config = CaptureConfig(sites=as_sites(sites), **options)
    template, columns = store_template(loaded, tokens, config, dict(metadata or {}), extra)
    metadata = {k: list(v) for k, v in columns.items()}  # with the prompt columns
    directory = Path(directory)
    writer = StoreWriter(directory, template)
    manifest = writer.open(repair=repair)
    if manifest.complete and not writer.bad_shards:
        log.info("store %s is already complete (%d examples); nothing to capture",
                 directory, len(tokens))
        return ActivationStore(directory)
    done = finished_shards(directory, manifest, frozenset(writer.bad_shards))
    size = config.shard_examples
    n_shards = -(-len(tokens) // size)
    todo = [i for i in range(n_shards) if i not in done]
    if done:
        log.info("resuming %s: %d of %d shard(s) already captured", directory, len(done), n_shards)
    task_config = replace(config, progress=False,
                          key_width=config.key_width or max(len(seq) for seq in tokens))
    identity = identity_digest(template)
    tasks = []
    for run in _runs(todo, shards_per_task):
        lo = shard_bounds(run[0], len(tokens), size)[0]
        hi = shard_bounds(run[-1], len(tokens), size)[1]
        tasks.append(ShardRange(
            model=ref, device=device, directory=str(directory.resolve()),
            config=replace(task_config, positions=slice_rule(config.positions, lo, hi)),
            tokens=tuple(tuple(int(t) for t in seq) for seq in tokens[lo:hi]),
            metadata={k: v[lo:hi] for k, v in metadata.items()},
            first_example=lo, first_shard=run[0], model_fingerprint=fingerprint,
            identity=identity,
        ))
    runner = get_executor(executor)
    if tasks:  # workers must see the model and the store before any of them starts
        check_worker_paths(runner, read=model_paths([ref]), write=[directory.resolve()])
    results = runner.map(capture_shard_range, tasks, desc="capture shards")
    for task, infos in zip(tasks, results):
        done.update(enumerate(infos, start=task.first_shard))
    merge_manifest(directory, template, done)
    return ActivationStore(directory)
