"""Benchmark: HE of every layer of one SCAN model from one capture vs the paper's per-layer loop.

Ours: one batched all-layer capture (``probekit.homomorphism.capture_states``), then every layer's
operators fit at once (closed-form ridge for affine/bilinear, one layer-stacked Adam run for the
MLP; also with [C]'s Adam for all three). Baseline, An & Du (2026) [C] ``build_he_pairs`` +
``compute_layerwise_he`` per layer: one forward pass per training example, pairs gathered in
Python, each family trained alone with Adam for 50 epochs. Both give the same numbers (reported).

    python scripts/bench.py --sections homomorphism [--he-checkpoint runs/scan/checkpoints/step_0000450]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

try:
    import probekit  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probekit.homomorphism import (  # noqa: E402
    AffineOperator,
    BilinearOperator,
    HEConfig,
    MLPOperator,
    capture_states,
    modifier_he,
    modifier_pairs,
    split_pairs,
)
from probekit.models import build_model, load_checkpoint  # noqa: E402
from probekit.testbeds import get_task  # noqa: E402


def paper_loop(model: Any, tokens: list[list[int]], pairs: Any) -> np.ndarray:
    """[C]'s procedure, one layer at a time: per-example forwards, three Adam fits per layer."""
    by_ex: dict[int, list[int]] = {}
    for k, e in enumerate(pairs.example):
        by_ex.setdefault(int(e), []).append(k)
    out = []
    for layer in range(model.cfg.n_layers):
        name = f"blocks.{layer}.hook_resid_post"
        a = torch.zeros(len(pairs), model.cfg.d_model, dtype=torch.float64)
        b = torch.zeros_like(a)
        with torch.no_grad():
            for e, ks in by_ex.items():
                _, cache = model.run_with_cache(torch.tensor([tokens[e]]), names_filter=[name])
                h = cache[name][0].double()
                for k in ks:
                    a[k] = h[pairs.a_span[k, 0]]
                    b[k] = h[pairs.b_span[k, 0]]
        X, Y = torch.cat([a, b], -1), (a + b) / 2
        fit, score = split_pairs(len(pairs))
        errs = []
        for op in (AffineOperator(solver="adam"), BilinearOperator(solver="adam"), MLPOperator()):
            op.fit(X[fit], Y[fit])
            errs.append(float(((op.predict_tensor(X[score]) - Y[score]) ** 2).mean()))
        out.append(errs)
    return np.asarray(out)


def bench_homomorphism(checkpoint: str | None = None, max_examples: int = 900) -> dict[str, Any]:
    """Seconds for all-layer HE (ours, one capture) vs the per-layer paper loop; their ratio."""
    torch.set_num_threads(1)
    task = get_task("scan", n_noise=3)
    model = load_checkpoint(checkpoint) if checkpoint else build_model(task.model_config())
    ds = task.splits()["train"].subset(range(min(max_examples, len(task.splits()["train"]))))
    pairs = modifier_pairs(ds)

    t0 = time.perf_counter()
    states = capture_states(model, ds.tokens)
    t_capture = time.perf_counter() - t0
    ours = modifier_he(states=states, pairs=pairs)
    t_ours = time.perf_counter() - t0
    t1 = time.perf_counter()
    ours_c = modifier_he(states=states, pairs=pairs, config=HEConfig(solver="adam"))
    t_ours_c = time.perf_counter() - t1 + t_capture
    t2 = time.perf_counter()
    ref = paper_loop(model, ds.tokens, pairs)
    t_ref = time.perf_counter() - t2
    return {
        "model": checkpoint or "untrained scan 4L d128",
        "layers": model.cfg.n_layers,
        "pairs": len(pairs),
        "ours_capture_s": t_capture,
        "ours_all_layers_s": t_ours,
        "ours_all_layers_adam_s": t_ours_c,
        "paper_per_layer_loop_s": t_ref,
        "ratio_paper_vs_ours": t_ref / t_ours,
        "ratio_paper_vs_ours_adam": t_ref / t_ours_c,
        "max_abs_diff_mse_adam_vs_paper": float(np.abs(ours_c.mse - ref).max()),
        "max_rel_diff_mse_adam_vs_paper": float((np.abs(ours_c.mse - ref) / ref).max()),
        "he_last_layer_ours": ours.headline,
        "he_last_layer_paper": float(ref[-1].mean()),
        "goal": "ratio_paper_vs_ours > 1 with equal numbers (ours_adam vs paper)",
    }
