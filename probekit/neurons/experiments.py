"""The three properties of relation neurons (Liu et al. 2025): cumulativity, versatility, interference.

For every relation r: r's neurons are the top units by AP (:func:`select_neurons`); they are
deactivated (:mod:`.deactivation`) and recall is scored on held-out *test* facts of every
relation r'. Controls [ours, per neurons.md]: ``n_random`` random unit sets with the same number of
units per site (layer and module), and r's lowest-AP units.

- Versatility: the relation x relation matrix of accuracy changes ``change[r, r']``.
- Interference: ``change[r, r'] > 0`` beyond every random set's change on r' (count of cells).
- Cumulativity: r's accuracy drop when deactivating the first 10/25/50/100% of its set, and
  single top neurons one at a time.
- Test "r's neurons hurt r more than random sets do": permutation p-value of r's drop against the
  random sets' drops on r (``(1 + #random >= observed) / (1 + n_random)``), Holm-adjusted over r.

Scores: first-token top-1 (one forward; every matrix and test) and greedy generation (the paper's
metric; baseline and r's own sets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..errors import ConfigError, DataError
from ..stats import StatTestResult, adjust_pvalues
from ..stats.permutation import permutation_result
from .deactivation import (
    METHODS,
    FactSet,
    accuracy_by_relation,
    deactivation_ops,
    first_token_correct,
    generation_correct,
)
from .selection import NeuronSet, jaccard_matrix, random_like, select_neurons
from .statistics import NeuronStatistics


@dataclass(frozen=True, kw_only=True)
class DeactivationConfig:
    """How relation neurons are chosen and deactivated.

    Attributes:
        k / fraction: set size per relation (exactly one; fraction of all candidate units).
        method: ``"zero"`` (the paper's) or ``"mean"`` (each unit's mean response).
        n_random: random matched sets per relation (>= 5; 19 lets p reach 0.05).
        shares: cumulativity shares of the set.
        n_single: single top neurons deactivated one at a time.
        generation: also score greedy generation (slower) for the baseline and r's own sets.
        max_new_tokens, batch_size, seed: decoding length, batch size, random-set seed.
    """

    k: int | None = None
    fraction: float | None = 0.005
    method: str = "zero"
    n_random: int = 19
    shares: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0)
    n_single: int = 3
    generation: bool = True
    max_new_tokens: int = 8
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        """Validate the options."""
        if self.method not in METHODS:
            raise ConfigError(f"unknown method {self.method!r}; use one of {list(METHODS)}")
        if self.n_random < 5:
            raise ConfigError(f"n_random={self.n_random}: use >= 5 random sets (19 for p < 0.05)")
        if not self.shares or not all(0 < s <= 1 for s in self.shares):
            raise ConfigError(f"shares must be fractions in (0, 1], got {self.shares}")


@dataclass(frozen=True)
class RelationNeuronResult:
    """Everything the deactivation experiments measured (accuracies are fractions).

    Attributes:
        relations: row/column order of every matrix.
        n_test: test facts per relation.
        sets: each relation's neuron set.
        baseline_first / baseline_generation: unablated accuracy per relation.
        change_first: ``(set r, relation r')`` first-token accuracy change when r's set is off.
        change_first_correct: the same on the facts the unablated model gets right.
        change_generation: generation accuracy change (NaN if not run).
        random_change: ``(set r, random i, relation r')`` changes of matched random sets.
        lowest_change: ``(set r, relation r')`` change for r's lowest-AP units.
        cumulative: ``(set r, share)`` accuracy drop on r; ``single``: ``(set r, neuron)``.
        tests: per relation, "r's neurons hurt r more than random sets", Holm-adjusted p.
        interference: ``(r, r')`` cells whose gain beats every random set.
        jaccard: overlap of the relations' sets.
    """

    relations: tuple[str, ...]
    n_test: tuple[int, ...]
    sets: dict[str, NeuronSet]
    baseline_first: Tensor
    baseline_generation: Tensor
    change_first: Tensor
    change_first_correct: Tensor
    change_generation: Tensor
    random_change: Tensor
    lowest_change: Tensor
    shares: tuple[float, ...]
    cumulative: Tensor
    single: Tensor
    tests: tuple[StatTestResult, ...]
    p_holm: tuple[float, ...]
    interference: tuple[tuple[str, str, float], ...]
    jaccard: np.ndarray
    config: DeactivationConfig = field(default_factory=DeactivationConfig)

    def random_spread(self) -> tuple[Tensor, Tensor]:
        """Per ``(set r, relation r')``: the min and max change over the random sets."""
        return self.random_change.amin(1), self.random_change.amax(1)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready numbers (NaN -> None)."""

        def clean(t: Tensor | np.ndarray | float) -> object:
            arr = np.asarray(t, dtype=np.float64)
            return np.where(np.isfinite(arr), arr, None).tolist()

        lo, hi = self.random_spread()
        return {
            "relations": list(self.relations),
            "n_test": list(self.n_test),
            "set_sizes": {r: len(s) for r, s in self.sets.items()},
            "baseline_first": clean(self.baseline_first),
            "baseline_generation": clean(self.baseline_generation),
            "change_first": clean(self.change_first),
            "change_first_correct": clean(self.change_first_correct),
            "change_generation": clean(self.change_generation),
            "random_change_min": clean(lo),
            "random_change_max": clean(hi),
            "lowest_change": clean(self.lowest_change),
            "shares": list(self.shares),
            "cumulative": clean(self.cumulative),
            "single": clean(self.single),
            "tests": [
                {"relation": r, "drop": clean(t.statistic), "p": t.p_value, "p_holm": p,
                 "z_vs_random": clean(t.effect_size)}
                for r, t, p in zip(self.relations, self.tests, self.p_holm, strict=True)
            ],
            "interference": [list(c) for c in self.interference],
            "jaccard": clean(self.jaccard),
        }


def _mean_responses(stats: NeuronStatistics) -> dict:
    w = torch.tensor(stats.n_prompts, dtype=torch.float64)
    return {s: (stats.mean[s] * w).sum(1) / w.sum() for s in stats.sites}


def relation_neuron_experiments(
    model: object,
    stats: NeuronStatistics,
    facts: FactSet,
    config: DeactivationConfig | None = None,
    *,
    relations: Sequence[str] | None = None,
    progress: bool = True,
) -> RelationNeuronResult:
    """Run the deactivation experiments on held-out ``facts`` for every relation of ``stats``.

    ``facts`` must be disjoint from the identification prompts ``stats`` came from (the caller's
    split); every relation needs at least one test fact.
    """
    cfg = config or DeactivationConfig()
    rels = tuple(relations or stats.relations)
    for r in rels:
        stats.relation_index(r)
        if not facts.relation_mask(r).any():
            raise DataError(f"no test facts for relation {r!r}; every relation needs >= 1")
    means = _mean_responses(stats) if cfg.method == "mean" else None
    widths = {s: int(stats.ap[s].shape[0]) for s in stats.sites}

    n_passes = 1 + len(rels) * (2 + cfg.n_random + len(cfg.shares) + cfg.n_single + cfg.generation)
    bar = tqdm(total=n_passes, desc="deactivation passes", disable=not progress)

    def first(neurons: NeuronSet | None) -> np.ndarray:
        ops = deactivation_ops(neurons, method=cfg.method, means=means)
        bar.update(1)
        return first_token_correct(model, facts, ops, batch_size=cfg.batch_size)

    def acc(correct: np.ndarray) -> Tensor:
        return accuracy_by_relation(correct, facts, rels)

    sets = {r: select_neurons(stats, r, k=cfg.k, fraction=cfg.fraction) for r in rels}
    base = first(None)
    base_acc = acc(base)
    n_rel = len(rels)
    change = torch.zeros(n_rel, n_rel, dtype=torch.float64)
    change_ok = torch.zeros_like(change)
    rand = torch.zeros(n_rel, cfg.n_random, n_rel, dtype=torch.float64)
    low = torch.zeros_like(change)
    cum = torch.zeros(n_rel, len(cfg.shares), dtype=torch.float64)
    single = torch.zeros(n_rel, cfg.n_single, dtype=torch.float64)
    gen_base = torch.full((n_rel,), float("nan"), dtype=torch.float64)
    gen_change = torch.full((n_rel, n_rel), float("nan"), dtype=torch.float64)
    if cfg.generation:
        _, ok = generation_correct(
            model, facts, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size
        )
        gen_base = acc(ok)
    facts_ok = base.astype(bool)
    right = facts.subset(facts_ok)  # the facts the unablated model gets right
    for i, r in enumerate(rels):
        off = first(sets[r])
        change[i] = acc(off) - base_acc
        change_ok[i] = accuracy_by_relation(off[facts_ok], right, rels) - 1.0
        for j in range(cfg.n_random):
            rnd = random_like(sets[r], widths, seed=cfg.seed * 1000 + j)
            rand[i, j] = acc(first(rnd)) - base_acc
        lowest = select_neurons(stats, r, k=len(sets[r]), lowest=True)
        low[i] = acc(first(lowest)) - base_acc
        for s, share in enumerate(cfg.shares):
            n = max(1, int(round(share * len(sets[r]))))
            cum[i, s] = base_acc[i] - acc(first(sets[r].top(n)))[i]
        for s in range(min(cfg.n_single, len(sets[r]))):
            single[i, s] = base_acc[i] - acc(first(sets[r].nth(s)))[i]
        if cfg.generation:
            ops = deactivation_ops(sets[r], method=cfg.method, means=means)
            _, ok = generation_correct(
                model, facts, ops, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size
            )
            gen_change[i] = acc(ok) - gen_base
            bar.update(1)
    bar.close()
    n_test = tuple(int(facts.relation_mask(r).sum()) for r in rels)
    tests = tuple(
        permutation_result(
            float(-change[i, i]),
            (-rand[i, :, i]).numpy(),
            n=n_test[i],
            method=f"{rels[i]}'s neurons vs {cfg.n_random} matched random sets (drop on {rels[i]})",
        )
        for i in range(n_rel)
    )
    p_holm = adjust_pvalues([t.p_value for t in tests], method="holm").p_adjusted
    hi = rand.amax(1)
    interference = tuple(
        (rels[i], rels[j], float(change[i, j]))
        for i in range(n_rel)
        for j in range(n_rel)
        if i != j and change[i, j] > 0 and change[i, j] > hi[i, j]
    )
    return RelationNeuronResult(
        relations=rels,
        n_test=n_test,
        sets=sets,
        baseline_first=base_acc,
        baseline_generation=gen_base,
        change_first=change,
        change_first_correct=change_ok,
        change_generation=gen_change,
        random_change=rand,
        lowest_change=low,
        shares=cfg.shares,
        cumulative=cum,
        single=single,
        tests=tests,
        p_holm=tuple(float(p) for p in p_holm),
        interference=interference,
        jaccard=jaccard_matrix([sets[r] for r in rels]),
        config=cfg,
    )
