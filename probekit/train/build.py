"""Runs from presets: a preset plus ``--set`` overrides -> (task, model config, train config).

The ``--set`` items are parsed by :func:`probekit.train.sets.parse_sets` (shared with the
fine-tune presets) over :func:`run_sections`.

The library side of ``probekit train`` (:mod:`probekit.train.cli` parses arguments and calls
these; :mod:`probekit.train.population` builds each run of a population in its worker), and the
one place that turns a :class:`~probekit.train.TrainConfig`'s loss-term weights into the terms
themselves (:func:`loss_terms`): the trainer names no method package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError, ProbekitError
from ..models.config import ModelConfig
from ..util.constraints import ConstraintError
from .config import TrainConfig
from .loss_term import LossTermFactory
from .presets import get_preset
from .sets import parse_sets, parse_value

if TYPE_CHECKING:
    from ..testbeds.base import Task

__all__ = ["build_run", "loss_terms", "parse_sets", "parse_value", "run_sections"]

def run_sections(task_name: str) -> dict[str, type]:
    """The ``--set`` sections of a testbed preset: its task's config, ``ModelConfig``, ``TrainConfig``."""
    from ..testbeds.registry import config_class

    return {"task": config_class(task_name), "model": ModelConfig, "train": TrainConfig}


def build_run(
    name: str,
    *,
    steps: int | None = None,
    seed: int | None = None,
    sets: list[str] | None = None,
    device: str | None = None,
) -> tuple[Task, ModelConfig, TrainConfig]:
    """Resolve a preset plus overrides into (task, model config, train config)."""
    from ..testbeds.registry import get_task

    preset = get_preset(name)
    over = parse_sets(list(sets or []), run_sections(preset.task), what=f"preset {name!r}")
    task_kw = {**preset.task_overrides, **over["task"]}
    model_kw = {**preset.model_overrides, **over["model"]}
    train_kw = {**preset.train.to_dict(), **over["train"]}
    if seed is not None:
        task_kw["seed"] = model_kw["seed"] = train_kw["seed"] = seed
    if steps is not None:
        train_kw["steps"] = steps
    if device is not None:
        train_kw["device"] = device
    try:
        task = get_task(preset.task, **task_kw)
        return task, task.model_config(**model_kw), TrainConfig.from_dict(train_kw)
    except ConstraintError as err:  # a field's declared rule: name the --set item that gave it
        raise ConfigError(_with_flag(str(err), list(sets or []), err.key)) from None
    except ProbekitError as err:
        raise ConfigError(_with_flag(str(err), list(sets or []))) from None
    except (ValueError, TypeError) as err:  # a task config's rule across fields (plain ValueError)
        raise ConfigError(_with_flag(str(err), list(sets or []))) from None


def _with_flag(message: str, sets: list[str], key: str | None = None) -> str:
    """``message`` with the ``--set`` item that gave the failing field (``key``), when one did."""
    for item in sets:
        name = item.partition("=")[0].rpartition(".")[2]
        if (name == key if key is not None else
                f".{name} " in message or f".{name}=" in message or f"'{name}'" in message):
            return f"--set {item}: {message}"
    return f"{message} (check --set, --seed and --steps)"


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
