"""Benchmarks: a population of short trainings, and a sharded capture, in-process vs local Ray.

Trains ``n_runs`` seeds of the ``modular_addition`` preset (``steps`` each, full batch, torch on
one thread) one after another in this process, then as Ray tasks on a local cluster of
``workers`` CPUs, and reports the ratio in the same run. The in-process side is timed after a
one-step warm-up training (imports done). ``ray_cold_s`` includes starting the
worker processes (each imports torch + transformer-lens once); ``ray_warm_s`` is a second
population on the same, already warm workers (the steady state of a long sweep). Histories are
checked to be identical to the in-process ones (up to wall-clock columns).

    python scripts/bench.py --sections ray,ray_capture
    python scripts/bench_ray.py --runs 8 --steps 100 --workers 2
    python scripts/bench_ray.py --capture --n-examples 2048 --workers 2
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


def _store_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def bench_ray_capture(n_examples: int = 2048, workers: int = 2, batch_size: int = 32,
                      examples_per_shard: int = 256, model: str | None = None) -> dict[str, Any]:
    """Sharded capture on a local Ray cluster (``workers`` CPUs) vs in-process ``capture_to_store``.

    All ``resid_post`` sites at the last token of ``n_examples`` random prompts (16-47 tokens)
    of a native 6-layer d_model 256 model saved as a checkpoint (or the named ``model``), one
    shard per task. The in-process side runs on one torch thread (what each Ray task gets) with
    the model already loaded; ``ray_cold_s`` includes the workers' imports and model loads,
    ``ray_warm_s`` is a second capture on the same workers (model cached per worker). The stores
    are checked byte-identical. Workers run at the driver's niceness (``RAY_worker_niceness=0``).
    """
    import ray

    from probekit.capture import LastToken, all_layers, capture_sharded, capture_to_store
    from probekit.executors.ray import RayExecutor
    from probekit.models import ModelConfig, build_model, save_checkpoint
    from probekit.models.cached import load_model_cached

    root = Path(tempfile.mkdtemp(prefix="bench_ray_capture_"))
    if model is None:
        cfg = ModelConfig(n_layers=6, d_model=256, n_heads=8, d_head=32, d_vocab=2048, n_ctx=64)
        torch.manual_seed(0)
        model = str(save_checkpoint(build_model(cfg), cfg, root / "ckpt"))
    loaded, _ = load_model_cached(model)
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(16, 48, (n_examples,), generator=g)
    vocab = int(loaded.cfg.d_vocab)
    tokens = [torch.randint(0, vocab, (int(n),), generator=g).tolist() for n in lengths]
    sites = all_layers(loaded, "resid_post")
    options = {"positions": LastToken(), "batch_size": batch_size,
               "examples_per_shard": examples_per_shard, "progress": False}
    load_before = os.getloadavg()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        capture_to_store(loaded, tokens[:batch_size], root / "warmup", sites, **options)
        t0 = time.perf_counter()
        capture_to_store(loaded, tokens, root / "inprocess", sites, **options)
        inprocess_s = time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)
    # Ray starts its workers 15 nice levels below the driver (RAY_worker_niceness): on a box
    # shared with other jobs they would then get a fraction of the CPU the in-process side got.
    # The workers run at the driver's priority here, so the ratio measures the capture itself.
    os.environ["RAY_worker_niceness"] = "0"  # noqa: SIM112 (Ray reads this exact name)
    t0 = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                 [str(ROOT), os.environ.get("PYTHONPATH", "")])}})
    init_s = time.perf_counter() - t0
    try:
        ex = RayExecutor(progress=False)
        t0 = time.perf_counter()
        capture_sharded(model, tokens, root / "ray_cold", sites, executor=ex, **options)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        capture_sharded(model, tokens, root / "ray_warm", sites, executor=ex, **options)
        warm_s = time.perf_counter() - t0
    finally:
        ray.shutdown()
    expected = _store_files(root / "inprocess")
    identical = _store_files(root / "ray_cold") == expected == _store_files(root / "ray_warm")
    return {
        "model": model if not model.startswith(str(root)) else "native 6L d256 vocab2048",
        "n_examples": n_examples, "sites": len(sites), "workers": workers,
        "shards": -(-n_examples // examples_per_shard),
        "inprocess_s": round(inprocess_s, 2),
        "ray_init_s": round(init_s, 2),
        "ray_cold_s": round(cold_s, 2),
        "ray_warm_s": round(warm_s, 2),
        "speedup_cold": round(inprocess_s / cold_s, 3),
        "speedup_warm": round(inprocess_s / warm_s, 3),
        "identical_stores": identical,
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
    ap.add_argument("--capture", action="store_true", help="the sharded-capture benchmark instead")
    ap.add_argument("--n-examples", type=int, default=2048)
    args = ap.parse_args(argv)
    if args.capture:
        print(json.dumps(bench_ray_capture(args.n_examples, args.workers), indent=1))
        return 0
    print(json.dumps(bench_ray(args.runs, args.steps, args.workers), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
