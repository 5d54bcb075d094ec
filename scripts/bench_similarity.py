"""Benchmark: a layer x layer linear-CKA matrix vs a loop of pairwise direct calls (same run).

Writes ``layers`` synthetic residual-stream-like layers ``(n, d)`` (each layer = previous +
a random update, float32) into an activation store shard by shard, then times

* ``layer_similarity(store_reps(store))``: streams the shards twice (means, then centred
  cross-products of all pairs, each computed once), float64 products;
* the same with float32 products (``dtype=torch.float32``);
* the baseline: a Python loop over the ``L(L+1)/2`` layer pairs calling a direct numpy
  implementation of Kornblith et al.'s formula (float64, centring and both self-terms
  recomputed per call, as a user calling ``cka(X, Y)`` pairwise would), layers loaded once.

Both sides single-threaded (torch and BLAS), so the ratio measures the algorithm; times are
process CPU seconds (``time.process_time``), which a busy shared machine distorts far less
than wall time (wall seconds are reported too).

    python scripts/bench_similarity.py --n 20000 --d 576 --layers 12 --out out/bench_similarity.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

try:
    import probekit  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probekit.similarity import SimilarityConfig, layer_similarity, store_reps  # noqa: E402
from probekit.store import ActivationStore, StoreWriter  # noqa: E402
from probekit.store.manifest import Manifest  # noqa: E402


def direct_linear_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Kornblith et al. 2019 feature-space linear CKA, written out in numpy."""
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    num = np.linalg.norm(Y.T @ X, "fro") ** 2
    return float(num / (np.linalg.norm(X.T @ X, "fro") * np.linalg.norm(Y.T @ Y, "fro")))


def _write_store(directory: Path, n: int, d: int, layers: int, shard: int, seed: int) -> ActivationStore:
    sites = [f"resid_post@{layer}" for layer in range(layers)]
    template = Manifest(
        model_id="synthetic", model_fingerprint="synthetic", sites=sites, positions={"kind": "last"},
        dtype="float32", dataset_fingerprint=f"bench-{n}-{d}-{layers}-{seed}", n_examples=n,
        examples_per_shard=shard, padding_side="right", metadata_columns=[],
    )
    writer = StoreWriter(directory, template)
    writer.open()
    g = torch.Generator().manual_seed(seed)
    mix = [torch.randn(d, d, generator=g) / d**0.5 for _ in range(layers)]
    for start in range(0, n, shard):
        rows = min(shard, n - start)
        h = torch.randn(rows, d, generator=g)
        out = {}
        for layer in range(layers):
            h = h + torch.tanh(h @ mix[layer]) + 0.5 * torch.randn(rows, d, generator=g)
            out[sites[layer]] = h.clone()
        idx = torch.arange(start, start + rows)
        writer.write_shard(out, idx, torch.zeros(rows, dtype=torch.int64), {}, start + rows)
    writer.finish()
    return ActivationStore(directory)


def bench_similarity(n: int = 20000, d: int = 576, layers: int = 12, shard: int = 4096,
                     seed: int = 0, threads: int = 1) -> dict:
    """Time the layer CKA matrix (streamed) against the pairwise direct loop; return the numbers."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    tmp = Path(tempfile.mkdtemp(prefix="pk-bench-sim-"))
    try:
        t0 = time.perf_counter()
        store = _write_store(tmp / "s", n, d, layers, shard, seed)
        t_write = time.perf_counter() - t0
        wall = {}

        def timed(name, fn):
            t0, w0 = time.process_time(), time.perf_counter()
            out = fn()
            wall[name] = time.perf_counter() - w0
            return out, time.process_time() - t0

        def baseline():
            acts = [store.load(s).numpy().astype(np.float64) for s in store.sites]
            base = np.eye(layers)
            for i in range(layers):
                for j in range(i, layers):
                    base[i, j] = base[j, i] = direct_linear_cka(acts[i], acts[j])
            return base

        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        with threadpool_limits(threads):
            ours, t_ours = timed("ours", lambda: layer_similarity(store_reps(store)).values)
            ours32, t_ours32 = timed(
                "ours32", lambda: layer_similarity(store_reps(store), config=SimilarityConfig(dtype=torch.float32)).values
            )
            rss_ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            base, t_base = timed("base", baseline)
            rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        pairs = layers * (layers + 1) // 2
        return {
            "n": n, "d": d, "layers": layers, "pairs": pairs, "threads": threads,
            "store_write_wall_s": t_write,
            "layer_similarity_f64_cpu_s": t_ours,
            "layer_similarity_f32_cpu_s": t_ours32,
            "pairwise_direct_loop_cpu_s": t_base,
            "layer_similarity_f64_wall_s": wall["ours"],
            "layer_similarity_f32_wall_s": wall["ours32"],
            "pairwise_direct_loop_wall_s": wall["base"],
            "ratio_loop_vs_ours_f64": t_base / t_ours,
            "ratio_loop_vs_ours_f32": t_base / t_ours32,
            "max_abs_diff_f64": float(np.abs(ours - base).max()),
            "max_abs_diff_f32": float(np.abs(ours32 - base).max()),
            "accumulator_mb": pairs * d * d * 8 / 2**20,
            "peak_rss_before_mb": rss0,
            "peak_rss_after_ours_mb": rss_ours,
            "peak_rss_after_loop_mb": rss_base,
            "activations_mb_f32": n * d * layers * 4 / 2**20,
            "cka_first_last": float(ours[0, -1]),
            "goal": "ratio > 1 (each pair's cross-product once; centring and self-terms once per layer)",
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_MEM_CHILD = """
import resource, sys, tempfile, time, torch
from pathlib import Path
from scripts.bench_similarity import _write_store
from probekit.similarity import layer_similarity, store_reps
torch.set_num_threads(1)
n = int(sys.argv[1])
with tempfile.TemporaryDirectory() as tmp:
    store = _write_store(Path(tmp) / "s", n, 576, 12, 4096, 0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    layer_similarity(store_reps(store))
    print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bench_similarity_memory(ns: tuple[int, ...] = (20000, 40000)) -> dict:
    """Peak RSS of a streamed 12 x 12 layer CKA (d=576) at each n, one process per n."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    out: dict = {"d": 576, "layers": 12, "shard_rows": 4096}
    for n in ns:
        res = subprocess.run([sys.executable, "-c", _MEM_CHILD, str(n)], capture_output=True,
                             text=True, check=True, cwd=root)
        before, peak = map(int, res.stdout.split()[-2:])
        out[f"peak_rss_mb_n{n}"] = peak / 1024
        out[f"peak_rss_before_mb_n{n}"] = before / 1024
        out[f"activations_mb_n{n}"] = n * 576 * 12 * 4 / 2**20
    out["goal"] = "peak RSS independent of n (streamed shard by shard)"
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: run the benchmark and write JSON to ``--out``."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--d", type=int, default=576)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--memory", action="store_true", help="peak RSS at n=20k and 40k instead")
    p.add_argument("--out", default="out/bench_similarity.json")
    a = p.parse_args(argv)
    if a.memory:
        res = bench_similarity_memory()
    else:
        res = bench_similarity(n=a.n, d=a.d, layers=a.layers, threads=a.threads)
    for k, v in res.items():
        print(f"  {k:28s} {v:.4g}" if isinstance(v, float) else f"  {k:28s} {v}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
