"""Frozen configuration of an HE measurement (An & Du 2026; [C] defaults).

:class:`HEConfig` is the one declaration of HE's options: the ``[[homomorphism]]`` suite
section (:class:`probekit.suites.analyses.homomorphism.HomomorphismSpec`) and the
``homomorphism_error`` claim and diagnosis-marker kind
(:class:`probekit.hypotheses.kinds.homomorphism_error.HomomorphismErrorSpec`) subclass it, so an
option added here is a key of all three files, validated by its declared rule
(:mod:`probekit.util.constraints`).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Literal

from ..stats.limits import MAX_RESAMPLES
from ..util.constraints import SEED, Between, Ge, Le, NonEmpty, Validated

Family = Literal["affine", "bilinear", "mlp"]
Solver = Literal["adam", "closed_form_ridge"]
Parts = Literal["same_pass", "separate"]
Pooling = Literal["mean", "last"]


@dataclass(frozen=True, kw_only=True)
class HEConfig(Validated):
    """What to fit, how to split, how to read the states.

    Attributes:
        families: operator families fit separately; HE = their mean error [C].
        solver: ``"adam"`` (default: [C]'s 50-epoch Adam fit, lr 1e-3, weight decay 1e-6,
            batch 128, no shuffling) or ``"closed_form_ridge"`` for affine/bilinear: exact least
            squares, so 0 by construction for [C]'s linear target ``(a + b) / 2`` (meaningful
            only for a target that is not a linear function of the parts, e.g.
            ``parts="separate"``). The MLP always uses [C]'s Adam schedule.
        alpha: ridge penalty of ``closed_form_ridge``.
        parts: where the part and composite states come from. ``"same_pass"`` [C]: both parts
            from the input's one forward pass, composite ``(a + b) / 2``, one operator shared by
            all modifiers. ``"separate"`` ([O], a homomorphism in the usual sense; see
            :mod:`probekit.homomorphism.separate`): part ``a`` read in its own left context,
            part ``b`` from a pass with ``a`` deleted from the input (so it never sees ``a``),
            the composite's span from its own pass, one operator per modifier / connective,
            and ``he_normalised`` (held-out ``1 - R^2`` within each group) as the statistic;
            [O] pairs it with ``families=("affine",)``, ``solver="closed_form_ridge"``.
        train_fraction, shuffle, seed: first ``train_fraction`` of the pairs fit, the rest scored
            [C]; ``shuffle=True`` splits a seeded permutation instead. ``seed`` also seeds the
            operators' initialisation and the bootstrap.
        site: hook kind read at every block (``resid_post`` [C]).
        layer: block whose HE is the headline (``-1`` = last block [C]).
        pooling: span pooling, ``"mean"`` [C] or ``"last"``.
        split: dataset split the pairs come from (``train`` [C]).
        max_examples: read at most this many examples of the split (first ones); None = all.
        n_resamples, confidence_level: percentile bootstrap over scored pairs.
        batch_size: capture batch size.
    """

    families: Annotated[tuple[Family, ...], NonEmpty()] = typing.get_args(Family)
    solver: Solver = "adam"
    alpha: Annotated[float, Ge(0)] = 1e-3
    parts: Parts = "same_pass"
    train_fraction: Annotated[float, Between(0, 1)] = 0.8
    shuffle: bool = False
    seed: Annotated[int, SEED] = 0
    site: str = "resid_post"
    layer: int = -1  # a block index; negative counts from the last block (-1); checked on the data
    pooling: Pooling = "mean"
    split: str = "train"
    max_examples: Annotated[int | None, Ge(1)] = None
    n_resamples: Annotated[int, Ge(1000), Le(MAX_RESAMPLES)] = 1000
    confidence_level: Annotated[float, Between(0, 1)] = 0.95
    batch_size: Annotated[int, Ge(1)] = 128
