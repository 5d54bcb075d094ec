"""Matplotlib figures for probe reports, returned as PNG bytes (embedded, no CDN)."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _labels(rows: list[dict[str, Any]]) -> list[str]:
    return [r["site"].replace("blocks.", "").replace(".hook_", " ") for r in rows]


def metric_by_layer(entry: dict[str, Any]) -> bytes:
    """Train / validation / test (with bootstrap CI) and every OOD split, per site."""
    sweep = entry["sweep"]
    rows = sweep["rows"]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(rows) + 3), 3.8))
    test = np.array([r["test"] for r in rows])
    lo = np.array([r["test_ci"][0] for r in rows])
    hi = np.array([r["test_ci"][1] for r in rows])
    ax.plot(x, [r["train"] for r in rows], ":", color="grey", label="train")
    ax.plot(x, [r["val"] for r in rows], "--", color="tab:blue", alpha=0.6, label="CV validation")
    ax.plot(x, test, "o-", color="tab:blue", label="test (ID)")
    ax.fill_between(x, lo, hi, color="tab:blue", alpha=0.2)
    colors = iter(["tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive"])
    for key in [k for k in rows[0] if k.startswith("ood/")]:
        name = key.split("/", 1)[1]
        c = next(colors, "black")
        vals = np.array([r[key] for r in rows])
        ci = np.array([r[f"ood_ci/{name}"] for r in rows])
        ax.plot(x, vals, "s-", color=c, label=f"OOD {name}")
        ax.fill_between(x, ci[:, 0], ci[:, 1], color=c, alpha=0.15)
    if "chance" in entry:
        ax.axhline(entry["chance"], color="black", lw=0.8, ls="-.", label="chance")
    best = next(i for i, r in enumerate(rows) if r["site"] == sweep["best"]["site"] and r["layer"] == sweep["best"]["layer"])
    ax.axvline(best, color="green", lw=0.8, alpha=0.6, label="selected (val)")
    ax.set_xticks(x, _labels(rows), rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(sweep["metric"])
    ax.set_title(f"{entry['kind']} probe for {entry['label']!r}")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return _png(fig)


def selectivity_plot(entry: dict[str, Any]) -> bytes:
    rows = entry["sweep"]["rows"]
    control = entry["control"]["rows"]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(rows) + 3), 3.4))
    ax.bar(x - 0.2, [r["test"] for r in rows], 0.4, label="task", color="tab:blue")
    ax.bar(x + 0.2, [r["test"] for r in control], 0.4, label="control task", color="tab:grey")
    ax.plot(x, entry["selectivity"], "o-", color="tab:green", label="selectivity")
    ax.set_xticks(x, _labels(rows), rotation=60, ha="right", fontsize=7)
    ax.set_title("Selectivity (Hewitt & Liang 2019): task - control accuracy")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    return _png(fig)


def pvalue_plot(entry: dict[str, Any], alpha: float) -> bytes:
    rows = entry["sweep"]["rows"]
    perm = entry["permutation"]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(rows) + 3), 3.0))
    floor = 1.0 / (1 + perm["n_permutations"])
    ax.plot(x, -np.log10(np.maximum(perm["p_values"], floor)), "o-", label="raw p")
    ax.plot(x, -np.log10(np.maximum(perm["p_adjusted"], floor)), "s-", label=f"{perm['correction']}-adjusted")
    ax.axhline(-np.log10(alpha), color="red", ls="--", lw=0.8, label=f"alpha={alpha}")
    ax.set_xticks(x, _labels(rows), rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("-log10 p")
    ax.set_title("Permutation tests per site")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)
