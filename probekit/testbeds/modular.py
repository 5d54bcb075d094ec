"""Modular addition, the grokking testbed of Power et al. (2022) and Nanda et al. (2023).

Input ``"a b ="`` (token ids ``a``, ``b`` in ``0..p-1`` and ``=`` = ``p``), target
``c = (a + b) mod p`` predicted by the logit at the ``=`` position (position 2). All ``p^2`` ordered
pairs are split once, by a seeded permutation, into ``train`` (``round(train_fraction * p^2)``
pairs) and ``test_id`` (the rest).

Paper config (Nanda et al. 2023, "Progress measures for grokking via mechanistic
interpretability", arXiv 2301.05217): ``p = 113``, ``train_fraction = 0.3``. The CPU preset used by
``probekit train modular_addition`` uses ``p = 53``, ``train_fraction = 0.6`` (and lr 3e-3) so that
it groks in a few hundred full-batch steps on a laptop CPU (see :mod:`probekit.train.presets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np

from ..errors import ConfigError
from ..models.config import ModelConfig
from ..util.constraints import SEED, Between, Ge, validate
from .base import TaskDataset, Vocab


@dataclass(frozen=True, kw_only=True)
class ModularAdditionConfig:
    """``p``: modulus (>= 2); ``train_fraction``: share of the p^2 pairs used for training."""

    check_types: ClassVar[bool] = True

    p: Annotated[int, Ge(2)] = 113
    train_fraction: Annotated[float, Between(0, 1)] = 0.3
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The declared rules (:mod:`probekit.util.constraints`), then the rule across fields."""
        validate(self)
        n_train = round(self.train_fraction * self.p**2)
        if n_train < 1 or n_train >= self.p**2:
            raise ConfigError(
                f"ModularAdditionConfig.train_fraction={self.train_fraction} leaves {n_train} of "
                f"{self.p**2} pairs for training; choose a fraction giving at least one train and "
                "one test pair"
            )


class ModularAddition:
    """Task object: ``vocab``, ``splits()`` -> {"train", "test_id"}, ``model_config()``.

    Metadata columns: ``a``, ``b``, ``answer`` (ints).
    """

    name = "modular_addition"

    def __init__(self, config: ModularAdditionConfig | None = None) -> None:
        self.config = config or ModularAdditionConfig()
        p = self.config.p
        self._vocab = Vocab(tokens=(*(str(i) for i in range(p)), "=", "<pad>"))
        self._splits: dict[str, TaskDataset] | None = None

    @property
    def vocab(self) -> Vocab:
        """Tokens: the residues ``0..p-1`` and ``=``."""
        return self._vocab

    @property
    def eq_id(self) -> int:
        """Token id of ``=`` (``p``)."""
        return self.config.p

    def splits(self) -> dict[str, TaskDataset]:
        """``train`` / ``test_id`` pairs split by a seeded permutation, built once."""
        if self._splits is None:
            self._splits = _make_splits(self.config)
        return self._splits

    def model_config(self, **overrides: Any) -> ModelConfig:
        """Nanda et al. (2023): 1 layer, d_model 128, 4 heads x 32, d_mlp 512, ReLU, no LayerNorm."""
        base: dict[str, Any] = dict(
            n_layers=1, d_model=128, n_heads=4, d_head=32, d_mlp=512, act_fn="relu",
            normalization_type=None, d_vocab=len(self.vocab), n_ctx=3, seed=self.config.seed,
        )
        base.update(overrides)
        return ModelConfig(**base)


def _make_splits(cfg: ModularAdditionConfig) -> dict[str, TaskDataset]:
    p = cfg.p
    rng = np.random.default_rng(cfg.seed)
    a_all, b_all = (x.ravel() for x in np.meshgrid(np.arange(p), np.arange(p), indexing="ij"))
    perm = rng.permutation(p * p)
    n_train = round(cfg.train_fraction * p * p)

    def build(name: str, idx: np.ndarray) -> TaskDataset:
        a, b = a_all[idx].tolist(), b_all[idx].tolist()
        c = [(x + y) % p for x, y in zip(a, b)]
        return TaskDataset(
            name=name,
            tokens=[[x, y, p] for x, y in zip(a, b)],
            targets=[[z] for z in c],
            target_positions=[[2]] * len(a),
            metadata={"a": a, "b": b, "answer": c},
        )

    return {"train": build("train", perm[:n_train]), "test_id": build("test_id", perm[n_train:])}
