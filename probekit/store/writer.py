"""Append shards to a store atomically; resume an interrupted store."""

from __future__ import annotations

import json
import logging
import shutil
import struct
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from ..errors import StoreError
from ..util.io import atomic_path, sha256_file
from ..util.lock import DirectoryLock
from ..util.outdir import check_writable
from .manifest import MANIFEST, PARTS, Manifest, ShardInfo, StoreMismatchError
from .safetensors_mmap import _REPAIR, CorruptShardError, read_header

log = logging.getLogger("probekit")

EXAMPLE_KEY = "_example"
POSITION_KEY = "_position"
META_PREFIX = "meta."


def shard_name(index: int) -> str:
    """File name of shard ``index``: ``shard-00012.safetensors``."""
    return f"shard-{index:05d}.safetensors"


def encode_metadata(
    columns: Mapping[str, Sequence[Any]], row_examples: np.ndarray, offset: int = 0
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Expand per-example columns to rows: numeric -> tensors, anything else -> JSON strings.

    ``columns[name][i - offset]`` is the value of example ``i`` (``offset``: the first example
    the columns hold, for a shard range of a sharded capture).
    """
    tensors: dict[str, torch.Tensor] = {}
    texts: dict[str, str] = {}
    for name, values in columns.items():
        picked = [values[i - offset] for i in row_examples.tolist()]
        try:
            arr = np.asarray(picked) if picked else np.zeros(0)
        except ValueError:  # ragged lists (e.g. token ids of different lengths)
            arr = np.empty(0, dtype=object)
        if arr.dtype.kind in "biuf" and arr.ndim == 1 and len(arr) == len(picked):
            tensors[META_PREFIX + name] = torch.from_numpy(np.ascontiguousarray(arr))
        else:
            texts[META_PREFIX + name] = json.dumps(picked, default=str)
    return tensors, texts


def write_shard_file(
    directory: Path,
    index: int,
    site_rows: Mapping[str, torch.Tensor],
    examples: torch.Tensor,
    positions: torch.Tensor,
    metadata: Mapping[str, Sequence[Any]],
    *,
    first_example: int,
    end_example: int,
    metadata_offset: int = 0,
) -> ShardInfo:
    """Write ``shard-<index>.safetensors`` atomically (temp file, fsync, rename); no manifest.

    The file holds every site's rows, each row's example index and token position, and the
    metadata columns expanded to rows (``metadata_offset``: see :func:`encode_metadata`). The
    same rows give the same bytes, whichever process writes them.
    """
    name = shard_name(index)
    tensors = {k: v.contiguous().cpu() for k, v in site_rows.items()}
    tensors[EXAMPLE_KEY] = examples.to(torch.int64).cpu().contiguous()
    tensors[POSITION_KEY] = positions.to(torch.int64).cpu().contiguous()
    meta_tensors, meta_texts = encode_metadata(
        metadata, tensors[EXAMPLE_KEY].numpy(), metadata_offset
    )
    tensors.update(meta_tensors)
    with atomic_path(directory / name) as tmp:
        save_file(tensors, str(tmp), metadata=meta_texts or None)
        sort_header_metadata(tmp)
    return ShardInfo(
        file=name,
        rows=int(examples.shape[0]),
        first_example=first_example,
        end_example=end_example,
        sha256=sha256_file(directory / name),
    )


def sort_header_metadata(path: Path) -> None:
    """Rewrite a safetensors header in place with its ``__metadata__`` keys sorted.

    safetensors serialises ``__metadata__`` from a Rust ``HashMap`` whose order changes from
    call to call, so the same shard would get different bytes (and sha256) each time it is
    written; sorted, equal shards are byte-identical, whichever process writes them. The
    header keeps its length (same JSON, compact, padded with spaces as safetensors pads it).
    """
    with open(path, "r+b") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        raw = fh.read(n)
        header = json.loads(raw)
        meta = header.get("__metadata__")
        if not meta or len(meta) < 2:
            return
        header["__metadata__"] = dict(sorted(meta.items()))
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        if len(text) > n:  # a different escaping than serde_json's: keep the file as written
            log.debug("safetensors header of %s not canonicalised (%d > %d bytes)", path,
                      len(text), n)
            return
        fh.seek(8)
        fh.write(text + b" " * (n - len(text)))


class StoreWriter:
    """Writes ``shard-NNNNN.safetensors`` files and keeps ``manifest.json`` in step.

    Each shard goes to a temp file, is fsynced and renamed into place, and only then listed in
    the manifest (itself replaced atomically). A killed writer therefore leaves a valid store
    prefix, and :meth:`open` resumes after the last listed shard.
    """

    def __init__(self, directory: str | Path, template: Manifest, *, lock_timeout: float | int = 0.0) -> None:
        self.directory = Path(directory)
        self.template = template
        self.manifest: Manifest | None = None
        self.bad_shards: list[int] = []
        self.lock_timeout = lock_timeout
        self._lock: DirectoryLock | None = None

    def _fresh(self) -> Manifest:
        self.manifest = replace(self.template, shards=[], complete=False)
        self.manifest.save(self.directory)
        return self.manifest

    def open(self, *, repair: bool = False) -> Manifest:
        """Start a store, or reopen it to resume; with ``repair``, list damaged shards.

        A store left by a *different* capture is replaced only when it holds no shard (logged);
        one that holds data is refused. Every existing shard's sha256 is checked: a mismatch
        raises :class:`CorruptShardError`, or with ``repair=True`` its index goes into
        :attr:`bad_shards` for the caller to re-capture with :meth:`write_shard` ``(index=...)``.

        The directory's write lock is held from here to :meth:`finish` / :meth:`close`: a second
        writer waits ``lock_timeout`` seconds, then is refused with
        :class:`~probekit.util.lock.LockedError` naming this process.
        """
        if self._lock is None:
            # a file, or a folder that cannot be written: one line, before any forward pass
            check_writable(self.directory, flag="store directory")
            self._lock = DirectoryLock(self.directory, what="activation store")
            self._lock.acquire(self.lock_timeout)
        try:
            return self._open(repair=repair)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the write lock (the store stays as written; :meth:`open` again to resume)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _open(self, *, repair: bool) -> Manifest:
        self.directory.mkdir(parents=True, exist_ok=True)
        for stray in self.directory.glob(".*.tmp-*"):
            stray.unlink()
        if not (self.directory / MANIFEST).exists():
            if any(self.directory.glob("shard-*.safetensors")):
                raise StoreError(
                    f"{self.directory} holds shard files but no {MANIFEST}; refusing to overwrite"
                    " them. Delete the directory or choose another output path."
                )
            return self._fresh()
        existing = Manifest.load(self.directory)
        mine, theirs = self.template.identity(), existing.identity()
        diff = [k for k in mine if mine[k] != theirs[k]]
        if diff:
            detail = "; ".join(
                f"{k}: store has {_short(theirs[k])}, this capture has {_short(mine[k])}"
                for k in diff
            )
            if not existing.shards:
                log.info(
                    "replacing the empty store in %s: it was started by a different capture "
                    "(%s) but holds no shard", self.directory, ", ".join(diff),
                )
                return self._fresh()
            raise StoreMismatchError(
                f"store {self.directory} holds {len(existing.shards)} shard(s) of a different "
                f"capture ({detail}). Nothing was overwritten; write to a new directory or "
                "delete this one."
            )
        self.bad_shards = []
        for index, shard in enumerate(existing.shards):
            path = self.directory / shard.file
            try:
                read_header(path)
                if sha256_file(path) != shard.sha256:
                    raise CorruptShardError(
                        f"shard {path} does not match its manifest checksum (damaged or "
                        f"modified); nothing was overwritten; {_REPAIR}"
                    )
            except CorruptShardError:
                if not repair:
                    raise
                self.bad_shards.append(index)
        self.manifest = existing
        return existing

    def write_shard(
        self,
        site_rows: Mapping[str, torch.Tensor],
        examples: torch.Tensor,
        positions: torch.Tensor,
        metadata: Mapping[str, Sequence[Any]],
        end_example: int,
        *,
        index: int | None = None,
    ) -> ShardInfo:
        """Write the next shard (or, with ``index``, rewrite that existing shard in place)."""
        if self.manifest is None:
            raise RuntimeError("StoreWriter.open() must be called before write_shard()")
        replacing = index is not None
        if index is None:
            index = len(self.manifest.shards)
        first = (
            self.manifest.shards[index].first_example if replacing else self.manifest.examples_done
        )
        info = write_shard_file(
            self.directory, index, site_rows, examples, positions, metadata,
            first_example=first, end_example=end_example,
        )
        if not self.manifest.feature_shapes:
            self.manifest.feature_shapes = {k: list(v.shape[1:]) for k, v in site_rows.items()}
        if replacing:
            self.manifest.shards[index] = info
        else:
            self.manifest.shards.append(info)
        self.manifest.save(self.directory)
        return info

    def finish(self) -> Manifest:
        """Mark the store complete (readers refuse incomplete stores by default)."""
        if self.manifest is None:
            raise RuntimeError("StoreWriter.open() must be called before finish()")
        self.manifest.complete = True
        self.manifest.save(self.directory)
        shutil.rmtree(self.directory / PARTS, ignore_errors=True)  # stale sharded-capture records
        self.close()
        return self.manifest


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) < 80 else text[:77] + "..."
