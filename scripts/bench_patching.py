"""Bench: batched activation patching vs ``transformer_lens.patching`` (one forward per cell).

SmolLM2-135M, ``resid_pre`` by (layer, pos) over all 30 layers x every position of a ~9-token
prompt pair, and of a 16-pair batch; TL's ``get_act_patch_resid_pre`` in the same run with the
same pair-averaged metric; reports both times, their ratio and the max abs difference.

    python scripts/bench.py --sections patching [--device cuda]
    python scripts/bench_patching.py [--device cuda] [--pairs 16] [--skip-tl-batch]
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

from probekit.circuits import activation_patching, logit_diff  # noqa: E402
from probekit.models import load_model  # noqa: E402

PROMPTS = [
    ("The Eiffel Tower is located in the city of", "The Colosseum is located in the city of", " Paris", " Rome"),
]
CAPITALS = [("France", "Paris"), ("Italy", "Rome"), ("Japan", "Tokyo"), ("Spain", "Madrid"), ("Egypt", "Cairo"),
            ("Russia", "Moscow"), ("Greece", "Athens"), ("Germany", "Berlin"), ("Peru", "Lima"),
            ("Cuba", "Havana"), ("Kenya", "Nairobi"), ("Norway", "Oslo"), ("Chile", "Santiago"),
            ("Poland", "Warsaw"), ("Austria", "Vienna"), ("Canada", "Ottawa"), ("China", "Beijing")]


def _ids(model, text: str) -> list[int]:
    """Token ids without BOS (SmolLM2's tokenizer.encode prepends <|im_start|>)."""
    return model.to_tokens(text, prepend_bos=False)[0].tolist()


def _pairs(model, n_pairs: int):
    """``n_pairs`` (clean, corrupt) capital prompts of equal token length, answers and foils."""
    out = []
    for i in range(len(CAPITALS)):
        c, a = CAPITALS[i]
        r, f = CAPITALS[(i + 1) % len(CAPITALS)]
        clean = _ids(model, f"The capital city of {c} is the city of")
        corrupt = _ids(model, f"The capital city of {r} is the city of")
        if len(clean) == len(corrupt):
            out.append((clean, corrupt, _ids(model, " " + a)[0], _ids(model, " " + f)[0]))
    while len(out) < n_pairs:
        out = out + out
    return out[:n_pairs]


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench_patching(device: str = "cpu", n_pairs: int = 16, skip_tl_batch: bool = False,
                   batch_size: int = 64) -> dict:
    """Run both sweeps; return times, ratios and agreement."""
    from transformer_lens import patching

    torch.manual_seed(0)
    model = load_model("smollm2-135m", device=device)
    results: dict = {"device": device, "threads": torch.get_num_threads(), "batch_size": batch_size}
    clean_t, corrupt_t, ans, foil = PROMPTS[0]
    single = [(_ids(model, clean_t), _ids(model, corrupt_t), _ids(model, ans)[0], _ids(model, foil)[0])]
    cases = {"single_pair": single, f"batch_{n_pairs}_pairs": _pairs(model, n_pairs)}
    for name, pairs in cases.items():
        clean = torch.tensor([p[0] for p in pairs], device=device)
        corrupt = torch.tensor([p[1] for p in pairs], device=device)
        metric = partial(logit_diff, answer=torch.tensor([p[2] for p in pairs]),
                         foil=torch.tensor([p[3] for p in pairs]))
        ours, t_ours = _time(lambda clean=clean, corrupt=corrupt, metric=metric: activation_patching(
            model, clean, corrupt, metric, kind="resid_pre", batch_size=batch_size))
        entry = {"pairs": len(pairs), "tokens": clean.shape[1], "cells": int(ours.values.numel()),
                 "probekit_s": t_ours, "clean_logit_diff": float(ours.clean.mean()),
                 "corrupt_logit_diff": float(ours.corrupt.mean())}
        if not (skip_tl_batch and len(pairs) > 1):
            def tl(clean=clean, corrupt=corrupt, metric=metric):
                _, cache = model.run_with_cache(clean)
                idx = torch.arange(clean.shape[0])
                return patching.get_act_patch_resid_pre(
                    model, corrupt, cache, lambda logits: metric(logits[:, -1], idx).mean())

            ref, t_tl = _time(tl)
            entry.update(tl_s=t_tl, speedup=t_tl / t_ours,
                         max_abs_diff=float((ours.values - ref.cpu()).abs().max()))
        results[name] = entry
        print(name, entry, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    """CLI: print and optionally write the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--skip-tl-batch", action="store_true", help="skip TL on the 16-pair batch (slow)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    res = bench_patching(args.device, args.pairs, args.skip_tl_batch, args.batch_size)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
