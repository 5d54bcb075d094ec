"""Memory-mapped reading of safetensors files (format: u64 header length, JSON header, data)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import torch

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


class CorruptShardError(ValueError):
    """A shard file is truncated, unreadable or fails its checksum."""


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
        raise CorruptShardError(f"shard {path} is truncated inside its header")
    try:
        header = json.loads(blob)
    except json.JSONDecodeError as err:
        raise CorruptShardError(f"shard {path} has an unreadable header: {err}") from None
    data_start = 8 + n
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    size = path.stat().st_size
    if size < data_start + end:
        raise CorruptShardError(
            f"shard {path} is truncated: {size} bytes, header promises {data_start + end}"
        )
    return header, data_start


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
