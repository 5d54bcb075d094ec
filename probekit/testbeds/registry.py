"""Task registry: ``get_task(name, **overrides)`` builds a task from its config class."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from ..util.config import check_keys
from ..util.registry import Registry
from .base import Task
from .bio_scratch import BioScratch, BioScratchConfig
from .knowledge import (
    KGComparisonConfig,
    KGCompositionConfig,
    KnowledgeComparison,
    KnowledgeComposition,
)
from .modular import ModularAddition, ModularAdditionConfig
from .relation_facts import RelationFacts, RelationFactsConfig
from .scan import ScanConfig, ScanTask


class TaskType(NamedTuple):
    """A registered testbed: its task class and its frozen config class."""

    task: type
    config: type


#: The testbeds by name (``TASKS.get(name).config``); an unknown name lists the registered ones.
TASKS: Registry[TaskType] = Registry(
    "task", hint="a testbed registers with register_task(name, task_class, config_class) "
                 "(CONTRIBUTING.md)",
)


def register_task(name: str, task: type, config: type) -> None:
    """Make ``get_task(name, **overrides)`` build ``task(config(**overrides))``.

    Registering ``name`` again from another task class is refused (naming both).
    """
    TASKS.register(name, TaskType(task, config), origin=task)


for _name, _task, _config in (
    ("modular_addition", ModularAddition, ModularAdditionConfig),
    ("scan", ScanTask, ScanConfig),
    ("kg_composition", KnowledgeComposition, KGCompositionConfig),
    ("kg_comparison", KnowledgeComparison, KGComparisonConfig),
    ("relation_facts", RelationFacts, RelationFactsConfig),
    ("bio_scratch", BioScratch, BioScratchConfig),
):
    register_task(_name, _task, _config)


def task_names() -> list[str]:
    """Names of the registered tasks (``get_task`` accepts them), sorted."""
    return list(TASKS.names())


def config_class(name: str) -> type:
    """The config dataclass of task ``name``."""
    return TASKS.get(name).config


def get_task(name: str, **overrides: Any) -> Task:
    """Task ``name`` with its default config, fields replaced by ``overrides``.

    Lists (from TOML, JSON or ``--set``) become tuples, as the frozen configs declare them.

    >>> get_task("modular_addition", p=59, train_fraction=0.4).config.p
    59
    """
    task_cls, cfg_cls = TASKS.get(name)
    fields = (f.name for f in dataclasses.fields(cfg_cls))
    check_keys(overrides, fields, what=f"{cfg_cls.__name__} (task {name!r})")
    return task_cls(cfg_cls(**{k: _tuplify(v) for k, v in overrides.items()}))


def task_from_dict(name: str, config: dict[str, Any]) -> Task:
    """Rebuild a task from ``name`` and ``dataclasses.asdict(config)`` (JSON lists -> tuples)."""
    return get_task(name, **config)


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value
