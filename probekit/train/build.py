"""Runs from presets: a preset plus ``--set`` overrides -> (task, model config, train config).

The library side of ``probekit train`` (:mod:`probekit.train.cli` parses arguments and calls
these; :mod:`probekit.train.population` builds each run of a population in its worker), and the
one place that turns a :class:`~probekit.train.TrainConfig`'s loss-term weights into the terms
themselves (:func:`loss_terms`): the trainer names no method package.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ProbekitError
from ..models.config import ModelConfig
from ..util.constraints import ConstraintError, check_value
from .config import TrainConfig
from .loss_term import LossTermFactory
from .presets import get_preset

if TYPE_CHECKING:
    from ..testbeds.base import Task

__all__ = ["build_run", "loss_terms", "parse_sets", "parse_value"]

_SCOPES = ("task", "model", "train")


def parse_value(text: str) -> Any:
    """JSON if it parses (lists become tuples), else the raw string.

    Only parsing: whether the value suits its field (type, bounds, ``1e400`` = inf) is decided by
    the field's declared constraints when the config is built (:func:`build_run`).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return _tuplify(value)


def _tuplify(v: Any) -> Any:
    return tuple(_tuplify(x) for x in v) if isinstance(v, list) else v


def parse_sets(items: list[str], task_name: str) -> dict[str, dict[str, Any]]:
    """``["task.p=97", "lr=3e-3"]`` -> ``{"task": {"p": 97}, "model": {}, "train": {"lr": 0.003}}``."""
    from ..testbeds.registry import config_class

    fields = {
        "task": {f.name for f in dataclasses.fields(config_class(task_name))},
        "model": {f.name for f in dataclasses.fields(ModelConfig)},
        "train": {f.name for f in dataclasses.fields(TrainConfig)},
    }
    out: dict[str, dict[str, Any]] = {s: {} for s in _SCOPES}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r} is not key=value (e.g. --set train.lr=3e-3)")
        scope, dot, name = key.partition(".")
        if dot:
            if scope not in _SCOPES:
                raise ConfigError(f"--set {item!r}: prefix {scope!r} must be one of {_SCOPES}")
            if name not in fields[scope]:
                raise ConfigError(
                    f"--set {item!r}: {scope} config has no field {name!r}; valid: {sorted(fields[scope])}"
                )
        else:
            name = key
            owners = [s for s in _SCOPES if name in fields[s]]
            if len(owners) != 1:
                where = "no config" if not owners else f"configs {owners}"
                raise ConfigError(
                    f"--set {item!r}: field {name!r} belongs to {where}; write it as "
                    f"<scope>.{name}=... with scope in {_SCOPES}"
                )
            scope = owners[0]
        cls = {"task": config_class(task_name), "model": ModelConfig, "train": TrainConfig}[scope]
        value = _as_float(parse_value(raw), typing.get_type_hints(cls)[name])
        try:  # the field's declared type and rules, the line the config itself would give
            check_value(cls, name, value)
        except ConstraintError as err:
            raise ConfigError(f"--set {item}: {err}") from None
        out[scope][name] = value
    return out


def _as_float(value: Any, annotation: Any) -> Any:
    """An int given for a ``float`` field (``train.lr=1``) as a float, also inside tuples."""
    if isinstance(value, int) and not isinstance(value, bool):
        options = (typing.get_args(annotation)
                   if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,))
        return float(value) if float in options and int not in options else value
    if isinstance(value, tuple) and typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        inner = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        return tuple(_as_float(v, a) for v, a in zip(value, inner))
    return value


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
    over = parse_sets(list(sets or []), preset.task)
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
    task's training split, :func:`probekit.homomorphism.regulariser.he_loss_term`.
    """
    terms: list[LossTermFactory] = []
    if "he_regulariser" in config.loss_term_weights():
        from ..homomorphism.regulariser import he_loss_term

        terms.append(he_loss_term(
            task.splits()["train"], pad_id=task.vocab.pad_id, blocks=config.he_layers,
            n_pairs=config.he_pairs, pool_size=config.he_pool, hidden=config.he_hidden,
            seed=config.seed,
        ))
    return tuple(terms)
