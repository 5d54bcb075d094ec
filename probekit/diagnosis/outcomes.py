"""Outcome columns of a checkpoint: accuracy on every split by the testbed's own evaluation.

The evaluation is the trainer's (:func:`probekit.train.trainer.evaluate`: exact match per example,
or the task's ``primary_metric``, e.g. SCAN's token accuracy), on the splits of

* the ``[data]`` task when the file names one: the same examples for every checkpoint;
* otherwise each checkpoint's own training task (its ``config.json``), so that a design knob of
  the task (modular addition's train fraction) keeps its own held-out pairs.

Columns (the naming scheme of the marker table):

==================  ==========================================================================
``train_accuracy``  ``train`` split (``train_loss``: mean cross-entropy per scored token)
``id_accuracy``     ``test_id``, the in-distribution held-out split (``id_loss`` likewise)
``ood:NAME``        every other split ``NAME`` (``ood:ood_len_7``); splits named ``PREFIX_N``
                    also give their unweighted mean ``ood:PREFIX`` (SCAN's ``ood:ood_len``)
``COLUMN__n``       the number of evaluation examples behind each accuracy column (of an
                    ``ood:PREFIX`` mean: the sum over its splits); :func:`examples_column`
==================  ==========================================================================

``max_eval_examples`` evaluates a fixed seeded subset of each split (the same for every
checkpoint with the same task). The train columns are measured by this same evaluation, not read
from the run's history: every row (final or series checkpoint) is then measured the same way,
whatever the run's evaluation schedule was.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..train.history import read_history, read_run_meta

__all__ = ["checkpoint_task", "crossing_column", "crossing_step", "examples_column", "next_eval_step",
           "outcome_columns", "outcome_names", "split_column"]

TRAIN, ID = "train", "test_id"


def split_column(split: str, metric: str = "accuracy") -> str:
    """The table column of a split's metric: ``train_accuracy``, ``id_accuracy``, ``ood:NAME``."""
    if split == TRAIN:
        return f"train_{metric}"
    if split == ID:
        return f"id_{metric}"
    return f"ood:{split}" if metric == "accuracy" else f"ood_{metric}:{split}"


def examples_column(column: str) -> str:
    """The column holding the number of evaluation examples behind ``column``: ``COLUMN__n``."""
    return f"{column}__n"


def checkpoint_task(data: Any, meta: dict[str, Any]) -> Any:
    """The task whose splits are evaluated: ``[data] task`` if given, else the checkpoint's own."""
    from ..errors import ConfigError
    from ..testbeds import get_task, task_from_dict

    if data.task is not None:
        return get_task(data.task, **data.task_options)
    extra = meta.get("extra") or {}
    if "task" not in extra:
        raise ConfigError("checkpoint records no training task (config.json extra.task); name the "
                          "evaluation task in [data] task = \"...\"")
    return task_from_dict(extra["task"], {**extra["task_config"], **data.task_options})


def _subset(ds: Any, name: str, cap: int | None, seed: int) -> Any:
    if cap is None or len(ds) <= cap:
        return ds
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return ds.subset(np.sort(rng.choice(len(ds), size=cap, replace=False)).tolist())


def outcome_columns(
    model: Any, task: Any, *, max_examples: int | None = None, seed: int = 0,
) -> dict[str, float | int]:
    """Accuracy (and loss) of ``model`` on every split of ``task`` (see the module table)."""
    from ..train.trainer import evaluate

    metric = getattr(task, "primary_metric", "acc")
    out: dict[str, float] = {}
    groups: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    for name, ds in task.splits().items():
        if len(ds) == 0:
            continue
        sub = _subset(ds, name, max_examples, seed)
        res = evaluate(model, sub.to_tensors(task.vocab.pad_id))
        out[split_column(name)] = float(res[metric])
        out[examples_column(split_column(name))] = len(sub)
        if name in (TRAIN, ID):
            out[split_column(name, "loss")] = float(res["loss"])
        m = re.match(r"^(.*)_(\d+)$", name)
        if m and name not in (TRAIN, ID):
            groups.setdefault(m.group(1), []).append(float(res[metric]))
            sizes[m.group(1)] = sizes.get(m.group(1), 0) + len(sub)
    for prefix, values in groups.items():
        if len(values) > 1 and f"ood:{prefix}" not in out:
            out[f"ood:{prefix}"] = float(np.mean(values))
            out[examples_column(f"ood:{prefix}")] = sizes[prefix]
    return out


def outcome_names(splits: list[str]) -> set[str]:
    """The columns :func:`outcome_columns` gives for a task with these split names (no model run)."""
    out: set[str] = set()
    groups: dict[str, int] = {}
    for name in splits:
        out.add(split_column(name))
        out.add(examples_column(split_column(name)))
        if name in (TRAIN, ID):
            out.add(split_column(name, "loss"))
            continue
        m = re.match(r"^(.*)_(\d+)$", name)
        if m:
            groups[m.group(1)] = groups.get(m.group(1), 0) + 1
    out |= {c for p, k in groups.items() if k > 1 for c in (f"ood:{p}", examples_column(f"ood:{p}"))}
    return out


def crossing_column(threshold: float) -> str:
    """Name of the crossing-step column: ``id_step_0.9``."""
    return f"id_step_{threshold:g}"


def crossing_step(run_dir: str | Path, threshold: float) -> int | None:
    """First step whose history record has held-out (``test_id``) accuracy >= ``threshold``.

    The accuracy is the task's primary metric (``acc``; SCAN: ``token_acc``) as the trainer logged
    it (``history.json`` of the run). ``None`` when the run never reaches it or has no history.
    """
    from ..testbeds.registry import TASKS

    path = Path(run_dir) / "history.json"
    meta = Path(run_dir) / "run.json"
    if not path.is_file():
        return None
    task = read_run_meta(meta).get("task") if meta.is_file() else None
    metric = getattr(TASKS[task][0], "primary_metric", "acc") if task in TASKS else "acc"
    for rec in read_history(run_dir).get("records", []):
        value = rec.get(f"{ID}/{metric}")
        if value is not None and value >= threshold:
            return int(rec["step"])
    return None


def next_eval_step(run_dir: str | Path) -> int | None:
    """One evaluation past the run's last held-out evaluation: ``last + (last - previous)``.

    From the steps of the ``history.json`` records with a held-out (``test_id``) metric; the
    censoring value ``"next_eval"`` of a crossing-step outcome. ``None`` with fewer than two.
    """
    path = Path(run_dir) / "history.json"
    if not path.is_file():
        return None
    steps = sorted({int(rec["step"]) for rec in read_history(run_dir).get("records", [])
                    if any(k.startswith(f"{ID}/") for k in rec)})
    return 2 * steps[-1] - steps[-2] if len(steps) >= 2 else None
