"""The HE population study of An & Du (2026) on the built-in SCAN-style testbed.

Trains SCAN models over noise levels, coverage (training clause counts), depth and seeds (and
optionally with the HE regulariser), each as an independent executor task (resumable: a model
whose ``result.json`` exists is not retrained), measures per model the modifier and sequence HE
(every layer from one capture; headline = last block), ID token accuracy and OOD token accuracy
(mean over ``ood_len_5..12``), then reports:

* polynomial fits (degrees 1-3) of OOD accuracy on modifier HE over the noise-level means, with
  their R^2 ([C]: 16 noise levels x 5 seeds, paper R^2 = 0.73),
* Pearson / Spearman over single models with p-values and CIs (ours), scatter plots,
* HE-regularised vs plain: paired t-tests on modifier HE, sequence HE and OOD accuracy (per
  seed, averaged over noise levels as [C]; also over single (noise, seed) pairs).

    python scripts/he_study.py --out runs/he_study --noise 0 3 6 9 12 15 --seeds 0 1 2
    python scripts/he_study.py --out runs/he_study --noise 0 3 6 9 12 15 --seeds 0 1 2 3 4 \
        --he-lambda 0 0.2                                  # + the regularised population
    python scripts/he_study.py --out runs/he_coverage --coverage 1 2 3 4 --noise 0
    python scripts/he_study.py --smoke --out /tmp/he_smoke # tiny, ~20 s

Writes ``models/<name>/`` (training runs + result.json), ``study.json`` and ``scatter.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    import probekit  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probekit.errors import DataError  # noqa: E402
from probekit.executor import get_executor  # noqa: E402

RESULT = "result.json"


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One training of the population (a picklable executor task)."""

    out_root: str
    noise: int = 0
    train_clauses: tuple[int, ...] = (2,)
    n_layers: int = 4
    seed: int = 0
    he_lambda: float = 0.0
    steps: int = 450
    max_samples: int = 1000
    n_ood_per_length: int = 200
    d_model: int = 128
    he_pairs: int = 256
    he_epochs: int = 50

    @property
    def name(self) -> str:
        """Directory name of this model's run."""
        cov = "".join(str(c) for c in self.train_clauses)
        return (
            f"n{self.noise:02d}_c{cov}_L{self.n_layers}_s{self.seed}_lam{self.he_lambda:g}"
            f"_st{self.steps}_d{self.d_model}"
        )

    def sets(self) -> list[str]:
        """``--set`` overrides for :func:`probekit.train.build_run` (preset ``scan``)."""
        small = self.d_model != 128
        out = [
            f"task.n_noise={self.noise}",
            f"task.train_clauses={json.dumps(list(self.train_clauses))}",
            f"task.max_samples={self.max_samples}",
            f"task.n_ood_per_length={self.n_ood_per_length}",
            f"task.n_ood_combo={min(200, self.n_ood_per_length)}",
            f"model.n_layers={self.n_layers}",
            f"train.eval_steps=[{self.steps}]",
            f"train.checkpoint_steps=[{self.steps}]",
        ]
        if small:
            out += [f"model.d_model={self.d_model}", f"model.d_mlp={2 * self.d_model}",
                    "model.n_heads=2", f"model.d_head={self.d_model // 2}"]
        if self.he_lambda:
            out += [f"train.he_lambda={self.he_lambda}", f"train.he_pairs={self.he_pairs}"]
        return out


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def run_model(spec: ModelSpec) -> dict[str, Any]:
    """Train (or resume) one model, measure its HE and accuracies; cached in ``result.json``."""
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
    from probekit.train import build_run, list_checkpoints, train

    out = Path(spec.out_root) / spec.name
    done = out / RESULT
    if done.is_file():
        cached = json.loads(done.read_text())
        if cached.get("name") == spec.name:
            return cached
    torch.set_num_threads(1)
    task, mcfg, tcfg = build_run("scan", seed=spec.seed, steps=spec.steps, sets=spec.sets())
    t0 = time.perf_counter()
    hist = train(task, mcfg, tcfg, out / "run", progress=False, plot=False)
    train_s = time.perf_counter() - t0
    model = load_checkpoint(list_checkpoints(out / "run")[-1][1])
    last = hist.records[-1]
    ds = task.splits()["train"]
    t1 = time.perf_counter()
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
        c = measure(states=top, pairs=pairs, config=HEConfig(solver="adam", seed=spec.seed))
        r = measure(states=states, pairs=pairs, config=HEConfig(families=("affine", "bilinear")))
        he[kind] = {
            "he": c.headline,  # [C]: Adam-fit affine/bilinear/MLP, mean held-out MSE
            "he_ci": [float(c.he_low[-1]), float(c.he_high[-1])],
            "he_normalised": c.headline_normalised,  # ours
            "he_ridge": float((r.mse[-1].sum() + c.mse[-1, 2]) / 3),  # closed-form linear ones
            "per_layer_ridge_affine_bilinear": r.he.tolist(),
            "per_family": dict(zip(c.families, c.mse[-1].tolist())),
            "per_group": dict(zip(c.groups, c.group_mse[-1].mean(0).tolist())),
            "n_pairs": c.n_pairs,
        }
    res = {
        "spec": json.loads(json.dumps(asdict(spec))),
        "name": spec.name,
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
    }
    done.write_text(json.dumps(res, indent=1))
    return res


