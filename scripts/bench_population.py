"""Population throughput: models per CPU-hour of each testbed preset the shipped populations train.

For each configuration (a preset with the sets of its shipped population) one short run of
``steps_run`` steps is timed end to end through :func:`probekit.train.train` (task, model, the
final evaluation and checkpoint included, the lean evaluation schedule of a diagnosis grid),
and the training step alone over ``timed_steps`` steps after a warm-up; the cost of a model is
``run CPU-s + (steps - steps_run) * step CPU-s`` (models per CPU-hour = 3600 / it). CPU time is
the process's (``time.process_time``: both threads when torch uses two), so the figures hold on
a busy box too. FLOPs of a step (forward + backward; the optimiser's elementwise update is not
counted) come from ``torch.utils.flop_counter.FlopCounterMode``; the achieved FLOP per CPU-second
is compared with a float32 ``torch.mm`` of ``matmul_n`` x ``matmul_n`` timed the same way, in
the same process and thread count (the ratio is the figure: both move with the box).

Variants of the SCAN step tried for speed (``--pop-variants``): AdamW with ``foreach=True``
(one multi-tensor update instead of a loop over parameters) and two threads.

    python scripts/bench.py --sections population_throughput --pop-steps 60
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import torch

#: (label, preset, sets, steps): the shipped populations' runs (probes/diagnose_*.toml)
CONFIGS: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    ("modular_addition p=23 (diagnose_modadd)", "modular_addition",
     ("task.p=23", "model.d_model=64", "model.d_head=16", "model.d_mlp=256", "train.lr=1e-2"), 1200),
    ("kg_composition_cpu (diagnose_kg_composition)", "kg_composition_cpu",
     ("task.n_relations=20", "task.out_degree=10", "task.ood_fraction=0.1",
      "task.test_id_fraction=0.02", "train.lr=2e-3", "train.eval_max_examples=1000",
      "train.stop_metric=null", "task.phi=5.4"), 500),
    ("scan_he_paper plain", "scan_he_paper", ("train.he_lambda=0",), 1450),
    ("scan_he_paper pool-HE [C]", "scan_he_paper", ("train.he_source=pool",), 1450),
    ("scan_he_paper batch-HE", "scan_he_paper", ("train.he_source=batch",), 1450),
)


def _matmul_flops_per_cpu_s(n: int, min_cpu_s: float = 1.0) -> float:
    """FLOP per CPU-second of a float32 ``n x n`` matmul (best of repeated timings)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(3):
        reps, c0 = 0, time.process_time()
        while time.process_time() - c0 < min_cpu_s / 3:
            torch.mm(a, b)
            reps += 1
        best = min(best, (time.process_time() - c0) / reps)
    return 2 * n**3 / best


def _loop(preset: str, sets: list[str], steps: int, *, foreach: bool | None = None) -> Any:
    """Model, optimiser, data and one-step closure of a run, built like ``train`` builds them."""
    from probekit.train import loss_terms
    from probekit.train import trainer as tr
    from probekit.train.build import build_run

    task, mcfg, cfg = build_run(preset, steps=steps, seed=0, sets=sets)
    out = Path(tempfile.mkdtemp(prefix="pk-bench-pop-"))
    run = tr._prepare_run(task, mcfg, cfg, out)
    begin = tr._start_or_resume(run, out, False)
    opt = tr._make_optimiser(run, begin, loss_terms(task, cfg))
    if foreach is not None:
        opt = opt._replace(optimiser=torch.optim.AdamW(
            opt.params, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
            weight_decay=cfg.weight_decay, foreach=foreach))
    data = tr._training_data(task, run)
    drop = tr._dropout_scope(begin.model, cfg, run.device)
    model = begin.model
    model.train()
    cache: list[Any] = [None]

    def step(i: int, backward: bool = True) -> None:
        batch, cache[0] = tr._step_batch(i, data, cfg, run.device, cache[0])
        with drop(i):
            loss = tr._step_loss(model, batch, i, opt.terms, opt.weights)
        opt.optimiser.zero_grad(set_to_none=True)
        loss.backward()
        opt.optimiser.step()

    return step


