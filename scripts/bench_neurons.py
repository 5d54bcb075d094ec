"""Benchmark: relation-neuron statistics, streaming vs run_with_cache-and-concatenate.

Ours: :func:`probekit.neurons.neuron_statistics` over every layer's gated-MLP units (``mlp_pre``
and ``mlp_pre_linear``): responses (mean over prompt tokens) stream into an activation store,
then exact AP/AUROC per site. Baseline (how the lineage code and a TransformerLens notebook do
it): ``run_with_cache`` per batch with a ``names_filter``, keep every token's activations,
concatenate, then average over tokens and rank with the same exact AP. Each side runs in its own
process so peak RSS is its own.

    python scripts/bench.py --sections neurons [--model smollm2-135m]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, tempfile, time
import torch
sys.path.insert(0, sys.argv[4])
from probekit.models import load_model
from probekit.neurons import neuron_statistics, statistics_from_responses
from probekit.neurons.study import candidate_sites, read_facts
mode, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(1)
model = load_model(name)
rows = read_facts(sys.argv[5])
rows = [rows[i % len(rows)] for i in range(n)]
prompts = [model.to_tokens(r["text"], prepend_bos=False)[0].tolist() for r in rows]
rels = [r["relation"] for r in rows]
sites = candidate_sites(model)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
if mode == "ours":
    stats = neuron_statistics(model, prompts, rels, sites, batch_size=32)
else:
    from probekit.capture import pad_batch
    names = {s.name: s for s in sites}
    acts = {s: [] for s in sites}
    lengths = []
    for i in range(0, n, 32):
        chunk = prompts[i : i + 32]
        batch = pad_batch(chunk, pad_id=0, side="right")
        with torch.inference_mode():
            _, cache = model.run_with_cache(batch.input_ids, attention_mask=batch.attention_mask,
                                            names_filter=lambda k: k in names)
        for k, s in names.items():
            acts[s].append(cache[k].cpu())
        lengths.extend(len(p) for p in chunk)
        del cache
    width = max(a.shape[1] for a in acts[sites[0]])
    lens = torch.tensor(lengths)
    mask = (torch.arange(width)[None, :] < lens[:, None]).float()[..., None]
    resp = {}
    for s in sites:
        full = torch.cat([torch.nn.functional.pad(a, (0, 0, 0, width - a.shape[1])) for a in acts[s]])
        resp[s] = (full * mask).sum(1) / lens[:, None]
    stats = statistics_from_responses(resp, rels)
elapsed = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ap = torch.cat([stats.ap[s] for s in sites])
print(json.dumps({"seconds": elapsed, "peak_mb": peak / 1024, "growth_mb": (peak - base) / 1024,
                  "ap_sum": float(ap.sum()), "units": int(ap.shape[0])}))
"""


def run(model: str | None = None, n_prompts: int = 1000) -> dict[str, Any]:
    """Time and peak RSS of both sides (separate processes) and their ratios."""
    name = model or "smollm2-135m"
    facts = str(ROOT / "probes" / "data" / "relation_facts.jsonl")
    out = {}
    for mode in ("ours", "run_with_cache"):
        res = subprocess.run(
            [sys.executable, "-c", _CHILD, mode, name, str(n_prompts), str(ROOT), facts],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )
        out[mode] = json.loads(res.stdout.strip().splitlines()[-1])
    ours, base = out["ours"], out["run_with_cache"]
    return {
        "model": name,
        "prompts": n_prompts,
        "units": ours["units"],
        "ours_seconds": ours["seconds"],
        "baseline_seconds": base["seconds"],
        "speedup": base["seconds"] / ours["seconds"],
        "ours_peak_mb": ours["peak_mb"],
        "baseline_peak_mb": base["peak_mb"],
        "ours_growth_mb": ours["growth_mb"],
        "baseline_growth_mb": base["growth_mb"],
        "memory_ratio_growth": base["growth_mb"] / max(ours["growth_mb"], 1e-9),
        "same_ap_sum": abs(ours["ap_sum"] - base["ap_sum"]) < 1e-3 * max(1.0, abs(base["ap_sum"])),
    }


if __name__ == "__main__":
    t = time.perf_counter()
    print(json.dumps(run(*sys.argv[1:2]), indent=1), f"{time.perf_counter() - t:.0f} s")
