"""Frozen training configuration; ``__post_init__`` only validates."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..util.config import check_keys


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """AdamW training run (defaults: Nanda et al. 2023 modular addition, full batch).

    Attributes:
        steps: optimiser steps in total (a resumed run continues up to this).
        lr, weight_decay, betas, eps: AdamW (decoupled weight decay, Loshchilov & Hutter 2019).
        batch_size: examples per step; None = full batch. Minibatches walk a per-epoch
            permutation drawn from ``numpy.random.default_rng([seed, epoch])``.
        warmup_steps: linear warm-up ``lr * min(1, step / warmup_steps)``, then constant.
        grad_clip: max global gradient L2 norm; None = no clipping.
        seed: seeds the minibatch order and the evaluation subsets (model init uses
            ``ModelConfig.seed``, data ``task.config.seed``).
        n_evals: number of log-spaced evaluation steps in ``[1, steps]`` (plus step 0).
        eval_every: additional evaluations every this many steps (None: log-spaced only).
        eval_steps: explicit evaluation steps, replacing the two knobs above.
        eval_at_start: evaluate the untrained model (step 0); False skips that record (e.g. a
            population study that reads only the final evaluation).
        n_checkpoints / checkpoint_steps: the same for checkpoints (step 0 and the last step are
            always saved).
        eval_max_examples: evaluate each split on at most this many examples (a fixed seeded
            subset); None = all.
        eval_batch_size: examples per forward pass during evaluation.
        stop_metric, stop_threshold: stop early at the first evaluation where the history key
            ``stop_metric`` (e.g. ``"test_id/acc"``) reaches ``stop_threshold``.
        device: torch device string ("cpu", "cuda").
        he_lambda: weight of the HE regulariser of An & Du (2026) [C] added to the loss,
            ``L = CE + he_lambda * L_HE`` (:mod:`probekit.homomorphism.regulariser`); 0 = off
            (then training is bit-identical to a run without the field). [C] uses 0.2.
        he_layers: 1-indexed blocks whose outputs are regularised ([C]: 2 and 4).
        he_pairs: primitive-modifier pairs drawn (with replacement) per step ([C]: 256).
        he_pool: pool size, the first pairs of the training set ([C]: 2048).
        he_hidden: width of the per-modifier MLPs ([C]: 256).
        dropout: inverted-dropout rate during training steps (0 = off, then training is
            bit-identical to a run without the field) at ``dropout_kinds`` of every block,
            through :func:`probekit.interventions.dropout` (TL-native blocks have no dropout
            of their own); masks are seeded by ``(seed, step)``, so a resumed run continues
            exactly. Evaluation never drops. An & Du (2026) [C]: 0.1.
        dropout_kinds: site kinds that drop ([C]: attention weights, attention output, MLP
            output, each before its residual add).
    """

    steps: int = 10_000
    lr: float = 1e-3
    weight_decay: float = 1.0
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    batch_size: int | None = None
    warmup_steps: int = 0
    grad_clip: float | None = None
    seed: int = 0
    n_evals: int = 60
    eval_every: int | None = None
    eval_steps: tuple[int, ...] | None = None
    eval_at_start: bool = True
    n_checkpoints: int = 20
    checkpoint_steps: tuple[int, ...] | None = None
    eval_max_examples: int | None = None
    eval_batch_size: int = 4096
    stop_metric: str | None = None
    stop_threshold: float = 0.95
    device: str = "cpu"
    he_lambda: float = 0.0
    he_layers: tuple[int, ...] = (2, 4)
    he_pairs: int = 256
    he_pool: int = 2048
    he_hidden: int = 256
    dropout: float = 0.0
    dropout_kinds: tuple[str, ...] = ("attn_pattern", "attn_out", "mlp_out")

    def __post_init__(self) -> None:
        own = "TrainConfig"
        for name in ("lr", "weight_decay", "eps", "grad_clip", "stop_threshold", "he_lambda", "dropout"):
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{own}.{name} must be a finite number, got {value!r}")
        for name in ("steps", "n_evals", "n_checkpoints", "eval_batch_size"):
            _pos_int(own, name, getattr(self, name))
        for name in ("batch_size", "eval_every", "eval_max_examples"):
            if getattr(self, name) is not None:
                _pos_int(own, name, getattr(self, name), hint=" or None")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ConfigError(f"{own}.warmup_steps must be an int >= 0, got {self.warmup_steps!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ConfigError(f"{own}.lr must be > 0, got {self.lr!r}")
        if not (isinstance(self.weight_decay, (int, float)) and self.weight_decay >= 0):
            raise ConfigError(f"{own}.weight_decay must be >= 0, got {self.weight_decay!r}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"{own}.betas must be two numbers in [0, 1), got {self.betas!r}")
        if not self.eps > 0:
            raise ConfigError(f"{own}.eps must be > 0, got {self.eps!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ConfigError(f"{own}.grad_clip must be > 0 or None, got {self.grad_clip!r}")
        for name in ("eval_steps", "checkpoint_steps"):
            steps = getattr(self, name)
            if steps is not None and any(
                isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= self.steps for s in steps
            ):
                raise ConfigError(
                    f"{own}.{name} must hold ints in [0, steps={self.steps}], got {steps!r}"
                )
        if not isinstance(self.eval_at_start, bool):
            raise ConfigError(f"{own}.eval_at_start must be true or false, got {self.eval_at_start!r}")
        if not (isinstance(self.he_lambda, (int, float)) and self.he_lambda >= 0):
            raise ValueError(f"{own}.he_lambda must be >= 0 (0 = off), got {self.he_lambda!r}")
        for name in ("he_pairs", "he_pool", "he_hidden"):
            _pos_int(own, name, getattr(self, name))
        if not self.he_layers or any(
            isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in self.he_layers
        ):
            raise ValueError(
                f"{own}.he_layers must be 1-indexed block numbers >= 1, got {self.he_layers!r}"
            )
        if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            raise ConfigError(f"{own}.dropout must be in [0, 1) (0 = off), got {self.dropout!r}")
        if not self.dropout_kinds or not all(isinstance(k, str) for k in self.dropout_kinds):
            raise ConfigError(
                f"{own}.dropout_kinds must be site kinds such as 'attn_out', got "
                f"{self.dropout_kinds!r}"
            )
        if not isinstance(self.device, str) or not self.device:
            raise ConfigError(f"{own}.device must be a torch device string, got {self.device!r}")

    def loss_term_weights(self) -> dict[str, float]:
        """Weights of the extra loss terms this config asks for, by term name (nonzero only).

        The trainer adds ``weight * term.loss(model, step)`` for each term its caller supplies
        and checks that the supplied terms are exactly these (:mod:`probekit.train.loss_term`;
        :func:`probekit.train.build.loss_terms` builds them).
        """
        return {"he_regulariser": float(self.he_lambda)} if self.he_lambda > 0 else {}

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form of the config (``from_dict`` inverts it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Rebuild from :meth:`to_dict` output (lists become tuples); unknown keys raise ``ConfigError``."""
        check_keys(data, (f.name for f in dataclasses.fields(cls)), what="TrainConfig")
        conv = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**conv)


#: fields that must agree between a checkpointed run and the run resuming it
OPTIMISATION_FIELDS = (
    "lr", "weight_decay", "betas", "eps", "batch_size", "warmup_steps", "grad_clip", "seed",
    "he_lambda", "he_layers", "he_pairs", "he_pool", "he_hidden", "dropout", "dropout_kinds",
)


def _pos_int(own: str, name: str, value: Any, hint: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{own}.{name} must be an int >= 1{hint}, got {value!r}")
