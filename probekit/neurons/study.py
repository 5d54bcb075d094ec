"""The relation-neuron study on a fact file: statistics -> deactivation -> JSON + plots.

A fact file is JSONL with ``text`` (the prompt), ``relation``, ``object`` (gold, ``|``-separated
aliases) and ``split`` (``identify`` for ranking neurons, ``test`` for deactivation; subjects of
the two splits are disjoint). Units: for gated MLPs (Llama family) ``mlp_pre`` (gate) and
``mlp_pre_linear`` (up) of every layer, ranked together (the lineage code's units, neurons.md);
otherwise ``mlp_pre``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..inputs import read_jsonl
from ..models.protocol import HookedModel
from ..sites import Site
from ..util.io import atomic_write_json, sha256_file
from .deactivation import FactSet
from .experiments import DeactivationConfig, RelationNeuronResult, relation_neuron_experiments
from .statistics import NeuronStatistics, neuron_statistics

REQUIRED = ("text", "relation", "object", "split")


def read_facts(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a fact file, each checked for the required keys (``FILE:LINE`` errors)."""
    rows = read_jsonl(path)
    for row in rows:
        missing = [k for k in REQUIRED if k not in row.data]
        if missing:
            raise DataError(f"{row.where}: missing {missing}; a fact needs {list(REQUIRED)}")
        if row.data["split"] not in ("identify", "test"):
            raise DataError(
                f"{row.where}: split {row.data['split']!r}; use 'identify' or 'test'"
            )
    return [r.data for r in rows]


def candidate_sites(model: HookedModel) -> tuple[Site, ...]:
    """``mlp_pre`` (+ ``mlp_pre_linear`` where the MLP is gated) of every layer."""
    kinds = ["mlp_pre"]
    if "blocks.0.mlp.hook_pre_linear" in model.hook_dict:
        kinds.append("mlp_pre_linear")
    return tuple(Site(layer, kind) for layer in range(model.cfg.n_layers) for kind in kinds)


def _plot(result: RelationNeuronResult, stats: NeuronStatistics, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    rels = list(result.relations)
    fig, ax = plt.subplots(figsize=(1.1 * len(rels) + 2, 0.9 * len(rels) + 1.5))
    m = 100 * result.change_first.numpy()
    im = ax.imshow(m, cmap="RdBu", vmin=-100, vmax=100)
    lo, hi = (100 * t.numpy() for t in result.random_spread())
    for i in range(len(rels)):
        for j in range(len(rels)):
            ax.text(j, i, f"{m[i, j]:+.0f}\n[{lo[i, j]:+.0f},{hi[i, j]:+.0f}]", ha="center",
                    va="center", fontsize=7)
    ax.set_xticks(range(len(rels)), rels, rotation=45, ha="right")
    ax.set_yticks(range(len(rels)), rels)
    ax.set_xlabel("relation scored (test facts)")
    ax.set_ylabel("relation whose neurons are off")
    ax.set_title("first-token accuracy change, pts\n[random-set min, max]", fontsize=9)
    fig.colorbar(im, ax=ax, label="accuracy change (pts)")
    fig.tight_layout()
    fig.savefig(out / "versatility.png", dpi=110)
    plt.close(fig)
    files.append("versatility.png")

    layers, best = stats.max_ap_by_layer()
    curves = [
        ("cumulativity.png", rels, [100 * x for x in result.shares], 100 * result.cumulative.numpy(),
         "share of the relation's neurons deactivated (%)", "accuracy drop on the relation (pts)",
         "cumulativity"),
        ("ap_by_layer.png", list(stats.relations), layers, best.numpy(), "layer", "max unit AP (identification prompts)",
         "where the most relation-specific units are"),
    ]
    for name, names, x, ys, xlabel, ylabel, title in curves:
        fig, ax = plt.subplots(figsize=(6, 3.8))
        for r, y in zip(names, ys, strict=True):
            ax.plot(x, y, "o-", label=r, markersize=3)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files


def run_relation_neuron_study(
    model: HookedModel,
    facts_path: str | Path,
    out: str | Path,
    *,
    fraction: float | None = 0.001,
    k: int | None = None,
    n_random: int = 19,
    generation: bool = True,
    sites: Sequence[Site] | None = None,
    batch_size: int = 32,
) -> dict[str, Any]:
    """Statistics on the ``identify`` facts, deactivation on the ``test`` facts; writes ``out``.

    ``model`` is a loaded model or a name for :func:`probekit.models.load_model`. Writes
    ``neurons.json`` (every number, strict JSON) and PNG plots; the activation store of the
    identification pass is kept in ``out/store`` so a rerun does not capture again.
    """
    from ..models import load_model

    rows = read_facts(facts_path)
    name = model if isinstance(model, str) else getattr(model.cfg, "model_name", "model")
    if isinstance(model, str):
        model = load_model(model)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ident = [r for r in rows if r["split"] == "identify"]
    test = [r for r in rows if r["split"] == "test"]
    overlap = {r.get("subject") for r in ident} & {r.get("subject") for r in test} - {None}
    if overlap:
        raise DataError(
            f"identify and test facts share subjects {sorted(overlap)[:5]}; split by subject"
        )
    site_list = tuple(sites or candidate_sites(model))
    ident_facts = FactSet.from_texts(
        model, [r["text"] for r in ident], [r["relation"] for r in ident],
        [r["object"] for r in ident],
    )
    stats = neuron_statistics(
        model, ident_facts.tokens, ident_facts.relations, site_list, store_dir=out / "store",
        batch_size=batch_size,
    )
    test_facts = FactSet.from_texts(
        model, [r["text"] for r in test], [r["relation"] for r in test],
        [r["object"] for r in test],
    )
    cfg = DeactivationConfig(
        k=k, fraction=None if k is not None else fraction, n_random=n_random,
        generation=generation, batch_size=batch_size,
    )
    result = relation_neuron_experiments(model, stats, test_facts, cfg)
    plots = _plot(result, stats, out)
    rels = result.relations
    diag = np.diag(result.change_first.numpy())
    off = result.change_first.numpy()[~np.eye(len(rels), dtype=bool)]
    summary = {
        "model": name,
        "facts": str(facts_path),
        "facts_sha256": sha256_file(facts_path),
        "n_identify": len(ident),
        "n_test": len(test),
        "n_candidate_units": stats.n_units,
        "set_size": len(next(iter(result.sets.values()))),
        "baseline_first": dict(zip(rels, result.baseline_first.tolist(), strict=True)),
        "baseline_generation": dict(
            zip(rels, [None if np.isnan(v) else v for v in result.baseline_generation.tolist()],
                strict=True)
        ),
        "mean_intra_change": float(diag.mean()),
        "mean_inter_change": float(off.mean()),
        "p_holm": dict(zip(rels, result.p_holm, strict=True)),
        "interference_cells": [list(c) for c in result.interference],
    }
    payload = {
        "summary": summary,
        "statistics": stats.to_dict(),
        "experiments": result.to_dict(),
        "plots": plots,
    }
    atomic_write_json(out / "neurons.json", json.loads(json.dumps(payload, allow_nan=False)))
    return payload
