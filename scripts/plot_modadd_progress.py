"""Plot Nanda et al. (2023) progress measures from a ``probekit test`` report of modadd_progress.

Reads the ``restricted_loss_lead`` claim's curves (``claims[i].details``) from ``report.json``
and writes a two-panel PNG (losses on a log scale with the threshold crossings; Fourier Gini,
weight norm and key-frequency share) plus the curves as JSON:

    probekit test circuits/modadd_progress.toml --out out/modadd_progress
    python scripts/plot_modadd_progress.py out/modadd_progress/report.json \
        --png docs/modadd_progress_p53.png --json docs/modadd_progress_p53.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

CURVES = ("train_loss", "test_loss", "restricted_loss", "excluded_loss", "test_acc", "gini_embed",
          "gini_neuron_logit", "sum_sq_weights", "norm_per_margin", "key_power_share")


def main(argv: list[str] | None = None) -> int:
    """Write the figure (and the curves) of the report's first ``restricted_loss_lead`` claim."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", help="report.json of `probekit test circuits/modadd_progress.toml`")
    ap.add_argument("--png", required=True)
    ap.add_argument("--json", default=None, help="also write the curves here")
    args = ap.parse_args(argv)
    report = json.loads(Path(args.report).read_text())
    claim = next(c for c in report["claims"] if c["measure"] == "restricted_loss_lead")
    d = claim["details"]
    steps = np.asarray(d["steps"], dtype=float)
    t = float(report["suite"]["claim"][report["claims"].index(claim)]["loss_threshold"])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    floor = 1e-6
    for name, style in (("train_loss", ":"), ("test_loss", "-"), ("restricted_loss", "-"),
                        ("excluded_loss", "--")):
        ax.plot(steps, np.maximum(d[name], floor), style, label=name.replace("_", " "))
    ax.axhline(t, color="grey", lw=0.8)
    for key, label in (("restricted_step", "restricted"), ("test_step", "held-out")):
        ax.axvline(d[key], color="grey", ls=":", lw=0.8)
        ax.text(d[key], t * 1.3, f" {label} < {t:g} at {d[key]:.0f}", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats)")
    ax.set_title(f"lead {claim['effect']:.0f} steps [{claim['ci'][0]:.0f}, {claim['ci'][1]:.0f}]; "
                 f"keys {d['keys']}; {d.get('path', 'logits')} path")
    ax.legend(fontsize=8)
    bx.plot(steps, d["gini_embed"], label="Gini of W_E Fourier norms")
    bx.plot(steps, d["gini_neuron_logit"], label="Gini of W_L Fourier norms")
    bx.plot(steps, d["key_power_share"], label="key share of sum-direction power")
    bx.plot(steps, np.asarray(d["test_acc"]), ":", label="held-out accuracy")
    bx.set_xlabel("step")
    bx.set_ylim(0, 1.05)
    cx = bx.twinx()
    cx.plot(steps, d["sum_sq_weights"], "k--", lw=1, label="sum of squared weights")
    cx.set_ylabel("sum of squared weights")
    lines = bx.get_legend_handles_labels()
    more = cx.get_legend_handles_labels()
    bx.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="center right")
    bx.set_title("Fourier sparsity and weight norm")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    if args.json:
        out = {k: d[k] for k in ("p", "keys", "steps", "restricted_step", "test_step", *CURVES)}
        out.update(lead=claim["effect"], lead_ci=claim["ci"], loss_threshold=t)
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
