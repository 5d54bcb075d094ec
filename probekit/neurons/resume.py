"""Per-relation results of the deactivation experiments kept on disk: an interrupted run resumes.

The experiments of :func:`~probekit.neurons.experiments.relation_neuron_experiments` are one
block per relation (its own set, the random sets on its facts, greedy generation: up to an hour
each for SmolLM2 with 279 random sets on a 2-core box). With a directory, each block's rows are
written when it finishes, as ``<name>.safetensors`` (written atomically: :mod:`probekit.util.io`),
and a rerun reads the finished blocks instead of recomputing them.

A file is used only when it was written for the same experiment: its metadata holds the
experiment key (:func:`experiment_key`: the config, the relations, the test facts and every
relation's neuron set) and the sha256 of its tensors, both checked on read. A file that does not
load, has another key or a different digest is reported (a warning naming the file and why) and
the block is recomputed and rewritten; it is never used.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from torch import Tensor

from ..util.io import atomic_write_bytes, sha256_bytes

__all__ = ["RelationRowCache", "experiment_key"]


def experiment_key(config: object, relations: Sequence[str], facts: object,
                   sets: Mapping[str, object]) -> str:
    """Digest of what an experiment's rows depend on (besides the model, keyed by the caller).

    Args:
        config: the :class:`~probekit.neurons.experiments.DeactivationConfig` (its ``repr``).
        relations: the relations, in order.
        facts: the test :class:`~probekit.neurons.deactivation.FactSet` (its ``repr``).
        sets: each relation's :class:`~probekit.neurons.selection.NeuronSet` (its ranked units).
    """
    ranked = {r: [(s.key, int(u)) for s, u, _ in s_.ranked]  # type: ignore[attr-defined]
              for r, s_ in sets.items()}
    return sha256_bytes(repr((repr(config), tuple(relations), repr(facts),
                              sorted(ranked.items()))).encode())[:24]


def _digest(rows: Mapping[str, Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(rows):
        t = rows[name].contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


class RelationRowCache:
    """Named blocks of tensors under ``directory`` for experiment ``key`` (no-op when ``None``)."""

    def __init__(self, directory: str | Path | None, key: str) -> None:
        self.directory = None if directory is None else Path(directory)
        self.key = key

    def _path(self, name: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{name}.safetensors"

    def load(self, name: str) -> dict[str, Tensor] | None:
        """The block ``name`` if it was written for this key and is intact, else ``None``."""
        if self.directory is None or not self._path(name).is_file():
            return None
        from safetensors import safe_open

        path = self._path(name)
        try:
            with safe_open(str(path), framework="pt") as fh:
                meta = fh.metadata() or {}
                rows = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118
        except Exception as exc:  # a truncated or overwritten file
            why = f"does not load ({type(exc).__name__}: {exc})"
        else:
            if meta.get("key") != self.key:
                why = f"was written for another experiment (key {meta.get('key')!r}, not {self.key!r})"
            elif meta.get("sha256") != _digest(rows):
                why = "is corrupted (its tensors do not match the sha256 it was written with)"
            else:
                return rows
        warnings.warn(f"neurons: {path} {why}; recomputing that block", stacklevel=2)
        return None

    def save(self, name: str, rows: Mapping[str, Tensor]) -> None:
        """Write block ``name`` atomically (a no-op without a directory)."""
        if self.directory is None:
            return
        from safetensors.torch import save

        rows = {k: v.detach().cpu().contiguous() for k, v in rows.items()}
        self.directory.mkdir(parents=True, exist_ok=True)
        data = save(rows, metadata={"key": self.key, "sha256": _digest(rows)})
        atomic_write_bytes(self._path(name), data)
