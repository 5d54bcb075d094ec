"""Pure schedule functions: evaluation/checkpoint steps, learning rate, minibatch indices."""

from __future__ import annotations

import math

import numpy as np

from .config import TrainConfig


def log_spaced_steps(total: int, n: int) -> list[int]:
    """``0`` plus about ``n`` distinct integer steps log-spaced in ``[1, total]`` (``total`` included)."""
    if total < 1 or n < 1:
        raise ValueError(f"log_spaced_steps needs total >= 1 and n >= 1, got total={total}, n={n}")
    pts = np.unique(np.round(np.logspace(0, math.log10(total), n)).astype(int))
    return sorted({0, total, *pts.tolist()})


def eval_schedule(cfg: TrainConfig) -> list[int]:
    """Steps after which the model is evaluated (0 = before training; the last step always).

    ``eval_at_start=False`` drops step 0.
    """
    if cfg.eval_steps is not None:
        steps = {0, cfg.steps, *cfg.eval_steps}
    else:
        steps = set(log_spaced_steps(cfg.steps, cfg.n_evals))
        if cfg.eval_every:
            steps |= set(range(0, cfg.steps + 1, cfg.eval_every))
    if not cfg.eval_at_start:
        steps.discard(0)
    return sorted(steps)


def checkpoint_schedule(cfg: TrainConfig) -> list[int]:
    """Steps after which a checkpoint is written (always 0 and the last step)."""
    if cfg.checkpoint_steps is not None:
        return sorted({0, cfg.steps, *cfg.checkpoint_steps})
    return log_spaced_steps(cfg.steps, cfg.n_checkpoints)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of optimiser step ``step`` (1-based): linear warm-up, then constant."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    return cfg.lr


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """Order of the ``n`` training examples in ``epoch`` (stateless, so resuming is exact)."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def batch_position(step: int, n: int, batch_size: int) -> tuple[int, slice]:
    """(epoch, slice into that epoch's permutation) of 1-based ``step``; last batch may be short."""
    per_epoch = math.ceil(n / batch_size)
    epoch, k = divmod(step - 1, per_epoch)
    return epoch, slice(k * batch_size, min((k + 1) * batch_size, n))
