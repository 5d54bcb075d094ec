"""Implicit reasoning over a synthetic knowledge graph (composition and comparison tasks).

Wang et al. (2024), "Grokked Transformers are Implicit Reasoners" (arXiv 2405.15071), with
the sizes of its section 2 and appendix (scaled-down presets: ``docs/testbeds.md``).

Format: one token per entity / relation / attribute / value / label. Input = query tokens, target =
answer token + end token ``</a>``; the loss is on the target tokens only. With the alignment of
:mod:`probekit.testbeds.base`, ``tokens = query + [answer]`` and ``target_positions`` are the last
query position and the answer position, e.g. two-hop ``[h, r1, r2, t]`` -> targets ``[t, </a>]`` at
positions ``[2, 3]``.

Composition
-----------
Each of ``n_entities`` entities gets ``out_degree`` distinct random relations (of ``n_relations``),
each to a uniform random tail: atomic facts ``(h, r) -> t``. Atomic facts are split
``1 - ood_fraction`` / ``ood_fraction`` into ID / OOD (95/5); all atomic facts are trained. Two-hop
facts ``(h, r1, r2) -> t`` with bridge ``b = r1(h)``, ``t = r2(b)``: both hops ID -> train pool
(``1 - test_id_fraction`` = 99.5 %) or ``test_id`` (0.5 %); both hops OOD -> ``test_ood``; mixed
-> dropped. ``train`` = all atomic facts + ``round(phi * |ID atomic|)`` two-hop facts sampled
without replacement from the pool (so ``phi <= |pool| / |ID atomic|``, about 0.95 x out-degree).

Comparison
----------
``n_entities`` entities, ``n_attributes`` attributes, values iid uniform in ``0..n_values-1``;
atomic ``(e, a) -> v``. Query ``(a, e1, e2)`` -> one of 3 per-attribute labels ``<``, ``=``, ``>``
(``v(e1, a)`` vs ``v(e2, a)``), ordered pairs so both orders occur, ``e1 != e2``. Per attribute a
``1 - ood_fraction`` / ``ood_fraction`` (90/10) ID/OOD entity split: ID-ID pairs -> train pool
(90 %) / ``test_id`` (10 %), OOD-OOD pairs -> ``test_ood``, mixed dropped. ``train`` = all atomic +
``round(phi * |ID atomic|)`` ID-ID pairs, where ID atomic facts are those of ID entities.
Implementation note [O]: the ID-ID pair space is large (|E|^2 x |A|), so instead of enumerating it
we draw distinct pairs uniformly and assign the first ``phi * |ID atomic|`` to train and the next
ones to ``test_id``; this equals splitting the pool 90/10 and sampling from each part, as long as the
train draw stays within 90 % of the pool (checked). ``test_id`` / ``test_ood`` are capped at
``n_test`` examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np

from ..models.config import ModelConfig
from ..util.constraints import SEED, Between, Finite, Ge, validate
from .base import TaskDataset, Vocab

END = "</a>"
PAD = "<pad>"
_LABELS = ("<", "=", ">")


#: the inferred-to-atomic ratio of a knowledge graph (Wang et al. 2024 use 3.6 ... 18.0)
Phi = Annotated[float, Finite(), Ge(0, hint="paper: 3.6 ... 18.0")]


@dataclass(frozen=True, kw_only=True)
class KGCompositionConfig:
    """Paper scale: 2000 entities, 200 relations, out-degree 20, phi in {3.6 ... 18.0}."""

    check_types: ClassVar[bool] = True

    n_entities: Annotated[int, Ge(2)] = 2000
    n_relations: Annotated[int, Ge(1)] = 200
    out_degree: Annotated[int, Ge(1)] = 20
    ood_fraction: Annotated[float, Between(0, 1)] = 0.05
    test_id_fraction: Annotated[float, Between(0, 1)] = 0.005
    phi: Phi = 18.0
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The declared rules (:mod:`probekit.util.constraints`), then the rule across fields."""
        validate(self)
        own = "KGCompositionConfig"
        if self.out_degree > self.n_relations:
            raise ValueError(
                f"{own}.out_degree={self.out_degree} exceeds n_relations={self.n_relations}: an "
                "entity's relations are distinct; lower out_degree or add relations"
            )


