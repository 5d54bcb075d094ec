"""The HE population study of An & Du (2026) on the built-in SCAN-style testbed.

Trains SCAN models over noise levels, coverage (training clause counts), depth and seeds (and
optionally with the HE regulariser), each as an independent executor task, measures per model the
modifier and sequence HE (every layer from one capture; headline = last block), ID token accuracy
and OOD token accuracy (mean over ``ood_len_5..12``), then reports per sweep (statistics in
``scripts/he_study_analysis.py``): polynomial fits (degrees 1-3) of OOD accuracy on modifier HE
over the level means ([C]: R^2 = 0.73 over 16 noise levels x 5 seeds), Pearson / Spearman over
single models with CIs, and HE-regularised vs plain paired t-tests (over models and per seed).

Resumable: each model's ``models/<name>/result.json`` is written atomically when it is done and
a rerun skips every model that has one (an interrupted training restarts from its last
checkpoint), so a population can be grown (more seeds, levels) or finished elsewhere.

    python scripts/he_study.py --out runs/he --noise 0 3 6 9 12 15 --seeds 0 1 2 \
        --he-lambda 0 0.2                                  # noise grid, plain + regularised
    python scripts/he_study.py --out runs/he --noise --coverage 1 2 3 4 \
        --depth 1 2 3 4 5 6 7 8 9 10 --seeds 0 1 2 3 4 --epochs 15   # [C]'s probe sweeps
    python scripts/he_study.py --out runs/he --population paper --executor ray  # all 175 of [C]
    python scripts/he_study.py --out runs/he --preset scan_he_paper --epochs 50 --max-samples 2000 \
        --noise 0 3 6 9 12 15 --seeds 0 1 2 3 4 --he-lambda 0 0.2   # [C]'s regularisation study
    python scripts/he_study.py --out runs/he --analyse-all  # every finished model under runs/he
    python scripts/he_study.py --smoke --out /tmp/he_smoke # tiny, ~20 s

Writes ``models/<name>/`` (training run + result.json), ``study.json`` and one plot per sweep.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:  # `python scripts/he_study.py` from a checkout: probekit + scripts
    sys.path.insert(0, ROOT)

from probekit.errors import ConfigError, DataError  # noqa: E402
from probekit.executor import get_executor  # noqa: E402
from probekit.util.io import atomic_write_json  # noqa: E402
from scripts import he_study_analysis as A  # noqa: E402

RESULT = "result.json"
#: [C]'s probe sweeps: noise 0..15 (2 clauses, 4 layers), coverage 1..4 clauses, depth 1..10,
#: 5 seeds, and the regularisation study over noise {0, 3, ..., 15} x {0, 0.2}
PAPER = dict(noise=tuple(range(16)), coverage=(1, 2, 3, 4), depth=tuple(range(1, 11)),
             seeds=(0, 1, 2, 3, 4), he_lambda=(0.0, 0.2), reg_noise=(0, 3, 6, 9, 12, 15))


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One training of the population (a picklable executor task).

    ``epochs`` (when set) replaces ``steps``: the run takes ``epochs * ceil(n_train / 32)``
    steps, [C]'s schedule (15 epochs), so small data sets (no noise: 109 commands; 1-clause
    coverage: 10) are not trained ~100 epochs as with a fixed 450 steps.
    """

    out_root: str
    noise: int = 0
    train_clauses: tuple[int, ...] = (2,)
    n_layers: int = 4
    seed: int = 0
    he_lambda: float = 0.0
    steps: int = 450
    epochs: int | None = None
    max_samples: int = 1000
    n_ood_per_length: int = 200
    d_model: int = 128
    he_pairs: int = 256
    he_epochs: int = 50
    preset: str = "scan"
    #: training device ("cpu", "cuda"; the trainer's final ID/OOD evaluation runs there too);
    #: HE is measured on the CPU copy of the final checkpoint either way. The device changes
    #: only the run's floating-point rounding and dropout stream. Not part of :attr:`name`.
    device: str = "cpu"

    @property
    def name(self) -> str:
        """Directory name of this model's run (unique per spec; stable across versions)."""
        cov = "".join(str(c) for c in self.train_clauses)
        sched = f"ep{self.epochs}" if self.epochs is not None else f"st{self.steps}"
        own = "" if self.preset == "scan" else f"_{self.preset}"  # old names unchanged
        return (
            f"n{self.noise:02d}_c{cov}_L{self.n_layers}_s{self.seed}_lam{self.he_lambda:g}"
            f"_{sched}_d{self.d_model}{own}"
        )

    def sets(self) -> list[str]:
        """``--set`` overrides for :func:`probekit.train.build_run` (preset :attr:`preset`)."""
        small = self.d_model != 128
        out = [
            f"task.n_noise={self.noise}",
            f"task.train_clauses={json.dumps(list(self.train_clauses))}",
            f"task.max_samples={self.max_samples}",
            f"task.n_ood_per_length={self.n_ood_per_length}",
            f"task.n_ood_combo={min(200, self.n_ood_per_length)}",
            f"model.n_layers={self.n_layers}",
        ]
        if small:
            out += [f"model.d_model={self.d_model}", f"model.d_mlp={2 * self.d_model}",
                    "model.n_heads=2", f"model.d_head={self.d_model // 2}"]
        if self.he_lambda:
            out += [f"train.he_lambda={self.he_lambda}", f"train.he_pairs={self.he_pairs}"]
        elif self.preset != "scan":  # e.g. scan_he_paper regularises by default
            out.append("train.he_lambda=0")
        return out

    def train_steps(self, n_train: int, batch_size: int) -> int:
        """Optimiser steps of this run: ``steps``, or ``epochs`` passes over ``n_train``."""
        if self.epochs is None:
            return self.steps
        return self.epochs * math.ceil(n_train / batch_size)


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def load_result(spec: ModelSpec) -> dict[str, Any] | None:
    """The finished result of ``spec`` (its ``result.json``), or None when it must still run."""
    done = Path(spec.out_root) / spec.name / RESULT
    if not done.is_file():
        return None
    cached = json.loads(done.read_text())
    return cached if cached.get("name") == spec.name else None