def poly_r2(x: np.ndarray, y: np.ndarray, degree: int) -> float:
    """R^2 of a least-squares polynomial fit ``y ~ poly_degree(x)`` ([C]'s noise-sweep fit)."""
    coef = np.polyfit(x, y, degree)
    resid = y - np.polyval(coef, x)
    return float(1.0 - (resid**2).sum() / ((y - y.mean()) ** 2).sum())


def _corr(x: list[float], y: list[float]) -> dict[str, Any]:
    from probekit.stats import pearson, spearman

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"n": len(x), "note": "too few points or constant values"}
    p, s = pearson(x, y), spearman(x, y)
    return {
        "n": p.n, "pearson_r": p.statistic, "pearson_p": p.p_value,
        "pearson_ci": [p.ci_low, p.ci_high], "pearson_r2": p.r_squared,
        "spearman_rho": s.statistic, "spearman_p": s.p_value,
    }


def _partial(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Ours: Pearson of modifier HE and OOD accuracy after regressing both on ID accuracy."""
    if len(rows) < 4:
        return {"n": len(rows), "note": "too few models"}
    z = np.array([r["id_token_acc"] for r in rows])
    if np.ptp(z) == 0:
        return {"n": len(rows), "note": "constant ID accuracy"}
    Z = np.stack([np.ones_like(z), z], 1)

    def resid(v: list[float]) -> np.ndarray:
        y = np.asarray(v)
        return y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]

    out = _corr(
        resid([r["modifier_he"] for r in rows]).tolist(),
        resid([r["ood_token_acc"] for r in rows]).tolist(),
    )
    out["note"] = "residuals after a linear fit on ID token accuracy (p-value ignores that fit)"
    return out


def analyse(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Noise-sweep R^2 over level means, single-model correlations, regularisation tests."""
    from probekit.stats import paired_ttest

    plain = [r for r in rows if r["spec"]["he_lambda"] == 0 and r["modifier_he"] is not None]
    out: dict[str, Any] = {"n_models": len(rows)}
    # noise sweep: 2-clause, modal depth
    sweep = [r for r in plain if r["spec"]["train_clauses"] == [2]]
    levels: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in sweep:
        levels[r["spec"]["noise"]].append(r)
    means = {
        n: {
            "modifier_he": float(np.mean([r["modifier_he"] for r in rs])),
            "sequence_he": float(np.mean([r["sequence_he"] for r in rs if r["sequence_he"]])),
            "ood_token_acc": float(np.mean([r["ood_token_acc"] for r in rs])),
            "id_token_acc": float(np.mean([r["id_token_acc"] for r in rs])),
            "n_models": len(rs),
        }
        for n, rs in sorted(levels.items())
    }
    out["noise_level_means"] = means
    if len(means) >= 3:
        hx = np.array([m["modifier_he"] for m in means.values()])
        acc = np.array([m["ood_token_acc"] for m in means.values()])
        out["poly_r2_modifier_he_vs_ood"] = {
            str(d): poly_r2(hx, acc, d) for d in (1, 2, 3) if len(hx) >= d + 2
        }
        out["noise_vs_modifier_he_level_means"] = _corr(list(means), hx.tolist())
    out["single_models"] = {
        "modifier_he_vs_ood": _corr(
            [r["modifier_he"] for r in plain], [r["ood_token_acc"] for r in plain]
        ),
        "sequence_he_vs_ood": _corr(
            [r["sequence_he"] for r in plain if r["sequence_he"] is not None],
            [r["ood_token_acc"] for r in plain if r["sequence_he"] is not None],
        ),
        "noise_vs_modifier_he": _corr(
            [r["spec"]["noise"] for r in sweep], [r["modifier_he"] for r in sweep]
        ),
        "modifier_he_vs_ood_given_id_acc": _partial(plain),
    }
    cov: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in plain:
        if r["spec"]["noise"] == 0:
            cov[str(max(r["spec"]["train_clauses"]))].append(r)
    if len(cov) > 1:
        out["coverage_means"] = {
            k: {
                "modifier_he": float(np.mean([r["modifier_he"] for r in rs])),
                "ood_token_acc": float(np.mean([r["ood_token_acc"] for r in rs])),
                "n_models": len(rs),
            }
            for k, rs in sorted(cov.items())
        }
    # regularised vs plain, paired on (noise, coverage, depth, seed)
    def key(r: dict[str, Any]) -> tuple:
        s = r["spec"]
        return (s["noise"], tuple(s["train_clauses"]), s["n_layers"], s["seed"], s["steps"])

    base = {key(r): r for r in rows if r["spec"]["he_lambda"] == 0}
    reg = [r for r in rows if r["spec"]["he_lambda"] > 0 and key(r) in base]
    if len(reg) >= 2:
        lams = sorted({r["spec"]["he_lambda"] for r in reg})
        tests: dict[str, Any] = {"n_pairs": len(reg), "lambda": lams}
        for metric in ("modifier_he", "sequence_he", "ood_token_acc"):
            a = [base[key(r)][metric] for r in reg]
            b = [r[metric] for r in reg]
            t = paired_ttest(b, a)
            by_seed_a: dict[int, list[float]] = defaultdict(list)
            by_seed_b: dict[int, list[float]] = defaultdict(list)
            for r, va, vb in zip(reg, a, b):
                by_seed_a[r["spec"]["seed"]].append(va)
                by_seed_b[r["spec"]["seed"]].append(vb)
            seeds = sorted(by_seed_a)
            entry = {
                "plain_mean": float(np.mean(a)), "reg_mean": float(np.mean(b)),
                "paired_t_over_models": {"t": t.statistic, "p": t.p_value, "dz": t.effect_size},
            }
            if len(seeds) >= 2:
                ts = paired_ttest(
                    [np.mean(by_seed_b[s]) for s in seeds], [np.mean(by_seed_a[s]) for s in seeds]
                )
                entry["paired_t_over_seeds"] = {"t": ts.statistic, "p": ts.p_value, "n": ts.n}
            tests[metric] = entry
        out["regularisation"] = tests
    return out


def scatter(rows: list[dict[str, Any]], analysis: dict[str, Any], path: Path) -> None:
    """Modifier / sequence HE vs OOD accuracy per model (colour = noise), level means + fits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for ax, metric in zip(axes, ("modifier_he", "sequence_he")):
        for lam, marker in ((0.0, "o"), (None, "^")):
            sel = [
                r for r in rows if r[metric] is not None
                and ((r["spec"]["he_lambda"] == 0) if lam == 0.0 else r["spec"]["he_lambda"] > 0)
            ]
            if not sel:
                continue
            sc = ax.scatter(
                [r[metric] for r in sel], [r["ood_token_acc"] for r in sel],
                c=[r["spec"]["noise"] for r in sel], cmap="viridis", vmin=0, vmax=15,
                marker=marker, label="plain" if lam == 0.0 else "HE-regularised", alpha=0.8,
            )
        means = analysis.get("noise_level_means", {})
        if metric == "modifier_he" and len(means) >= 3:
            hx = np.array([m["modifier_he"] for m in means.values()])
            acc = np.array([m["ood_token_acc"] for m in means.values()])
            ax.plot(hx, acc, "kx", ms=9, label="noise-level means")
            grid = np.linspace(hx.min(), hx.max(), 100)
            for d, r2 in analysis.get("poly_r2_modifier_he_vs_ood", {}).items():
                ax.plot(grid, np.polyval(np.polyfit(hx, acc, int(d)), grid), lw=1,
                        label=f"deg {d}: R^2={r2:.2f}")
        ax.set_xlabel(f"{metric.replace('_', ' ')} (last block, [C] MSE)")
        ax.set_ylabel("OOD token accuracy (ood_len 5..12)")
        ax.legend(fontsize=7)
    fig.colorbar(sc, ax=axes, label="noise tokens")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_population(args: argparse.Namespace) -> list[ModelSpec]:
    """Grid: noise x seeds (2-clause, default depth) + coverage + depth sweeps, x lambdas."""
    common = dict(out_root=str(Path(args.out) / "models"), steps=args.steps,
                  max_samples=args.max_samples, n_ood_per_length=args.n_ood,
                  d_model=args.d_model, he_pairs=args.he_pairs)
    specs: list[ModelSpec] = []
    for seed in args.seeds:  # seed-major: an interrupted run still has complete paired seeds
        for lam in args.he_lambda:
            for n in args.noise:
                specs.append(
                    ModelSpec(noise=n, seed=seed, he_lambda=lam, n_layers=args.layers, **common)
                )
    for k in args.coverage:
        for seed in args.seeds:
            specs.append(ModelSpec(train_clauses=tuple(range(1, k + 1)), seed=seed,
                                   n_layers=args.layers, **common))
    for depth in args.depth:
        for seed in args.seeds:
            specs.append(ModelSpec(n_layers=depth, seed=seed, **common))
    return list(dict.fromkeys(specs))


def main(argv: list[str] | None = None, *, executor: Any = None) -> dict[str, Any]:
    """Run (or resume) the population, analyse it, write study.json and scatter.png.

    ``executor`` (an :class:`probekit.executor.Executor`) overrides ``--executor``.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--noise", type=int, nargs="*", default=[0, 3, 6, 9, 12, 15])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--coverage", type=int, nargs="*", default=[], help="max training clauses")
    ap.add_argument("--depth", type=int, nargs="*", default=[], help="layer counts (no noise)")
    ap.add_argument("--he-lambda", type=float, nargs="*", default=[0.0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=450, help="[C]: ~15 epochs of 1000 = 450")
    ap.add_argument("--max-samples", type=int, default=1000)
    ap.add_argument("--n-ood", type=int, default=200, help="commands per OOD length")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--he-pairs", type=int, default=256, help="regulariser pairs per step")
    ap.add_argument("--executor", default=None, help="inprocess (default) or ray")
    ap.add_argument("--ray-address", default=None,
                    help="Ray cluster (implies --executor ray): 'auto' or the head's HOST:6379")
    ap.add_argument("--smoke", action="store_true", help="tiny population (tests)")
    ap.add_argument("--analyse-only", action="store_true",
                    help="analyse the models already finished; train nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.noise, args.seeds, args.steps = [0, 6, 15], [0], 20
        args.max_samples, args.n_ood, args.d_model, args.he_pairs = 40, 6, 32, 16
        args.he_lambda = [0.0, 0.5] if args.he_lambda == [0.0] else args.he_lambda
    args.out.mkdir(parents=True, exist_ok=True)
    specs = build_population(args)
    if args.analyse_only:
        specs = [s for s in specs if (Path(s.out_root) / s.name / RESULT).is_file()]
    t0 = time.perf_counter()
    if executor is None and args.ray_address is not None:
        executor = get_executor("ray", address=args.ray_address)
    rows = get_executor(executor or args.executor).map(run_model, specs, desc="he-study models")
    analysis = analyse(rows)
    analysis["wall_s"] = round(time.perf_counter() - t0, 1)
    analysis["train_s_total"] = round(sum(r["train_s"] for r in rows), 1)
    analysis["he_s_total"] = round(sum(r["he_s"] for r in rows), 1)
    analysis["argv"] = list(argv) if argv is not None else sys.argv[1:]
    summary = {"analysis": analysis, "models": [
        {k: r[k] for k in ("name", "spec", "modifier_he", "sequence_he", "id_token_acc",
                           "ood_token_acc", "train_s", "he_s")}
        | {"modifier_he_normalised": r["he"].get("modifier", {}).get("he_normalised"),
           "modifier_he_ridge": r["he"].get("modifier", {}).get("he_ridge")}
        for r in rows
    ]}
    (args.out / "study.json").write_text(json.dumps(summary, indent=1))
    if any(r["modifier_he"] is not None for r in rows):
        scatter(rows, analysis, args.out / "scatter.png")
    return summary


if __name__ == "__main__":
    res = main()
    print(json.dumps(res["analysis"], indent=1))
