"""Benchmark: greedy generation under relation-neuron deactivation, many unit sets at once.

Workload (Liu et al. 2025's generation metric): the test facts of ``--relations`` in
``probes/data/relation_facts.jsonl`` on SmolLM2-135M, each decoded for 8 greedy tokens under
each of ``n_sets`` unit sets of 92 gate/up units (``mlp_pre`` / ``mlp_pre_linear``, random
layers), deactivated (set to 0) at every position.

- ours, cached: :func:`probekit.neurons.greedy_under_sets` (rows of all sets packed 32 to a
  forward; one prompt pass fills a KV cache computed under the ops, then one token per step);
- ours, re-run: the same with ``kv_cache=False`` (the growing sequence re-run every step);
- lineage-style baseline: the plain Hugging Face model (the same converted weights, no bridge)
  with forward hooks on ``gate_proj`` / ``up_proj`` that zero the units, ``model.generate``
  (greedy, left padding, 8 new tokens) one set at a time, batches of 32 prompts: how the paper's
  code scores a set.

All three must give the same continuations (counted). One thread each, the same process.

    python scripts/bench.py --sections generation
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
N_UNITS = 92
STEPS = 8
BATCH = 32


def _random_sets(n_layers: int, width: int, n_sets: int, seed: int = 0) -> list[dict[tuple[int, str], list[int]]]:
    """``n_sets`` sets of N_UNITS distinct (layer, kind, unit) triples, uniform over the model."""
    g = torch.Generator().manual_seed(seed)
    kinds = ("mlp_pre", "mlp_pre_linear")
    out = []
    for _ in range(n_sets):
        flat = torch.randperm(n_layers * len(kinds) * width, generator=g)[:N_UNITS].tolist()
        units: dict[tuple[int, str], list[int]] = {}
        for f in flat:
            layer, rest = divmod(f, len(kinds) * width)
            kind, unit = divmod(rest, width)
            units.setdefault((layer, kinds[kind]), []).append(unit)
        out.append({k: sorted(v) for k, v in units.items()})
    return out


def _ours(model: Any, prompts: list[list[int]], sets: list[dict], kv_cache: bool) -> tuple[float, list]:
    from probekit.capture import AllTokens
    from probekit.interventions import Ablate
    from probekit.neurons import greedy_under_sets
    from probekit.sites import Site

    op_sets = [[Ablate(site=Site(layer, kind), features=tuple(units), positions=AllTokens())
                for (layer, kind), units in s.items()] for s in sets]
    t0 = time.perf_counter()
    conts = greedy_under_sets(model, prompts, op_sets, max_new_tokens=STEPS, batch_size=BATCH,
                              kv_cache=kv_cache)
    return time.perf_counter() - t0, conts


def _lineage(hf_dir: Path, prompts: list[list[int]], sets: list[dict]) -> tuple[float, list]:
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    pad = hf.config.pad_token_id if hf.config.pad_token_id is not None else 0
    modules = {"mlp_pre": "gate_proj", "mlp_pre_linear": "up_proj"}
    out: list[list[list[int]]] = []
    t0 = time.perf_counter()
    for s in sets:
        handles = []
        for (layer, kind), units in s.items():
            idx = torch.tensor(units)

            def zero(_module, _inputs, output, idx=idx):
                output[..., idx] = 0.0
                return output

            mlp = hf.model.layers[layer].mlp
            handles.append(getattr(mlp, modules[kind]).register_forward_hook(zero))
        conts = []
        for lo in range(0, len(prompts), BATCH):
            chunk = prompts[lo:lo + BATCH]
            width = max(map(len, chunk))
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk])
            with torch.inference_mode():
                gen = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=STEPS,
                                  min_new_tokens=STEPS, do_sample=False, pad_token_id=pad)
            conts.extend(gen[:, width:].tolist())
        for h in handles:
            h.remove()
        out.append(conts)
    return time.perf_counter() - t0, out


def bench_generation(relations: tuple[str, ...] = ("capital", "currency"), n_sets: int = 8,
                     rerun: bool = True) -> dict[str, Any]:
    """Seconds of each side on the same workload, ratios, and how many continuations agree."""
    from probekit.models import load_model
    from probekit.models.real import cache_dir_for

    torch.set_num_threads(1)
    model = load_model("smollm2-135m")
    rows = [json.loads(line) for line in (ROOT / "probes/data/relation_facts.jsonl").open()]
    rows = [r for r in rows if r["split"] == "test" and r["relation"] in relations]
    prompts = [model.to_tokens(r["text"], prepend_bos=False)[0].tolist() for r in rows]
    sets = _random_sets(int(model.cfg.n_layers), int(model.cfg.d_mlp), n_sets)
    n = len(prompts) * n_sets
    result: dict[str, Any] = {"prompts": len(prompts), "sets": n_sets, "decodes": n, "new_tokens": STEPS}
    cached_s, cached = _ours(model, prompts, sets, kv_cache=True)
    lineage_s, lineage = _lineage(cache_dir_for("smollm2-135m"), prompts, sets)
    result.update(ours_cached_s=cached_s, lineage_generate_s=lineage_s,
                  lineage_over_ours_cached=lineage_s / cached_s,
                  agree_with_lineage=sum(a == b for x, y in zip(cached, lineage, strict=True)
                                         for a, b in zip(x, y, strict=True)))
    if rerun:
        rerun_s, plain = _ours(model, prompts, sets, kv_cache=False)
        result.update(ours_rerun_s=rerun_s, rerun_over_cached=rerun_s / cached_s,
                      agree_cached_rerun=sum(a == b for x, y in zip(cached, plain, strict=True)
                                             for a, b in zip(x, y, strict=True)))
    return result


if __name__ == "__main__":
    print(json.dumps(bench_generation(), indent=1))
