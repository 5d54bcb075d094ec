"""Real activations grouped by label: the embedded modadd checkpoint at '=', classes = answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "probes" / "checkpoints" / "modadd-p53"


def modadd_manifolds(site: str, *, n_classes: int, max_points: int, seed: int) -> list[np.ndarray]:
    """``(N, M)`` clouds of train-pair activations at '=' for answers ``0..n_classes-1``."""
    from probekit.capture import LastToken, Site, collect_activations
    from probekit.models import load_checkpoint
    from probekit.testbeds import get_task

    model = load_checkpoint(CHECKPOINT)
    task = get_task("modular_addition", p=53, seed=0, train_fraction=0.6)  # the checkpoint's task
    train = task.splits()["train"]
    kind, layer = site.split("@")
    s = Site(int(layer), kind)
    with torch.no_grad():
        acts = collect_activations(model, train.tokens, [s], positions=LastToken(), batch_size=512)
    x = acts[s].to(torch.float64).numpy()
    y = np.asarray(train.metadata["answer"])
    rng = np.random.default_rng(seed)
    out = []
    for c in range(n_classes):
        idx = np.flatnonzero(y == c)
        idx = np.sort(rng.choice(idx, size=min(max_points, idx.size), replace=False))
        out.append(np.ascontiguousarray(x[idx].T))
    return out