@dataclass(frozen=True, kw_only=True)
class KGComparisonConfig:
    """Paper scale: 1000 entities, 20 attributes, values 0..19, phi in {3.6, 7.2, 9.0, 12.6}."""

    check_types: ClassVar[bool] = True

    n_entities: Annotated[int, Ge(4)] = 1000
    n_attributes: Annotated[int, Ge(1)] = 20
    n_values: Annotated[int, Ge(2)] = 20
    ood_fraction: Annotated[float, Between(0, 1)] = 0.1
    test_id_fraction: Annotated[float, Between(0, 1)] = 0.1
    phi: Phi = 7.2
    n_test: Annotated[int, Ge(1)] = 3000
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The declared rules (:mod:`probekit.util.constraints`), then the rule across fields."""
        validate(self)
        own = "KGComparisonConfig"
        n_ood = round(self.ood_fraction * self.n_entities)
        if n_ood < 2 or self.n_entities - n_ood < 2:
            raise ValueError(
                f"{own}: ood_fraction={self.ood_fraction} of n_entities={self.n_entities} gives "
                f"{n_ood} OOD entities; both ID and OOD need at least 2 (raise n_entities)"
            )


@dataclass(frozen=True)
class AtomicFacts:
    """Arrays of one KG: fact ``k`` is ``(head[k], relation[k]) -> tail[k]``; ``is_ood[k]``."""

    head: np.ndarray
    relation: np.ndarray
    tail: np.ndarray
    is_ood: np.ndarray


def make_atomic_facts(
    rng: np.random.Generator, n_entities: int, n_relations: int, out_degree: int, ood_fraction: float
) -> AtomicFacts:
    """Random KG: every entity gets ``out_degree`` distinct relations to uniform random tails."""
    rel = np.stack([rng.permutation(n_relations)[:out_degree] for _ in range(n_entities)])
    head = np.repeat(np.arange(n_entities), out_degree)
    relation = rel.ravel()
    tail = rng.integers(0, n_entities, size=head.size)
    n_ood = round(ood_fraction * head.size)
    is_ood = np.zeros(head.size, dtype=bool)
    is_ood[rng.permutation(head.size)[:n_ood]] = True
    return AtomicFacts(head, relation, tail, is_ood)


def _kg_model_config(vocab: Vocab, n_ctx: int, seed: int, overrides: dict[str, Any]) -> ModelConfig:
    # Our scaled-down GPU choice (circuits.md): 4 layers, d_model 256, 8 heads.
    base: dict[str, Any] = dict(
        n_layers=4, d_model=256, n_heads=8, d_head=32, d_mlp=1024, act_fn="gelu",
        normalization_type="LN", d_vocab=len(vocab), n_ctx=n_ctx, seed=seed,
    )
    base.update(overrides)
    return ModelConfig(**base)


class KnowledgeComposition:
    """Two-hop composition task. Splits ``train``, ``test_id``, ``test_ood``.

    Metadata columns: ``hop`` (1 atomic, 2 two-hop), ``h``, ``r1``, ``r2``, ``bridge``, ``t``
    (entity / relation indices, not token ids; ``r2``/``bridge`` are None for atomic facts) and
    ``ood`` (atomic: the fact is OOD; two-hop: both hops are OOD); ``answer``: the answer's
    token id. ``pair_id`` / ``role``: clean/corrupt prompt pairs for patching and circuit
    faithfulness (``ex.pairs()``), on ``test_id`` only (see :func:`consecutive_pairs`); None
    elsewhere.
    Token ids: ``entity_id(e)``, ``relation_id(r)``.
    """

    name = "kg_composition"

    def __init__(self, config: KGCompositionConfig | None = None) -> None:
        self.config = config or KGCompositionConfig()
        c = self.config
        toks = [PAD, END, *(f"<e{i}>" for i in range(c.n_entities))]
        toks += [f"<r{i}>" for i in range(c.n_relations)]
        self._vocab = Vocab(tokens=tuple(toks), pad=PAD)
        self._splits: dict[str, TaskDataset] | None = None
        self._facts: AtomicFacts | None = None

    @property
    def vocab(self) -> Vocab:
        """Tokens: pad, end, entities, relations."""
        return self._vocab

    def entity_id(self, e: int | np.integer) -> int:
        """Token id of entity ``e``."""
        return 2 + int(e)

    def relation_id(self, r: int | np.integer) -> int:
        """Token id of relation ``r``."""
        return 2 + self.config.n_entities + int(r)

    @property
    def end_id(self) -> int:
        """Token id of the end-of-answer marker."""
        return 1

    @property
    def atomic_facts(self) -> AtomicFacts:
        """The seeded atomic fact graph (built on first use)."""
        if self._facts is None:
            c = self.config
            rng = np.random.default_rng([c.seed, 0])
            self._facts = make_atomic_facts(
                rng, c.n_entities, c.n_relations, c.out_degree, c.ood_fraction
            )
        return self._facts

    def splits(self) -> dict[str, TaskDataset]:
        """``train`` (atomic + ID inferred facts), ``test_id`` and ``test_ood``, built once and cached."""
        if self._splits is None:
            self._splits = self._make_splits()
        return self._splits

    def model_config(self, **overrides: Any) -> ModelConfig:
        """Default model (``_kg_model_config``: 4 layers) with ``overrides`` applied."""
        return _kg_model_config(self.vocab, 4, self.config.seed, overrides)

    def _make_splits(self) -> dict[str, TaskDataset]:
        c, f = self.config, self.atomic_facts
        rng = np.random.default_rng([c.seed, 1])
        n_e, deg = c.n_entities, c.out_degree
        # out[h] = indices of h's atomic facts (contiguous block of out_degree)
        # two-hop (h, r1, r2): fact i = (h, r1) -> b, then fact j in b's block
        i = np.repeat(np.arange(n_e * deg), deg)
        j = (f.tail[i] * deg) + np.tile(np.arange(deg), n_e * deg)
        both_id = ~f.is_ood[i] & ~f.is_ood[j]
        both_ood = f.is_ood[i] & f.is_ood[j]
        id_idx = np.flatnonzero(both_id)
        perm = rng.permutation(id_idx.size)
        n_test = round(c.test_id_fraction * id_idx.size)
        test_id, pool = id_idx[perm[:n_test]], id_idx[perm[n_test:]]
        n_id_atomic = int((~f.is_ood).sum())
        n_infer = round(c.phi * n_id_atomic)
        if n_infer > pool.size:
            raise ValueError(
                f"KGCompositionConfig.phi={c.phi} asks for {n_infer} inferred facts but the ID "
                f"two-hop pool has {pool.size} (max phi = {pool.size / n_id_atomic:.2f}); lower phi "
                "or raise out_degree"
            )
        train_inf = np.sort(pool[rng.permutation(pool.size)[:n_infer]])
        atomic = np.arange(f.head.size)
        return {
            "train": self._dataset("train", atomic, np.sort(train_inf), i, j),
            "test_id": self._dataset("test_id", atomic[:0], np.sort(test_id), i, j),
            "test_ood": self._dataset("test_ood", atomic[:0], np.flatnonzero(both_ood), i, j),
        }

    def _dataset(
        self, name: str, atomic: np.ndarray, inferred: np.ndarray, i: np.ndarray, j: np.ndarray
    ) -> TaskDataset:
        f, ne = self.atomic_facts, self.config.n_entities
        tokens: list[list[int]] = []
        keys = ("hop", "h", "r1", "r2", "bridge", "t", "ood")
        meta: dict[str, list[Any]] = {k: [] for k in keys}
        for k in atomic.tolist():
            h, r, t = int(f.head[k]), int(f.relation[k]), int(f.tail[k])
            tokens.append([2 + h, 2 + ne + r, 2 + t])
            for key, v in zip(keys, (1, h, r, None, None, t, bool(f.is_ood[k]))):
                meta[key].append(v)
        for k in inferred.tolist():
            a, b = int(i[k]), int(j[k])
            h, r1, br = int(f.head[a]), int(f.relation[a]), int(f.tail[a])
            r2, t = int(f.relation[b]), int(f.tail[b])
            tokens.append([2 + h, 2 + ne + r1, 2 + ne + r2, 2 + t])
            for key, v in zip(keys, (2, h, r1, r2, br, t, bool(f.is_ood[a] and f.is_ood[b]))):
                meta[key].append(v)
        meta["answer"] = [tok[-1] for tok in tokens]
        pair_id, role = (consecutive_pairs(meta["t"]) if name == "test_id"
                         else ([None] * len(tokens), [None] * len(tokens)))
        meta["pair_id"], meta["role"] = pair_id, role
        return TaskDataset(
            name=name,
            tokens=tokens,
            targets=[[tok[-1], self.end_id] for tok in tokens],
            target_positions=[[len(tok) - 2, len(tok) - 1] for tok in tokens],
            metadata=meta,
        )


def consecutive_pairs(answers: list[Any]) -> tuple[list[int | None], list[str | None]]:
    """Clean/corrupt pairs of consecutive queries with different answers.

    Rows ``2k`` (clean) and ``2k + 1`` (corrupt) form pair ``k`` when their answers differ; a pair
    with equal answers (no logit difference to restore) and an odd last row get ``None``. The
    corrupted prompt is another real query of the split, so the metric ``logit(t) - logit(t')``
    contrasts the clean and the corrupted answer (the counterfactual query of Wang et al. 2024's
    causal tracing, here differing in every token rather than in one).

    Returns:
        ``(pair_id, role)``: one entry per row, ``role`` in ``"clean"`` / ``"corrupt"``.
    """
    n = len(answers)
    pair_id: list[int | None] = [None] * n
    role: list[str | None] = [None] * n
    for k in range(n // 2):
        a, b = 2 * k, 2 * k + 1
        if answers[a] != answers[b]:
            pair_id[a] = pair_id[b] = k
            role[a], role[b] = "clean", "corrupt"
    return pair_id, role


class KnowledgeComparison:
    """Attribute comparison task. Splits ``train``, ``test_id``, ``test_ood``.

    Metadata columns: ``hop`` (1 atomic, 2 comparison), ``attribute``, ``e1``, ``e2`` (``e2`` None
    for atomic), ``v1``, ``v2`` (values), ``label`` (0 ``<``, 1 ``=``, 2 ``>``; None for atomic),
    ``ood`` (atomic: the entity is OOD for that attribute; comparison: both are).
    """

    name = "kg_comparison"

    def __init__(self, config: KGComparisonConfig | None = None) -> None:
        self.config = config or KGComparisonConfig()
        c = self.config
        toks = [PAD, END, *(f"<e{i}>" for i in range(c.n_entities))]
        toks += [f"<a{i}>" for i in range(c.n_attributes)]
        toks += [f"<v{i}>" for i in range(c.n_values)]
        toks += [f"<a{a}{lab}>" for a in range(c.n_attributes) for lab in _LABELS]
        self._vocab = Vocab(tokens=tuple(toks), pad=PAD)
        self._splits: dict[str, TaskDataset] | None = None
        rng = np.random.default_rng([c.seed, 0])
        #: values[e, a]
        self.values = rng.integers(0, c.n_values, size=(c.n_entities, c.n_attributes))
        n_ood = round(c.ood_fraction * c.n_entities)
        #: is_ood[e, a]: per-attribute OOD entity split
        self.is_ood = np.zeros((c.n_entities, c.n_attributes), dtype=bool)
        for a in range(c.n_attributes):
            self.is_ood[rng.permutation(c.n_entities)[:n_ood], a] = True

    @property
    def vocab(self) -> Vocab:
        """The task's token vocabulary (pad and end first, then entities, attributes, values, labels)."""
        return self._vocab

    @property
    def end_id(self) -> int:
        """Token id of the end-of-answer marker."""
        return 1

    def entity_id(self, e: int | np.integer) -> int:
        """Token id of entity ``e``."""
        return 2 + int(e)

    def attribute_id(self, a: int | np.integer) -> int:
        """Token id of attribute ``a``."""
        return 2 + self.config.n_entities + int(a)

    def value_id(self, v: int | np.integer) -> int:
        """Token id of attribute value ``v``."""
        return 2 + self.config.n_entities + self.config.n_attributes + int(v)

    def label_id(self, a: int | np.integer, label: int | np.integer) -> int:
        """Token id of comparison label ``label`` (0/1/2) of attribute ``a``."""
        c = self.config
        return 2 + c.n_entities + c.n_attributes + c.n_values + 3 * int(a) + int(label)

    def splits(self) -> dict[str, TaskDataset]:
        """``train`` (atomic + ID inferred facts), ``test_id`` and ``test_ood``, built once and cached."""
        if self._splits is None:
            self._splits = self._make_splits()
        return self._splits

    def model_config(self, **overrides: Any) -> ModelConfig:
        """Default model (``_kg_model_config``: 4 layers) with ``overrides`` applied."""
        return _kg_model_config(self.vocab, 4, self.config.seed, overrides)

    def _sample_pairs(self, rng: np.random.Generator, ood: bool, n: int) -> np.ndarray:
        """``n`` distinct ordered pairs (a, e1, e2), e1 != e2, both entities ID (or both OOD)."""
        c = self.config
        groups = [np.flatnonzero(self.is_ood[:, a] == ood) for a in range(c.n_attributes)]
        m = groups[0].size  # same group size for every attribute
        per = m * (m - 1)
        n = min(n, per * c.n_attributes)
        k = rng.choice(per * c.n_attributes, size=n, replace=False)
        a, rem = np.divmod(k, per)
        i, jj = np.divmod(rem, m - 1)
        j = jj + (jj >= i)
        g = np.stack(groups)
        return np.stack([a, g[a, i], g[a, j]], axis=1)

    def _make_splits(self) -> dict[str, TaskDataset]:
        c = self.config
        rng = np.random.default_rng([c.seed, 1])
        n_id_atomic = int((~self.is_ood).sum())
        n_train = round(c.phi * n_id_atomic)
        m = int((~self.is_ood[:, 0]).sum())
        pool = m * (m - 1) * c.n_attributes
        max_train = round((1 - c.test_id_fraction) * pool)
        if n_train > max_train:
            raise ValueError(
                f"KGComparisonConfig.phi={c.phi} asks for {n_train} comparisons but the ID train "
                f"pool has {max_train} (max phi = {max_train / n_id_atomic:.2f}); lower phi or "
                "raise n_entities"
            )
        n_test_id = min(c.n_test, pool - max_train)
        drawn = self._sample_pairs(rng, False, n_train + n_test_id)
        train_pairs, test_pairs = drawn[:n_train], drawn[n_train:]
        ood_pairs = self._sample_pairs(rng, True, c.n_test)
        ea = np.argwhere(np.ones_like(self.is_ood))  # all atomic facts (e, a)
        return {
            "train": self._dataset("train", ea, train_pairs),
            "test_id": self._dataset("test_id", ea[:0], test_pairs),
            "test_ood": self._dataset("test_ood", ea[:0], ood_pairs),
        }

    def _dataset(self, name: str, atomic: np.ndarray, pairs: np.ndarray) -> TaskDataset:
        tokens, targets = [], []
        keys = ("hop", "attribute", "e1", "e2", "v1", "v2", "label", "ood")
        meta: dict[str, list[Any]] = {k: [] for k in keys}
        for e, a in atomic.tolist():
            v = int(self.values[e, a])
            tokens.append([self.entity_id(e), self.attribute_id(a), self.value_id(v)])
            targets.append([self.value_id(v), self.end_id])
            for key, x in zip(keys, (1, a, e, None, v, None, None, bool(self.is_ood[e, a]))):
                meta[key].append(x)
        for a, e1, e2 in pairs.tolist():
            v1, v2 = int(self.values[e1, a]), int(self.values[e2, a])
            label = int(np.sign(v1 - v2)) + 1
            lab = self.label_id(a, label)
            tokens.append([self.attribute_id(a), self.entity_id(e1), self.entity_id(e2), lab])
            targets.append([lab, self.end_id])
            ood = bool(self.is_ood[e1, a] and self.is_ood[e2, a])
            for key, x in zip(keys, (2, a, e1, e2, v1, v2, label, ood)):
                meta[key].append(x)
        return TaskDataset(
            name=name,
            tokens=tokens,
            targets=targets,
            target_positions=[[len(t) - 2, len(t) - 1] for t in tokens],
            metadata=meta,
        )
