"""Tiny untrained testbed checkpoints and diagnosis files for the population / runner tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from probekit.models import build_model, save_checkpoint
from probekit.testbeds import get_task
from probekit.train.config import TrainConfig

TINY = dict(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32)


def write_checkpoint(directory: Path, *, task: str = "modular_addition", seed: int = 0,
                     step: int = 100, train: dict[str, Any] | None = None,
                     **task_options: Any) -> Path:
    """An untrained checkpoint whose config.json records a training run like the trainer's."""
    options = {"p": 11, "train_fraction": 0.5} if task == "modular_addition" else {}
    t = get_task(task, **{**options, **task_options, "seed": seed})
    cfg = t.model_config(**TINY, seed=seed)
    tcfg = TrainConfig(seed=seed, steps=max(step, 1), **(train or {}))
    extra = {"task": t.name, "task_config": dataclasses.asdict(t.config),
             "model_config": cfg.to_dict(), "train_config": tcfg.to_dict(),
             "vocab": t.vocab.to_dict(), "step": step}
    return save_checkpoint(build_model(cfg), cfg, directory, extra=extra)


def write_file(root: Path, population: str, markers: str, diagnosis: str,
               data: str = 'label = "answer"\nmax_per_split = 200') -> Path:
    """A diagnosis file in ``root`` (sections given as TOML text)."""
    path = root / "diag.toml"
    path.write_text(f'[suite]\nname = "t"\ndevice = "cpu"\n\n[population]\n{population}\n\n'
                    f"[data]\n{data}\n\n[stats]\nn_bootstrap = 1000\n\n{markers}\n\n"
                    f"[diagnosis]\n{diagnosis}\n")
    return path


WEIGHT_NORM = '[[marker]]\nname = "wn"\nmeasure = "weight_norm"'


def run_smoke_diagnosis(path: Path, root: Path) -> dict[str, Any]:
    """``probekit diagnose path --out root/out`` on one torch thread into a fresh cache under ``root``.

    Returns the exit code, the output directory and the rows of its ``markers.csv``.
    """
    import csv

    import pytest
    import torch

    from probekit.cli import main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny GEMMs on a shared 2-core box: one thread is fastest
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PROBEKIT_CACHE", str(root / "cache"))
            code = main(["diagnose", str(path), "--out", str(root / "out"), "--quiet"])
    finally:
        torch.set_num_threads(threads)
    with open(root / "out" / "markers.csv") as fh:
        rows = list(csv.DictReader(fh))
    return {"code": code, "out": root / "out", "rows": rows}
