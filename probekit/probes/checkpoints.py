"""Probe sweeps over checkpoints x sites, one executor task per checkpoint.

:func:`sweep_checkpoints` maps :func:`probe_checkpoint` over a series of checkpoints (e.g. the
training steps of a grokking run) with any executor (in-process or a cluster backend): each task loads its
checkpoint, captures the sites into memory (:func:`~probekit.capture.collect_activations`) and
runs the batched layer sweep (:func:`~probekit.probes.sweep_layers`, every site in one pass)
with the same splits and seeds; the result holds one :class:`SweepResult` per checkpoint. On
CPU, with torch on one thread (what a Ray task gets), the numbers do not depend on the executor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..capture import LastToken, collect_activations
from ..capture.positions import PositionRule
from ..errors import ConfigError
from ..executor import Executor, check_worker_paths, get_executor, map_resumable
from ..models.cached import model_paths
from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ..sites import Site, as_sites
from ._validation import IndexLike
from .sweep import SweepConfig, SweepResult, sweep_layers

__all__ = ["CheckpointProbe", "CheckpointSweepResult", "probe_checkpoint", "sweep_checkpoints"]


@dataclass(frozen=True, kw_only=True)
class CheckpointProbe:
    """One task of a checkpoint sweep: capture ``sites`` of ``checkpoint`` and sweep probes.

    Attributes:
        checkpoint: model name or path (``load_model``), visible to the worker.
        device: torch device of the model.
        tokens: the examples.
        labels: one label (or regression target) per example.
        sites: sites to capture and probe.
        capture: :class:`~probekit.capture.CaptureConfig` options (positions, batch_size ...).
        sweep: :func:`~probekit.probes.sweep_layers` keyword arguments: ``train_idx``,
            ``test_idx``, ``ood_idx`` and ``config`` (a :class:`~probekit.probes.SweepConfig`).
    """

    checkpoint: str
    device: str
    tokens: tuple[tuple[int, ...], ...]
    labels: tuple[Any, ...]
    sites: tuple[Site, ...]
    capture: dict[str, Any] = field(default_factory=dict)
    sweep: dict[str, Any] = field(default_factory=dict)


def probe_checkpoint(task: CheckpointProbe) -> SweepResult:
    """Load one checkpoint, capture its sites into memory and sweep a probe over them."""
    from ..models.loading import load_model

    model = load_model(task.checkpoint, device=task.device)
    acts = collect_activations(model, [list(t) for t in task.tokens], task.sites, progress=False,
                               **task.capture)
    return sweep_layers({s: acts[s] for s in task.sites}, np.asarray(task.labels), **task.sweep)


@dataclass(frozen=True, repr=False)
class CheckpointSweepResult(NotebookMixin):
    """One :class:`SweepResult` per checkpoint (rows = sites, in the same order for all)."""

    checkpoints: tuple[str, ...]
    sweeps: tuple[SweepResult, ...]

    def to_records(self) -> list[dict[str, Any]]:
        """One row per checkpoint and site: the sweep's row (:meth:`SweepResult.to_records`)."""
        return [{"checkpoint": c, **r} for c, s in zip(self.checkpoints, self.sweeps)
                for r in s.to_records()]

    def _blocks(self) -> tuple[Block, ...]:
        from ..report.blocks import Column, LinePlot, Series, Table
        from .blocks import row_label

        names = tuple(Path(c).name or c for c in self.checkpoints)
        first = self.sweeps[0]
        test = self.metric("test")
        plot = LinePlot(
            title=f"{first.probe} probe over checkpoints (test {first.metric})", x_labels=names,
            xlabel="checkpoint", ylabel=f"test {first.metric}",
            series=tuple(Series(name=row_label(s, first.layers[j]),
                                values=tuple(float(v) for v in test[:, j]))
                         for j, s in enumerate(first.sites)),
        )
        table = Table(
            columns=(Column(key="checkpoint", header="checkpoint", fmt="", align="left"),
                     Column(key="site", header="site", fmt="", align="left"),
                     Column(key="val", header=f"CV validation {first.metric}"),
                     Column(key="test", header=f"test {first.metric}"),
                     Column(key="test_ci", header="test CI", fmt="ci")),
            rows=tuple({"checkpoint": Path(r["checkpoint"]).name or r["checkpoint"],
                        "site": row_label(r["site"], r["layer"]), "val": r["val"],
                        "test": r["test"],
                        "test_ci": [r["test_ci_low"], r["test_ci_high"]]}
                       for r in self.to_records()),
        )
        return (plot, table)

    def _summary(self) -> str:
        best = [s.best_test for s in self.sweeps]
        return (f"{len(self.checkpoints)} checkpoints x {len(self.sweeps[0].sites)} rows; best "
                f"test {self.sweeps[0].metric} {best[0]:.3f} -> {best[-1]:.3f}")

    def metric(self, split: str = "test") -> np.ndarray:
        """``(checkpoint, site)`` matrix of the metric on ``split`` (``train``, ``val``, ``test``)."""
        if split not in ("train", "val", "test"):
            raise ConfigError(f"split {split!r}: use 'train', 'val' or 'test'")
        return np.stack([getattr(s, split) for s in self.sweeps])

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable: each checkpoint's sweep summary (:meth:`SweepResult.to_dict`)."""
        return {"checkpoints": [{"checkpoint": c, **s.to_dict()}
                                for c, s in zip(self.checkpoints, self.sweeps)]}

    def table(self, split: str = "test") -> str:
        """Markdown table: one line per checkpoint, one column per site (``split`` metric)."""
        sites = self.sweeps[0].sites
        lines = ["| checkpoint | " + " | ".join(sites) + " |", "|" + "---|" * (len(sites) + 1)]
        for c, row in zip(self.checkpoints, self.metric(split)):
            lines.append(f"| {Path(c).name or c} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
        return "\n".join(lines)


def sweep_checkpoints(
    checkpoints: Sequence[str | Path],
    tokens: Sequence[Sequence[int]],
    labels: Sequence[Any] | np.ndarray,
    sites: Sequence[Site | str],
    *,
    executor: str | Executor | None = None,
    device: str = "cpu",
    positions: PositionRule | None = None,
    batch_size: int = 32,
    padding_side: str = "right",
    resume_dir: str | Path | None = None,
    train_idx: IndexLike,
    test_idx: IndexLike,
    ood_idx: Mapping[str, IndexLike] | None = None,
    config: SweepConfig | None = None,
) -> CheckpointSweepResult:
    """Probe ``sites`` of every checkpoint, one executor task per checkpoint.

    Args:
        checkpoints: model names or paths (every worker must see them).
        tokens: the examples (the same for every checkpoint).
        labels: one label per example.
        sites: sites captured and probed in each checkpoint.
        executor: a name (:func:`~probekit.executor.available_executors`) or an executor; ``None``: in-process.
        device: torch device of each model.
        positions: position rule of the capture (default: last token).
        batch_size: capture batch size.
        padding_side: capture padding side.
        resume_dir: records of finished checkpoints (:func:`~probekit.executor.map_resumable`):
            the same call after a killed driver runs only the unfinished checkpoints.
        train_idx: example indices of the training split (:func:`~probekit.probes.sweep_layers`).
        test_idx: example indices of the test split.
        ood_idx: named OOD splits (optional).
        config: the sweep's options (:class:`~probekit.probes.SweepConfig`: ``probe``, ``Cs``,
            ``cv``, ``n_bootstrap`` ...); default ``SweepConfig()``.
    """
    if not checkpoints:
        raise ConfigError("sweep_checkpoints: no checkpoints given")
    if len(labels) != len(tokens):
        raise ConfigError(f"{len(labels)} labels for {len(tokens)} examples; give one per example")
    capture = {"positions": positions or LastToken(), "batch_size": batch_size,
               "padding_side": padding_side}
    sweep = {"train_idx": _plain(train_idx), "test_idx": _plain(test_idx),
             "ood_idx": _plain(ood_idx or {}), "config": config or SweepConfig()}
    items = tuple(tuple(int(t) for t in seq) for seq in tokens)
    tasks = [CheckpointProbe(checkpoint=str(c), device=device, tokens=items,
                             labels=tuple(np.asarray(labels).tolist()), sites=as_sites(sites),
                             capture=capture, sweep=sweep) for c in checkpoints]
    runner = get_executor(executor)
    check_worker_paths(runner, read=model_paths([t.checkpoint for t in tasks]))  # before any task
    results = map_resumable(runner, probe_checkpoint, tasks, resume_dir, desc="checkpoints")
    return CheckpointSweepResult(checkpoints=tuple(t.checkpoint for t in tasks),
                                 sweeps=tuple(results))


def _plain(value: Any) -> Any:
    """Index arrays and tensors as numpy arrays (picklable without torch storage sharing)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "numpy") and hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return value
