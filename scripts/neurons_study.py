"""Relation neurons on SmolLM2-135M (Liu et al. 2025 in spirit): the ``[[neurons]]`` suite on a fact file.

    python scripts/neurons_study.py --out out/neurons [--facts FILE] [--fraction 0.001]
        [--n-random N] [--n-spread 19] [--no-generation] [--post]

A thin caller of the suite section (``probekit/suites/analyses/neurons.py``, the one pipeline):
writes a suite for the fact file (JSONL: ``text``, ``relation``, ``subject``, ``object``,
``split`` = identify|test) into ``--out``, runs it (``report.html`` + ``report.json``), and saves
``neurons.json`` (a summary + every number of the section) and the section's plots as PNG
(``versatility.png``, ``cumulativity.png``, ``ap_by_layer.png``). ``--n-random`` defaults to the
fewest random sets with which Holm over the relations can reach alpha = 0.05.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

SUITE = """\
[suite]
name = "relation-neurons-study"
description = "Relation-specific neurons (Liu et al. 2025): AP selection, deactivation vs matched random sets."

[model]
name = {model}

[data]
file = {facts}
label = "relation"
train_split = "identify"
test_split = "test"
prepend_bos = false

[[neurons]]
object_column = "object"
fraction = {fraction}
n_spread = {n_spread}
generation = {generation}
post = {post}
batch_size = {batch_size}
{n_random}
[stats]
alpha = 0.05
"""

PLOTS = {"First-token accuracy change": "versatility.png", "Cumulativity": "cumulativity.png",
         "Most relation-specific unit": "ap_by_layer.png"}


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of a ``[[neurons]]`` section's data."""
    exp = data["experiments"]
    rels = exp["relations"]
    change = np.array(exp["change_first"], dtype=float)
    off = ~np.eye(len(rels), dtype=bool)
    return {
        "n_candidate_units": sum(s["n_units"] for s in data["statistics"]["sites"].values()),
        "set_size": exp["set_sizes"][rels[0]],
        "n_random": exp["n_random"],
        "n_test": dict(zip(rels, exp["n_test"], strict=True)),
        "baseline_first": dict(zip(rels, exp["baseline_first"], strict=True)),
        "baseline_generation": dict(zip(rels, exp["baseline_generation"], strict=True)),
        "own_change": dict(zip(rels, np.diag(change).tolist(), strict=True)),
        "mean_intra_change": float(np.diag(change).mean()),
        "mean_inter_change": float(change[off].mean()),
        "p": {t["relation"]: t["p"] for t in exp["tests"]},
        "p_floor": exp.get("p_floor"),
        "p_holm": {t["relation"]: t["p_holm"] for t in exp["tests"]},
        "p_holm_floor": exp.get("p_holm_floor"),
        "generation_p": {t["relation"]: t["p"] for t in exp.get("generation", {}).get("tests", [])},
        "generation_p_holm": {t["relation"]: t["p_holm"]
                              for t in exp.get("generation", {}).get("tests", [])},
        "interference_cells": exp["interference"],
    }


#: the [[neurons]] keys that are flags of this script (``--no-generation`` turns generation off)
NEURON_FLAGS = ("fraction", "n_random", "n_spread", "generation", "post")


def main(argv: list[str] | None = None) -> None:
    """Run the suite and write the report, ``neurons.json`` and PNG plots to ``--out``."""
    from probekit.neurons.study import read_facts
    from probekit.report.plots import heatmap, line_plot
    from probekit.report.write import write_report
    from probekit.suites import load_suite, run_suite
    from probekit.suites.analyses.neurons import NeuronsSpec
    from probekit.util.cli_options import add_config_flags, config_from_flags
    from probekit.util.io import atomic_write_json, sha256_file

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--facts", type=Path, default=Path("probes/data/relation_facts.jsonl"))
    # the [[neurons]] options: flags generated from the section's config (one declaration)
    add_config_flags(ap, NeuronsSpec, NEURON_FLAGS)
    ap.add_argument("--batch-size", type=int, default=64,
                    help="prompts per forward (this study's 64 on SmolLM2; the section's default is 32)")
    args = ap.parse_args(argv)
    config_from_flags(args, NeuronsSpec, NEURON_FLAGS)  # a bad value names its flag, before any work
    t0 = time.perf_counter()
    read_facts(args.facts)  # FILE:LINE errors for a malformed fact file before the model loads
    args.out.mkdir(parents=True, exist_ok=True)
    toml = SUITE.format(
        model=json.dumps(args.model), facts=json.dumps(str(args.facts.resolve())),
        fraction=args.fraction, n_spread=args.n_spread,
        generation=str(args.generation).lower(), post=str(args.post).lower(),
        batch_size=args.batch_size,
        n_random="" if args.n_random is None else f"n_random = {args.n_random}\n",
    )
    (args.out / "suite.toml").write_text(toml)
    result = run_suite(load_suite(args.out / "suite.toml"), cache_dir=args.out / "cache")
    write_report(result, args.out)
    (section,) = [a for a in result.analyses if a.section == "neurons"]
    plots = []
    for block in section.to_dict()["blocks"]:
        name = next((f for t, f in PLOTS.items() if block.get("title", "").startswith(t)), None)
        if name is not None:
            draw = heatmap if block["block"] == "heatmap" else line_plot
            (args.out / name).write_bytes(draw(block))
            plots.append(name)
    head = {"model": args.model, "facts": str(args.facts), "facts_sha256": sha256_file(args.facts),
            "seconds": round(time.perf_counter() - t0, 1), **summary(section.data)}
    payload = {"summary": head, "warnings": list(section.warnings), **section.data, "plots": plots}
    atomic_write_json(args.out / "neurons.json", json.loads(json.dumps(payload, allow_nan=False)))
    print(json.dumps(head, indent=1))
    print(f"done in {head['seconds']:.0f} s -> {args.out} (report.html, neurons.json, {plots})")


if __name__ == "__main__":
    main()
