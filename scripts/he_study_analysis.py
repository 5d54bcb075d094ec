"""Statistics and plots of the HE population study (An & Du 2026) over finished models.

Pure functions of the per-model result rows written by ``scripts/he_study.py`` (no training, no
model): one analysis per sweep (noise, coverage, depth; per training schedule), the
HE-regularised vs plain comparison, and the plots. Per sweep:

* level means of modifier / sequence HE, ID and OOD token accuracy (seed mean per level) and
  [C]'s polynomial fits (degrees 1-3) of OOD accuracy on modifier HE over those means, R^2;
* over single models (ours): Pearson r (Fisher-z CI) and Spearman rho (Fisher-z CI with the
  Bonett & Wright 2000 variance) of HE with OOD accuracy, and of the sweep level with HE.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: the sweeps of [C]'s probe study; a plain model belongs to each whose fixed settings it has
SWEEPS = ("noise", "coverage", "depth")
_METRICS = ("modifier_he", "modifier_he_normalised", "sequence_he", "sequence_he_normalised",
            "ood_token_acc", "id_token_acc")


def value(row: dict[str, Any], metric: str) -> float | None:
    """A row's metric; ``*_he_normalised`` (ours: 1 - R^2) is read from the row's ``he`` block."""
    if metric.endswith("_he_normalised"):
        kind = metric.split("_")[0]
        return row.get("he", {}).get(kind, {}).get("he_normalised")
    return row.get(metric)


def schedule_label(spec: dict[str, Any]) -> str:
    """``"ep15"`` for an epoch schedule, ``"st450"`` for a fixed step count.

    A preset other than ``scan`` is appended (``"ep50_scan_he_paper"``), so models trained on
    different presets are never paired or pooled.
    """
    label = f"ep{spec['epochs']}" if spec.get("epochs") else f"st{spec['steps']}"
    preset = spec.get("preset", "scan")
    return label if preset == "scan" else f"{label}_{preset}"


def sweep_level(spec: dict[str, Any], sweep: str, *, layers: int = 4) -> int | None:
    """The level of a plain model in ``sweep`` (None when it is not part of that sweep).

    noise: 2-clause data, ``layers`` blocks, level = noise tokens; coverage: no noise, ``layers``
    blocks, data of 1..k clauses, level = k; depth: no noise, 2-clause data, level = blocks.
    """
    clauses = list(spec["train_clauses"])
    if sweep == "noise":
        return spec["noise"] if clauses == [2] and spec["n_layers"] == layers else None
    if sweep == "coverage":
        k = max(clauses)
        full = clauses == list(range(1, k + 1))
        return k if full and spec["noise"] == 0 and spec["n_layers"] == layers else None
    if sweep == "depth":
        return spec["n_layers"] if clauses == [2] and spec["noise"] == 0 else None
    raise ValueError(f"unknown sweep {sweep!r}; choose from {SWEEPS}")


def poly_r2(x: np.ndarray, y: np.ndarray, degree: int) -> float:
    """R^2 of a least-squares polynomial fit ``y ~ poly_degree(x)`` ([C]'s noise-sweep fit)."""
    coef = np.polyfit(x, y, degree)
    resid = y - np.polyval(coef, x)
    return float(1.0 - (resid**2).sum() / ((y - y.mean()) ** 2).sum())


def correlation(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Pearson r and Spearman rho with p-values and 95% CIs (``probekit.stats``)."""
    from probekit.stats import pearson, spearman

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"n": len(x), "note": "too few points or constant values"}
    p, s = pearson(x, y), spearman(x, y)
    return {
        "n": p.n, "pearson_r": p.statistic, "pearson_p": p.p_value,
        "pearson_ci": [p.ci_low, p.ci_high], "pearson_r2": p.r_squared,
        "spearman_rho": s.statistic, "spearman_p": s.p_value,
        "spearman_ci": [_nan_none(s.ci_low), _nan_none(s.ci_high)],
    }


def _nan_none(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)


def partial_correlation(rows: list[dict[str, Any]]) -> dict[str, Any]:
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

    out = correlation(
        resid([r["modifier_he"] for r in rows]).tolist(),
        resid([r["ood_token_acc"] for r in rows]).tolist(),
    )
    out["note"] = "residuals after a linear fit on ID token accuracy (p-value ignores that fit)"
    return out


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [value(r, key) for r in rows if value(r, key) is not None]
    return float(np.mean(vals)) if vals else None


def analyse_sweep(rows: list[dict[str, Any]], sweep: str, *, layers: int = 4) -> dict[str, Any]:
    """Level means, polynomial R^2 over them and single-model correlations for one sweep.

    ``rows`` are plain (``he_lambda == 0``) models of one training schedule.
    """
    levels: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        lv = sweep_level(r["spec"], sweep, layers=layers)
        if lv is not None and r["modifier_he"] is not None:
            levels[lv].append(r)
    members = [r for lv in sorted(levels) for r in levels[lv]]
    out: dict[str, Any] = {
        "levels": sorted(levels),
        "n_models": len(members),
        "seeds": sorted({r["spec"]["seed"] for r in members}),
        "level_means": {
            str(lv): {m: _mean(rs, m) for m in _METRICS} | {"n_models": len(rs)}
            for lv, rs in sorted(levels.items())
        },
    }
    if len(levels) >= 3:
        hx = np.array([out["level_means"][str(lv)]["modifier_he"] for lv in sorted(levels)])
        acc = np.array([out["level_means"][str(lv)]["ood_token_acc"] for lv in sorted(levels)])
        out["poly_r2_modifier_he_vs_ood"] = {
            str(d): poly_r2(hx, acc, d) for d in (1, 2, 3) if len(hx) >= d + 2
        }
        out["level_vs_modifier_he_level_means"] = correlation(sorted(levels), hx.tolist())
    lv_of = [sweep_level(r["spec"], sweep, layers=layers) for r in members]
    single: dict[str, Any] = {}
    for metric in ("modifier_he", "sequence_he", "modifier_he_normalised",
                   "sequence_he_normalised"):
        have = [r for r in members if value(r, metric) is not None]
        if have:
            single[f"{metric}_vs_ood"] = correlation(
                [value(r, metric) for r in have], [r["ood_token_acc"] for r in have]
            )
    out["single_models"] = single | {
        "level_vs_modifier_he": correlation(lv_of, [r["modifier_he"] for r in members]),
        "level_vs_modifier_he_normalised": correlation(
            [v for v, r in zip(lv_of, members) if value(r, "modifier_he_normalised") is not None],
            [value(r, "modifier_he_normalised") for r in members
             if value(r, "modifier_he_normalised") is not None],
        ),
        "level_vs_ood": correlation(lv_of, [r["ood_token_acc"] for r in members]),
        "modifier_he_vs_ood_given_id_acc": partial_correlation(members),
    }
    return out


def regularisation(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """HE-regularised vs plain, paired on (noise, clauses, depth, seed, schedule).

    Paired t-tests over single model pairs and, as [C], over per-seed means (one value per seed,
    the mean over the noise levels; only seeds that have every pair of the grid).
    """
    from probekit.stats import paired_ttest

    def key(r: dict[str, Any]) -> tuple:
        s = r["spec"]
        return (s["noise"], tuple(s["train_clauses"]), s["n_layers"], s["seed"],
                schedule_label(s))

    base = {key(r): r for r in rows if r["spec"]["he_lambda"] == 0}
    reg = [r for r in rows if r["spec"]["he_lambda"] > 0 and key(r) in base]
    if len(reg) < 2:
        return None
    tests: dict[str, Any] = {
        "n_pairs": len(reg), "lambda": sorted({r["spec"]["he_lambda"] for r in reg}),
        "seeds": sorted({r["spec"]["seed"] for r in reg}),
        "noise": sorted({r["spec"]["noise"] for r in reg}),
    }
    # [C]'s unit is a seed's mean over the noise levels; a seed missing some pair is left out
    grid = {(r["spec"]["noise"], key(r)[1:3]) for r in reg}
    complete = [s for s in tests["seeds"]
                if grid <= {(r["spec"]["noise"], key(r)[1:3]) for r in reg
                            if r["spec"]["seed"] == s}]
    tests["seeds_complete"] = complete
    for metric in ("modifier_he", "sequence_he", "ood_token_acc"):
        a = [base[key(r)][metric] for r in reg]
        b = [r[metric] for r in reg]
        t = paired_ttest(b, a)
        entry: dict[str, Any] = {
            "plain_mean": float(np.mean(a)), "reg_mean": float(np.mean(b)),
            "paired_t_over_models": {"t": t.statistic, "p": t.p_value, "dz": t.effect_size,
                                     "n": t.n, "mean_diff_ci": [t.ci_low, t.ci_high]},
        }
        seed_means = paired_seed_means(reg, a, b)
        seed_means = {s: v for s, v in seed_means.items() if s in complete}
        if len(seed_means) >= 2:
            sa, sb = zip(*seed_means.values())
            ts = paired_ttest(list(sb), list(sa))
            entry["paired_t_over_seeds"] = {
                "t": ts.statistic, "p": ts.p_value, "n": ts.n,
                "mean_diff_ci": [ts.ci_low, ts.ci_high],
                "per_seed": {str(s): {"plain": v[0], "reg": v[1]} for s, v in seed_means.items()},
            }
        tests[metric] = entry
    return tests


def paired_seed_means(
    reg: list[dict[str, Any]], plain: Sequence[float], regularised: Sequence[float]
) -> dict[int, tuple[float, float]]:
    """Per seed: (mean plain value, mean regularised value) over that seed's matched pairs."""
    acc: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for r, va, vb in zip(reg, plain, regularised):
        acc[r["spec"]["seed"]].append((va, vb))
    return {
        s: (float(np.mean([p[0] for p in v])), float(np.mean([p[1] for p in v])))
        for s, v in sorted(acc.items())
    }


def analyse(rows: list[dict[str, Any]], *, layers: int = 4) -> dict[str, Any]:
    """Every sweep (per schedule) with >= 2 levels, plus the regularisation comparison."""
    plain = [r for r in rows if r["spec"]["he_lambda"] == 0 and r["modifier_he"] is not None]
    out: dict[str, Any] = {"n_models": len(rows), "sweeps": {}}
    for sched in sorted({schedule_label(r["spec"]) for r in plain}):
        group = [r for r in plain if schedule_label(r["spec"]) == sched]
        for sweep in SWEEPS:
            res = analyse_sweep(group, sweep, layers=layers)
            if len(res["levels"]) >= 2:
                out["sweeps"][f"{sweep}/{sched}"] = res
    reg = regularisation(rows)
    if reg is not None:
        out["regularisation"] = reg
    return out


def plot_sweep(rows: list[dict[str, Any]], res: dict[str, Any], sweep: str, title: str,
               path: Path, *, layers: int = 4) -> None:
    """Three panels: modifier HE vs OOD, sequence HE vs OOD (colour = level), level means."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    members = [r for r in rows if sweep_level(r["spec"], sweep, layers=layers) is not None
               and r["modifier_he"] is not None]
    lv = [sweep_level(r["spec"], sweep, layers=layers) for r in members]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), constrained_layout=True)
    sc = None
    for ax, metric in zip(axes[:2], ("modifier_he", "sequence_he")):
        pts = [(r[metric], r["ood_token_acc"], v) for r, v in zip(members, lv)
               if r[metric] is not None]
        if pts:
            x, y, c = zip(*pts)
            sc = ax.scatter(x, y, c=c, cmap="viridis", vmin=min(lv), vmax=max(lv), alpha=0.8)
        if metric == "modifier_he" and "poly_r2_modifier_he_vs_ood" in res:
            means = res["level_means"]
            hx = np.array([means[str(v)]["modifier_he"] for v in res["levels"]])
            acc = np.array([means[str(v)]["ood_token_acc"] for v in res["levels"]])
            ax.plot(hx, acc, "kx", ms=9, label=f"{sweep}-level means")
            grid = np.linspace(hx.min(), hx.max(), 100)
            for d, r2 in res["poly_r2_modifier_he_vs_ood"].items():
                ax.plot(grid, np.polyval(np.polyfit(hx, acc, int(d)), grid), lw=1,
                        label=f"deg {d}: R^2={r2:.2f}")
            ax.legend(fontsize=7)
        corr = res["single_models"].get(f"{metric}_vs_ood", {})
        if "spearman_rho" in corr:
            ax.set_title(f"models: Spearman {corr['spearman_rho']:.2f}, "
                         f"Pearson {corr['pearson_r']:.2f} (n={corr['n']})", fontsize=9)
        ax.set_xlabel(f"{metric.replace('_', ' ')} (last block, [C] MSE)")
        ax.set_ylabel("OOD token accuracy (ood_len 5..12)")
    if sc is not None:
        fig.colorbar(sc, ax=axes[:2], label=sweep)
    ax = axes[2]
    levels = res["levels"]
    for metric, color in (("modifier_he", "C0"), ("sequence_he", "C2")):
        vals = [[r[metric] for r, v in zip(members, lv) if v == lev and r[metric] is not None]
                for lev in levels]
        keep = [(lev, v) for lev, v in zip(levels, vals) if v]
        if keep:
            ax.errorbar([k[0] for k in keep], [np.mean(k[1]) for k in keep],
                        yerr=[np.std(k[1]) for k in keep], color=color, marker="o", capsize=3,
                        label=metric.replace("_", " "))
    ax.set_xlabel(sweep)
    ax.set_ylabel("HE ([C] MSE); mean +- sd over seeds")
    ax.legend(loc="upper left", fontsize=7)
    ax2 = ax.twinx()
    for metric, color in (("ood_token_acc", "C3"), ("id_token_acc", "C1")):
        vals = [[r[metric] for r, v in zip(members, lv) if v == lev] for lev in levels]
        ax2.errorbar(levels, [np.mean(v) for v in vals], yerr=[np.std(v) for v in vals],
                     color=color, marker="s", ls="--", capsize=3, label=metric.replace("_", " "))
    ax2.set_ylabel("token accuracy")
    ax2.legend(loc="center right", fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_regularisation(rows: list[dict[str, Any]], path: Path) -> None:
    """Modifier HE vs OOD accuracy, plain and HE-regularised models (colour = noise)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2), constrained_layout=True)
    sc = None
    for reg, marker, label in ((False, "o", "plain"), (True, "^", "HE-regularised")):
        sel = [r for r in rows if (r["spec"]["he_lambda"] > 0) == reg
               and r["modifier_he"] is not None and sweep_level(r["spec"], "noise") is not None]
        if sel:
            sc = ax.scatter([r["modifier_he"] for r in sel], [r["ood_token_acc"] for r in sel],
                            c=[r["spec"]["noise"] for r in sel], cmap="viridis", vmin=0, vmax=15,
                            marker=marker, label=label, alpha=0.8)
    if sc is not None:
        fig.colorbar(sc, ax=ax, label="noise tokens")
    ax.set_xlabel("modifier HE (last block, [C] MSE)")
    ax.set_ylabel("OOD token accuracy")
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)
