"""Append shards to a store atomically; resume an interrupted store."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from ..util.io import atomic_path, sha256_file
from .manifest import MANIFEST, Manifest, ShardInfo
from .safetensors_mmap import CorruptShardError, read_header

EXAMPLE_KEY = "_example"
POSITION_KEY = "_position"
META_PREFIX = "meta."


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.safetensors"


def encode_metadata(
    columns: Mapping[str, Sequence[Any]], row_examples: np.ndarray
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Expand per-example columns to rows: numeric -> tensors, anything else -> JSON strings."""
    tensors: dict[str, torch.Tensor] = {}
    texts: dict[str, str] = {}
    for name, values in columns.items():
        picked = [values[i] for i in row_examples.tolist()]
        arr = np.asarray(picked) if picked else np.zeros(0)
        if arr.dtype.kind in "biuf" and arr.ndim >= 1:
            tensors[META_PREFIX + name] = torch.from_numpy(np.ascontiguousarray(arr))
        else:
            texts[META_PREFIX + name] = json.dumps(picked, default=str)
    return tensors, texts


class StoreWriter:
    """Writes ``shard-NNNNN.safetensors`` files and keeps ``manifest.json`` in step.

    Each shard goes to a temp file, is fsynced and renamed into place, and only then listed in
    the manifest (itself replaced atomically). A killed writer therefore leaves a valid store
    prefix, and :meth:`open` resumes after the last listed shard.
    """

    def __init__(self, directory: str | Path, template: Manifest) -> None:
        self.directory = Path(directory)
        self.template = template
        self.manifest: Manifest | None = None

    def open(self) -> Manifest:
        self.directory.mkdir(parents=True, exist_ok=True)
        for stray in self.directory.glob(".*.tmp-*"):
            stray.unlink()
        if not (self.directory / MANIFEST).exists():
            if any(self.directory.glob("shard-*.safetensors")):
                raise FileExistsError(
                    f"{self.directory} holds shard files but no {MANIFEST}; refusing to overwrite"
                    " them. Delete the directory or choose another output path."
                )
            self.manifest = replace(self.template, shards=[], complete=False)
            self.manifest.save(self.directory)
            return self.manifest
        existing = Manifest.load(self.directory)
        mine, theirs = self.template.identity(), existing.identity()
        diff = [k for k in mine if mine[k] != theirs[k]]
        if diff:
            detail = "; ".join(
                f"{k}: store has {_short(theirs[k])}, this capture has {_short(mine[k])}"
                for k in diff
            )
            raise ValueError(
                f"store {self.directory} was made by a different capture ({detail}). Nothing was "
                "overwritten; write to a new directory or delete this one."
            )
        for shard in existing.shards:
            path = self.directory / shard.file
            read_header(path)
            if sha256_file(path) != shard.sha256:
                raise CorruptShardError(
                    f"shard {path} does not match its manifest checksum; the store is damaged. "
                    "Nothing was overwritten; delete the directory and capture again."
                )
        self.manifest = existing
        return existing

    def write_shard(
        self,
        site_rows: Mapping[str, torch.Tensor],
        examples: torch.Tensor,
        positions: torch.Tensor,
        metadata: Mapping[str, Sequence[Any]],
        end_example: int,
    ) -> ShardInfo:
        if self.manifest is None:
            raise RuntimeError("StoreWriter.open() must be called before write_shard()")
        index = len(self.manifest.shards)
        name = shard_name(index)
        tensors = {k: v.contiguous().cpu() for k, v in site_rows.items()}
        tensors[EXAMPLE_KEY] = examples.to(torch.int64).cpu().contiguous()
        tensors[POSITION_KEY] = positions.to(torch.int64).cpu().contiguous()
        meta_tensors, meta_texts = encode_metadata(metadata, tensors[EXAMPLE_KEY].numpy())
        tensors.update(meta_tensors)
        with atomic_path(self.directory / name) as tmp:
            save_file(tensors, str(tmp), metadata=meta_texts or None)
        info = ShardInfo(
            file=name,
            rows=int(examples.shape[0]),
            first_example=self.manifest.examples_done,
            end_example=end_example,
            sha256=sha256_file(self.directory / name),
        )
        if not self.manifest.feature_shapes:
            self.manifest.feature_shapes = {k: list(v.shape[1:]) for k, v in site_rows.items()}
        self.manifest.shards.append(info)
        self.manifest.save(self.directory)
        return info

    def finish(self) -> Manifest:
        if self.manifest is None:
            raise RuntimeError("StoreWriter.open() must be called before finish()")
        self.manifest.complete = True
        self.manifest.save(self.directory)
        return self.manifest


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) < 80 else text[:77] + "..."
