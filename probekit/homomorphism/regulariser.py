"""HE regulariser of An & Du (2026) [C]: a loss pulling modifier composition to a homomorphism.

``L_HE`` = mean over regularised blocks of the mean over modifiers present of
``MSE(f_m([h_prim; h_mod]), (h_prim + h_mod) / 2)``, where ``f_m`` is one MLP per modifier
(``2d -> 256 (ReLU) -> d``, shared by the blocks, learned jointly with the model) and the
gradient also flows through the target. Each step draws ``n_pairs`` pairs with replacement from
a pool of at most ``max_pool`` adjacent primitive-modifier positions of the training set (the
first ones in dataset order [C]) and reads the blocks' outputs in a separate forward pass,
through :func:`probekit.capture.record_with_grad`. That pass is most of a regularised step's cost
(``scan_he_paper``: ~2.5x a plain step on one thread); ``TrainConfig.he_source = "batch"`` reads
the minibatch's own pairs from the training forward pass instead (a deviation from [C],
:mod:`probekit.homomorphism.regulariser_batch`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..capture import Site, record_with_grad
from ..errors import ConfigError, DataError
from ..models.protocol import HookedModel
from ..testbeds.base import TaskDataset
from .pairs import modifier_pairs


@dataclass(frozen=True, kw_only=True)
class PairPool:
    """Adjacent primitive-modifier positions of a training set (at most ``max_pool``).

    Attributes:
        example: example index of each pair.
        prim_pos: primitive token position (the modifier is at ``prim_pos + 1``).
        modifier: index into ``modifiers`` of each pair's modifier.
        modifiers: modifier names.
    """

    example: Int[np.ndarray, " pool"]
    prim_pos: Int[np.ndarray, " pool"]
    modifier: Int[np.ndarray, " pool"]
    modifiers: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.example)


def mine_pair_pool(dataset: TaskDataset, *, max_pool: int = 2048) -> PairPool:
    """The first ``max_pool`` primitive-modifier pairs of ``dataset`` in order [C]."""
    if max_pool < 1:
        raise ConfigError(f"max_pool must be >= 1, got {max_pool}")
    pairs = modifier_pairs(dataset)
    keep = np.arange(min(max_pool, len(pairs)))
    mods = tuple(sorted(set(pairs.label)))
    return PairPool(
        example=pairs.example[keep],
        prim_pos=pairs.a_span[keep, 0],
        modifier=np.asarray([mods.index(pairs.label[i]) for i in keep], dtype=np.int64),
        modifiers=mods,
    )


class HERegulariser(nn.Module):
    """One MLP per modifier, ``[h_prim; h_mod] -> (h_prim + h_mod) / 2`` (An & Du 2026 [C]).

    Args:
        d_model: hidden size.
        modifiers: modifier names (one MLP each).
        hidden: MLP width ([C] 256).
        seed: initialisation seed (``nn.Linear``'s distribution, drawn from a private generator).
    """

    def __init__(self, d_model: int, modifiers: Sequence[str], *, hidden: int = 256, seed: int = 0):
        super().__init__()
        if not modifiers:
            raise ConfigError("HERegulariser needs at least one modifier")
        self.modifiers = tuple(modifiers)
        self.ops = nn.ModuleList(
            nn.Sequential(nn.Linear(2 * d_model, hidden), nn.ReLU(), nn.Linear(hidden, d_model))
            for _ in self.modifiers
        )
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for lin in (m for op in self.ops for m in op if isinstance(m, nn.Linear)):
                bound = 1.0 / lin.in_features**0.5
                lin.weight.uniform_(-bound, bound, generator=gen)
                lin.bias.uniform_(-bound, bound, generator=gen)

    def forward(
        self,
        prim: Float[Tensor, "pair d"],
        mod: Float[Tensor, "pair d"],
        modifier: Int[Tensor, " pair"],
    ) -> Float[Tensor, ""]:
        """Mean over the modifiers present of ``MSE(f_m([a; b]), (a + b) / 2)``."""
        target = (prim + mod) / 2
        x = torch.cat([prim, mod], dim=-1)
        losses = [
            F.mse_loss(op(x[modifier == m]), target[modifier == m])
            for m, op in enumerate(self.ops)
            if bool((modifier == m).any())
        ]
        return torch.stack(losses).mean()


def he_regulariser_loss(
    model: HookedModel,
    regulariser: HERegulariser,
    tokens: Sequence[Sequence[int]],
    pool: PairPool,
    *,
    blocks: Sequence[int],
    n_pairs: int,
    rng: np.random.Generator,
    pad_id: int = 0,
) -> Float[Tensor, ""]:
    """``L_HE`` on ``n_pairs`` pool pairs drawn with replacement, averaged over ``blocks``.

    ``blocks`` are 1-indexed block numbers ([C]: 2 and 4). The pairs' sequences are run once
    (each distinct example once, right-padded; the model is causal) up to the last needed block.
    """
    n_layers = model.cfg.n_layers
    if not blocks or any(not 1 <= b <= n_layers for b in blocks):
        raise ConfigError(
            f"HE regulariser blocks {tuple(blocks)} must be 1-indexed blocks in 1..{n_layers}; "
            "e.g. train.he_layers=[2,4] for a 4-layer model"
        )
    if len(pool) == 0:
        raise DataError(
            "the HE pair pool is empty; the training set has no primitive-modifier pairs"
        )
    draw = rng.integers(0, len(pool), size=n_pairs)
    examples, row = np.unique(pool.example[draw], return_inverse=True)
    width = max(len(tokens[int(e)]) for e in examples)
    toks = torch.full((len(examples), width), pad_id, dtype=torch.long)
    for i, e in enumerate(examples):
        toks[i, : len(tokens[int(e)])] = torch.as_tensor(tokens[int(e)], dtype=torch.long)
    device = next(model.parameters()).device
    toks = toks.to(device)
    sites = [Site(b - 1, "resid_post") for b in blocks]
    with record_with_grad(model, sites) as acts:
        model(toks, stop_at_layer=max(blocks))
    r = torch.as_tensor(row, device=device)
    p = torch.as_tensor(pool.prim_pos[draw], device=device)
    m = torch.as_tensor(pool.modifier[draw], device=device)
    losses = [regulariser(acts[s][r, p], acts[s][r, p + 1], m) for s in sites]
    return torch.stack(losses).mean()


class HELossTerm:
    """The HE regulariser as an extra loss term of :func:`probekit.train.train` ([C]).

    Has the shape of :class:`probekit.train.loss_term.LossTerm`: ``name`` keys its weight in
    ``TrainConfig.loss_term_weights()`` (``he_lambda``), ``module`` (the per-modifier MLPs)
    learns jointly with the model, and :meth:`loss` draws the step's pairs from a generator
    seeded by ``(seed, step)``, so a resumed run continues exactly. Build it with
    :func:`he_loss_term` (what :func:`probekit.train.build.loss_terms` does).
    """

    name = "he_regulariser"

    def __init__(
        self, module: HERegulariser, pool: PairPool, tokens: Sequence[Sequence[int]], *,
        blocks: Sequence[int], n_pairs: int, seed: int, pad_id: int,
    ):
        self.module, self.pool, self.tokens = module, pool, tokens
        self.blocks, self.n_pairs, self.seed, self.pad_id = tuple(blocks), n_pairs, seed, pad_id

    def loss(self, model: HookedModel, step: int) -> Float[Tensor, ""]:
        """:func:`he_regulariser_loss` on this step's draw of ``n_pairs`` pool pairs."""
        rng = np.random.default_rng([self.seed, 4845, step])  # stateless: exact resume
        return he_regulariser_loss(
            model, self.module, self.tokens, self.pool, blocks=self.blocks,
            n_pairs=self.n_pairs, rng=rng, pad_id=self.pad_id,
        )


def he_loss_term(
    dataset: TaskDataset, *, pad_id: int, blocks: Sequence[int], n_pairs: int, pool_size: int,
    hidden: int, seed: int,
) -> Callable[[HookedModel, torch.device], HELossTerm]:
    """A factory ``make(model, device)`` of the HE loss term on ``dataset`` (the training split).

    Args:
        dataset: the training split; its first ``pool_size`` primitive-modifier pairs are the
            pool [C].
        pad_id: the task's padding token.
        blocks: 1-indexed blocks whose outputs are regularised ([C]: 2 and 4).
        n_pairs: pairs drawn with replacement per step ([C]: 256).
        pool_size: pool size ([C]: 2048).
        hidden: width of the per-modifier MLPs ([C]: 256).
        seed: seeds the MLPs' initialisation and the per-step draws.
    """

    def make(model: HookedModel, device: torch.device) -> HELossTerm:
        n_layers = model.cfg.n_layers
        if max(blocks) > n_layers:
            raise ConfigError(
                f"TrainConfig.he_layers={tuple(blocks)} names blocks past the model's {n_layers} "
                f"layers; use 1-indexed blocks in 1..{n_layers}"
            )
        pool = mine_pair_pool(dataset, max_pool=pool_size)
        module = HERegulariser(model.cfg.d_model, pool.modifiers, hidden=hidden, seed=seed)
        return HELossTerm(module.to(device), pool, dataset.tokens, blocks=blocks,
                          n_pairs=n_pairs, seed=seed, pad_id=pad_id)

    return make
