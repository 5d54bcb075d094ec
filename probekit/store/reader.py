"""Read an activation store: per site, memory-mapped, with row provenance and metadata."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..capture.sites import Site
from ..models.protocol import HookedModel
from ..util.io import sha256_file
from .manifest import Manifest
from .safetensors_mmap import CorruptShardError, mmap_tensor, read_header
from .writer import EXAMPLE_KEY, META_PREFIX, POSITION_KEY


class ActivationStore:
    """A finished store directory. Opening checks every shard's header and size (cheap);
    :meth:`verify` also checks sha256 checksums.

    Example:
        >>> store = ActivationStore("acts/")
        >>> X = store.load("blocks.3.hook_resid_post")   # (rows, d_model)
        >>> y = store.metadata()["label"]
    """

    def __init__(self, directory: str | Path, *, allow_incomplete: bool = False) -> None:
        self.directory = Path(directory)
        self.manifest = Manifest.load(self.directory)
        if not self.manifest.complete and not allow_incomplete:
            raise ValueError(
                f"store {self.directory} is incomplete ({self.manifest.examples_done} of "
                f"{self.manifest.n_examples} examples): rerun the same capture to resume it, or "
                "pass allow_incomplete=True"
            )
        for shard in self.manifest.shards:
            read_header(self.directory / shard.file)

    @property
    def sites(self) -> list[str]:
        return list(self.manifest.sites)

    @property
    def n_rows(self) -> int:
        return self.manifest.n_rows

    def __len__(self) -> int:
        return self.n_rows

    def _site_key(self, site: Site | str) -> str:
        key = site.name if isinstance(site, Site) else str(site)
        if key not in self.manifest.sites:
            with contextlib.suppress(ValueError):
                key = Site.parse(key).name
        if key not in self.manifest.sites:
            raise KeyError(f"store {self.directory} has no site {key!r}; it holds {self.sites}")
        return key

    def iter_shards(self, site: Site | str) -> Iterator[torch.Tensor]:
        """Yield each shard's rows of ``site`` as a read-only memory-mapped tensor."""
        key = self._site_key(site)
        for shard in self.manifest.shards:
            yield mmap_tensor(self.directory / shard.file, key)

    def load(self, site: Site | str, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        """All rows of ``site`` as one tensor ``(rows, *feature)`` (copied out of the maps)."""
        parts = list(self.iter_shards(site))
        out = torch.cat(parts) if parts else torch.empty(0)
        return out.to(dtype) if dtype is not None else out

    def load_layers(self, sites: list[Site | str] | None = None) -> torch.Tensor:
        """Stack several sites of equal width: ``(site, rows, d)`` for layer sweeps."""
        chosen = sites if sites is not None else self.sites
        return torch.stack([self.load(s) for s in chosen])

    def _column(self, key: str) -> torch.Tensor:
        return torch.cat([mmap_tensor(self.directory / s.file, key) for s in self.manifest.shards])

    def examples(self) -> torch.Tensor:
        """Example index of every row."""
        return self._column(EXAMPLE_KEY)

    def positions(self) -> torch.Tensor:
        """Unpadded token position of every row (span start for span means)."""
        return self._column(POSITION_KEY)

    def metadata(self) -> dict[str, Any]:
        """Per-row metadata columns: numeric as numpy arrays, others as lists."""
        headers = [read_header(self.directory / s.file)[0] for s in self.manifest.shards]
        columns: dict[str, Any] = {}
        for name in self.manifest.metadata_columns:
            key = META_PREFIX + name
            if all(key in h for h in headers):  # numeric in every shard: stored as tensors
                columns[name] = self._column(key).numpy() if headers else np.zeros(0)
                continue
            values: list[Any] = []
            for shard, header in zip(self.manifest.shards, headers):
                if key in header:
                    values.extend(mmap_tensor(self.directory / shard.file, key).numpy())
                else:
                    values.extend(json.loads(header["__metadata__"][key]))
            columns[name] = values
        return columns

    def verify(self) -> None:
        """Check every shard's sha256 against the manifest; raise naming the first bad file."""
        for shard in self.manifest.shards:
            path = self.directory / shard.file
            read_header(path)
            if sha256_file(path) != shard.sha256:
                raise CorruptShardError(
                    f"shard {path} fails its checksum (manifest sha256 {shard.sha256[:12]}...); "
                    "the file was modified or damaged: capture again into a new directory"
                )

    def check_model(self, model: HookedModel) -> None:
        """Raise if ``model`` is not the model this store was captured from."""
        from ..capture.fingerprint import model_fingerprint

        got = model_fingerprint(model)
        if got != self.manifest.model_fingerprint:
            raise ValueError(
                f"store {self.directory} was captured from model {self.manifest.model_id!r} "
                f"(fingerprint {self.manifest.model_fingerprint}), not from this model "
                f"(fingerprint {got})"
            )
