"""Relation facts: one-hop ``(subject, relation) -> object`` facts over a random KG.

For neuron experiments (which neurons store which relation). Same graph model and token format as the
composition task of Wang et al. (2024), :mod:`probekit.testbeds.knowledge`: every subject gets
``out_degree`` distinct relations, each to a uniform random object; input ``[s, r]``, targets
``[o, </a>]`` at positions ``[1, 2]`` (``tokens = [s, r, o]``).

Splits: ``train`` = all facts minus a seeded ``test_fraction`` held out as ``test_id`` (only if
``test_fraction > 0``; random facts are not inferable, so ``test_id`` measures memorisation leakage,
expected at chance). Metadata: ``subject``, ``relation`` (ground-truth relation id, 0-based),
``object``, ``relation_name``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np

from ..models.config import ModelConfig
from ..util.constraints import SEED, Between, Ge, validate
from .base import TaskDataset, Vocab
from .knowledge import END, PAD, make_atomic_facts


@dataclass(frozen=True, kw_only=True)
class RelationFactsConfig:
    """Default: 200 subjects x 8 relations (each subject has all of them) = 1600 facts."""

    check_types: ClassVar[bool] = True

    n_entities: Annotated[int, Ge(2)] = 200
    n_relations: Annotated[int, Ge(1)] = 8
    out_degree: Annotated[int, Ge(1)] = 8
    test_fraction: Annotated[float, Between(0, 1, closed="left")] = 0.0
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The declared rules (:mod:`probekit.util.constraints`), then the rule across fields."""
        validate(self)
        own = "RelationFactsConfig"
        if self.out_degree > self.n_relations:
            raise ValueError(
                f"{own}.out_degree={self.out_degree} exceeds n_relations={self.n_relations}; "
                "lower out_degree or add relations"
            )


class RelationFacts:
    """Task object; token ids ``entity_id(e) = 2 + e``, ``relation_id(r) = 2 + n_entities + r``."""

    name = "relation_facts"

    def __init__(self, config: RelationFactsConfig | None = None) -> None:
        self.config = config or RelationFactsConfig()
        c = self.config
        toks = [PAD, END, *(f"<e{i}>" for i in range(c.n_entities))]
        toks += [f"<r{i}>" for i in range(c.n_relations)]
        self._vocab = Vocab(tokens=tuple(toks), pad=PAD)
        self._splits: dict[str, TaskDataset] | None = None

    @property
    def vocab(self) -> Vocab:
        """Tokens: pad, end, one per entity, one per relation."""
        return self._vocab

    def entity_id(self, e: int | np.integer) -> int:
        """Token id of entity ``e``."""
        return 2 + int(e)

    def relation_id(self, r: int | np.integer) -> int:
        """Token id of relation ``r``."""
        return 2 + self.config.n_entities + int(r)

    def splits(self) -> dict[str, TaskDataset]:
        """``train`` and (if any facts are held out) ``test_id``, built once and cached."""
        if self._splits is None:
            self._splits = self._make_splits()
        return self._splits

    def model_config(self, **overrides: Any) -> ModelConfig:
        """2 layers, d_model 128, 4 heads, GELU, LN, with ``overrides`` applied."""
        base: dict[str, Any] = dict(
            n_layers=2, d_model=128, n_heads=4, d_head=32, d_mlp=512, act_fn="gelu",
            normalization_type="LN", d_vocab=len(self.vocab), n_ctx=3, seed=self.config.seed,
        )
        base.update(overrides)
        return ModelConfig(**base)

    def _make_splits(self) -> dict[str, TaskDataset]:
        c = self.config
        rng = np.random.default_rng(c.seed)
        f = make_atomic_facts(rng, c.n_entities, c.n_relations, c.out_degree, 0.0)
        perm = rng.permutation(f.head.size)
        n_test = round(c.test_fraction * f.head.size)
        parts = {"train": np.sort(perm[n_test:])}
        if n_test:
            parts["test_id"] = np.sort(perm[:n_test])
        out = {}
        for name, idx in parts.items():
            s, r, o = (x[idx].tolist() for x in (f.head, f.relation, f.tail))
            out[name] = TaskDataset(
                name=name,
                tokens=[[self.entity_id(a), self.relation_id(b), self.entity_id(t)]
                        for a, b, t in zip(s, r, o)],
                targets=[[self.entity_id(t), 1] for t in o],
                target_positions=[[1, 2]] * len(s),
                metadata={"subject": s, "relation": r, "object": o,
                          "relation_name": [f"<r{b}>" for b in r]},
            )
        return out
