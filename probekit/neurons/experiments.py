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
  The test needs only r's facts, so the random sets are scored on r's test facts (the first
  ``n_spread`` of them on every relation, for the matrix's spread and interference), many sets
  per forward pass (:func:`first_token_correct_sets`); by default ``n_random`` is the fewest sets
  with which Holm over the relations can reach ``alpha`` (139 for 7 relations at 0.05). A
  permutation p cannot fall below ``1 / (1 + n_random)`` (:attr:`RelationNeuronResult.p_floor`).
- With ``generation=True`` the same test is also run on greedy generation (the paper's metric):
  r's own set and the same ``n_random`` random sets, scored on r's facts many sets per forward
  (:func:`generation_correct_sets`).
- Optionally (``post=True``) the same neurons are also deactivated at ``mlp_post`` (the usual
  "MLP neuron", neurons.md: report both). Zeroing gate/up unit ``i`` and zeroing post unit ``i``
  are the same intervention when ``act(0) = 0`` (SiLU, ReLU, GELU); the two differ where gate and
  up units coincide (one post unit) and under mean ablation (not offered at post: the post
  sites' mean responses are not part of the statistics).

Scores: first-token top-1 (one forward; every matrix and test) and greedy generation (the paper's
metric; baseline and r's own sets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..errors import DataError
from ..progress import progress_bar
from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ..stats import StatTestResult, adjust_pvalues
from ..stats.permutation import permutation_result
from ..util.threads import ThreadTuner
from .config import DeactivationConfig
from .deactivation import (
    FactSet,
    accuracy_by_relation,
    deactivation_ops,
    first_token_correct_sets,
    generation_correct,
    generation_correct_sets,
)
from .resume import RelationRowCache, experiment_key
from .selection import NeuronSet, jaccard_matrix, random_like, select_neurons
from .statistics import NeuronStatistics


@dataclass(frozen=True, repr=False)
class RelationNeuronResult(NotebookMixin):
    """Everything the deactivation experiments measured (accuracies are fractions).

    Attributes:
        relations: row/column order of every matrix.
        n_test: test facts per relation.
        sets: each relation's neuron set.
        baseline_first / baseline_generation: unablated accuracy per relation.
        change_first: ``(set r, relation r')`` first-token accuracy change when r's set is off.
        change_first_correct: the same on the facts the unablated model gets right.
        change_generation: generation accuracy change (NaN if not run).
        random_change: ``(set r, random i, relation r')`` changes of the first ``n_spread``
            matched random sets (scored on every relation).
        random_own: ``(set r, random i)`` change on r of all ``n_random`` random sets.
        lowest_change: ``(set r, relation r')`` change for r's lowest-AP units.
        cumulative: ``(set r, share)`` accuracy drop on r; ``single``: ``(set r, neuron)``.
        tests: per relation, "r's neurons hurt r more than random sets", Holm-adjusted p.
        random_own_generation, tests_generation, p_holm_generation: the same test on greedy
            generation (NaN / empty unless ``generation``).
        interference: ``(r, r')`` cells whose gain beats every random set.
        jaccard: overlap of the relations' sets.
        change_post / tests_post / p_holm_post: the same neurons deactivated at ``mlp_post``
            (NaN / empty unless ``post``), with random ``mlp_post`` sets of the same per-layer
            counts.
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
    random_own: Tensor
    lowest_change: Tensor
    shares: tuple[float, ...]
    cumulative: Tensor
    single: Tensor
    tests: tuple[StatTestResult, ...]
    p_holm: tuple[float, ...]
    interference: tuple[tuple[str, str, float], ...]
    jaccard: np.ndarray
    change_post: Tensor
    tests_post: tuple[StatTestResult, ...] = ()
    p_holm_post: tuple[float, ...] = ()
    random_own_generation: Tensor | None = None
    tests_generation: tuple[StatTestResult, ...] = ()
    p_holm_generation: tuple[float, ...] = ()
    config: DeactivationConfig = field(default_factory=DeactivationConfig)

    @property
    def n_random(self) -> int:
        """Random sets per relation in the test."""
        return int(self.random_own.shape[1])

    @property
    def p_floor(self) -> float:
        """Smallest permutation p the test can give: ``1 / (1 + n_random)``."""
        return 1.0 / (1 + self.n_random)

    @property
    def p_holm_floor(self) -> float:
        """Smallest Holm-adjusted p over the relations: ``min(1, n_relations / (1 + n_random))``."""
        return min(1.0, len(self.relations) / (1 + self.n_random))

    def to_records(self) -> list[dict[str, Any]]:
        """One row per relation: baselines, changes (fractions), random-set range, p-values."""
        own_lo, own_hi = self.random_own.amin(1), self.random_own.amax(1)
        out = []
        for i, r in enumerate(self.relations):
            others = np.delete(self.change_first[i].numpy(), i)
            rec: dict[str, Any] = {
                "relation": r, "n_test": int(self.n_test[i]), "set_size": len(self.sets[r]),
                "baseline_first": float(self.baseline_first[i]),
                "baseline_generation": float(self.baseline_generation[i]),
                "change_own": float(self.change_first[i, i]),
                "change_others_mean": float(others.mean()) if others.size else float("nan"),
                "random_own_min": float(own_lo[i]), "random_own_max": float(own_hi[i]),
                "change_generation_own": float(self.change_generation[i, i]),
                "p_value": float(self.tests[i].p_value), "p_holm": float(self.p_holm[i]),
                "p_floor": self.p_floor, "p_holm_floor": self.p_holm_floor,
            }
            if self.config.post:
                rec["change_own_post"] = float(self.change_post[i, i])
                rec["p_holm_post"] = float(self.p_holm_post[i])
            out.append(rec)
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import experiment_blocks

        return tuple(experiment_blocks(self))

    def _main_plot(self) -> Any:
        return self._blocks()[1]  # the set x relation heatmap

    def _summary(self) -> str:
        own = ", ".join(f"{r} {100 * float(self.change_first[i, i]):+.0f}"
                        for i, r in enumerate(self.relations[:4]))
        more = ", ..." if len(self.relations) > 4 else ""
        return (f"{len(self.relations)} relations, {self.n_random} random sets; own-neuron "
                f"change (points) {own}{more}")

    def random_spread(self) -> tuple[Tensor, Tensor]:
        """Per ``(set r, relation r')``: the min and max change over the spread random sets."""
        return self.random_change.amin(1), self.random_change.amax(1)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready numbers (NaN -> None)."""

        def clean(t: Tensor | np.ndarray | float) -> object:
            arr = np.asarray(t, dtype=np.float64)
            return np.where(np.isfinite(arr), arr, None).tolist()

        def tests(ts: tuple[StatTestResult, ...], ps: tuple[float, ...]) -> list[dict]:
            return [
                {"relation": r, "drop": clean(t.statistic), "p": t.p_value,
                 "p_floor": self.p_floor, "p_holm": p, "p_holm_floor": self.p_holm_floor,
                 "z_vs_random": clean(t.effect_size)}
                for r, t, p in zip(self.relations, ts, ps, strict=True)
            ]

        lo, hi = self.random_spread()
        out = {
            "relations": list(self.relations),
            "n_test": list(self.n_test),
            "set_sizes": {r: len(s) for r, s in self.sets.items()},
            "n_random": self.n_random,
            "p_floor": self.p_floor,
            "p_holm_floor": self.p_holm_floor,
            "n_spread": int(self.random_change.shape[1]),
            "baseline_first": clean(self.baseline_first),
            "baseline_generation": clean(self.baseline_generation),
            "change_first": clean(self.change_first),
            "change_first_correct": clean(self.change_first_correct),
            "change_generation": clean(self.change_generation),
            "random_change_min": clean(lo),
            "random_change_max": clean(hi),
            "random_own": clean(self.random_own),
            "lowest_change": clean(self.lowest_change),
            "shares": list(self.shares),
            "cumulative": clean(self.cumulative),
            "single": clean(self.single),
            "tests": tests(self.tests, self.p_holm),
            "interference": [list(c) for c in self.interference],
            "jaccard": clean(self.jaccard),
        }
        if self.tests_generation:
            out["generation"] = {
                "random_own": clean(self.random_own_generation),
                "tests": tests(self.tests_generation, self.p_holm_generation),
            }
        if self.tests_post:
            out["post"] = {
                "set_sizes": {r: len(s.at_mlp_post()) for r, s in self.sets.items()},
                "change_first": clean(self.change_post),
                "tests": tests(self.tests_post, self.p_holm_post),
            }
        return out


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
    resume_dir: str | Path | None = None,
) -> RelationNeuronResult:
    """Run the deactivation experiments on held-out ``facts`` for every relation of ``stats``.

    ``facts`` must be disjoint from the identification prompts ``stats`` came from (the caller's
    split); every relation needs at least one test fact. With ``resume_dir``, the baseline and
    each relation's block are written there as they finish and read back by a rerun of the same
    experiment (:mod:`.resume`; the caller keys the directory by the model).
    """
    cfg = config or DeactivationConfig()
    plan = _plan(stats, facts, cfg, relations)
    bar = progress_bar(total=plan.total_rows, desc="deactivation", unit="row", enabled=progress)
    scorer = _Scorer(model, cfg, plan.means, bar)
    cache = RelationRowCache(resume_dir, experiment_key(cfg, plan.relations, facts, plan.sets))
    baseline = _baseline(model, facts, plan, scorer, cache)
    rows = [_relation_row(i, model, stats, facts, plan, scorer, baseline, cache)
            for i in range(len(plan.relations))]
    bar.close()
    table = _RelationRow.stacked(rows)
    tests = _permutation_tests(plan, table)
    return _result(plan, baseline, table, tests)


@dataclass(frozen=True)
class _Plan:
    """Phase 1: the relations, their test-fact counts and neuron sets, the null's sizes.

    ``n_random`` random sets per relation (the first ``n_spread`` scored on every relation's
    facts, the rest on r's only); ``means``: the units' mean responses (mean ablation) or None;
    ``widths``: site -> units (random sets match r's set site by site); ``rows_per_fact``: sets
    scored on each of r's own facts; ``total_rows``: every (set, fact) row of the run.
    """

    config: DeactivationConfig
    relations: tuple[str, ...]
    n_test: tuple[int, ...]
    sets: dict[str, NeuronSet]
    n_random: int
    n_spread: int
    means: dict | None
    widths: dict[Any, int]
    n_facts: int
    rows_per_fact: int
    total_rows: int


class _Baseline(NamedTuple):
    """Phase 2: the unablated model: per-fact first-token correctness, accuracy per relation."""

    first: np.ndarray  # (fact,) 1 if the first answer token is right
    accuracy: Tensor  # (relation,)
    generation: Tensor  # (relation,) greedy-generation accuracy (NaN without generation)
    right: np.ndarray  # (fact,) bool: the facts the unablated model gets right
    right_facts: FactSet  # those facts


class _RelationRow(NamedTuple):
    """Phase 3: one relation's row of every matrix (the resume cache's block, by these names).

    ``change``: accuracy change on every relation when r's set is off; ``change_ok``: the same
    on the facts the unablated model gets right; ``rand``: the first ``n_spread`` random sets'
    changes on every relation; ``rand_own``: every random set's change on r; ``low``: r's
    lowest-AP units; ``cum``: drops of the top shares; ``single``: drops of single top units;
    ``gen_change``, ``rand_gen``: greedy generation (NaN without it); ``change_post``,
    ``rand_post``: at ``mlp_post`` (NaN / 0 without ``post``).
    """

    change: Tensor
    change_ok: Tensor
    rand: Tensor
    rand_own: Tensor
    low: Tensor
    cum: Tensor
    single: Tensor
    gen_change: Tensor
    change_post: Tensor
    rand_post: Tensor
    rand_gen: Tensor

    @classmethod
    def stacked(cls, rows: Sequence[_RelationRow]) -> _RelationRow:
        """The full matrices: each field stacked over relations (float64)."""
        return cls(*(torch.stack([r[k] for r in rows]) for k in range(len(cls._fields))))


class _Tests(NamedTuple):
    """Phase 4: the permutation tests (first token, generation, mlp_post) and Holm p-values."""

    first: tuple[StatTestResult, ...]
    p_holm: tuple[float, ...]
    generation: tuple[StatTestResult, ...]
    p_holm_generation: tuple[float, ...]
    post: tuple[StatTestResult, ...]
    p_holm_post: tuple[float, ...]


@dataclass(frozen=True)
class _Scorer:
    """First-token correctness of many neuron sets per forward, counted on the progress bar."""

    model: object
    config: DeactivationConfig
    means: dict | None
    bar: Any
    #: thread counts of the run's forwards, one tuner per kind of forward (util.threads)
    first_threads: ThreadTuner = field(default_factory=ThreadTuner)
    generation_threads: ThreadTuner = field(default_factory=ThreadTuner)

    def score(self, sets: Sequence[NeuronSet | None], on: FactSet) -> np.ndarray:
        """``(set, fact)`` first-token correctness, many sets per forward."""
        op_sets = [deactivation_ops(n, method=self.config.method, means=self.means) for n in sets]
        out = first_token_correct_sets(self.model, on, op_sets, batch_size=self.config.batch_size,
                                       threads=self.first_threads)
        self.bar.update(out.size)
        return out


def _plan(
    stats: NeuronStatistics, facts: FactSet, cfg: DeactivationConfig,
    relations: Sequence[str] | None,
) -> _Plan:
    """Phase 1: check every relation has test facts; select the sets; count the work."""
    rels = tuple(relations or stats.relations)
    for r in rels:
        stats.relation_index(r)
        if not facts.relation_mask(r).any():
            raise DataError(f"no test facts for relation {r!r}; every relation needs >= 1")
    n_rel = len(rels)
    n_random = cfg.random_sets(n_rel)
    n_spread = min(cfg.n_spread, n_random)
    means = _mean_responses(stats) if cfg.method == "mean" else None
    widths = {s: int(stats.ap[s].shape[0]) for s in stats.sites}
    n_facts = len(facts.tokens)
    n_test = tuple(int(facts.relation_mask(r).sum()) for r in rels)
    sets = {r: select_neurons(stats, r, k=cfg.k, fraction=cfg.fraction) for r in rels}
    size = len(sets[rels[0]])  # every relation's set has the same size
    per_r = (n_random - n_spread) + len(cfg.shares) + min(cfg.n_single, size) + (
        cfg.post * n_random)  # sets scored on r's facts only
    if cfg.generation:
        per_r += n_random  # the test's random sets, decoded on r's facts
    total = n_facts * (1 + n_rel * (2 + n_spread + cfg.post)) + per_r * sum(n_test)
    return _Plan(config=cfg, relations=rels, n_test=n_test, sets=sets, n_random=n_random,
                 n_spread=n_spread, means=means, widths=widths, n_facts=n_facts,
                 rows_per_fact=per_r, total_rows=total)


def _baseline(
    model: object, facts: FactSet, plan: _Plan, scorer: _Scorer, cache: RelationRowCache
) -> _Baseline:
    """Phase 2: the unablated model's scores (read back from the resume cache when there)."""
    cfg, rels = plan.config, plan.relations
    if (saved := cache.load("baseline")) is not None:
        base = saved["first"].numpy()
        scorer.bar.update(plan.n_facts)
    else:
        base = scorer.score([None], facts)[0]
    base_acc = accuracy_by_relation(base, facts, rels)
    gen_base = torch.full((len(rels),), float("nan"), dtype=torch.float64)
    if saved is not None:
        gen_base = saved["generation"]
    elif cfg.generation:
        _, ok = generation_correct(
            model, facts, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size,
            threads=scorer.generation_threads,
        )
        gen_base = accuracy_by_relation(ok, facts, rels)
    if saved is None:
        cache.save("baseline", {"first": torch.from_numpy(np.asarray(base)), "generation": gen_base})
    facts_ok = base.astype(bool)
    return _Baseline(base, base_acc, gen_base, facts_ok, facts.subset(facts_ok))


def _relation_row(
    i: int, model: object, stats: NeuronStatistics, facts: FactSet, plan: _Plan,
    scorer: _Scorer, baseline: _Baseline, cache: RelationRowCache,
) -> _RelationRow:
    """Phase 3: relation ``i``'s row of every matrix (read back from the resume cache when there)."""
    cfg, rels, n_random, n_spread = plan.config, plan.relations, plan.n_random, plan.n_spread
    if (done := cache.load(f"relation-{i:03d}")) is not None:
        scorer.bar.update(plan.n_facts * (2 + n_spread + cfg.post) + plan.rows_per_fact * plan.n_test[i])
        return _RelationRow(**{k: done[k] for k in _RelationRow._fields})
    own = plan.sets[rels[i]]
    randoms = [random_like(own, plan.widths, seed=cfg.seed * 1000 + j) for j in range(n_random)]
    change, change_ok, low, rand = _all_facts_cells(i, stats, facts, plan, scorer, baseline, randoms)
    rand_own, cum, single = _own_facts_cells(i, facts, plan, scorer, baseline, randoms, rand)
    change_post, rand_post = _post_cells(i, model, facts, plan, scorer, baseline)
    gen_change, rand_gen = _generation_cells(i, model, facts, plan, scorer, baseline, randoms)
    row = _RelationRow(change, change_ok, rand, rand_own, low, cum, single, gen_change,
                       change_post, rand_post, rand_gen)
    cache.save(f"relation-{i:03d}", row._asdict())
    return row


def _all_facts_cells(
    i: int, stats: NeuronStatistics, facts: FactSet, plan: _Plan, scorer: _Scorer,
    baseline: _Baseline, randoms: Sequence[NeuronSet],
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Relation ``i``'s set, its lowest-AP units and the spread random sets on every fact.

    Returns the accuracy changes per relation ``(change, change_ok, low, rand)``: on all facts,
    on the facts the unablated model gets right, for the lowest-AP units, for each of the first
    ``n_spread`` random sets (``(n_spread, relation)``).
    """
    rels, n_spread = plan.relations, plan.n_spread
    n_rel, base_acc = len(rels), baseline.accuracy
    change = torch.zeros(n_rel, dtype=torch.float64)
    change_ok = torch.zeros_like(change)
    low = torch.zeros_like(change)
    rand = torch.zeros(n_spread, n_rel, dtype=torch.float64)
    own = plan.sets[rels[i]]
    lowest = select_neurons(stats, rels[i], k=len(own), lowest=True)
    full = scorer.score([own, lowest, *randoms[:n_spread]], facts)
    off = full[0]
    change[:] = accuracy_by_relation(off, facts, rels) - base_acc
    change_ok[:] = accuracy_by_relation(off[baseline.right], baseline.right_facts, rels) - 1.0
    low[:] = accuracy_by_relation(full[1], facts, rels) - base_acc
    for j in range(n_spread):
        rand[j] = accuracy_by_relation(full[2 + j], facts, rels) - base_acc
    return change, change_ok, low, rand


def _own_facts_cells(
    i: int, facts: FactSet, plan: _Plan, scorer: _Scorer, baseline: _Baseline,
    randoms: Sequence[NeuronSet], rand: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """Drops on relation ``i``'s own facts: every random set, the top shares, single top units.

    Returns ``(rand_own, cum, single)``: the random sets' changes on r (the spread sets' taken
    from ``rand``), the drops of ``cfg.shares`` of r's set and of its first ``n_single`` units.
    """
    cfg, n_random, n_spread = plan.config, plan.n_random, plan.n_spread
    rand_own = torch.zeros(n_random, dtype=torch.float64)
    cum = torch.zeros(len(cfg.shares), dtype=torch.float64)
    single = torch.zeros(cfg.n_single, dtype=torch.float64)
    own = plan.sets[plan.relations[i]]
    mine = facts.relation_mask(plan.relations[i])
    tops = [own.top(max(1, int(round(share * len(own))))) for share in cfg.shares]
    singles = [own.nth(s) for s in range(min(cfg.n_single, len(own)))]
    own_sets = [*randoms[n_spread:], *tops, *singles]
    base_r = float(baseline.first[mine].mean())
    acc_r = scorer.score(own_sets, facts.subset(mine)).mean(1) if own_sets else np.zeros(0)
    rand_own[:n_spread] = rand[:, i]
    rand_own[n_spread:] = torch.from_numpy(acc_r[: n_random - n_spread] - base_r)
    rest = acc_r[n_random - n_spread :]
    cum[:] = torch.from_numpy(base_r - rest[: len(tops)])
    single[: len(singles)] = torch.from_numpy(base_r - rest[len(tops) :])
    return rand_own, cum, single


def _post_cells(
    i: int, model: object, facts: FactSet, plan: _Plan, scorer: _Scorer, baseline: _Baseline
) -> tuple[Tensor, Tensor]:
    """The same units off at ``mlp_post`` (``cfg.post``): ``(change_post, rand_post)``.

    Without ``post``: NaN changes and zero random drops (what the result has always held).
    """
    cfg, rels, n_random = plan.config, plan.relations, plan.n_random
    change_post = torch.full((len(rels),), float("nan"), dtype=torch.float64)
    rand_post = torch.zeros(n_random, dtype=torch.float64)
    if not cfg.post:
        return change_post, rand_post
    mine = facts.relation_mask(rels[i])
    base_r = float(baseline.first[mine].mean())
    post = plan.sets[rels[i]].at_mlp_post()
    d_mlp = int(model.cfg.d_mlp)  # type: ignore[attr-defined]
    change_post[:] = accuracy_by_relation(scorer.score([post], facts)[0], facts, rels) - baseline.accuracy
    post_widths = dict.fromkeys(post.units, d_mlp)
    post_rand = [random_like(post, post_widths, seed=cfg.seed * 1000 + j) for j in range(n_random)]
    rand_post[:] = torch.from_numpy(scorer.score(post_rand, facts.subset(mine)).mean(1) - base_r)
    return change_post, rand_post


def _generation_cells(
    i: int, model: object, facts: FactSet, plan: _Plan, scorer: _Scorer, baseline: _Baseline,
    randoms: Sequence[NeuronSet],
) -> tuple[Tensor, Tensor]:
    """Greedy generation (``cfg.generation``): ``(gen_change, rand_gen)``, NaN without it.

    ``gen_change``: accuracy change per relation with r's set off; ``rand_gen``: each random
    set's change on r's facts.
    """
    cfg, rels, n_random = plan.config, plan.relations, plan.n_random
    gen_change = torch.full((len(rels),), float("nan"), dtype=torch.float64)
    rand_gen = torch.full((n_random,), float("nan"), dtype=torch.float64)
    if not cfg.generation:
        return gen_change, rand_gen
    gen_base = baseline.generation
    ops = deactivation_ops(plan.sets[rels[i]], method=cfg.method, means=plan.means)
    _, ok = generation_correct(
        model, facts, ops, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size,
        threads=scorer.generation_threads,
    )
    gen_change[:] = accuracy_by_relation(ok, facts, rels) - gen_base
    rand_ops = [deactivation_ops(n, method=cfg.method, means=plan.means) for n in randoms]
    rand_ok = generation_correct_sets(model, facts.subset(facts.relation_mask(rels[i])), rand_ops,
                                      max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size,
                                      threads=scorer.generation_threads)
    scorer.bar.update(rand_ok.size)
    rand_gen[:] = torch.from_numpy(rand_ok.mean(1) - float(gen_base[i]))
    return gen_change, rand_gen


def _permutation_tests(plan: _Plan, table: _RelationRow) -> _Tests:
    """Phase 4: r's drop against its random sets' drops on r, per metric; Holm over relations."""
    cfg, rels, n_test, n_random = plan.config, plan.relations, plan.n_test, plan.n_random

    def permutation_tests(
        drop: Tensor, null: Tensor, what: str
    ) -> tuple[tuple[StatTestResult, ...], tuple[float, ...]]:
        tests = tuple(
            permutation_result(
                float(drop[i]), null[i].numpy(), n=n_test[i],
                method=f"{rels[i]}'s neurons{what} vs {n_random} matched random sets (drop on "
                f"{rels[i]})",
            )
            for i in range(len(rels))
        )
        p = adjust_pvalues([t.p_value for t in tests], method="holm").p_adjusted
        return tests, tuple(float(v) for v in p)

    tests, p_holm = permutation_tests(-torch.diagonal(table.change), -table.rand_own, "")
    tests_post: tuple[StatTestResult, ...] = ()
    p_holm_post: tuple[float, ...] = ()
    tests_gen: tuple[StatTestResult, ...] = ()
    p_holm_gen: tuple[float, ...] = ()
    if cfg.generation:
        tests_gen, p_holm_gen = permutation_tests(
            -torch.diagonal(table.gen_change), -table.rand_gen, " (greedy generation)"
        )
    if cfg.post:
        tests_post, p_holm_post = permutation_tests(
            -torch.diagonal(table.change_post), -table.rand_post, " at mlp_post"
        )
    return _Tests(tests, p_holm, tests_gen, p_holm_gen, tests_post, p_holm_post)


def _result(
    plan: _Plan, baseline: _Baseline, table: _RelationRow, tests: _Tests
) -> RelationNeuronResult:
    """Phase 5: the interference cells (beyond every spread random set) and the result."""
    cfg, rels, sets = plan.config, plan.relations, plan.sets
    change, n_rel = table.change, len(rels)
    hi = table.rand.amax(1)
    interference = tuple(
        (rels[i], rels[j], float(change[i, j]))
        for i in range(n_rel)
        for j in range(n_rel)
        if i != j and change[i, j] > 0 and change[i, j] > hi[i, j]
    )
    return RelationNeuronResult(
        relations=rels,
        n_test=plan.n_test,
        sets=sets,
        baseline_first=baseline.accuracy,
        baseline_generation=baseline.generation,
        change_first=change,
        change_first_correct=table.change_ok,
        change_generation=table.gen_change,
        random_change=table.rand,
        random_own=table.rand_own,
        lowest_change=table.low,
        shares=cfg.shares,
        cumulative=table.cum,
        single=table.single,
        tests=tests.first,
        p_holm=tests.p_holm,
        interference=interference,
        jaccard=jaccard_matrix([sets[r] for r in rels]),
        change_post=table.change_post,
        tests_post=tests.post,
        p_holm_post=tests.p_holm_post,
        random_own_generation=table.rand_gen if cfg.generation else None,
        tests_generation=tests.generation,
        p_holm_generation=tests.p_holm_generation,
        config=cfg,
    )
