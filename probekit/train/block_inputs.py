"""A verified, resumable cache of the residual stream entering block ``b``, per training row.

The fast fine-tune path (:mod:`probekit.train.top_blocks`) trains the top ``k`` blocks only, so
``h_b`` (``b = L - k``), the input of block ``b`` at every token of a row, is a function of the
frozen weights below ``b`` and the row's tokens alone. It is computed once (no gradient,
float32, rows batched by length) and kept as an activation store (:mod:`probekit.store`): one
row per token (example = training row, position = token index), site ``resid_pre@b``, each shard
written to a temporary file, fsynced, renamed and listed with its sha256 in the sealed
manifest, under the directory's write lock. So an interrupted computation resumes after its last
listed shard, a damaged shard is recomputed, and a second process waits for the first.

The entry's name is a hash of what determines ``h_b``: a fingerprint of the model (its config
and every weight outside blocks ``b..L-1``), the rows' token ids and ``b``; every seed and
hyperparameter of a grid that fine-tunes one model on one data file above one block shares it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .top_blocks import block_of, causal_lm

__all__ = ["FORMAT", "block_inputs", "compute_block_inputs", "model_key"]

FORMAT = "probekit-block-inputs/1"
#: training rows per shard (a shard is the unit of resumption and of the checksum)
ROWS_PER_SHARD = 512
#: seconds a second process waits for the one computing the same entry
LOCK_WAIT_S = 3600


def model_key(model: Any, first: int) -> str:
    """blake2b (16 hex digits) of the config and every weight outside blocks ``first..L-1``."""
    import torch

    lm = causal_lm(model)
    digest = hashlib.blake2b(digest_size=8)
    config = {k: v for k, v in lm.config.to_dict().items()
              if not k.startswith("_") and k != "transformers_version"}
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    for name, tensor in sorted(lm.state_dict().items()):
        block = block_of(name)
        if block is not None and block >= first:
            continue
        t = tensor.detach().cpu().contiguous()
        digest.update(name.encode() + str(t.dtype).encode())
        digest.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def compute_block_inputs(model: Any, ids: list[list[int]], first: int,
                         batch_size: int = 16) -> list[Any]:
    """``h_first`` of each row, ``(n_i, d)`` float32: the forward stopped at block ``first``.

    Rows run in batches of similar length (right-padded, with the attention mask); a
    pre-hook on block ``first`` takes its input and stops the forward there.
    """
    import torch

    lm = causal_lm(model)
    decoder = lm.model
    device = next(decoder.parameters()).device
    taken: list[Any] = []

    class _Stop(Exception):
        pass

    def grab(_module: Any, args: tuple, kwargs: dict) -> None:
        taken.append(args[0] if args else kwargs["hidden_states"])
        raise _Stop

    out: list[Any] = [None] * len(ids)
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), i))
    handle = decoder.layers[first].register_forward_pre_hook(grab, with_kwargs=True)
    was_training = lm.training
    lm.eval()
    try:
        with torch.no_grad():
            for s in range(0, len(order), batch_size):
                chunk = order[s:s + batch_size]
                width = max(len(ids[i]) for i in chunk)
                x = torch.zeros((len(chunk), width), dtype=torch.long)
                m = torch.zeros((len(chunk), width), dtype=torch.long)
                for r, i in enumerate(chunk):
                    x[r, :len(ids[i])] = torch.as_tensor(ids[i])
                    m[r, :len(ids[i])] = 1
                taken.clear()
                with contextlib.suppress(_Stop):
                    decoder(input_ids=x.to(device), attention_mask=m.to(device))
                h = taken[0].float().cpu()
                for r, i in enumerate(chunk):
                    out[i] = h[r, :len(ids[i])].clone()
    finally:
        handle.remove()
        lm.train(was_training)
    return out


def _entry(root: Path, model_fp: str, ids: list[list[int]], first: int) -> tuple[Path, Any]:
    """The entry's directory and its store manifest template."""
    from ..fingerprint import dataset_fingerprint
    from ..sites import Site
    from ..store.manifest import Manifest

    data_fp = dataset_fingerprint(ids)
    key = hashlib.sha256(f"{FORMAT};{model_fp};{data_fp};{first}".encode()).hexdigest()[:16]
    template = Manifest(
        model_id="", model_fingerprint=model_fp, sites=[Site.parse(f"resid_pre@{first}").key],
        positions={"rule": "every token"}, dtype="float32", dataset_fingerprint=data_fp,
        n_examples=len(ids), examples_per_shard=ROWS_PER_SHARD, padding_side="none",
        metadata_columns=[], extra={"format": FORMAT, "block": first},
    )
    return root / f"resid_pre{first}-{key}", template


def _write(writer: Any, model: Any, ids: list[list[int]], first: int, start: int,
           index: int | None = None) -> None:
    """Compute and write the shard of rows ``start..`` (``index``: rewrite that shard)."""
    import torch

    end = min(start + ROWS_PER_SHARD, len(ids))
    rows = compute_block_inputs(model, ids[start:end], first)
    site = writer.template.sites[0]
    examples = torch.cat([torch.full((r.shape[0],), start + i, dtype=torch.long)
                          for i, r in enumerate(rows)])
    positions = torch.cat([torch.arange(r.shape[0]) for r in rows])
    writer.write_shard({site: torch.cat(rows)}, examples, positions, {}, end, index=index)


def block_inputs(model: Any, ids: list[list[int]], first: int, root: str | Path,
                 *, model_id: str = "") -> list[Any]:
    """``h_first`` of each row from the cache under ``root`` (computed and stored if missing).

    Args:
        model: the base causal LM (its weights below ``first`` are the ones fine-tuning keeps).
        ids: each training row's token ids.
        first: the block whose input is cached (``L - k``).
        root: the cache folder (one entry per model, rows and block).
        model_id: a readable name recorded in the entry's manifest.

    Returns:
        One float32 tensor ``(len(ids[i]), d_model)`` per row.

    Raises:
        StoreError: the entry does not hold the rows it should (delete the folder named).
    """
    import dataclasses

    import torch

    from ..store.reader import ActivationStore
    from ..store.writer import StoreWriter

    directory, template = _entry(Path(root), model_key(model, first), ids, first)
    writer = StoreWriter(directory, dataclasses.replace(template, model_id=model_id),
                         lock_timeout=LOCK_WAIT_S)
    manifest = writer.open(repair=True)  # every listed shard's sha256 checked
    try:
        for index in writer.bad_shards:  # damaged: recomputed in place
            _write(writer, model, ids, first, manifest.shards[index].first_example, index)
        for start in range(manifest.examples_done, len(ids), ROWS_PER_SHARD):
            _write(writer, model, ids, first, start)
        store = ActivationStore(directory, allow_incomplete=True, verify=False)  # just checked
        values = store.load(template.sites[0])
        counts = torch.bincount(store.examples(), minlength=len(ids)).tolist()
        if counts != [len(x) for x in ids]:
            raise StoreError(f"block-input cache {directory} does not hold one row per token of "
                             "the training rows; delete it (it is recomputed)")
        if not writer.manifest.complete:
            writer.finish()
    finally:
        writer.close()
    return list(torch.split(values, counts))
