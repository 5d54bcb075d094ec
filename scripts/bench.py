"""Benchmarks, as ratios against a baseline measured in the same run.

capture: all-layer residual capture at the last token into an activation store vs a plain
forward pass over the same batches (goal <= 1.15x) and vs ``run_with_cache`` + indexing.
Other sections (probe sweep vs sklearn loop, grokking time) run when their modules exist.

    python scripts/bench.py --out out/bench.json [--model smollm2-135m] [--sections capture,probes]
        [--device cuda] [--sklearn-threads 4]   # probe sweep on the GPU; sklearn on 4 CPU threads
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from probekit.capture import LastToken, all_layers, capture_to_store  # noqa: E402
from probekit.capture.batching import iter_batches  # noqa: E402
from probekit.models import ModelConfig, build_model, load_model  # noqa: E402


def _best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_capture(model_name: str | None, n_examples: int, batch_size: int, repeats: int) -> dict:
    if model_name:
        model = load_model(model_name)
    else:
        model = build_model(ModelConfig(n_layers=6, d_model=256, n_heads=8, d_head=32, d_vocab=2048, n_ctx=64))
    vocab = model.cfg.d_vocab
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(16, 48, (n_examples,), generator=g)
    tokens = [torch.randint(0, vocab, (int(n),), generator=g).tolist() for n in lengths]
    sites = all_layers(model, "resid_post")
    names = {s.name for s in sites}

    def plain() -> None:
        with torch.inference_mode():
            for b in iter_batches(tokens, batch_size=batch_size, pad_id=0):
                model(b.input_ids, attention_mask=b.attention_mask)

    def with_cache() -> None:
        with torch.inference_mode():
            for b in iter_batches(tokens, batch_size=batch_size, pad_id=0):
                _, cache = model.run_with_cache(
                    b.input_ids, attention_mask=b.attention_mask, names_filter=lambda n: n in names
                )
                rows = torch.arange(b.input_ids.shape[0])
                _ = [cache[n][rows, b.lengths - 1].clone() for n in names]

    tmp = Path(tempfile.mkdtemp(prefix="pk-bench-"))

    def store() -> None:
        shutil.rmtree(tmp / "s", ignore_errors=True)
        capture_to_store(model, tokens, tmp / "s", sites, positions=LastToken(),
                         batch_size=batch_size, progress=False)

    plain()  # warm-up
    t_plain = _best_of(plain, repeats)
    t_cache = _best_of(with_cache, repeats)
    t_store = _best_of(store, repeats)
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "model": model_name or "native 6L d256 vocab2048",
        "n_examples": n_examples,
        "batch_size": batch_size,
        "sites": len(sites),
        "plain_forward_s": t_plain,
        "run_with_cache_s": t_cache,
        "capture_to_store_s": t_store,
        "ratio_store_vs_forward": t_store / t_plain,
        "ratio_run_with_cache_vs_forward": t_cache / t_plain,
        "goal": "ratio_store_vs_forward <= 1.15",
    }


_MEM_CHILD = """
import resource, sys, tempfile, torch
from probekit.capture import all_layers, capture_to_store
from probekit.models import ModelConfig, build_model
n = int(sys.argv[1])
model = build_model(ModelConfig(n_layers=4, d_model=512, n_heads=8, d_head=64, d_vocab=1000, n_ctx=32))
g = torch.Generator().manual_seed(0)
tokens = [torch.randint(0, 1000, (24,), generator=g).tolist() for _ in range(n)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with tempfile.TemporaryDirectory() as tmp:
    capture_to_store(model, tokens, tmp + "/s", all_layers(model), batch_size=64,
                     examples_per_shard=512, progress=False)
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bench_store_memory(n_small: int = 2048, factor: int = 8) -> dict:
    """Peak RSS of a streaming capture at n and factor*n examples (separate processes)."""
    import subprocess

    out = {}
    for n in (n_small, factor * n_small):
        res = subprocess.run([sys.executable, "-c", _MEM_CHILD, str(n)], capture_output=True,
                             text=True, check=True, cwd=ROOT)
        before, peak = map(int, res.stdout.split())
        out[n] = (before, peak)
    (b1, p1), (b2, p2) = out[n_small], out[factor * n_small]
    rows_bytes = factor * n_small * 4 * 512 * 4
    return {
        "examples_small": n_small,
        "examples_large": factor * n_small,
        "store_bytes_large": rows_bytes,
        "peak_rss_small_mb": p1 / 1024,
        "peak_rss_large_mb": p2 / 1024,
        "capture_growth_small_mb": (p1 - b1) / 1024,
        "capture_growth_large_mb": (p2 - b2) / 1024,
        "ratio_peak_large_vs_small": p2 / p1,
        "goal": "ratio ~1.0 (peak memory independent of dataset size)",
    }


OPTIONAL = {
    "probes": ("scripts.bench_probes", "bench_probe_sweep"),
    "grokking": ("scripts.bench_grokking", "bench_grokking"),
    "homomorphism": ("scripts.bench_homomorphism", "bench_homomorphism"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out/bench.json")
    parser.add_argument("--model", default=None, help="named model for the capture bench (default: native)")
    parser.add_argument("--sections", default="capture,store_memory,probes",
                        help="comma list: capture,store_memory,probes,grokking,homomorphism")
    parser.add_argument("--n-examples", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="device of the batched probe sweep (cpu, cuda)")
    parser.add_argument("--sklearn-threads", type=int, default=None,
                        help="BLAS threads of the sklearn baseline (default all; 4 was fastest on 16 cores)")
    parser.add_argument("--he-checkpoint", default=None,
                        help="SCAN checkpoint for the homomorphism section (default: untrained)")
    args = parser.parse_args(argv)
    results: dict = {}
    for section in args.sections.split(","):
        if section == "capture":
            results["capture"] = bench_capture(args.model, args.n_examples, args.batch_size, args.repeats)
        elif section == "store_memory":
            results["store_memory"] = bench_store_memory()
        elif section in OPTIONAL:
            module, fn = OPTIONAL[section]
            kwargs = {"device": args.device, "sklearn_threads": args.sklearn_threads} if section == "probes" else {}
            if section == "homomorphism":
                kwargs = {"checkpoint": args.he_checkpoint}
            results[section] = getattr(importlib.import_module(module), fn)(**kwargs)
        else:
            parser.error(f"unknown section {section!r}; choose from capture,store_memory,{','.join(OPTIONAL)}")
        print(f"\n[{section}]")
        for key, value in results[section].items():
            if not isinstance(value, (list, dict)):
                print(f"  {key:34s} {value:.4g}" if isinstance(value, float) else f"  {key:34s} {value}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
