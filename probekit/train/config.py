"""Frozen training configuration; ``__post_init__`` only validates.

Each field declares its rules in the project's constraint vocabulary
(:mod:`probekit.util.constraints`), so the Python API, ``probekit train --set`` and a diagnosis
population grid all refuse a bad value with the same line (``TrainConfig.lr must be a finite
number, got inf``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from ..errors import ConfigError
from ..util.config import check_keys
from ..util.constraints import SEED, Between, Each, Finite, Ge, Gt, NonEmpty, validate


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
        he_source: where the regulariser's pairs come from. ``"pool"`` ([C]): ``he_pairs``
            draws from the pool, read by a separate forward pass of their sequences
            (:class:`probekit.homomorphism.regulariser.HELossTerm`; ~4x the cost of a plain
            step on ``scan_he_paper``). ``"batch"`` (a deviation from [C]): the pairs of the
            step's own minibatch (all of them, at most ``he_pairs``), read from the training
            forward pass, so no second pass and ``he_pool`` is unused
            (:class:`probekit.homomorphism.regulariser_batch.HEBatchLossTerm`).
        dropout: inverted-dropout rate during training steps (0 = off, then training is
            bit-identical to a run without the field) at ``dropout_kinds`` of every block,
            through :func:`probekit.interventions.dropout` (TL-native blocks have no dropout
            of their own); masks are seeded by ``(seed, step)``, so a resumed run continues
            exactly. Evaluation never drops. An & Du (2026) [C]: 0.1.
        dropout_kinds: site kinds that drop ([C]: attention weights, attention output, MLP
            output, each before its residual add).
    """

    #: every field's type is checked too (``steps=2.5`` is refused), see :func:`validate`
    check_types: ClassVar[bool] = True

    steps: Annotated[int, Ge(1)] = 10_000
    lr: Annotated[float, Finite(), Gt(0)] = 1e-3
    weight_decay: Annotated[float, Finite(), Ge(0)] = 1.0
    betas: Annotated[tuple[float, float], Each(Between(0, 1, closed="left"))] = (0.9, 0.98)
    eps: Annotated[float, Finite(), Gt(0)] = 1e-8
    batch_size: Annotated[int | None, Ge(1, hint="or None for the full batch")] = None
    warmup_steps: Annotated[int, Ge(0)] = 0
    grad_clip: Annotated[float | None, Finite(), Gt(0, hint="or None for no clipping")] = None
    seed: Annotated[int, SEED] = 0
    n_evals: Annotated[int, Ge(1)] = 60
    eval_every: Annotated[int | None, Ge(1)] = None
    eval_steps: tuple[int, ...] | None = None
    eval_at_start: bool = True
    n_checkpoints: Annotated[int, Ge(1)] = 20
    checkpoint_steps: tuple[int, ...] | None = None
    eval_max_examples: Annotated[int | None, Ge(1)] = None
    eval_batch_size: Annotated[int, Ge(1)] = 4096
    stop_metric: str | None = None
    stop_threshold: Annotated[float, Finite()] = 0.95
    device: Annotated[str, NonEmpty(hint="a torch device such as 'cpu' or 'cuda'")] = "cpu"
    he_lambda: Annotated[float, Finite(), Ge(0, hint="0 = off")] = 0.0
    he_layers: Annotated[tuple[int, ...], NonEmpty(), Each(Ge(1, hint="1-indexed blocks"))] = (2, 4)
    he_pairs: Annotated[int, Ge(1)] = 256
    he_pool: Annotated[int, Ge(1)] = 2048
    he_hidden: Annotated[int, Ge(1)] = 256
    he_source: Literal["pool", "batch"] = "pool"
    dropout: Annotated[float, Between(0, 1, closed="left", hint="0 = off")] = 0.0
    dropout_kinds: Annotated[tuple[str, ...], NonEmpty(hint="site kinds such as 'attn_out'")] = (
        "attn_pattern", "attn_out", "mlp_out")

    def __post_init__(self) -> None:
        """The declared rules of every field (:func:`validate`), then the rules across fields."""
        validate(self)
        own = "TrainConfig"
        for name in ("eval_steps", "checkpoint_steps"):
            steps = getattr(self, name)
            if steps is not None and any(not 0 <= s <= self.steps for s in steps):
                raise ConfigError(
                    f"{own}.{name} must hold ints in [0, steps={self.steps}], got {steps!r}"
                )

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
    "he_lambda", "he_layers", "he_pairs", "he_pool", "he_hidden", "he_source", "dropout",
    "dropout_kinds",
)

