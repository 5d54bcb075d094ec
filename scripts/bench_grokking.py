"""Benchmark: steps and wall time until modular addition groks on this machine's CPU.

Trains the ``modular_addition`` preset (Nanda et al. 2023 model and optimiser, CPU-sized prime) and
stops at the first evaluation where test accuracy exceeds ``threshold``. Writes ``bench.json`` to
``--out``.

    python scripts/bench_grokking.py --seeds 0 1 --out runs/bench_grokking
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

try:
    import probekit  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probekit.executor import get_executor  # noqa: E402
from probekit.train.build import build_run  # noqa: E402
from probekit.train.trainer import train  # noqa: E402


@dataclass(frozen=True, kw_only=True)
class SeedRun:
    """One seed of the grokking benchmark (a picklable executor task)."""

    preset: str
    seed: int
    threshold: float
    out_dir: str
    sets: tuple[str, ...] = ()
    progress: bool = False


def run_seed(spec: SeedRun) -> dict[str, Any]:
    """Train one seed until test accuracy exceeds the threshold; steps and seconds."""
    task, mcfg, tcfg = build_run(
        spec.preset, seed=spec.seed,
        sets=[*spec.sets, "train.stop_metric=test_id/acc", f"train.stop_threshold={spec.threshold}"],
    )
    t0, c0 = time.perf_counter(), time.process_time()
    hist = train(task, mcfg, tcfg, spec.out_dir, progress=spec.progress, resume=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    mem = hist.first_step("train/acc", 1.0)
    grok = hist.first_step("test_id/acc", spec.threshold)
    return {
        "seed": spec.seed,
        "grokked": grok is not None,
        "step_train_acc_1": mem["step"] if mem else None,
        "step_test_acc": grok["step"] if grok else None,
        "test_acc": hist.records[-1]["test_id/acc"],
        "train_elapsed_s": grok["elapsed_s"] if grok else None,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
    }


def bench_grokking(
    *,
    preset: str = "modular_addition",
    seeds: tuple[int, ...] = (0,),
    threshold: float = 0.95,
    out_dir: str | Path | None = None,
    sets: tuple[str, ...] = (),
    progress: bool = False,
    executor: str | None = None,
) -> dict[str, Any]:
    """Per seed: first step with train acc = 1, first step with test acc > ``threshold``, seconds.

    ``wall_s`` is the wall time of the whole ``train`` call (model build, evaluations every
    ``eval_every`` steps and checkpoints included); ``train_elapsed_s`` is the trainer's own clock at
    the grokking evaluation; ``cpu_s`` is the process CPU time (all threads), which is less
    sensitive than wall time to other jobs sharing the machine. Seeds are independent tasks
    of ``executor`` (:func:`probekit.executor.get_executor`; default in-process).
    """
    root = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="bench_grok_"))
    tasks = [
        SeedRun(preset=preset, seed=seed, threshold=threshold, out_dir=str(root / f"seed{seed}"),
                sets=sets, progress=progress)
        for seed in seeds
    ]
    runs = get_executor(executor, **({} if executor else {"progress": progress})).map(
        run_seed, tasks, desc="seeds"
    )
    task, _, tcfg = build_run(
        preset, seed=seeds[-1],
        sets=[*sets, "train.stop_metric=test_id/acc", f"train.stop_threshold={threshold}"],
    )
    return {
        "preset": preset,
        "task_config": task.config.__dict__,
        "train_steps_max": tcfg.steps,
        "threshold": threshold,
        "runs": runs,
        "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "platform": platform.platform(), "torch": torch.__version__},
        "out_dir": str(root),
    }


def main(argv: list[str] | None = None) -> int:
    """Train the grokking presets per seed and report wall time and the grokking step."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="modular_addition")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--executor", default=None, help="executor for the seeds (default in-process)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads; use 1 when other jobs share the cores "
                    "(oversubscribed OpenMP threads spin and slow every step down)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    result = bench_grokking(preset=args.preset, seeds=tuple(args.seeds), threshold=args.threshold,
                            out_dir=args.out, sets=tuple(args.sets), progress=args.progress,
                            executor=args.executor)
    text = json.dumps(result, indent=1)
    Path(result["out_dir"]).mkdir(parents=True, exist_ok=True)
    (Path(result["out_dir"]) / "bench.json").write_text(text)
    print(text)
    return 0 if all(r["grokked"] for r in result["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
