"""Batched capture over a dataset: into memory (:func:`collect_activations`) or streamed into
an :class:`~probekit.store.ActivationStore` (:func:`capture_to_store`), resumably."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import einops
import torch
from torch import Tensor

from ..errors import ConfigError, DataError
from ..progress import progress_bar
from ..store import ActivationStore, Manifest, StoreWriter
from .batching import PaddingSide, TokenBatch, iter_batches, model_device
from .checks import check_capture_inputs
from .fingerprint import dataset_fingerprint, model_fingerprint, model_id
from .hooks import capture
from .positions import LastToken, PositionRule, select_positions
from .sites import Site, as_sites

log = logging.getLogger("probekit")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, kw_only=True)
class CaptureConfig:
    """How to capture: which sites, which positions, batch size, padding side, storage dtype."""

    sites: tuple[Site, ...]
    positions: PositionRule = field(default_factory=LastToken)
    batch_size: int = 32
    padding_side: PaddingSide = "right"
    dtype: str = "float32"
    pad_id: int | None = None
    examples_per_shard: int = 4096
    progress: bool = True

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.padding_side not in ("left", "right"):
            raise ConfigError(f"padding_side must be 'left' or 'right', got {self.padding_side!r}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype {self.dtype!r} not supported; choose one of {list(DTYPES)}")
        if self.examples_per_shard < 1:
            raise ConfigError(f"examples_per_shard must be >= 1, got {self.examples_per_shard}")

    @property
    def shard_examples(self) -> int:
        """Examples per shard, rounded up to whole batches so shards align with batches."""
        n_batches = -(-self.examples_per_shard // self.batch_size)
        return n_batches * self.batch_size


@dataclass(frozen=True)
class CaptureResult:
    """In-memory capture: ``acts[site]`` is ``(rows, *feature)``; provenance per row."""

    acts: dict[Site, Tensor]
    example: Tensor
    position: Tensor

    def __getitem__(self, site: Site | str) -> Tensor:
        key = site if isinstance(site, Site) else Site.parse(site)
        return self.acts[key]

    def stacked(self) -> Tensor:
        """``(site, rows, d)`` for sites of equal width, in capture order."""
        return torch.stack(list(self.acts.values()))


@dataclass(frozen=True)
class CapturedBatch:
    """One batch of a capture: selected rows per site, and each row's example and position."""

    batch: TokenBatch
    acts: dict[Site, Tensor]
    example: Tensor
    position: Tensor


def _stop_layer(model: Any, sites: Sequence[Site]) -> int | None:
    """Blocks after the last captured one need not run (None: the whole model must)."""
    if any(s.layer is None and s.kind == "ln_final" for s in sites):
        return None
    layers = [s.layer for s in sites if s.layer is not None]
    return (max(layers) + 1) if layers else 1


def _pad_id(model: Any, config: CaptureConfig) -> int:
    if config.pad_id is not None:
        return config.pad_id
    tok = getattr(model, "tokenizer", None)
    pad = getattr(tok, "pad_token_id", None) if tok is not None else None
    return int(pad) if pad is not None else 0


