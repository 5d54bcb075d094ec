"""The JSON manifest of an activation store."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorruptFileError, StoreError
from ..util.integrity import read_sealed, seal
from ..util.io import atomic_write_json

FORMAT = "probekit-store/1"
MANIFEST = "manifest.json"
PARTS = "parts"  # finished-shard records of a sharded capture (store/parts.py)


class StoreMismatchError(StoreError, ValueError):
    """A store made by a different model or capture, or unreadable (also a ``ValueError``)."""


class CorruptManifestError(CorruptFileError, StoreMismatchError):
    """``manifest.json`` is truncated or fails its checksum (also a ``StoreMismatchError``)."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """A directory that is not an activation store (also a ``FileNotFoundError``)."""


@dataclass(frozen=True)
class ShardInfo:
    """One shard file: its row count, the example range ``[first_example, end_example)`` it covers, its sha256."""
    file: str
    rows: int
    first_example: int
    end_example: int
    sha256: str


@dataclass
class Manifest:
    """What a store holds and how it was made. ``identity()`` decides if a resume is allowed."""

    model_id: str
    model_fingerprint: str
    sites: list[str]
    positions: dict[str, Any]
    dtype: str
    dataset_fingerprint: str
    n_examples: int
    examples_per_shard: int
    padding_side: str
    metadata_columns: list[str]
    complete: bool = False
    shards: list[ShardInfo] = field(default_factory=list)
    feature_shapes: dict[str, list[int]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    format: str = FORMAT

    def identity(self) -> dict[str, Any]:
        """The fields two captures must share for one to resume the other's store."""
        keys = (
            "model_fingerprint", "sites", "positions", "dtype", "dataset_fingerprint",
            "n_examples", "examples_per_shard", "padding_side", "metadata_columns",
        )
        return {k: getattr(self, k) for k in keys}

    @property
    def examples_done(self) -> int:
        """Examples covered by the listed shards (where a resumed capture starts)."""
        return self.shards[-1].end_example if self.shards else 0

    @property
    def n_rows(self) -> int:
        """Total activation rows over all listed shards."""
        return sum(s.rows for s in self.shards)

    def save(self, directory: Path) -> None:
        """Write ``manifest.json`` in ``directory`` atomically (temp file, fsync, rename), sealed."""
        atomic_write_json(directory / MANIFEST, seal(asdict(self)), indent=1)

    @classmethod
    def load(cls, directory: Path) -> Manifest:
        """Read ``manifest.json`` from ``directory``; raise if missing, not JSON or another format."""
        path = directory / MANIFEST
        if not path.is_file():
            raise StoreNotFoundError(
                f"{path} not found: not an activation store (create one with "
                "probekit.capture_to_store)"
            )
        try:
            data = read_sealed(path, what="store manifest",
                               fix=f"delete the store {directory} and capture it again")
        except CorruptFileError as err:
            raise CorruptManifestError(str(err)) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            data = data if isinstance(data, dict) else {}
            raise StoreMismatchError(f"manifest {path}: format {data.get('format')!r} is not {FORMAT!r}")
        data["shards"] = [ShardInfo(**s) for s in data["shards"]]
        return cls(**data)

