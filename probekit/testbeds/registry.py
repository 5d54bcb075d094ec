"""Task registry: ``get_task(name, **overrides)`` builds a task from its config class."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import ConfigError
from ..util.config import check_keys
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

#: name -> (task class, config class)
TASKS: dict[str, tuple[type, type]] = {
    "modular_addition": (ModularAddition, ModularAdditionConfig),
    "scan": (ScanTask, ScanConfig),
    "kg_composition": (KnowledgeComposition, KGCompositionConfig),
    "kg_comparison": (KnowledgeComparison, KGComparisonConfig),
    "relation_facts": (RelationFacts, RelationFactsConfig),
    "bio_scratch": (BioScratch, BioScratchConfig),
}


def task_names() -> list[str]:
    """Names of the registered tasks (``get_task`` accepts them)."""
    return list(TASKS)


def config_class(name: str) -> type:
    """The config dataclass of task ``name``."""
    return _lookup(name)[1]


def _lookup(name: str) -> tuple[type, type]:
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; valid tasks are {list(TASKS)}")
    return TASKS[name]


def get_task(name: str, **overrides: Any) -> Task:
    """Task ``name`` with its default config, fields replaced by ``overrides``.

    Lists (from TOML, JSON or ``--set``) become tuples, as the frozen configs declare them.

    >>> get_task("modular_addition", p=59, train_fraction=0.4).config.p
    59
    """
    task_cls, cfg_cls = _lookup(name)
    fields = (f.name for f in dataclasses.fields(cfg_cls))
    check_keys(overrides, fields, what=f"{cfg_cls.__name__} (task {name!r})")
    return task_cls(cfg_cls(**{k: _tuplify(v) for k, v in overrides.items()}))


def task_from_dict(name: str, config: dict[str, Any]) -> Task:
    """Rebuild a task from ``name`` and ``dataclasses.asdict(config)`` (JSON lists -> tuples)."""
    _, cfg_cls = _lookup(name)
    return get_task(name, **config)


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value
