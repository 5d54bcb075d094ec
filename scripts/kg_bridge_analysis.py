"""Bridge-entity mechanism of a KG-composition checkpoint (Wang et al. 2024), ID vs OOD.

Logit lens of the bridge at r1 and of the answer at the last token per block, and causal
tracing with counterfactual head entities, for the checkpoint's ``test_id`` and ``test_ood``
queries (and up to ``--max-train`` two-hop training queries). Writes the numbers as JSON.

    python scripts/kg_bridge_analysis.py probes/checkpoints/kg-composition --out docs/kg_bridge.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    """Run the analysis and print one table per measurement."""
    from probekit.kg import bridge_entity_analysis, bridge_entity_probe
    from probekit.models import load_checkpoint
    from probekit.models.checkpoint import read_checkpoint_meta
    from probekit.testbeds import task_from_dict

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--out", default=None)
    parser.add_argument("--max-train", type=int, default=200)
    parser.add_argument("--max-traced", type=int, default=64)
    parser.add_argument("--probe-train", type=int, default=5000,
                        help="two-hop training queries for the linear bridge probe")
    parser.add_argument("--pairs-out", default=None,
                        help="also write the ID query/counterfactual pairs as JSONL for `probekit patch`")
    args = parser.parse_args()
    torch.set_num_threads(1)
    extra = read_checkpoint_meta(args.checkpoint)["extra"]
    task = task_from_dict(extra["task"], extra["task_config"])
    model = load_checkpoint(args.checkpoint)
    splits = task.splits()
    groups = {"id": splits["test_id"], "ood": splits["test_ood"]}
    train = splits["train"]
    two_hop = np.flatnonzero(np.array(train.metadata["hop"]) == 2)
    rng = np.random.default_rng(0)
    groups["train"] = train.subset(np.sort(rng.choice(two_hop, size=min(args.max_train, two_hop.size),
                                                       replace=False)))
    e = task.entity_id
    q = {g: [t[:3] for t in ds.tokens] for g, ds in groups.items()}
    b = {g: [e(x) for x in ds.metadata["bridge"]] for g, ds in groups.items()}
    a = {g: [t[3] for t in ds.tokens] for g, ds in groups.items()}
    f = task.atomic_facts
    facts = {(e(h), task.relation_id(r)): e(t) for h, r, t in zip(f.head, f.relation, f.tail)}
    res = bridge_entity_analysis(model, q, b, a, facts=facts, max_traced=args.max_traced)
    out = {"checkpoint": args.checkpoint, "step": extra.get("step"), "task_config": extra["task_config"],
           "n_queries": {g: len(v) for g, v in q.items()}, "accuracy": res.accuracy,
           "lens": res.summary(1), "lens_top5": res.summary(5), "tracing": {}}
    print(f"answer accuracy: {res.accuracy}")
    for g, s in res.summary(1).items():
        print(f"{g:5s} bridge top-1 by block {np.round(s['bridge_top_k'], 3).tolist()}  "
              f"MRR {np.round(s['bridge_mrr'], 3).tolist()}  answer top-1 {np.round(s['answer_top_k'], 3).tolist()}")
    for g, tr in res.tracing.items():
        norm = tr.normalized
        out["tracing"][g] = {"n_pairs": int(tr.per_pair.shape[0]), "normalized": norm.tolist(),
                             "clean": float(tr.clean.mean()), "corrupt": float(tr.corrupt.mean()),
                             "axes": list(tr.axes)}
        print(f"{g}: causal tracing (resid_post, rows = blocks, cols = h, r1, r2), "
              f"{tr.per_pair.shape[0]} pairs, clean {float(tr.clean.mean()):.2f}, corrupt "
              f"{float(tr.corrupt.mean()):.2f}:\n{np.round(norm.numpy(), 3)}")
    pick = np.sort(rng.choice(two_hop, size=min(args.probe_train, two_hop.size), replace=False))
    probe = bridge_entity_probe(model, [train.tokens[i][:3] for i in pick],
                                [e(train.metadata["bridge"][i]) for i in pick],
                                {g: q[g] for g in ("id", "ood")}, {g: b[g] for g in ("id", "ood")})
    out["probe"] = {"accuracy": probe.accuracy, "train_accuracy": probe.train_accuracy,
                    "n_train": probe.n_train, "n_classes": probe.n_classes}
    print(f"linear bridge probe at r1 (trained on {probe.n_train} two-hop training queries with "
          f"unseen (h, r1) prefixes), accuracy by block: "
          + ", ".join(f"{g} {np.round(v, 3).tolist()}" for g, v in probe.accuracy.items()))
    if args.pairs_out:
        from probekit.kg import counterfactual_queries

        cf = counterfactual_queries(q["id"], facts, seed=0)
        lines = []
        for i, c in enumerate(cf):
            if c is None or len(lines) >= 2 * args.max_traced:
                continue
            t2 = facts[(facts[(c[0], c[1])], c[2])]
            for role, toks, ans in (("clean", q["id"][i], a["id"][i]), ("corrupt", c, t2)):
                lines.append(json.dumps({"tokens": list(toks), "pair_id": i, "role": role,
                                         "answer": task.vocab.tokens[ans], "split": "pairs"}))
        Path(args.pairs_out).write_text("\n".join(lines) + "\n")
        print(f"wrote {len(lines) // 2} pairs to {args.pairs_out}")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
