"""Frozen configuration of the relation-neuron deactivation experiments (Liu et al. 2025).

:class:`DeactivationConfig` is the one declaration of the experiments' options: the
``[[neurons]]`` suite section (:class:`probekit.suites.analyses.neurons.NeuronsSpec`)
subclasses it, so an option added here is a key of the suite file, validated by its declared
rule (:mod:`probekit.util.constraints`). Importing this module does not import torch.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Literal

from ..errors import ConfigError
from ..stats.limits import MAX_PERMUTATIONS
from ..util.constraints import Between, Each, Ge, Le, NonEmpty, Validated

Method = Literal["zero", "mean"]
METHODS: tuple[str, ...] = typing.get_args(Method)

#: A share of the candidate units / of a neuron set, in (0, 1].
Share = Annotated[float, Between(0, 1, closed="right")]
#: the units deactivated per relation (its top-``k`` by average precision)
TopK = Annotated[int, Ge(1)]
#: matched random unit sets of a deactivation control: at least 5, the controls of the method
#: (random sets of the same size and per-layer counts, ">= 5 seeds"; Liu et al. 2025 leave the
#: number open), and 19 for a permutation p-value below 0.05
RandomSets = Annotated[int, Ge(5, hint="19 for p < 0.05"), Le(MAX_PERMUTATIONS)]


@dataclass(frozen=True, kw_only=True)
class DeactivationConfig(Validated):
    """How relation neurons are chosen and deactivated.

    Attributes:
        k / fraction: set size per relation (exactly one; fraction of all candidate units,
            default 0.001: the top 0.1 %, the smallest share of the method's grid).
        method: ``"zero"`` (the paper's) or ``"mean"`` (each unit's mean response).
        n_random: matched random sets per relation for the test, scored on r's facts (>= 5;
            ``None``: the fewest with which Holm over the relations can reach ``alpha``).
        n_spread: how many of them (at most all) are also scored on every relation (the
            matrix's random-set spread and interference).
        alpha: level the default ``n_random`` is chosen for.
        shares: cumulativity shares of the set.
        n_single: single top neurons deactivated one at a time.
        generation: also score greedy generation (slower): the baseline, r's own sets, and the
            ``n_random`` random sets of the per-relation test on r's facts.
        post: also deactivate the same neurons at ``mlp_post`` (zero ablation only).
        max_new_tokens, batch_size, seed: decoding length, rows per forward, random-set seed.
    """

    k: TopK | None = None
    fraction: Share | None = 0.001
    method: Method = "zero"
    n_random: RandomSets | None = None
    n_spread: Annotated[int, Ge(1), Le(MAX_PERMUTATIONS)] = 19
    alpha: Annotated[float, Between(0, 1)] = 0.05
    shares: Annotated[tuple[float, ...], NonEmpty(), Each(Between(0, 1, closed="right"))] = (
        0.1, 0.25, 0.5, 1.0)
    n_single: Annotated[int, Ge(0)] = 3
    generation: bool = True
    post: bool = False
    max_new_tokens: Annotated[int, Ge(1)] = 8
    batch_size: Annotated[int, Ge(1)] = 32
    seed: int = 0

    def __post_init__(self) -> None:
        """The declared rules, then: ``post`` deactivates with zeros only."""
        super().__post_init__()
        if self.post and self.method != "zero":
            raise ConfigError(
                f"post=True deactivates at mlp_post with zeros only, got method={self.method!r}; "
                "use method='zero' or post=False"
            )

    def random_sets(self, n_relations: int) -> int:
        """``n_random``, or the fewest sets for which Holm over ``n_relations`` can reach alpha."""
        from ..stats.permutation import n_permutations_for

        if self.n_random is not None:
            return self.n_random
        return max(self.n_spread, n_permutations_for(self.alpha, n_relations))
