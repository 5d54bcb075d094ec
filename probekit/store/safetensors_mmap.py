"""Memory-mapped reading of safetensors files (format: u64 header length, JSON header, data).

Why not ``safetensors.safe_open``: measured with safetensors 0.8, its tensors are lazy maps too
(RSS +1.9 MB on ``get_tensor`` of a 256 MB tensor, then only the pages touched), so zero-copy
views alone would not need this module. It is kept for :func:`read_header`, which validates every
tensor entry (dtype, shape against byte span, total file size) and names the damaged shard and
the repair command, where ``safe_open`` raises one generic error. The views map the file
read-only: never write into one (copy first, as ``ActivationStore.load`` does). ``models.real``
checks its cache files with ``safe_open``; nothing else parses safetensors headers.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import StoreError

_DTYPES: dict[str, tuple[np.dtype, torch.dtype]] = {
    "F64": (np.dtype("<f8"), torch.float64),
    "F32": (np.dtype("<f4"), torch.float32),
    "F16": (np.dtype("<f2"), torch.float16),
    "BF16": (np.dtype("<i2"), torch.bfloat16),  # reinterpreted after mapping
    "I64": (np.dtype("<i8"), torch.int64),
    "I32": (np.dtype("<i4"), torch.int32),
    "I16": (np.dtype("<i2"), torch.int16),
    "I8": (np.dtype("i1"), torch.int8),
    "U8": (np.dtype("u1"), torch.uint8),
    "BOOL": (np.dtype("?"), torch.bool),
}


class CorruptShardError(StoreError, ValueError):
    """A shard file is truncated, unreadable or fails its checksum (the message names it)."""


_REPAIR = (
    "re-capture the damaged shards with `probekit capture ... --repair` (or "
    "capture_to_store(..., repair=True)) using the command that made the store"
)


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """Return (header dict, byte offset of the data section); raise on a malformed file."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise CorruptShardError(f"shard {path} is truncated ({len(raw)} bytes)")
            (n,) = struct.unpack("<Q", raw)
            blob = fh.read(n)
    except FileNotFoundError:
        raise CorruptShardError(f"shard {path} is missing") from None
    if len(blob) != n:
        raise CorruptShardError(f"shard {path} is truncated or damaged inside its header; {_REPAIR}")
    try:
        header = json.loads(blob)
    except ValueError as err:  # JSONDecodeError, or UnicodeDecodeError from flipped bytes
        raise CorruptShardError(
            f"shard {path} has a damaged header ({type(err).__name__}); {_REPAIR}"
        ) from None
    problem = _header_problem(header)
    if problem:
        raise CorruptShardError(f"shard {path} has a damaged header ({problem}); {_REPAIR}")
    data_start = 8 + n
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    size = path.stat().st_size
    if size != data_start + end:
        raise CorruptShardError(
            f"shard {path} is truncated or damaged: {size} bytes, header promises "
            f"{data_start + end}; {_REPAIR}"
        )
    return header, data_start


def _header_problem(header: object) -> str | None:
    """Why a parsed safetensors header is inconsistent, or None (dtype, shape vs offsets)."""
    if not isinstance(header, dict):
        return "not a JSON object"
    for key, info in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(info, dict) or info.get("dtype") not in _DTYPES:
            return f"tensor {key!r} has no known dtype"
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            return f"tensor {key!r} has shape {shape!r}"
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) for o in offsets) and 0 <= offsets[0] <= offsets[1]):
            return f"tensor {key!r} has data_offsets {offsets!r}"
        want = int(np.prod(shape, dtype=np.int64)) * _DTYPES[info["dtype"]][0].itemsize
        if offsets[1] - offsets[0] != want:
            return f"tensor {key!r}: shape {shape} needs {want} bytes, offsets span "\
                f"{offsets[1] - offsets[0]}"
    return None


def mmap_tensor(path: Path, name: str) -> torch.Tensor:
    """A zero-copy, read-only tensor view of ``name`` in the safetensors file ``path``."""
    header, start = read_header(path)
    if name not in header:
        keys = sorted(k for k in header if k != "__metadata__")
        raise KeyError(f"shard {path} has no tensor {name!r}; it holds {keys}")
    info = header[name]
    np_dtype, torch_dtype = _DTYPES[info["dtype"]]
    lo, hi = info["data_offsets"]
    shape = tuple(info["shape"])
    count = (hi - lo) // np_dtype.itemsize
    if count == 0:
        return torch.empty(shape, dtype=torch_dtype)
    arr = np.memmap(path, dtype=np_dtype, mode="r", offset=start + lo, shape=(count,))
    import warnings

    with warnings.catch_warnings():  # read-only memmap: torch warns it is not writable
        warnings.simplefilter("ignore", UserWarning)
        tensor = torch.from_numpy(arr)
    if torch_dtype is torch.bfloat16:
        tensor = tensor.view(torch.bfloat16)
    return tensor.reshape(shape)