def run_model(spec: ModelSpec) -> dict[str, Any]:
    """Train (or resume) one model, measure its HE and accuracies; cached in ``result.json``.

    Only the final evaluation is read, so the step-0 evaluation is skipped
    (``eval_at_start=False``); that changes no trained weight or measured number.
    """
    cached = load_result(spec)
    if cached is not None:
        return cached
    import torch

    from probekit.homomorphism import (
        HEConfig,
        capture_states,
        modifier_he,
        modifier_pairs,
        sequence_he,
        sequence_pairs,
    )
    from probekit.models import load_checkpoint
    from probekit.train import build_run, list_checkpoints, loss_terms, train

    out = Path(spec.out_root) / spec.name
    torch.set_num_threads(1)
    task, mcfg, tcfg = build_run(spec.preset, seed=spec.seed, steps=spec.steps, sets=spec.sets())
    ds = task.splits()["train"]
    steps = spec.train_steps(len(ds), tcfg.batch_size or len(ds))
    tcfg = dataclasses.replace(tcfg, steps=steps, eval_steps=(steps,), checkpoint_steps=(steps,),
                               eval_at_start=False, device=spec.device)
    t0, c0 = time.perf_counter(), time.process_time()
    hist = train(task, mcfg, tcfg, out / "run", progress=False, plot=False,
                 loss_terms=loss_terms(task, tcfg))
    train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    model = load_checkpoint(list_checkpoints(out / "run")[-1][1])
    last = hist.records[-1]
    t1, c1 = time.perf_counter(), time.process_time()
    states = capture_states(model, ds.tokens, pad_id=task.vocab.pad_id)
    he: dict[str, Any] = {}
    for kind, mine, measure in (
        ("modifier", modifier_pairs, modifier_he), ("sequence", sequence_pairs, sequence_he)
    ):
        try:
            pairs = mine(ds)
        except DataError:  # e.g. 1-clause coverage has no sequence pairs
            continue
        # [C]'s Adam-fit families at the headline (last) block; closed-form ones at every block
        top = states.select([states.layers[-1]])
        try:
            c = measure(states=top, pairs=pairs, config=HEConfig(solver="adam", seed=spec.seed))
        except DataError:  # too few pairs for the 80/20 split (tiny 1-clause data)
            continue
        r = measure(states=states, pairs=pairs, config=HEConfig(
            families=("affine", "bilinear"), solver="closed_form_ridge"))
        try:  # [O] parts from separate passes, one ridge operator per modifier, 1 - R^2
            sep = measure(model, ds, pad_id=task.vocab.pad_id, config=HEConfig(
                parts="separate", families=("affine",), solver="closed_form_ridge"))
        except DataError:  # a group with < 2 fit pairs
            sep = None
        he[kind] = {
            "he": c.headline,  # [C]: Adam-fit affine/bilinear/MLP, mean held-out MSE
            "he_ci": [float(c.he_low[-1]), float(c.he_high[-1])],
            "he_normalised": c.headline_normalised,  # ours
            "he_ridge": float((r.mse[-1].sum() + c.mse[-1, 2]) / 3),  # closed-form linear ones
            "per_layer_ridge_affine_bilinear": r.he.tolist(),
            "per_family": dict(zip(c.families, c.mse[-1].tolist())),
            "per_group": dict(zip(c.groups, c.group_mse[-1].mean(0).tolist())),
            "n_pairs": c.n_pairs,
            "he_separate": None if sep is None else sep.headline_normalised,
            "per_layer_separate": None if sep is None else sep.he_normalised.tolist(),
        }
    res = {
        "spec": json.loads(json.dumps(asdict(spec))),
        "name": spec.name,
        "steps": steps,
        "n_train": len(ds),
        "id_token_acc": last["test_id/token_acc"],
        "train_token_acc": last["train/token_acc"],
        "ood_token_acc": last["ood_len/token_acc"],
        "ood_by_length": {
            k.split("/")[0]: v for k, v in last.items()
            if k.startswith("ood_len_") and k.endswith("/token_acc")
        },
        "modifier_he": _finite(he.get("modifier", {}).get("he", math.nan)),
        "sequence_he": _finite(he.get("sequence", {}).get("he", math.nan)),
        "he": he,
        "train_s": round(train_s, 2),
        "he_s": round(time.perf_counter() - t1, 2),
        "train_cpu_s": round(train_cpu, 2),
        "he_cpu_s": round(time.process_time() - c1, 2),
        "train_device": spec.device,
    }
    atomic_write_json(out / RESULT, res)  # a crash mid-write never leaves a half result
    return res