def _step_cost(preset: str, sets: list[str], timed: int, **kw: Any) -> tuple[float, float, float]:
    """(CPU-s per step, wall-s per step, FLOPs per step) over ``timed`` steps after 3 warm-up."""
    from torch.utils.flop_counter import FlopCounterMode

    step = _loop(preset, sets, timed + 10, **kw)
    for i in range(1, 4):
        step(i)
    with FlopCounterMode(display=False) as counter:
        step(4)
    flops = float(counter.get_total_flops())
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(5, 5 + timed):
        step(i)
    return (time.process_time() - c0) / timed, (time.perf_counter() - w0) / timed, flops


def _run_cost(preset: str, sets: list[str], steps: int) -> float:
    """CPU-s of a whole ``train`` run of ``steps`` steps (lean evaluation: the final step only)."""
    from probekit.train import loss_terms, train
    from probekit.train.build import build_run

    lean = [f"train.eval_steps=[{steps}]", f"train.checkpoint_steps=[{steps}]",
            "train.eval_at_start=false"]
    c0 = time.process_time()
    task, mcfg, cfg = build_run(preset, steps=steps, seed=0, sets=[*sets, *lean])
    with tempfile.TemporaryDirectory() as out:
        train(task, mcfg, cfg, out, progress=False, plot=False, loss_terms=loss_terms(task, cfg))
    return time.process_time() - c0


def bench_population_throughput(steps_run: int = 60, timed_steps: int = 30, threads: int = 1,
                                matmul_n: int = 512, variants: bool = True) -> dict:
    """Models per CPU-hour and achieved FLOP/s vs a float32 matmul, per shipped preset."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        peak = _matmul_flops_per_cpu_s(matmul_n)
        rows = []
        for label, preset, sets, steps in CONFIGS:
            cpu, wall, flops = _step_cost(preset, list(sets), timed_steps)
            run_s = _run_cost(preset, list(sets), steps_run)
            model_s = run_s + (steps - steps_run) * cpu
            rows.append({
                "config": label, "steps": steps, "step_cpu_ms": 1e3 * cpu, "step_wall_ms": 1e3 * wall,
                "step_gflop": flops / 1e9, "cpu_s_per_model": model_s,
                "models_per_cpu_hour": 3600 / model_s,
                "achieved_gflop_per_cpu_s": flops / cpu / 1e9,
                "ratio_vs_matmul": flops / cpu / peak,
            })
        out: dict[str, Any] = {
            "threads": threads, "matmul": f"float32 {matmul_n}x{matmul_n}",
            "matmul_gflop_per_cpu_s": peak / 1e9, "rows": rows,
        }
        plain = next(r for r in rows if r["config"] == "scan_he_paper plain")
        for r in rows:
            if r["config"].startswith("scan_he_paper"):
                out[f"step_ratio {r['config']} vs plain"] = r["step_cpu_ms"] / plain["step_cpu_ms"]
        for r in rows:
            out[f"models/CPU-h {r['config']}"] = r["models_per_cpu_hour"]
            out[f"ratio vs matmul {r['config']}"] = r["ratio_vs_matmul"]
        if variants:
            out.update(_variants(timed_steps, peak, plain["step_cpu_ms"] / 1e3))
        return out
    finally:
        torch.set_num_threads(before)


def _variants(timed: int, peak: float, plain_cpu: float) -> dict:
    """The SCAN plain step under the speed-ups tried: AdamW foreach, two threads, matmul n.

    foreach and the default loop are timed alternately, best of 3 each (a busy box drifts).
    """
    sets = ["train.he_lambda=0"]
    out: dict[str, Any] = {}
    loop, multi = [], []
    for _ in range(3):
        loop.append(_step_cost("scan_he_paper", sets, timed)[0])
        multi.append(_step_cost("scan_he_paper", sets, timed, foreach=True)[0])
    out["variant adamw_foreach step CPU ratio vs loop"] = min(multi) / min(loop)
    torch.set_num_threads(2)
    cpu2, wall2, _ = _step_cost("scan_he_paper", sets, max(3, timed // 6))
    out["variant 2 threads step CPU ratio vs 1 thread"] = cpu2 / min(loop)
    out["variant 2 threads step wall ms"] = 1e3 * wall2
    out["matmul 512x512 2 threads gflop_per_cpu_s"] = _matmul_flops_per_cpu_s(512) / 1e9
    torch.set_num_threads(1)
    for n in (128, 256, 1024):
        out[f"matmul {n}x{n} gflop_per_cpu_s"] = _matmul_flops_per_cpu_s(n) / 1e9
    return out
