"""Runs from presets: a preset plus ``--set`` overrides -> (task, model config, train config).

The ``--set`` items are parsed by :func:`probekit.train.sets.parse_sets` (shared with the
fine-tune presets) over :func:`~probekit.train.presets.run_sections`.

The library side of ``probekit train`` (:mod:`probekit.train.cli` parses arguments and calls
these; :mod:`probekit.train.population` builds each run of a population in its worker), and the
one place that turns a :class:`~probekit.train.TrainConfig`'s loss-term weights into the terms
themselves (:func:`loss_terms`): the trainer names no method package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models.config import ModelConfig
from .config import TrainConfig
from .loss_term import LossTermFactory
from .presets import get_preset, run_sections
from .sets import parse_sets, parse_value

if TYPE_CHECKING:
    from ..testbeds.base import Task

__all__ = ["build_run", "loss_terms", "parse_sets", "parse_value", "run_sections"]

def build_run(
    name: str,
    *,
    steps: int | None = None,
    seed: int | None = None,
    sets: list[str] | None = None,
    device: str | None = None,
) -> tuple[Task, ModelConfig, TrainConfig]:
    """Resolve testbed preset ``name`` plus overrides into (task, model config, train config).

    :meth:`probekit.train.presets.Preset.build` of :func:`~probekit.train.presets.get_preset`.
    """
    return get_preset(name).build(name, steps=steps, seed=seed, sets=sets, device=device)


def loss_terms(task: Task, config: TrainConfig) -> tuple[LossTermFactory, ...]:
    """The extra loss terms ``config`` weights (``config.loss_term_weights()``), for ``train``.

    ``he_regulariser`` (``he_lambda > 0``): the HE regulariser of An & Du (2026) [C] on the
    task's training split, :func:`probekit.homomorphism.regulariser.he_loss_term` (its pair pool,
    ``he_source="pool"``) or :func:`probekit.homomorphism.regulariser_batch.he_batch_loss_term`
    (the minibatch's pairs, ``he_source="batch"``).
    """
    terms: list[LossTermFactory] = []
    if "he_regulariser" in config.loss_term_weights() and config.he_source == "batch":
        from ..homomorphism.regulariser_batch import he_batch_loss_term

        terms.append(he_batch_loss_term(
            task.splits()["train"], blocks=config.he_layers, n_pairs=config.he_pairs,
            hidden=config.he_hidden, seed=config.seed,
        ))
    elif "he_regulariser" in config.loss_term_weights():
        from ..homomorphism.regulariser import he_loss_term

        terms.append(he_loss_term(
            task.splits()["train"], pad_id=task.vocab.pad_id, blocks=config.he_layers,
            n_pairs=config.he_pairs, pool_size=config.he_pool, hidden=config.he_hidden,
            seed=config.seed,
        ))
    return tuple(terms)
