"""Relation neurons on SmolLM2-135M (Liu et al. 2025 in spirit): statistics, deactivation, report.

    python scripts/neurons_study.py --out out/neurons [--fraction 0.001] [--n-random 19]

Reads probes/data/relation_facts.jsonl (identify/test subjects disjoint), ranks the gated-MLP
units (mlp_pre = gate, mlp_pre_linear = up; ranked together) of every layer by AP on the
identification prompts, and runs the deactivation experiments on the test prompts.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from probekit.neurons.study import run_relation_neuron_study


def main(argv: list[str] | None = None) -> None:
    """Run the study and write ``neurons.json`` + plots to ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--facts", type=Path, default=Path("probes/data/relation_facts.jsonl"))
    ap.add_argument("--fraction", type=float, default=0.001)
    ap.add_argument("--n-random", type=int, default=19)
    ap.add_argument("--no-generation", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = run_relation_neuron_study(
        args.model, args.facts, args.out, fraction=args.fraction, n_random=args.n_random,
        generation=not args.no_generation,
    )
    print(json.dumps(result["summary"], indent=1))
    print(f"done in {time.perf_counter() - t0:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
