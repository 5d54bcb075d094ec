"""Finished-shard records of a sharded capture, and the driver's atomic manifest merge.

A sharded capture (:func:`probekit.capture.capture_sharded`) runs one executor task per range
of shards, possibly on other machines. A task writes each shard file atomically and then a
record ``parts/shard-NNNNN.json`` (the shard's :class:`ShardInfo` and a digest of the capture's
identity), also atomically; it never touches ``manifest.json``. The driver owns the manifest:
after the tasks (or, when the driver itself was killed, on the rerun) it collects the finished
shards, checks each against its sha256, and replaces ``manifest.json`` once, atomically, with
every shard listed and ``complete = true``; then it deletes ``parts/``. The merged manifest is
the one :class:`~probekit.store.StoreWriter` writes for the same capture in one process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path

from ..util.io import atomic_write_json, sha256_file
from .manifest import PARTS, Manifest, ShardInfo, StoreMismatchError
from .safetensors_mmap import CorruptShardError, read_header

__all__ = ["finished_shards", "identity_digest", "merge_manifest", "record_shard", "shard_bounds"]

log = logging.getLogger("probekit")


def identity_digest(manifest: Manifest) -> str:
    """sha256 (16 hex digits) of the manifest's :meth:`~Manifest.identity` fields."""
    text = json.dumps(manifest.identity(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_bounds(index: int, n_examples: int, examples_per_shard: int) -> tuple[int, int]:
    """Examples ``[first, end)`` of shard ``index``: ``[i S, min((i + 1) S, n))``."""
    first = index * examples_per_shard
    return first, min(first + examples_per_shard, n_examples)


def _record_path(directory: Path, info: ShardInfo) -> Path:
    return directory / PARTS / (Path(info.file).stem + ".json")


def record_shard(directory: Path, info: ShardInfo, identity: str) -> None:
    """Record (atomically) that ``info``'s shard file is written; called after the file is in place."""
    (directory / PARTS).mkdir(exist_ok=True)
    atomic_write_json(_record_path(directory, info), {"identity": identity, "shard": asdict(info)})


def _shard_ok(directory: Path, info: ShardInfo) -> bool:
    try:
        read_header(directory / info.file)
    except CorruptShardError:
        return False
    return sha256_file(directory / info.file) == info.sha256


def finished_shards(
    directory: Path, manifest: Manifest, skip: frozenset[int] = frozenset()
) -> dict[int, ShardInfo]:
    """Shards of this capture already on disk, by index, each verified against its sha256.

    Sources: the shards ``manifest`` lists (an interrupted in-process capture; ``skip`` holds
    the indices found damaged) and the records in ``parts/`` whose identity digest matches
    ``manifest`` and whose example range is the expected one. A record whose file is missing
    or fails its checksum is ignored (that shard is captured again).
    """
    n, size = manifest.n_examples, manifest.examples_per_shard
    done: dict[int, ShardInfo] = {}
    for index, info in enumerate(manifest.shards):
        if index not in skip:
            done[index] = info
    digest = identity_digest(manifest)
    for path in sorted((directory / PARTS).glob("shard-*.json")):
        try:
            data = json.loads(path.read_text())
            info = ShardInfo(**data["shard"])
            index = int(Path(info.file).stem.removeprefix("shard-"))
        except (ValueError, KeyError, TypeError) as err:
            log.warning("ignoring unreadable shard record %s (%s)", path, err)
            continue
        if index in done or data.get("identity") != digest:
            continue
        if (info.first_example, info.end_example) != shard_bounds(index, n, size):
            continue
        if _shard_ok(directory, info):
            done[index] = info
        else:
            log.info("shard %s does not match its record; capturing it again", info.file)
    return done


def merge_manifest(
    directory: Path, template: Manifest, shards: Mapping[int, ShardInfo]
) -> Manifest:
    """Write the complete manifest (atomically) listing ``shards`` in order; remove ``parts/``.

    ``feature_shapes`` are read from the first shard's header, in the order of ``template.sites``.

    Raises:
        StoreMismatchError: a shard is missing or covers the wrong examples (a bug, or shards
            written by another capture); nothing is written then.
    """
    n, size = template.n_examples, template.examples_per_shard
    n_shards = -(-n // size)
    missing = [i for i in range(n_shards) if i not in shards]
    wrong = [i for i, s in shards.items()
             if i >= n_shards or (s.first_example, s.end_example) != shard_bounds(i, n, size)]
    if missing or wrong:
        raise StoreMismatchError(
            f"cannot merge the manifest of {directory}: shards {missing} missing, shards {wrong} "
            f"cover unexpected examples (expected {n_shards} shards of {size} examples); rerun the "
            "same capture to resume it"
        )
    header, _ = read_header(directory / shards[0].file)
    shapes = {k: list(header[k]["shape"][1:]) for k in template.sites}
    manifest = replace(template, shards=[shards[i] for i in range(n_shards)], complete=True,
                       feature_shapes=shapes)
    manifest.save(directory)
    shutil.rmtree(directory / PARTS, ignore_errors=True)
    return manifest