def population_specs(
    *, out_root: str, seeds: tuple[int, ...] | list[int], noise: tuple[int, ...] | list[int] = (),
    he_lambda: tuple[float, ...] | list[float] = (0.0,),
    reg_noise: tuple[int, ...] | list[int] | None = None,
    coverage: tuple[int, ...] | list[int] = (), depth: tuple[int, ...] | list[int] = (),
    layers: int = 4, **common: Any,
) -> list[ModelSpec]:
    """Expand the sweeps into one :class:`ModelSpec` per model, seed-major, without duplicates.

    Per seed: noise levels x ``he_lambda`` (2 clauses, ``layers`` blocks; lambdas > 0 only at
    ``reg_noise``, default every noise level), coverage k -> clauses 1..k (no noise), depth
    (no noise, 2 clauses). Seed-major order, and each noise level's plain and regularised
    models next to each other, leave complete seeds and pairs when a run is interrupted.
    ``common``: the other :class:`ModelSpec` fields (steps / epochs, sizes).
    """
    if any(k < 1 for k in coverage) or any(d < 1 for d in depth):
        raise ConfigError(f"coverage {list(coverage)} and depth {list(depth)} must be >= 1")
    reg_levels = set(noise if reg_noise is None else reg_noise)
    specs: list[ModelSpec] = []
    for seed in seeds:
        specs += [ModelSpec(out_root=out_root, noise=n, seed=seed, he_lambda=lam,
                            n_layers=layers, **common)
                  for n in noise for lam in he_lambda if lam == 0 or n in reg_levels]
        specs += [ModelSpec(out_root=out_root, train_clauses=tuple(range(1, k + 1)), seed=seed,
                            n_layers=layers, **common) for k in coverage]
        specs += [ModelSpec(out_root=out_root, n_layers=d, seed=seed, **common) for d in depth]
    return list(dict.fromkeys(specs))


def write_outputs(rows: list[dict[str, Any]], analysis: dict[str, Any], out: Path, *,
                  layers: int = 4) -> list[str]:
    """``study.json`` (analysis + one summary row per model) and one PNG per sweep."""
    summary = {"analysis": analysis, "models": [
        {k: r.get(k) for k in ("name", "spec", "steps", "n_train", "modifier_he", "sequence_he",
                               "id_token_acc", "ood_token_acc", "train_s", "he_s",
                               "train_cpu_s", "he_cpu_s")}
        | {"modifier_he_normalised": r["he"].get("modifier", {}).get("he_normalised"),
           "modifier_he_ridge": r["he"].get("modifier", {}).get("he_ridge"),
           "modifier_he_separate": r["he"].get("modifier", {}).get("he_separate")}
        for r in rows
    ]}
    atomic_write_json(out / "study.json", summary)
    plots = []
    for key, res in analysis["sweeps"].items():
        sweep, sched = key.split("/")
        sel = [r for r in rows if r["spec"]["he_lambda"] == 0
               and A.schedule_label(r["spec"]) == sched]
        name = f"{sweep}_{sched}.png"
        A.plot_sweep(sel, res, sweep, f"{sweep} sweep ({sched}, seeds {res['seeds']})",
                     out / name, layers=layers)
        plots.append(name)
    if "regularisation" in analysis:
        A.plot_regularisation(rows, out / "regularisation.png")
        plots.append("regularisation.png")
    return plots


