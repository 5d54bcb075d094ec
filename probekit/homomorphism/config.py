"""Frozen configuration of an HE measurement (An & Du 2026; [C] defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from .operators import FAMILIES, SOLVERS, Solver
from .states import Pooling

Parts = Literal["same_pass", "separate"]
PARTS: tuple[str, ...] = ("same_pass", "separate")


@dataclass(frozen=True, kw_only=True)
class HEConfig:
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

    families: tuple[str, ...] = FAMILIES
    solver: Solver = "adam"
    alpha: float = 1e-3
    parts: Parts = "same_pass"
    train_fraction: float = 0.8
    shuffle: bool = False
    seed: int = 0
    site: str = "resid_post"
    layer: int = -1
    pooling: Pooling = "mean"
    split: str = "train"
    max_examples: int | None = None
    n_resamples: int = 1000
    confidence_level: float = 0.95
    batch_size: int = 128

    def __post_init__(self) -> None:
        own = "HEConfig"
        if not self.families or any(f not in FAMILIES for f in self.families):
            raise ConfigError(f"{own}.families={self.families!r}; choose from {list(FAMILIES)}")
        if self.solver not in SOLVERS:
            hint = " (renamed 'closed_form_ridge')" if self.solver == "ridge" else ""
            raise ConfigError(f"{own}.solver={self.solver!r}{hint}; choose 'adam' ([C]) or "
                              "'closed_form_ridge' (exact least squares)")
        if self.parts not in PARTS:
            raise ConfigError(f"{own}.parts={self.parts!r}; choose 'same_pass' ([C]) or "
                              "'separate' (part states from separate forward passes)")
        if not self.alpha >= 0:
            raise ConfigError(f"{own}.alpha must be >= 0, got {self.alpha!r}")
        if not 0.0 < self.train_fraction < 1.0:
            raise ConfigError(
                f"{own}.train_fraction must be in (0, 1), got {self.train_fraction!r}"
            )
        if self.pooling not in ("mean", "last"):
            raise ConfigError(f"{own}.pooling={self.pooling!r}; choose 'mean' or 'last'")
        if self.max_examples is not None and self.max_examples < 1:
            raise ConfigError(
                f"{own}.max_examples must be >= 1 or None, got {self.max_examples!r}"
            )
        if self.n_resamples < 1000:
            raise ConfigError(f"{own}.n_resamples must be >= 1000, got {self.n_resamples!r}")
        if not 0.0 < self.confidence_level < 1.0:
            raise ConfigError(
                f"{own}.confidence_level must be in (0, 1), got {self.confidence_level!r}"
            )