def iter_capture(
    model: Any, tokens: Sequence[Sequence[int]], config: CaptureConfig, *, start: int = 0
) -> Iterator[CapturedBatch]:
    """Run ``model`` over ``tokens[start:]`` in batches; yield each batch's selected rows."""
    sites = as_sites(config.sites)
    check_capture_inputs(model, tokens, sites, config.positions)
    out_dtype = DTYPES[config.dtype]
    stop = _stop_layer(model, sites)
    current: dict[str, TokenBatch] = {}

    def transform(site: Site, act: Tensor) -> Tensor:
        if site.kind == "attn_pattern":  # (batch, head, query, key): select query positions
            act = einops.rearrange(act, "b h q k -> b q h k")
        return select_positions(act, current["batch"], config.positions).values.to(out_dtype)

    device = model_device(model)
    pad_id = _pad_id(model, config)
    batches = iter_batches(
        tokens, batch_size=config.batch_size, pad_id=pad_id, side=config.padding_side, start=start
    )
    total = -(-(len(tokens) - start) // config.batch_size)
    bar = progress_bar(desc="capture", total=total, unit="batch", enabled=config.progress)
    with contextlib.closing(bar), capture(model, sites) as recorder, torch.inference_mode():
        recorder.transform = transform
        for batch in batches:
            batch = batch.to(device)
            current["batch"] = batch
            kwargs: dict[str, Any] = {}
            if batch.is_padded:
                kwargs["attention_mask"] = batch.attention_mask
            if stop is not None:
                kwargs["stop_at_layer"] = stop
            recorder.clear()
            model(batch.input_ids, **kwargs)
            ref = select_positions(  # provenance is the same for every site
                torch.zeros(batch.input_ids.shape + (1,), device=batch.input_ids.device),
                batch,
                config.positions,
            )
            bar.update(1)
            yield CapturedBatch(
                batch, {site: recorder[site] for site in sites}, ref.example.cpu(), ref.position.cpu()
            )


def collect_activations(
    model: Any,
    tokens: Sequence[Sequence[int]],
    sites: Sequence[Site | str],
    **options: Any,
) -> CaptureResult:
    """Capture ``sites`` at the selected positions over all ``tokens`` into memory.

    ``options`` are :class:`CaptureConfig` fields (positions, batch_size, padding_side, dtype...).
    """
    config = CaptureConfig(sites=as_sites(sites), **options)
    parts: dict[Site, list[Tensor]] = {s: [] for s in config.sites}
    examples: list[Tensor] = []
    positions: list[Tensor] = []
    for step in iter_capture(model, tokens, config):
        for site, values in step.acts.items():
            parts[site].append(values.cpu())
        examples.append(step.example)
        positions.append(step.position)
    return CaptureResult(
        acts={s: torch.cat(v) for s, v in parts.items()},
        example=torch.cat(examples),
        position=torch.cat(positions),
    )


def _write_range(
    model: Any,
    tokens: Sequence[Sequence[int]],
    config: CaptureConfig,
    writer: StoreWriter,
    metadata: Mapping[str, Sequence[Any]],
    start: int,
    end: int,
    *,
    index: int | None = None,
) -> None:
    """Capture examples ``[start, end)`` into shards (one shard, rewritten in place, if ``index``)."""
    buffer: dict[Site, list[Tensor]] = {s: [] for s in config.sites}
    ex_buf: list[Tensor] = []
    pos_buf: list[Tensor] = []
    done = start

    def flush(end_example: int) -> None:
        writer.write_shard(
            {s.name: torch.cat(v) for s, v in buffer.items()},
            torch.cat(ex_buf),
            torch.cat(pos_buf),
            metadata,
            end_example,
            index=index,
        )
        for v in buffer.values():
            v.clear()
        ex_buf.clear()
        pos_buf.clear()

    with contextlib.closing(iter_capture(model, tokens, config, start=start)) as steps:
        for step in steps:
            for site, values in step.acts.items():
                buffer[site].append(values.cpu())
            ex_buf.append(step.example)
            pos_buf.append(step.position)
            done += step.batch.input_ids.shape[0]
            if done >= end:
                flush(done)
                break
            if index is None and (done - start) % config.shard_examples == 0:
                flush(done)


def capture_to_store(
    model: Any,
    tokens: Sequence[Sequence[int]],
    directory: str | Path,
    sites: Sequence[Site | str],
    *,
    metadata: Mapping[str, Sequence[Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
    repair: bool = False,
    **options: Any,
) -> ActivationStore:
    """Stream a capture into ``directory`` shard by shard; resume if it was interrupted.

    Inputs are checked against the model first (token ids, lengths, positions, sites), so a
    failed check leaves no store behind. ``repair=True`` re-captures only the shards that fail
    their sha256 (same call as the one that made the store), then resumes if incomplete.

    Peak memory is one shard of rows (``examples_per_shard``), whatever the dataset size.
    Rerunning the same call after a crash continues after the last complete shard and ends
    with a store identical to an uninterrupted run; a different model, dataset, site list or
    position rule is refused with the differing fields named.
    """
    config = CaptureConfig(sites=as_sites(sites), **options)
    check_capture_inputs(model, tokens, config.sites, config.positions)  # before any store write
    metadata = dict(metadata or {})
    for name, column in metadata.items():
        if len(column) != len(tokens):
            raise DataError(
                f"metadata column {name!r} has {len(column)} values but there are "
                f"{len(tokens)} examples"
            )
    template = Manifest(
        model_id=model_id(model),
        model_fingerprint=model_fingerprint(model),
        sites=[s.name for s in config.sites],
        positions=config.positions.describe(),
        dtype=config.dtype,
        dataset_fingerprint=dataset_fingerprint(tokens, {"metadata": metadata}),
        n_examples=len(tokens),
        examples_per_shard=config.shard_examples,
        padding_side=config.padding_side,
        metadata_columns=sorted(metadata),
        extra=dict(extra or {}),
    )
    writer = StoreWriter(directory, template)
    manifest = writer.open(repair=repair)
    for index in list(writer.bad_shards):
        shard = manifest.shards[index]
        log.info("re-capturing damaged shard %s (examples %d..%d of %d)", shard.file,
                 shard.first_example, shard.end_example, len(tokens))
        _write_range(model, tokens, config, writer, metadata, shard.first_example,
                     shard.end_example, index=index)
    if manifest.complete:
        if not writer.bad_shards:
            log.info("store %s is already complete (%d examples); nothing to capture",
                     directory, len(tokens))
        return ActivationStore(directory)
    start = manifest.examples_done
    if start:
        log.info("resuming %s from example %d of %d (%d shard(s) kept)", directory, start,
                 len(tokens), len(manifest.shards))
    _write_range(model, tokens, config, writer, metadata, start, len(tokens))
    writer.finish()
    return ActivationStore(directory)