def main(argv: list[str] | None = None, *, executor: Any = None) -> dict[str, Any]:
    """Run (or resume) the population, analyse it, write study.json and the plots.

    ``executor`` (an :class:`probekit.executor.Executor`) overrides ``--executor``.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--population", choices=["paper"], default=None,
                    help="paper: all of [C]'s models (noise 0..15, coverage 1..4, depth 1..10, "
                         "5 seeds, regularised at noise 0,3,..,15; 15 epochs unless --epochs); "
                         "overrides the grid options")
    ap.add_argument("--noise", type=int, nargs="*", default=[0, 3, 6, 9, 12, 15])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--coverage", type=int, nargs="*", default=[], help="max training clauses")
    ap.add_argument("--depth", type=int, nargs="*", default=[], help="layer counts (no noise)")
    ap.add_argument("--he-lambda", type=float, nargs="*", default=[0.0])
    ap.add_argument("--reg-noise", type=int, nargs="*", default=None,
                    help="noise levels of the regularised models (default: all --noise)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=450, help="[C]: ~15 epochs of 1000 = 450")
    ap.add_argument("--epochs", type=int, default=None,
                    help="train this many epochs instead of --steps ([C]: 15)")
    ap.add_argument("--max-samples", type=int, default=1000)
    ap.add_argument("--n-ood", type=int, default=200, help="commands per OOD length")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--he-pairs", type=int, default=256, help="regulariser pairs per step")
    ap.add_argument("--preset", default="scan",
                    help="training preset of every model: scan (the probe sweeps' schedule) or "
                         "scan_he_paper ([C]'s regularisation schedule: Adam lr 1e-4, betas "
                         "0.9/0.98, batch 64, sinusoidal positions, dropout 0.1; with --epochs 50 "
                         "--max-samples 2000)")
    ap.add_argument("--device", default="cpu",
                    help="training (and final evaluation) device of every model: cpu, cuda; HE is "
                         "measured on the CPU copy of the final checkpoint")
    ap.add_argument("--executor", default=None, help="inprocess (default) or ray")
    ap.add_argument("--ray-address", default=None,
                    help="Ray cluster (implies --executor ray): 'auto' or the head's HOST:6379")
    ap.add_argument("--smoke", action="store_true", help="tiny population (tests)")
    ap.add_argument("--list", action="store_true",
                    help="print the population (done / to run) and exit")
    ap.add_argument("--analyse-only", action="store_true",
                    help="analyse the models of this grid already finished; train nothing")
    ap.add_argument("--analyse-all", action="store_true",
                    help="analyse every finished model under --out (any grid or schedule)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.noise, args.seeds, args.steps = [0, 6, 15], [0], 20
        args.max_samples, args.n_ood, args.d_model, args.he_pairs = 40, 6, 32, 16
        args.he_lambda = [0.0, 0.5] if args.he_lambda == [0.0] else args.he_lambda
    grid = dict(noise=args.noise, seeds=args.seeds, he_lambda=args.he_lambda,
                reg_noise=args.reg_noise, coverage=args.coverage, depth=args.depth)
    if args.population == "paper":
        grid = dict(PAPER)
        args.epochs = 15 if args.epochs is None else args.epochs
    args.out.mkdir(parents=True, exist_ok=True)
    specs = population_specs(
        out_root=str(args.out / "models"), layers=args.layers, steps=args.steps,
        epochs=args.epochs, max_samples=args.max_samples, n_ood_per_length=args.n_ood,
        d_model=args.d_model, he_pairs=args.he_pairs, preset=args.preset, device=args.device,
        **grid,
    )
    todo = [s for s in specs if load_result(s) is None]
    if args.list:
        for s in specs:
            print(("todo " if s in todo else "done ") + s.name)
        print(f"{len(specs)} models, {len(specs) - len(todo)} done, {len(todo)} to run")
        return {"specs": specs, "todo": todo}
    if args.analyse_only:
        specs = [s for s in specs if s not in todo]
    t0 = time.perf_counter()
    if args.analyse_all:
        rows = [json.loads(p.read_text()) for p in sorted((args.out / "models").glob(f"*/{RESULT}"))]
    else:
        if executor is None and args.ray_address is not None:
            executor = get_executor("ray", address=args.ray_address)
        rows = get_executor(executor or args.executor).map(run_model, specs,
                                                           desc="he-study models")
    analysis = A.analyse(rows, layers=args.layers)
    analysis["wall_s"] = round(time.perf_counter() - t0, 1)
    trained = not (args.analyse_only or args.analyse_all)
    analysis["n_trained_this_call"] = len(todo) if trained else 0
    for key in ("train_s", "he_s", "train_cpu_s", "he_cpu_s"):
        vals = [r[key] for r in rows if r.get(key) is not None]
        analysis[f"{key}_total"] = round(sum(vals), 1)
    analysis["argv"] = list(argv) if argv is not None else sys.argv[1:]
    analysis["plots"] = write_outputs(rows, analysis, args.out, layers=args.layers)
    return {"analysis": analysis, "rows": rows}


if __name__ == "__main__":
    res = main()
    if "analysis" in res:
        print(json.dumps(res["analysis"], indent=1))
