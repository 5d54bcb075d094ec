"""The HE regulariser on the training minibatch's own forward pass (a deviation from [C]).

An & Du (2026) [C] draw ``n_pairs`` primitive-modifier pairs per step from a fixed pool of the
training set and read them in a separate forward pass (:mod:`probekit.homomorphism.regulariser`);
on ``scan_he_paper`` that pass is ~87 % of a regularised step's FLOPs. Here the pairs are those
of the step's minibatch: every adjacent primitive-modifier position of the batch's rows (at most
``n_pairs``, a uniform subset without replacement when the batch holds more), read from the
blocks' ``resid_post`` recorded during the cross-entropy forward pass
(:class:`probekit.train.loss_term.ForwardLossTerm`). The loss is [C]'s,

``L_HE`` = mean over regularised blocks of the mean over modifiers present of
``MSE(f_m([h_prim; h_mod]), (h_prim + h_mod) / 2)``,

with the same per-modifier MLPs ``f_m`` and the gradient through the target. What differs from
[C]: the pairs (the batch's, ~1-2 per SCAN command, each once, vs 256 draws with replacement from
the first 2048 pairs), and the states are read under the training step's dropout masks (the pool
pass draws its own). A batch without pairs adds 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import ConfigError
from ..models.protocol import HookedModel
from ..sites import Site
from ..testbeds.base import TaskDataset
from .pairs import modifier_pairs
from .regulariser import HERegulariser, PairPool

__all__ = ["HEBatchLossTerm", "all_pairs", "batch_pairs", "he_batch_loss_term"]


def batch_pairs(
    pairs: PairPool, rows: np.ndarray, *, n_train: int, max_pairs: int, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of the batch's ``rows``: (pair indices into ``pairs``, their row in the batch).

    Every pair whose example is one of ``rows`` (at most ``max_pairs``: a uniform subset drawn
    without replacement from ``rng``, kept in pair order), in pair order.
    """
    where = np.full(n_train, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))
    keep = np.flatnonzero(where[pairs.example] >= 0)
    if len(keep) > max_pairs:
        keep = np.sort(rng.choice(keep, size=max_pairs, replace=False))
    return keep, where[pairs.example[keep]]


class HEBatchLossTerm:
    """The batch-pair HE regulariser as a forward-reading loss term of :func:`probekit.train.train`.

    Has the shape of :class:`probekit.train.loss_term.ForwardLossTerm`: ``sites`` are the
    regularised blocks' ``resid_post``; :meth:`loss_from_forward` forms the minibatch's pairs
    (subset draws seeded by ``(seed, step)``: a resumed run continues exactly). Same ``name``
    and MLPs as [C]'s :class:`~probekit.homomorphism.regulariser.HELossTerm`. Build it with
    :func:`he_batch_loss_term`.
    """

    name = "he_regulariser"

    def __init__(
        self, module: HERegulariser, pairs: PairPool, *, n_train: int, blocks: Sequence[int],
        n_pairs: int, seed: int,
    ):
        self.module, self.pairs, self.n_train = module, pairs, n_train
        self.blocks, self.n_pairs, self.seed = tuple(blocks), n_pairs, seed
        self.sites = tuple(Site(b - 1, "resid_post") for b in self.blocks)

    def loss_from_forward(
        self, acts: Mapping[Site, Tensor], batch: Any, step: int
    ) -> Float[Tensor, ""]:
        """``L_HE`` on the pairs of ``batch.rows``, read from ``acts``.

        ``batch`` is the trainer's :class:`probekit.train.loss_term.StepBatch` (``rows``: the
        training-split index of each row).
        """
        rng = np.random.default_rng([self.seed, 4846, step])  # stateless: exact resume
        idx, row = batch_pairs(self.pairs, np.asarray(batch.rows), n_train=self.n_train,
                               max_pairs=self.n_pairs, rng=rng)
        first = acts[self.sites[0]]
        if len(idx) == 0:
            return first.new_zeros(())
        r = torch.as_tensor(row, device=first.device)
        p = torch.as_tensor(self.pairs.prim_pos[idx], device=first.device)
        m = torch.as_tensor(self.pairs.modifier[idx], device=first.device)
        losses = [self.module(acts[s][r, p], acts[s][r, p + 1], m) for s in self.sites]
        return torch.stack(losses).mean()


def all_pairs(dataset: TaskDataset) -> PairPool:
    """Every adjacent primitive-modifier pair of ``dataset`` (example, primitive position, modifier)."""
    pairs = modifier_pairs(dataset)
    mods = tuple(sorted(set(pairs.label)))
    return PairPool(
        example=pairs.example, prim_pos=pairs.a_span[:, 0],
        modifier=np.asarray([mods.index(lab) for lab in pairs.label], dtype=np.int64),
        modifiers=mods,
    )


def he_batch_loss_term(
    dataset: TaskDataset, *, blocks: Sequence[int], n_pairs: int, hidden: int, seed: int,
) -> Callable[[HookedModel, torch.device], HEBatchLossTerm]:
    """A factory ``make(model, device)`` of the batch-pair HE term on ``dataset`` (the training split).

    Args:
        dataset: the training split (its rows are the trainer's ``StepBatch.rows``).
        blocks: 1-indexed blocks whose outputs are regularised ([C]: 2 and 4).
        n_pairs: at most this many of the batch's pairs per step.
        hidden: width of the per-modifier MLPs ([C]: 256).
        seed: seeds the MLPs' initialisation (as [C]'s term) and the per-step subsets.
    """

    def make(model: HookedModel, device: torch.device) -> HEBatchLossTerm:
        n_layers = model.cfg.n_layers
        if not blocks or max(blocks) > n_layers or min(blocks) < 1:
            raise ConfigError(
                f"TrainConfig.he_layers={tuple(blocks)} names blocks past the model's {n_layers} "
                f"layers; use 1-indexed blocks in 1..{n_layers}"
            )
        pairs = all_pairs(dataset)
        module = HERegulariser(model.cfg.d_model, pairs.modifiers, hidden=hidden, seed=seed)
        return HEBatchLossTerm(module.to(device), pairs, n_train=len(dataset), blocks=blocks,
                               n_pairs=n_pairs, seed=seed)

    return make
