"""The tiny SCAN training setup shared by the HE-regulariser tests (pool and batch pairs)."""

from __future__ import annotations

from typing import Any

from probekit.models import load_checkpoint
from probekit.train import TrainConfig, list_checkpoints, loss_terms, train


def tiny_cfg(steps: int = 12, **kw: Any) -> TrainConfig:
    """A short Adam run evaluated and checkpointed only at its end; ``kw`` overrides any field."""
    base = dict(
        steps=steps, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.999), batch_size=16,
        eval_steps=(steps,), checkpoint_steps=(steps,),
    )
    return TrainConfig(**{**base, **kw})


def train_to_final(tmp, task, mcfg, cfg):
    """Train with the loss terms ``cfg`` asks for; the final checkpoint's model and the history."""
    hist = train(task, mcfg, cfg, tmp, progress=False, plot=False, loss_terms=loss_terms(task, cfg))
    return load_checkpoint(list_checkpoints(tmp)[-1][1]), hist
