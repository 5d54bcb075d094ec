"""Read an activation store: per site, memory-mapped, with row provenance and metadata."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, StoreError
from ..models.protocol import HookedModel
from ..sites import SITE_KINDS, Site
from ..util.io import sha256_file
from .manifest import Manifest, ShardInfo, StoreMismatchError
from .safetensors_mmap import _REPAIR, CorruptShardError, mmap_tensor, read_header
from .writer import EXAMPLE_KEY, META_PREFIX, POSITION_KEY

VERIFY_ENV = "PROBEKIT_VERIFY_SHARDS"
# Shards whose sha256 was checked in this process: (path, sha256, size, mtime_ns).
_VERIFIED: set[tuple[str, str, int, int]] = set()


class IncompleteStoreError(StoreError, ValueError):
    """A store whose capture has not finished (also a ``ValueError`` for older callers)."""


class UnknownStoreSiteError(StoreError, KeyError):
    """A site the store does not hold (also a ``KeyError`` for older callers)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def verify_shard(path: Path, shard: ShardInfo) -> None:
    """Check ``path`` against its manifest sha256 once per process (cached by size + mtime).

    Raises:
        CorruptShardError: naming the file, when its bytes differ from the recorded checksum.
    """
    stat = path.stat()
    key = (str(path.resolve()), shard.sha256, stat.st_size, stat.st_mtime_ns)
    if key in _VERIFIED:
        return
    if sha256_file(path) != shard.sha256:
        raise CorruptShardError(
            f"shard {path} fails its checksum (manifest sha256 {shard.sha256[:12]}...): the file "
            f"was modified or damaged; {_REPAIR}"
        )
    _VERIFIED.add(key)


