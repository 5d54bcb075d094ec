"""Benchmark: a population of short trainings in-process vs on a local Ray cluster.

Trains ``n_runs`` seeds of the ``modular_addition`` preset (``steps`` each, full batch, torch on
one thread) one after another in this process, then as Ray tasks on a local cluster of
``workers`` CPUs, and reports the ratio in the same run. The in-process side is timed after a
one-step warm-up training (imports done). ``ray_cold_s`` includes starting the
worker processes (each imports torch + transformer-lens once); ``ray_warm_s`` is a second
population on the same, already warm workers (the steady state of a long sweep). Histories are
checked to be identical to the in-process ones (up to wall-clock columns).

    python scripts/bench.py --sections ray
    python scripts/bench_ray.py --runs 8 --steps 100 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from probekit.executor import InProcessExecutor  # noqa: E402
from probekit.train.population import TrainRun, train_population  # noqa: E402


def _runs(root: Path, tag: str, n_runs: int, steps: int) -> list[TrainRun]:
    sets = ("train.eval_every=50", "train.n_checkpoints=1")
    return [TrainRun(preset="modular_addition", out_dir=str(root / tag / f"seed{s}"), seed=s,
                     steps=steps, sets=sets) for s in range(n_runs)]


def _metrics(histories: list[Any]) -> list[list[dict[str, Any]]]:
    return [[{k: v for k, v in r.items() if k != "elapsed_s"} for r in h.records] for h in histories]


def bench_ray(n_runs: int = 8, steps: int = 100, workers: int = 2) -> dict[str, Any]:
    """Population of ``n_runs`` trainings: in-process seconds vs Ray (``workers`` CPUs), ratios."""
    import ray

    from probekit.executors.ray import RayExecutor

    root = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    load_before = os.getloadavg()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # what each Ray task gets (OMP_NUM_THREADS=1 per reserved CPU)
    try:  # warm-up: imports (torch, transformer-lens) done before the clock, as on warm workers
        train_population(_runs(root, "warmup", 1, 1), InProcessExecutor(progress=False))
        t0 = time.perf_counter()
        local = train_population(_runs(root, "local", n_runs, steps), InProcessExecutor(progress=False))
        inprocess_s = time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                 [str(ROOT), os.environ.get("PYTHONPATH", "")])}})
    init_s = time.perf_counter() - t0
    try:
        ex = RayExecutor(progress=False)
        t0 = time.perf_counter()
        cold = train_population(_runs(root, "ray_cold", n_runs, steps), ex)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = train_population(_runs(root, "ray_warm", n_runs, steps), ex)
        warm_s = time.perf_counter() - t0
    finally:
        ray.shutdown()
    return {
        "n_runs": n_runs, "steps": steps, "workers": workers,
        "inprocess_s": round(inprocess_s, 2),
        "ray_init_s": round(init_s, 2),
        "ray_cold_s": round(cold_s, 2),
        "ray_warm_s": round(warm_s, 2),
        "speedup_cold": round(inprocess_s / cold_s, 3),
        "speedup_warm": round(inprocess_s / warm_s, 3),
        "identical_histories": _metrics(local) == _metrics(cold) == _metrics(warm),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "ray": ray.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the population benchmark and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    print(json.dumps(bench_ray(args.runs, args.steps, args.workers), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
