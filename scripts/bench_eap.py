"""Bench: edge attribution (EAP, EAP-IG) and top-k edge circuits on SmolLM2-135M.

A batch of capital-city prompt pairs (``scripts/bench_patching.py``'s): EAP over all edges of
the graph (input, 270 heads, 30 MLPs, logits; q per query head, k/v per KV head) timed against
a plain forward of the same prompts in the same run (ratio), EAP-IG with the paper's 5 steps,
and the faithfulness of the top-k circuits (each one edge-patched forward per pair).

    python scripts/bench.py --sections eap
    python scripts/bench_eap.py [--pairs 8] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from probekit.circuits import edge_attribution, faithfulness_curve, logit_diff  # noqa: E402
from probekit.interventions import run_with_interventions  # noqa: E402
from probekit.models import load_model  # noqa: E402
from scripts.bench_patching import _pairs  # noqa: E402


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench_eap(device: str = "cpu", n_pairs: int = 8, ks: tuple[int, ...] = (10, 100, 1000, 10000)) -> dict:
    """Time EAP / EAP-IG / top-k faithfulness on SmolLM2 and report the numbers."""
    torch.manual_seed(0)
    model = load_model("smollm2-135m", device=device)
    pairs = _pairs(model, n_pairs)
    clean = [p[0] for p in pairs]
    corrupt = [p[1] for p in pairs]
    metric = partial(logit_diff, answer=torch.tensor([p[2] for p in pairs]), foil=torch.tensor([p[3] for p in pairs]))
    run_with_interventions(model, clean, logits="last")  # warm-up
    _, t_fwd = _time(lambda: run_with_interventions(model, clean, logits="last"))
    eap, t_eap = _time(lambda: edge_attribution(model, clean, corrupt, metric, batch_size=n_pairs))
    ig, t_ig = _time(lambda: edge_attribution(model, clean, corrupt, metric, method="eap-ig", batch_size=5 * n_pairs))
    ks = tuple(k for k in ks if k <= eap.graph.n_edges) + (eap.graph.n_edges,)
    curve, t_curve = _time(lambda: faithfulness_curve(model, clean, corrupt, metric, ig, ks,
                                                          batch_size=n_pairs))
    flat = torch.stack([eap.scores.flatten(), ig.scores.flatten()])
    return {
        "device": device, "pairs": n_pairs, "tokens": len(clean[0]), "edges": eap.graph.n_edges,
        "forward_s": t_fwd, "eap_s": t_eap, "eap_over_forward": t_eap / t_fwd,
        "eap_ig5_s": t_ig, "eap_ig_over_eap": t_ig / t_eap,
        "eap_vs_eap_ig_pearson": float(torch.corrcoef(flat)[0, 1]),
        "clean_logit_diff": float(eap.clean.mean()), "corrupt_logit_diff": float(eap.corrupt.mean()),
        "curve_ks": list(ks), "curve_normalized_eap_ig": [float(x) for x in curve.normalized],
        "curve_s": t_curve, "curve_s_per_circuit": t_curve / len(ks),
        "top_edges_eap_ig": [f"{s} -> {d}: {v:.3f}" for s, d, v in ig.top(8)],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print its JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    res = bench_eap(args.device, args.pairs)
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