class ActivationStore:
    """A finished store directory, read through memory maps.

    Opening checks every shard's header and size (cheap). The first read of each shard in a
    process also checks its sha256 against the manifest (one extra pass over the file, then
    cached), so a flipped byte raises :class:`CorruptShardError` naming the file instead of
    returning wrong numbers. Opt out with ``verify=False`` or ``PROBEKIT_VERIFY_SHARDS=0``.

    Example:
        >>> store = ActivationStore("acts/")
        >>> X = store.load("blocks.3.hook_resid_post")   # (rows, d_model)
        >>> y = store.metadata()["label"]
    """

    def __init__(
        self, directory: str | Path, *, allow_incomplete: bool = False, verify: bool | None = None
    ) -> None:
        self.directory = Path(directory)
        self.manifest = Manifest.load(self.directory)
        self.verify_reads = (
            verify if verify is not None else os.environ.get(VERIFY_ENV, "1") != "0"
        )
        if not self.manifest.complete and not allow_incomplete:
            raise IncompleteStoreError(
                f"store {self.directory} is incomplete ({self.manifest.examples_done} of "
                f"{self.manifest.n_examples} examples): rerun the same capture to resume it, or "
                "pass allow_incomplete=True"
            )
        for shard in self.manifest.shards:
            read_header(self.directory / shard.file)

    @property
    def sites(self) -> list[str]:
        """Site keys the store holds (``blocks.N.hook_*`` names), in capture order."""
        return list(self.manifest.sites)

    @property
    def n_rows(self) -> int:
        """Number of activation rows (examples x positions kept)."""
        return self.manifest.n_rows

    def __len__(self) -> int:
        return self.n_rows

    def _site_key(self, site: Site | str) -> str:
        key = site.key if isinstance(site, Site) else str(site)
        if key not in self.manifest.sites:
            with contextlib.suppress(ValueError):
                key = Site.parse(key).key
        if key not in self.manifest.sites:
            raise UnknownStoreSiteError(
                f"store {self.directory} has no site {key!r}; it holds {self.sites}"
            )
        return key

    def _shard_path(self, shard: ShardInfo) -> Path:
        """The shard's file, its checksum verified on first use in this process."""
        path = self.directory / shard.file
        if self.verify_reads:
            verify_shard(path, shard)
        return path

    def iter_shards(self, site: Site | str) -> Iterator[torch.Tensor]:
        """Yield each shard's rows of ``site`` as a read-only memory-mapped tensor."""
        key = self._site_key(site)
        for shard in self.manifest.shards:
            yield mmap_tensor(self._shard_path(shard), key)

    def load(self, site: Site | str, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        """All rows of ``site`` as one tensor ``(rows, *feature)`` (copied out of the maps)."""
        parts = list(self.iter_shards(site))
        out = torch.cat(parts) if parts else torch.empty(0)
        return out.to(dtype) if dtype is not None else out

    def sites_of_kind(self, kind: str) -> list[str]:
        """The store's sites of hook ``kind`` (e.g. ``"resid_post"``), in layer order."""
        parsed = [Site.parse(s) for s in self.sites]
        return [s.key for s in sorted(parsed, key=lambda s: (s.layer is not None, s.layer or 0))
                if s.kind == kind]

    def load_layers(self, sites: Sequence[Site | str] | str | None = None) -> torch.Tensor:
        """Stack several sites of equal width: ``(site, rows, d)`` for layer sweeps.

        ``sites`` is a list of sites (index ``i`` of the stack is the ``i``-th listed site), a
        site kind (``"resid_post"``: every layer of that kind in the store, in layer order), or
        None (every site). With a kind (or None over one kind) index ``i`` must be layer ``i``:
        a store holding layers 0 and 2 only is refused (index 1 would be layer 2); list the
        sites then.
        """
        if isinstance(sites, str):
            if sites not in SITE_KINDS:
                raise ConfigError(
                    f"load_layers({sites!r}): a string must be a site kind {list(SITE_KINDS)}; "
                    f"for one site use load({sites!r}), for several pass a list"
                )
            chosen: Sequence[Site | str] = self.sites_of_kind(sites)
            if not chosen:
                raise ConfigError(
                    f"load_layers({sites!r}): store {self.directory} holds no site of that "
                    f"kind; it holds {self.sites}"
                )
        else:
            chosen = sites if sites is not None else self.sites
        if sites is None or isinstance(sites, str):
            _check_layer_axis([Site.parse(s) if isinstance(s, str) else s for s in chosen],
                              self.directory)
        return torch.stack([self.load(s) for s in chosen])

    def _column(self, key: str) -> torch.Tensor:
        return torch.cat([mmap_tensor(self._shard_path(s), key) for s in self.manifest.shards])

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
                    values.extend(mmap_tensor(self._shard_path(shard), key).numpy())
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
                    f"the file was modified or damaged; {_REPAIR}"
                )

    def check_model(self, model: HookedModel) -> None:
        """Raise if ``model`` is not the model this store was captured from."""
        from ..fingerprint import model_fingerprint

        got = model_fingerprint(model)
        if got != self.manifest.model_fingerprint:
            raise StoreMismatchError(
                f"store {self.directory} was captured from model {self.manifest.model_id!r} "
                f"(fingerprint {self.manifest.model_fingerprint}), not from this model "
                f"(fingerprint {got})"
            )


def _check_layer_axis(sites: Sequence[Site], directory: object) -> None:
    """Refuse an implicit stack whose index is not the layer (e.g. layers 0 and 2 only).

    Raises:
        ConfigError: naming the layers the store holds and the explicit list to pass.
    """
    if len({(s.kind, s.head) for s in sites}) != 1 or any(s.layer is None for s in sites):
        return
    layers = [int(s.layer) for s in sites]  # type: ignore[arg-type]
    if layers != list(range(len(layers))):
        listed = ", ".join(repr(s.short) for s in sites)
        raise ConfigError(
            f"load_layers: store {directory} holds {sites[0].kind} at layers {layers}, not "
            f"0..{len(layers) - 1}, so stack index i would not be layer i; pass the sites "
            f"explicitly, load_layers([{listed}]) (index i = the i-th listed site)"
        )
