"""Metrics history of a training run: one record per evaluation, written as JSON + CSV."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..util.integrity import read_sealed, seal
from ..util.io import atomic_write_text

HISTORY_JSON = "history.json"
RUN_JSON = "run.json"
HISTORY_CSV = "history.csv"


@dataclass
class History:
    """Evaluation records in step order.

    Each record has ``step``, ``elapsed_s`` (training wall time so far), ``lr``, ``batch_loss``
    (loss of the last optimiser step; None at step 0) and, per split, ``<split>/loss`` (mean cross-entropy over
    scored tokens), ``<split>/acc`` (fraction of examples with every target token right) and
    ``<split>/token_acc`` (fraction of scored tokens right). Splits named ``<prefix>_<int>``
    (``ood_len_5`` ...) also get the unweighted mean over the group as ``<prefix>/<metric>``.
    """

    records: list[dict[str, Any]] = field(default_factory=list)

    def append(self, record: dict[str, Any]) -> None:
        """Add one evaluation record; its ``step`` must be after the last one."""
        if self.records and record["step"] <= self.records[-1]["step"]:
            raise ValueError(
                f"history record for step {record['step']} is not after step {self.records[-1]['step']}"
            )
        self.records.append(record)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def keys(self) -> list[str]:
        """Every column name seen in any record, in first-seen order."""
        seen: dict[str, None] = {}
        for r in self.records:
            seen.update(dict.fromkeys(r))
        return list(seen)

    def column(self, key: str) -> list[Any]:
        """Values of ``key`` per record (None where missing); KeyError lists valid keys."""
        if key not in self.keys:
            raise KeyError(f"no history column {key!r}; columns are {self.keys}")
        return [r.get(key) for r in self.records]

    @property
    def steps(self) -> list[int]:
        """The ``step`` of every record."""
        return [r["step"] for r in self.records]

    def first_step(self, key: str, threshold: float) -> dict[str, Any] | None:
        """First record with ``record[key] >= threshold`` (None if never)."""
        self.column(key)
        for r in self.records:
            if r.get(key) is not None and r[key] >= threshold:
                return r
        return None

    def truncated(self, step: int) -> History:
        """Records up to and including ``step`` (used when resuming from a checkpoint)."""
        return History([r for r in self.records if r["step"] <= step])

    def to_json(self) -> str:
        """``{"records": [...]}`` as indented JSON."""
        return json.dumps(seal({"records": self.records}), indent=1)

    def to_csv(self) -> str:
        """One CSV row per record, columns :attr:`keys` (missing values empty)."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self.keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.records)
        return buf.getvalue()

    def write(self, directory: str | Path) -> None:
        """Atomically (re)write ``history.json`` and ``history.csv`` in ``directory``."""
        directory = Path(directory)
        atomic_write_text(directory / HISTORY_JSON, self.to_json())
        atomic_write_text(directory / HISTORY_CSV, self.to_csv())

    @classmethod
    def read(cls, directory: str | Path) -> History:
        """Load ``history.json`` from a run directory."""
        path = Path(directory) / HISTORY_JSON
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found; it is written by probekit.train.train")
        return cls(read_history(path.parent)["records"])


def read_history(run_dir: str | Path) -> dict[str, Any]:
    """The parsed ``history.json`` of ``run_dir``, its checksum verified.

    Raises:
        CorruptFileError: the file is truncated, not JSON or fails its checksum.
    """
    path = Path(run_dir) / HISTORY_JSON
    return read_sealed(path, what="training history",
                       fix=f"delete the run directory {Path(run_dir)} and train it again")


def write_run_meta(run_dir: str | Path, meta: dict[str, Any]) -> Path:
    """Write ``run_dir/run.json`` (task name and configs of a run) atomically, with its sha256."""
    path = Path(run_dir) / RUN_JSON
    atomic_write_text(path, json.dumps(seal(meta), indent=2))
    return path


def read_run_meta(path: str | Path) -> dict[str, Any]:
    """The parsed ``run.json`` (task name and configs of a training run), its checksum verified.

    Args:
        path: the ``run.json`` file (or its run directory).

    Raises:
        CorruptFileError: the file is truncated, not JSON or fails its checksum.
    """
    path = Path(path)
    if path.is_dir():
        path = path / RUN_JSON
    return read_sealed(path, what="training run metadata",
                       fix=f"delete the run directory {path.parent} and train it again")
