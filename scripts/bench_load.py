"""Work under load (issue 47 section 3): each shipped probe suite quiet and beside a busy core.

Every shipped probe suite (``probes/*.toml`` run by ``probekit report``, i.e. not the
``diagnose_*`` files) runs twice in a fresh process: once quiet, once beside a process that keeps
one core busy (a Python ``while True`` loop). The ratio ``busy / quiet`` is the figure; the goal
is <= 3 for every suite. Inner loops on small tensors scope their threads with
:func:`probekit.util.threads.small_work_threads`; without it, torch's OpenMP threads spin
against the busy core (``modadd_geometry`` did not finish in 15 min beside one busy core on
2 cores).

The children run with ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` unset (the figures are of
numpy/scipy's own OpenBLAS detection) and with the thread variables (``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``) unset: default threads, as a user runs them.

``--k-search`` times the centre-subspace ``K`` search alone (the inner loop of the issue:
scipy L-BFGS-B calling a torch objective) on the class centres of the embedded modadd checkpoint,
scoped (this code) and unscoped (BLAS limited to one thread, torch's OpenMP pool not: the code
before), quiet and beside a busy core.

``--tuner`` times SmolLM2-135M deactivation forwards (first-token scoring and greedy generation,
the loops of ``probes/smollm2_relation_neurons.toml``) on torch's threads, on one thread, and
under :class:`probekit.util.threads.ThreadTuner`, quiet and beside a busy core.

    python scripts/bench_load.py out/bench_load.json                       # every suite
    python scripts/bench_load.py out/bench_load.json --suites modadd_grokked,modadd_geometry
    python scripts/bench_load.py out/k_search.json --k-search [--k-search-variants scoped]
    python scripts/bench_load.py out/tuner.json --tuner        # SmolLM2 forwards: 2, 1, tuned threads
    python scripts/bench_load.py out/train.json --train 450    # scan-preset training steps: same
    python scripts/bench.py --sections load                                 # same, into bench.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 3.0
UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
         "MKL_NUM_THREADS")


def shipped_suites() -> list[str]:
    """Stems of the shipped probe suites: ``probes/*.toml`` that ``probekit report`` runs."""
    return sorted(p.stem for p in (ROOT / "probes").glob("*.toml") if not p.stem.startswith("diagnose_"))


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


@contextlib.contextmanager
def busy_core(on: bool = True) -> Iterator[int | None]:
    """A process that keeps one core busy for the duration of the block (its pid), or nothing."""
    if not on:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True:\n    pass"])
    try:
        time.sleep(0.5)  # let it reach its loop
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def run_suite(name: str, busy: bool, timeout_s: float) -> dict:
    """``probekit report probes/NAME.toml`` in a fresh process; its wall time and exit status.

    Each run gets an empty ``PROBEKIT_CACHE`` (a temporary folder): the second run of a pair
    must not reuse the activations or answers the first one cached.
    """
    with tempfile.TemporaryDirectory(prefix="pk-load-") as tmp, busy_core(busy):
        env = {**_child_env(), "PROBEKIT_CACHE": str(Path(tmp) / "cache")}
        load = _load()
        t0 = time.perf_counter()
        try:
            res = subprocess.run(
                [sys.executable, "-m", "probekit.cli", "report", str(ROOT / "probes" / f"{name}.toml"),
                 "--out", str(Path(tmp) / "out")],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s,
            )
            rc, tail = res.returncode, (res.stderr or res.stdout).strip().splitlines()[-1:]
        except subprocess.TimeoutExpired:
            rc, tail = None, [f"timed out after {timeout_s:.0f} s"]
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "rc": rc, "load_before": load,
            "last_line": tail[0] if rc and tail else ""}


def _summary(rows: dict) -> dict:
    return {
        "cpus": os.cpu_count(),
        "suites": rows,
        "all_within_goal": all(r["within_goal"] for r in rows.values()),
        "goal": f"busy_core / quiet <= {GOAL} for every suite",
        "env": f"children run with {', '.join(UNSET)} unset (default threads), each run with an "
               "empty PROBEKIT_CACHE",
    }


def bench_load(suites: str | None = None, timeout_s: float = 3600.0,
               out: Path | None = None) -> dict:
    """Every shipped probe suite quiet and beside a busy core; ratios and the goal (<= 3x).

    With ``out``, the JSON is rewritten after every suite (an interrupted run keeps its rows).
    """
    names = suites.split(",") if suites else shipped_suites()
    rows = {}
    for name in names:
        quiet = run_suite(name, busy=False, timeout_s=timeout_s)
        loaded = run_suite(name, busy=True, timeout_s=timeout_s)
        ok = quiet["rc"] == 0 and loaded["rc"] == 0
        ratio = loaded["seconds"] / quiet["seconds"] if ok else None
        rows[name] = {"quiet": quiet, "busy_core": loaded, "ratio": ratio,
                      "within_goal": ratio is not None and ratio <= GOAL}
        print(f"  {name:28s} quiet {quiet['seconds']:8.1f} s  busy {loaded['seconds']:8.1f} s  "
              f"ratio {ratio if ratio is None else round(ratio, 2)}", flush=True)
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(_summary(rows), indent=2))
    return _summary(rows)


def _child_row(script: str, args: list[str], *, busy: bool, timeout_s: float,
               timeout_ok: bool = False) -> dict:
    """``python -c script ROOT *args`` in a fresh process, beside a busy core or not.

    Returns the JSON of its last stdout line with the load average before it (``load_before``);
    a run past ``timeout_s`` raises, or with ``timeout_ok`` gives ``seconds = None``.
    """
    with busy_core(busy):
        load = _load()
        try:
            res = subprocess.run([sys.executable, "-c", script, str(ROOT), *args], cwd=ROOT,
                                 env=_child_env(), capture_output=True, text=True,
                                 timeout=timeout_s, check=True)
            row = json.loads(res.stdout.strip().splitlines()[-1])
        except subprocess.TimeoutExpired:
            if not timeout_ok:
                raise
            row = {"seconds": None, "timed_out_after_s": timeout_s}
    row["load_before"] = load
    return row


def _quiet_and_busy(script: str, args: list[str], timeout_s: float) -> dict:
    """``{"quiet": row, "busy_core": row}`` of :func:`_child_row`, each printed as it ends."""
    out: dict = {}
    for busy in (False, True):
        key = "busy_core" if busy else "quiet"
        out[key] = _child_row(script, args, busy=busy, timeout_s=timeout_s)
        print(f"  {key:10s} {out[key]}", flush=True)
    return out


_K_CHILD = """
import json, sys, time
import numpy as np, torch
sys.path.insert(0, sys.argv[1])
scoped = sys.argv[2] == "scoped"
from probekit.geometry import centers
if not scoped:  # the code before: BLAS on one thread, torch's OpenMP pool as configured
    from threadpoolctl import threadpool_limits
    centers.small_work_threads = lambda n=1, work=None: threadpool_limits(limits=1, user_api="blas")
sys.path.insert(0, sys.argv[1] + "/tests/geometry")
from mftma_real import modadd_manifolds
xs = modadd_manifolds(sys.argv[3], n_classes=53, max_points=20, seed=0)
c = torch.from_numpy(np.stack([x.mean(axis=1) for x in xs], axis=1)).to(torch.float64)
c = c - c.mean(dim=1, keepdim=True)
t0 = time.perf_counter()
sub = centers.common_center_subspace(c, max_k=centers.max_common_dim(c), n_reps=10,
                                     generator=torch.Generator().manual_seed(0))
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "n_common": sub.n_common, "k_tried": len(sub.residual_correlation),
                  "residual": sub.residual_correlation[sub.n_common - 1],
                  "torch_threads": torch.get_num_threads()}))
"""


def bench_k_search(variants: str = "scoped,unscoped", site: str = "resid_post@0",
                   timeout_s: float = 1800.0) -> dict:
    """The centre-subspace K search alone (modadd-p53 class centres), per variant quiet / busy."""
    out: dict = {"site": site, "cpus": os.cpu_count(),
                 "env": f"children run with {', '.join(UNSET)} unset (default threads)"}
    for variant in variants.split(","):
        for busy in (False, True):
            row = _child_row(_K_CHILD, [variant, site], busy=busy, timeout_s=timeout_s,
                             timeout_ok=True)
            key = f"{variant}_{'busy_core' if busy else 'quiet'}"
            out[key] = row
            print(f"  {key:24s} {row}", flush=True)
    for variant in variants.split(","):
        q, b = out[f"{variant}_quiet"]["seconds"], out[f"{variant}_busy_core"]["seconds"]
        out[f"{variant}_ratio_busy_vs_quiet"] = b / q if q and b else None
    return out


_TUNER_CHILD = """
import json, sys, time
import numpy as np, torch
sys.path.insert(0, sys.argv[1])
from probekit.capture import AllTokens, Site
from probekit.interventions import Ablate
from probekit.models import load_model
from probekit.neurons.deactivation import FactSet, first_token_correct_sets, generation_correct_sets
from probekit.util.threads import ThreadTuner
m = load_model("smollm2-135m")
tok = m.tokenizer
rows = [json.loads(l) for l in open(sys.argv[1] + "/probes/data/relation_facts.jsonl")]
rows = [r for r in rows if r["split"] == "test"][:32]
ids = lambda t: tok(t, add_special_tokens=False)["input_ids"]
facts = FactSet(tuple(tuple(ids(r["text"])) for r in rows), tuple(r["relation"] for r in rows),
                tuple(r["object"] for r in rows),
                tuple(ids(" " + r["object"].split("|")[0])[0] for r in rows))
rng = np.random.default_rng(0)
sets = [[Ablate(site=Site(layer, "mlp_pre"), positions=AllTokens(),
                features=tuple(int(u) for u in rng.choice(1536, 2, replace=False)))
         for layer in range(m.cfg.n_layers)] for _ in range(16)]
out = {"torch_threads": torch.get_num_threads()}
for name, make in [("default_threads", lambda: ThreadTuner([torch.get_num_threads()])),
                   ("one_thread", lambda: ThreadTuner([1])), ("tuned", ThreadTuner)]:
    for what in ("first_token", "generation"):
        tuner = make()
        t0 = time.perf_counter()
        if what == "first_token":
            first_token_correct_sets(m, facts, sets, batch_size=32, threads=tuner)
        else:
            generation_correct_sets(m, facts, sets[:4], max_new_tokens=8, batch_size=32, threads=tuner)
        out[f"{what}_{name}_s"] = time.perf_counter() - t0
        out[f"{what}_{name}_ms_per_token"] = {str(k): v * 1e3 for k, v in tuner.rate.items()}
print(json.dumps(out))
"""


def bench_tuner(timeout_s: float = 1800.0) -> dict:
    """SmolLM2-135M deactivation forwards on torch's threads, one thread and ThreadTuner, quiet / busy.

    First-token scoring of 16 ablation sets x 32 facts (16 forwards of 32 rows) and greedy
    generation of 4 sets (4 batches x 8 steps), in a fresh process per side.
    """
    out: dict = {"cpus": os.cpu_count(),
                 "env": f"children run with {', '.join(UNSET)} unset (default threads)",
                 **_quiet_and_busy(_TUNER_CHILD, [], timeout_s)}
    for what in ("first_token", "generation"):
        for name in ("default_threads", "one_thread", "tuned"):
            key = f"{what}_{name}_s"
            out[f"{what}_{name}_ratio_busy_vs_quiet"] = out["busy_core"][key] / out["quiet"][key]
    return out


_TRAIN_CHILD = """
import json, sys, tempfile, time
from pathlib import Path
import torch
sys.path.insert(0, sys.argv[1])
from probekit.testbeds import get_task
from probekit.train import trainer
from probekit.train.config import TrainConfig
from probekit.util.threads import ThreadTuner
task = get_task("scan", n_noise=3)
cfg = TrainConfig(steps=int(sys.argv[2]), batch_size=32, seed=0, n_evals=1, n_checkpoints=1)
out = {"torch_threads": torch.get_num_threads(), "steps": cfg.steps}
for name, make in [("default_threads", lambda: ThreadTuner([torch.get_num_threads()])),
                   ("one_thread", lambda: ThreadTuner([1])), ("tuned", ThreadTuner)]:
    trainer.ThreadTuner = make
    t0 = time.perf_counter()
    trainer.train(task, train_config=cfg, out_dir=Path(tempfile.mkdtemp()), progress=False,
                  plot=False)
    out[f"{name}_s"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def bench_train(steps: int = 450, timeout_s: float = 1800.0) -> dict:
    """Training steps of the ``scan`` preset's model (batch 32) on torch's threads, one, ThreadTuner.

    ``steps`` steps, one evaluation and one checkpoint per run, quiet and beside a busy core, a
    fresh process per side (the trainer's tuner replaced by a fixed-count one for the first two).
    """
    out: dict = {"cpus": os.cpu_count(),
                 "env": f"children run with {', '.join(UNSET)} unset (default threads)",
                 **_quiet_and_busy(_TRAIN_CHILD, [str(steps)], timeout_s)}
    for name in ("default_threads", "one_thread", "tuned"):
        out[f"{name}_ratio_busy_vs_quiet"] = (out["busy_core"][f"{name}_s"]
                                              / out["quiet"][f"{name}_s"])
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the suites (or the K search) and write the JSON to the given path."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="JSON output path")
    parser.add_argument("--suites", default=None,
                        help=f"comma list of probes/*.toml stems (default: {','.join(shipped_suites())})")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument("--k-search", action="store_true", help="time the K search alone")
    parser.add_argument("--k-search-variants", default="scoped,unscoped")
    parser.add_argument("--site", default="resid_post@0", help="site of the K search's centres")
    parser.add_argument("--tuner", action="store_true",
                        help="time SmolLM2 deactivation forwards: torch's threads, one, ThreadTuner")
    parser.add_argument("--train", type=int, default=None, metavar="STEPS",
                        help="time STEPS training steps of the scan preset: torch's threads, one, "
                             "ThreadTuner")
    args = parser.parse_args(argv)
    if args.train is not None:
        result = bench_train(args.train, args.timeout)
    elif args.tuner:
        result = bench_tuner(args.timeout)
    elif args.k_search:
        result = bench_k_search(args.k_search_variants, args.site, args.timeout)
    else:
        result = bench_load(args.suites, args.timeout, Path(args.out))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
