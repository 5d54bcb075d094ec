"""Benchmarks, as ratios against a baseline measured in the same run.

capture: all-layer residual capture at the last token into an activation store vs a plain
forward pass over the same batches (goal <= 1.15x) and vs ``run_with_cache`` + indexing.
store_read: loading every site of a store with the sha256-on-first-read check vs without.
cli: ``probekit --help`` / ``probekit models`` wall time and peak RSS vs ``python -c pass``.
Other sections (probe sweep vs sklearn loop, grokking time, similarity: 12 x 12 layer CKA
matrix vs a pairwise loop, geometry: batched MFTMA anchors vs a per-sample QP loop, ray: a
population of 8 short trainings in-process vs a 2-CPU local Ray cluster, ray_capture: sharded
capture on Ray vs in-process ``capture_to_store``, load: every shipped probe suite quiet and
beside a busy core, ``scripts/bench_load.py``; load_tuner: SmolLM2 deactivation forwards on
torch's threads, one thread and ``ThreadTuner``, quiet and busy; load_train: 450 training steps
of the ``scan`` model, the same three ways; population_throughput: models per CPU-hour of each
preset the shipped populations train, and a step's achieved FLOP/s vs a float32 matmul,
``scripts/bench_population.py``; finetune_step: CPU time of the preset's all-block LoRA fine-tune
step vs the cached top-block path, ``scripts/bench_finetune.py``; shape_checks: the per-call cost
of ``shapes.shape_checked``, ``scripts/bench_shapes.py``) run when their modules exist.

    python scripts/bench.py --out out/bench.json [--model smollm2-135m] [--sections capture,probes]
        [--device cuda] [--sklearn-threads 4]   # probe sweep on the GPU; sklearn on 4 CPU threads
    python scripts/bench.py --sections similarity --sim-n 20000   # n=20k, d=576, 12 layers
    python scripts/bench.py --sections load [--load-suites modadd_geometry]   # quiet vs busy core
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
    """Time capture against a plain forward and ``run_with_cache`` (ratios in one run)."""
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


def bench_store_read(n_examples: int = 8192, d_model: int = 512, n_layers: int = 4,
                     repeats: int = 3) -> dict:
    """Cost of the sha256 check on a shard's first read in a process (issue 27).

    Loads every site of a store once with ``verify=True`` (the per-process cache cleared, so every
    shard is hashed) and once with ``verify=False``; the page cache is warm for both.
    """
    import tempfile

    from probekit.store import reader

    g = torch.Generator().manual_seed(0)
    model = build_model(ModelConfig(n_layers=n_layers, d_model=d_model, n_heads=8,
                                    d_head=d_model // 8, d_vocab=1000, n_ctx=32))
    tokens = [torch.randint(0, 1000, (8,), generator=g).tolist() for _ in range(n_examples)]
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = Path(tmp) / "s"
        capture_to_store(model, tokens, store_dir, all_layers(model), batch_size=256,
                         examples_per_shard=1024, progress=False)
        size = sum(p.stat().st_size for p in store_dir.glob("shard-*"))

        def read(verify: bool) -> None:
            reader._VERIFIED.clear()
            store = reader.ActivationStore(store_dir, verify=verify)
            store.load_layers(store.sites)

        read(False)  # warm the page cache
        t_plain = _best_of(lambda: read(False), repeats)
        t_verify = _best_of(lambda: read(True), repeats)
    return {
        "store_mb": size / 2**20,
        "load_all_sites_s": t_plain,
        "load_all_sites_first_read_verified_s": t_verify,
        "sha256_mb_per_s": size / 2**20 / max(t_verify - t_plain, 1e-9),
        "ratio_verified_vs_plain": t_verify / t_plain,
        "note": "later reads in the same process skip the check (cached by path+size+mtime); "
                "opt out with ActivationStore(..., verify=False) or PROBEKIT_VERIFY_SHARDS=0",
    }


_CLI_CHILD = """
import sys
from probekit.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")]
print(int(hwm[0].split()[1]) if hwm else 0, file=sys.stderr)
"""


def bench_cli_startup(repeats: int = 3) -> dict:
    """Wall time and peak RSS (VmHWM) of ``probekit --help`` / ``models`` vs ``python -c pass``."""
    import subprocess

    def run(args: list[str]) -> tuple[float, float]:
        best_t, rss = float("inf"), 0.0
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                                 check=True, cwd=ROOT)
            best_t = min(best_t, time.perf_counter() - t0)
            last = res.stderr.strip().splitlines()[-1:] if args[0] == "-c" else []
            rss = max(rss, int(last[0]) / 1024 if last and last[0].isdigit() else 0.0)
        return best_t, rss

    bare = _CLI_CHILD.replace("from probekit.cli import main\n", "")
    t_py, rss_py = run(["-c", bare.replace("main(sys.argv[1:])", "pass")])
    t_help, rss_help = run(["-c", _CLI_CHILD, "--help"])
    t_models, rss_models = run(["-c", _CLI_CHILD, "models"])
    return {
        "python_startup_s": t_py,
        "help_s": t_help,
        "models_s": t_models,
        "python_peak_rss_mb": rss_py,
        "help_peak_rss_mb": rss_help,
        "models_peak_rss_mb": rss_models,
        "goal": "help_s and models_s well under 1 s (were 4.5-6 s and ~410 MB before lazy imports)",
    }


OPTIONAL = {
    "finetune_step": ("scripts.bench_finetune", "bench_finetune_step"),
    "probes": ("scripts.bench_probes", "bench_probe_sweep"),
    "grokking": ("scripts.bench_grokking", "bench_grokking"),
    "homomorphism": ("scripts.bench_homomorphism", "bench_homomorphism"),
    "similarity": ("scripts.bench_similarity", "bench_similarity"),
    "similarity_memory": ("scripts.bench_similarity", "bench_similarity_memory"),
    "patching": ("scripts.bench_patching", "bench_patching"),
    "eap": ("scripts.bench_eap", "bench_eap"),
    "neurons": ("scripts.bench_neurons", "run"),
    "generation": ("scripts.bench_generation", "bench_generation"),
    "geometry": ("scripts.bench_geometry", "bench_geometry"),
    "ray": ("scripts.bench_ray", "bench_ray"),
    "ray_capture": ("scripts.bench_ray", "bench_ray_capture"),
    "load": ("scripts.bench_load", "bench_load"),
    "load_tuner": ("scripts.bench_load", "bench_tuner"),
    "load_train": ("scripts.bench_load", "bench_train"),
    "population_throughput": ("scripts.bench_population", "bench_population_throughput"),
    "shape_checks": ("scripts.bench_shapes", "bench_shape_checks"),
}


def main(argv: list[str] | None = None) -> int:
    """Run the chosen bench sections and print / write their JSON report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out/bench.json")
    parser.add_argument("--model", default=None, help="named model for the capture bench (default: native)")
    parser.add_argument("--sections", default="capture,store_memory,store_read,cli,probes",
                        help="comma list: capture,store_memory,store_read,cli,probes,grokking,homomorphism,similarity,similarity_memory,patching,eap,neurons,generation,geometry,ray,ray_capture,load,load_tuner,load_train,population_throughput,finetune_step,shape_checks")
    parser.add_argument("--n-examples", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="device of the batched probe sweep (cpu, cuda)")
    parser.add_argument("--sklearn-threads", type=int, default=None,
                        help="BLAS threads of the sklearn baseline (default all; 4 was fastest on 16 cores)")
    parser.add_argument("--he-checkpoint", default=None,
                        help="SCAN checkpoint for the homomorphism section (default: untrained)")
    parser.add_argument("--sim-n", type=int, default=20000,
                        help="stimuli of the similarity section (d=576, 12 layers; smaller on a busy box)")
    parser.add_argument("--ray-steps", type=int, default=100,
                        help="training steps per run of the ray section (8 runs, 2 workers)")
    parser.add_argument("--ray-capture-n", type=int, default=2048,
                        help="prompts of the ray_capture section (all resid_post sites, 2 workers)")
    parser.add_argument("--neurons-n", type=int, default=1000,
                        help="prompts of the neurons section (SmolLM2, all 30 layers)")
    parser.add_argument("--pop-steps", type=int, default=60,
                        help="steps of each timed end-to-end run of the population_throughput "
                             "section (the full model's cost adds the remaining steps at the "
                             "timed step cost)")
    parser.add_argument("--pop-threads", type=int, default=1,
                        help="torch threads of the population_throughput section")
    parser.add_argument("--ft-steps", type=int, default=3,
                        help="timed steps per variant of the finetune_step section (after a warm-up)")
    parser.add_argument("--load-suites", default=None,
                        help="comma list of probes/*.toml stems of the load section (default: every shipped suite)")
    args = parser.parse_args(argv)
    results: dict = {}
    for section in args.sections.split(","):
        if section == "capture":
            results["capture"] = bench_capture(args.model, args.n_examples, args.batch_size, args.repeats)
        elif section == "store_memory":
            results["store_memory"] = bench_store_memory()
        elif section == "store_read":
            results["store_read"] = bench_store_read(repeats=args.repeats)
        elif section == "cli":
            results["cli"] = bench_cli_startup(args.repeats)
        elif section in OPTIONAL:
            module, fn = OPTIONAL[section]
            kwargs = {"device": args.device, "sklearn_threads": args.sklearn_threads} if section == "probes" else {}
            if section == "homomorphism":
                kwargs = {"checkpoint": args.he_checkpoint}
            if section == "similarity":
                kwargs = {"n": args.sim_n}
            if section == "neurons":
                kwargs = {"model": args.model, "n_prompts": args.neurons_n}
            if section == "ray":
                kwargs = {"steps": args.ray_steps}
            if section == "ray_capture":
                kwargs = {"n_examples": args.ray_capture_n, "model": args.model}
            if section == "load":
                kwargs = {"suites": args.load_suites}
            if section == "population_throughput":
                kwargs = {"steps_run": args.pop_steps, "threads": args.pop_threads}
            if section == "finetune_step":
                kwargs = {"steps": args.ft_steps}
            if section in ("patching", "eap", "geometry"):
                kwargs = {"device": args.device}
            results[section] = getattr(importlib.import_module(module), fn)(**kwargs)
        else:
            parser.error(f"unknown section {section!r}; choose from "
                         f"capture,store_memory,store_read,cli,{','.join(OPTIONAL)}")
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
