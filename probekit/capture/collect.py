"""Batched capture over a dataset, into memory or streamed into a store (resumably).

:func:`collect_activations` keeps rows in memory; :func:`capture_to_store` streams them into an
:class:`~probekit.store.ActivationStore`. Both run batches through :func:`iter_capture`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..capture_options import CaptureOptions, ShardOptions
from ..errors import DataError, NonFiniteError
from ..fingerprint import dataset_fingerprint, model_fingerprint, model_id
from ..models.protocol import HookedModel
from ..progress import progress_bar
from ..sites import Site, as_sites
from ..store import ActivationStore, Manifest, StoreWriter
from .batching import (
    TokenBatch,
    iter_batches,
    model_device,
    pad_id_of,
    safe_padding_side,
)
from .checks import TokenInput, check_capture_inputs, token_lists
from .layout import pad_keys, to_probekit_layout
from .positions import LastToken, PositionRule, select_positions
from .runner import run_batch, stop_layer

log = logging.getLogger("probekit")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, kw_only=True)
class CaptureConfig(CaptureOptions, ShardOptions):
    """How to capture: which sites, which positions, batch size, padding side, storage dtype.

    The batching and storage options (``batch_size``, ``padding_side``, ``dtype``,
    ``examples_per_shard``) and their
    defaults are :class:`~probekit.capture_options.CaptureOptions`'s and ``ShardOptions``'s,
    shared with a suite's ``[capture]`` table and the flags of ``probekit capture``.

    Attributes:
        sites: the hook sites captured.
        positions: which token positions of each example give rows.
        pad_id: the padding token id (default: the model's).
        progress: show a progress bar.
        key_width: the key axis of ``attn_pattern`` rows (default: the longest prompt).
    """

    sites: tuple[Site, ...]
    positions: PositionRule = field(default_factory=LastToken)
    pad_id: int | None = None
    progress: bool = True
    key_width: int | None = None

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


def _pad_id(model: HookedModel, config: CaptureConfig) -> int:
    if config.pad_id is not None:
        return config.pad_id
    return pad_id_of(model)


def _select(
    activation: Tensor,
    *,
    site: Site,
    batch: TokenBatch,
    config: CaptureConfig,
    key_width: int,
    out: dict[Site, Tensor],
) -> None:
    """Hook body: keep the selected rows of ``site`` (probekit layout, unpadded keys)."""
    act = to_probekit_layout(site.kind, activation.detach())
    if site.head is not None:
        act = act[:, :, site.head]
    if site.kind == "attn_pattern":  # (batch, query, [head,] key): keys to unpadded coordinates
        act = pad_keys(act, batch, key_width)
    out[site] = select_positions(act, batch, config.positions).values.to(DTYPES[config.dtype])


def check_finite(
    acts: Mapping[Site, Tensor], batch: TokenBatch, model: HookedModel, example_offset: int = 0
) -> None:
    """Raise :class:`~probekit.errors.NonFiniteError` if a site of this batch holds NaN/inf.

    One ``isfinite().all()`` per site; the slow path (which examples) runs only on failure.
    The message names examples by ``example_offset`` + their id in the batch.
    """
    for site, values in acts.items():
        if bool(torch.isfinite(values).all()):
            continue
        bad_rows = (~torch.isfinite(values.reshape(values.shape[0], -1))).any(1)
        n_rows = values.shape[0]
        per_example = n_rows == batch.input_ids.shape[0]
        ids = batch.example_ids.cpu()[bad_rows.cpu()] if per_example else batch.example_ids.cpu()
        ids = ids + example_offset
        dtype = next((p.dtype for p in model.parameters()), None)
        side = "left" if bool(batch.offsets.any()) else "right"
        raise NonFiniteError(
            f"site {site.short}: non-finite activations (NaN/inf) for examples "
            f"{ids.tolist()[:10]} (model dtype {dtype}, {side} padding); likely causes: "
            "fully masked pad queries under left padding (use padding_side='right'), float16 "
            "overflow (use float32), or non-finite weights"
        )


def iter_capture(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    config: CaptureConfig,
    *,
    start: int = 0,
    grad: bool = False,
    stop_early: bool = True,
    example_offset: int = 0,
) -> Iterator[CapturedBatch]:
    """Run ``model`` over ``tokens[start:]`` in batches; yield each batch's selected rows.

    ``example_offset`` is the dataset index of ``tokens[0]`` when ``tokens`` is a slice (a shard
    range of :func:`~probekit.capture.capture_sharded`, with the position rule sliced alike):
    yielded rows and error messages then carry dataset indices.

    ``stop_early`` skips the blocks after the last captured one (and the unembedding);
    ``grad=True`` keeps the autograd graph instead of running under ``torch.inference_mode``.
    ``attn_pattern`` rows hold keys in unpadded coordinates, zero-padded to the longest prompt of
    ``tokens`` (``config.key_width`` overrides), so every batch has the same width. Each batch is
    checked for NaN/inf (:func:`check_finite`).
    """
    sites = as_sites(config.sites)
    check_capture_inputs(model, tokens, sites, config.positions)
    key_width = config.key_width or max(len(seq) for seq in tokens)
    stop = stop_layer(model, sites) if stop_early else None
    device = model_device(model)
    pad_id = _pad_id(model, config)
    side = safe_padding_side(model, config.padding_side)
    batches = iter_batches(
        tokens, batch_size=config.batch_size, pad_id=pad_id, side=side, start=start
    )
    bar = progress_bar(desc="capture", total=len(tokens) - start, unit="example", enabled=config.progress)
    with contextlib.closing(bar):
        for batch in batches:
            batch = batch.to(device)
            out: dict[Site, Tensor] = {}
            hooks = [
                (site, partial(_select, site=site, batch=batch, config=config, key_width=key_width,
                               out=out))
                for site in sites
            ]
            run_batch(model, batch, hooks, grad=grad, stop_at_layer=stop)
            acts = {site: out[site] for site in sites}
            check_finite(acts, batch, model, example_offset)
            ref = select_positions(  # provenance is the same for every site
                torch.zeros(batch.input_ids.shape + (1,), device=batch.input_ids.device),
                batch,
                config.positions,
            )
            bar.update(batch.input_ids.shape[0])
            yield CapturedBatch(batch, acts, ref.example.cpu() + example_offset, ref.position.cpu())


def collect_activations(
    model: HookedModel,
    tokens: TokenInput,
    sites: Sequence[Site | str],
    **options: Any,
) -> CaptureResult:
    """Capture ``sites`` at the selected positions over all ``tokens`` into memory.

    ``options`` are :class:`CaptureConfig` fields (positions, batch_size, padding_side, dtype...).
    """
    config = CaptureConfig(sites=as_sites(sites), **options)
    tokens = token_lists(tokens)
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


@dataclass(frozen=True)
class ShardRows:
    """The rows of one store shard: per site key, with each row's example and position."""

    site_rows: dict[str, Tensor]
    examples: Tensor
    positions: Tensor
    first_example: int
    end_example: int


def iter_shard_rows(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    config: CaptureConfig,
    start: int,
    end: int,
    *,
    one_shard: bool = False,
    example_offset: int = 0,
) -> Iterator[ShardRows]:
    """Capture examples ``[start, end)`` and yield them cut into shards of ``shard_examples``.

    Shards start at ``start`` (a shard boundary). ``one_shard``: the whole range is one shard
    (re-capturing a damaged shard). ``example_offset``: as in :func:`iter_capture`; the yielded
    ``first_example``/``end_example`` are dataset indices.
    """
    buffer: dict[Site, list[Tensor]] = {s: [] for s in config.sites}
    ex_buf: list[Tensor] = []
    pos_buf: list[Tensor] = []
    done = first = start

    def cut() -> ShardRows:
        rows = ShardRows(
            {s.key: torch.cat(v) for s, v in buffer.items()}, torch.cat(ex_buf),
            torch.cat(pos_buf), first + example_offset, done + example_offset,
        )
        for v in buffer.values():
            v.clear()
        ex_buf.clear()
        pos_buf.clear()
        return rows

    steps = iter_capture(model, tokens, config, start=start, example_offset=example_offset)
    with contextlib.closing(steps):
        for step in steps:
            for site, values in step.acts.items():
                buffer[site].append(values.cpu())
            ex_buf.append(step.example)
            pos_buf.append(step.position)
            done += step.batch.input_ids.shape[0]
            if done >= end:
                yield cut()
                return
            if not one_shard and (done - start) % config.shard_examples == 0:
                yield cut()
                first = done


def store_template(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    config: CaptureConfig,
    metadata: Mapping[str, Sequence[Any]],
    extra: Mapping[str, Any] | None,
) -> tuple[Manifest, dict[str, Sequence[Any]]]:
    """Check a capture's inputs (before any store write); its store manifest and metadata columns.

    The columns are ``metadata`` plus each row's prompt (:func:`_with_prompt_columns`); the
    manifest lists no shard yet.

    Raises:
        DataError: a bad token, position or a metadata column of the wrong length.
    """
    check_capture_inputs(model, tokens, config.sites, config.positions)
    for name, column in metadata.items():
        if len(column) != len(tokens):
            raise DataError(
                f"metadata column {name!r} has {len(column)} values but there are "
                f"{len(tokens)} examples"
            )
    metadata = _with_prompt_columns(model, tokens, dict(metadata))
    return Manifest(
        model_id=model_id(model),
        model_fingerprint=model_fingerprint(model),
        sites=[s.key for s in config.sites],
        positions=config.positions.describe(),
        dtype=config.dtype,
        dataset_fingerprint=dataset_fingerprint(tokens, {"metadata": dict(metadata)}),
        n_examples=len(tokens),
        examples_per_shard=config.shard_examples,
        padding_side=config.padding_side,
        metadata_columns=sorted(metadata),
        extra=dict(extra or {}),
    ), metadata


def _with_prompt_columns(
    model: HookedModel, tokens: Sequence[Sequence[int]], metadata: dict[str, Sequence[Any]]
) -> dict[str, Sequence[Any]]:
    """Add ``token_ids`` and (with a tokenizer) the decoded prompt ``text`` unless given.

    A store then says which prompt each row came from, whichever way it was written (CLI or
    Python); columns the caller passes are kept as they are, except ``token_ids``, which is
    reserved: a caller's column of that name must equal the captured ids (else an error).
    """
    out = dict(metadata)
    ids = [[int(t) for t in seq] for seq in tokens]
    given = out.get("token_ids")
    if given is not None and [list(map(int, v)) if isinstance(v, (list, tuple)) else v
                              for v in given] != ids:
        raise DataError(
            "metadata column 'token_ids' is reserved: the store keeps each row's captured token "
            "ids under that name, and yours differ from the captured ones; rename your column "
            "(e.g. 'source_token_ids')"
        )
    out["token_ids"] = ids
    tokenizer = getattr(model, "tokenizer", None)
    if "text" not in out and tokenizer is not None:
        out["text"] = [tokenizer.decode([int(t) for t in seq]) for seq in tokens]
    return out


def capture_to_store(
    model: HookedModel,
    tokens: TokenInput,
    directory: str | Path,
    sites: Sequence[Site | str],
    *,
    metadata: Mapping[str, Sequence[Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
    repair: bool = False,
    lock_timeout: float | int = 0.0,
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

    Besides ``metadata``, the store keeps each row's prompt: ``token_ids`` and, when the model
    has a tokenizer, the decoded ``text`` (unless the caller passes columns of those names).

    One process writes a store at a time: a second capture into ``directory`` waits
    ``lock_timeout`` seconds for the first (then resumes or finds the store complete) or is
    refused with :class:`~probekit.util.lock.LockedError` naming the writing process.
    """
    config = CaptureConfig(sites=as_sites(sites), **options)
    tokens = token_lists(tokens)
    metadata = dict(metadata or {})
    template, metadata = store_template(model, tokens, config, metadata, extra)  # checks first
    writer = StoreWriter(directory, template, lock_timeout=lock_timeout)
    try:
        return _write_store(model, tokens, directory, config, metadata, writer, repair)
    finally:
        writer.close()


def _write_store(
    model: HookedModel, tokens: Sequence[Sequence[int]], directory: str | Path,
    config: CaptureConfig, metadata: dict[str, Sequence[Any]], writer: StoreWriter, repair: bool,
) -> ActivationStore:
    """The body of :func:`capture_to_store` while ``writer`` holds the store's lock."""
    manifest = writer.open(repair=repair)
    for index in list(writer.bad_shards):
        shard = manifest.shards[index]
        log.info("re-capturing damaged shard %s (examples %d..%d of %d)", shard.file,
                 shard.first_example, shard.end_example, len(tokens))
        for rows in iter_shard_rows(model, tokens, config, shard.first_example,
                                    shard.end_example, one_shard=True):
            writer.write_shard(rows.site_rows, rows.examples, rows.positions, metadata,
                               rows.end_example, index=index)
    if manifest.complete:
        if not writer.bad_shards:
            log.info("store %s is already complete (%d examples); nothing to capture",
                     directory, len(tokens))
        return ActivationStore(directory)
    start = manifest.examples_done
    if start:
        log.info("resuming %s from example %d of %d (%d shard(s) kept)", directory, start,
                 len(tokens), len(manifest.shards))
    for rows in iter_shard_rows(model, tokens, config, start, len(tokens)):
        writer.write_shard(rows.site_rows, rows.examples, rows.positions, metadata,
                           rows.end_example)
    writer.finish()
    return ActivationStore(directory)
