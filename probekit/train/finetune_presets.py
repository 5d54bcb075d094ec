"""Fine-tune presets: a :class:`FinetuneConfig` plus, optionally, the text testbed making its data.

A fine-tune preset is a training preset of a diagnosis grid like the testbed presets of
:mod:`probekit.train.presets` (``[population] preset = "smollm2_bio_smoke"``, ``grid = {...}``):
:func:`build_finetune` resolves it with ``--set``-style overrides (``train.X`` for the
:class:`~probekit.train.finetune_config.FinetuneConfig`, ``task.X`` for the testbed's config,
e.g. ``task.augmentation``) and :func:`finetune_run` trains one
:class:`~probekit.train.population.TrainRun` of it (the executor task).

Unlike the testbed presets, the ``seed`` of a run seeds the fine-tune only (adapter
initialisation, batch order), not the testbed: every model of a population is taught the same
fictional people, so one evaluation file serves them all (``task.seed`` changes the people).
A preset with a testbed writes its data into ``<run>/data/`` (deterministic in the testbed config,
which is part of the run's identity); one without reads ``train.data``, a JSONL path (relative
paths resolve against the working directory).

A :class:`FinetunePreset` is a :class:`~probekit.train.training_preset.TrainingPreset`
(``pretrained = True``), registered in :data:`~probekit.train.training_preset.PRESETS` with the
testbed presets: callers ask the preset (``PRESETS.get(name).planned_steps(...)``), never which
kind a name is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..errors import ConfigError, ProbekitError
from .finetune_config import FinetuneConfig
from .history import History
from .training_preset import PRESETS

__all__ = [
    "FINETUNE_PRESETS",
    "FinetunePreset",
    "FinetuneSetup",
    "base_model_of",
    "build_finetune",
    "finetune_preset",
    "finetune_run",
    "is_finetune_preset",
]


@dataclass(frozen=True, kw_only=True)
class FinetunePreset:
    """A named fine-tune: its config, and the text testbed that writes its data (or none)."""

    train: FinetuneConfig
    testbed: Literal["biographies"] | None = None
    testbed_overrides: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    pretrained: ClassVar[bool] = True

    def build(
        self, name: str, *, steps: int | None = None, seed: int | None = None,
        sets: Sequence[str] | None = None, device: str | None = None,
    ) -> FinetuneSetup:
        """This preset (called ``name``) with overrides (no model loads, no data is written).

        Raises:
            ConfigError: an unknown key, or a value a config refuses (named).
        """
        over = _parse_sets(list(sets or []), self)
        train = {**self.train.to_dict(), **over["train"]}
        for key, value in (("seed", seed), ("steps", steps), ("device", device)):
            if value is not None:
                train[key] = value
        try:
            config = FinetuneConfig.from_dict(train)
            testbed = None
            if self.testbed is not None:
                testbed = _testbed_class(self.testbed)(**{**self.testbed_overrides, **over["task"]})
            elif not config.data:
                raise ConfigError(f"fine-tune preset {name!r} reads train.data: give the JSONL "
                                  "with --set train.data=PATH (sets = [\"train.data=...\"] in a grid)")
        except ProbekitError as err:
            raise ConfigError(f"fine-tune preset {name!r}: {err}") from None
        return FinetuneSetup(config=config, testbed=self.testbed, testbed_config=testbed)

    def planned_steps(
        self, name: str, *, steps: int | None = None, seed: int | None = None,
        sets: Sequence[str] | None = None, device: str | None = None,
    ) -> int:
        """The final step of a run with these overrides (validated; nothing trains)."""
        return self.build(name, steps=steps, seed=seed, sets=sets, device=device).config.steps

    def train_run(self, run: Any, *, loss_terms: Callable[..., tuple[Any, ...]] | None = None
                  ) -> History:
        """Train one :class:`~probekit.train.population.TrainRun` (``loss_terms``: unused).

        The run directory is locked while it trains (:class:`~probekit.util.lock.DirectoryLock`);
        a testbed preset writes its data into ``<run>/data/`` first.
        """
        from ..util.lock import DirectoryLock
        from .finetune import finetune  # lazy: transformers

        setup = self.build(run.preset, steps=run.steps, seed=run.seed, sets=list(run.sets),
                           device=run.device)
        out = Path(run.out_dir)
        with DirectoryLock(out, what="fine-tune run"):
            config = setup.config
            if setup.testbed is not None:
                from ..testbeds.biographies import write_biographies

                paths = write_biographies(setup.testbed_config, out / "data")
                config = dataclasses.replace(config, data=str(paths["data"]))
            return finetune(config, out, extra=setup.extra())

    def base_model(self, name: str, sets: Sequence[str] | None = None) -> str:
        """The base model under ``--set`` overrides (``train.base_model``).

        Unlike :meth:`build`, nothing else of the preset need be complete (a preset reading
        ``train.data`` needs no data to say which model it fine-tunes).
        """
        return str(_parse_sets(list(sets or []), self)["train"].get("base_model",
                                                                     self.train.base_model))


#: smoke settings measured on 2 CPU cores (docs/finetune.md): LoRA r=4 on the MLPs of the
#: last two of SmolLM2's 30 blocks, 16 people, rows <= 48 tokens
_SMOKE = FinetuneConfig(
    base_model="smollm2-135m", method="lora", rank=4, alpha=8.0,
    target_modules=("gate_proj", "up_proj", "down_proj"), trainable_layers=(-2, -1), steps=6,
    lr=3e-3, batch_size=4, max_length=48,
)

_FINETUNE_PRESETS = {
    "smollm2_finetune": FinetunePreset(
        train=FinetuneConfig(base_model="smollm2-135m", method="lora", rank=8, alpha=16.0,
                             steps=200, lr=1e-3, batch_size=8, max_length=128),
        description="SmolLM2-135M, LoRA r=8 on every linear layer of every block, 200 steps of "
                    "8 rows on train.data = \"your.jsonl\" (prompt/answer/split rows)",
    ),
    "smollm2_bio_smoke": FinetunePreset(
        train=_SMOKE, testbed="biographies",
        testbed_overrides=dict(n_people=16, augmentation=1),
        description="CPU smoke of the knowledge-storage testbed (Allen-Zhu & Li 2023): 16 "
                    "people, LoRA r=4 on the MLPs of the last 2 blocks, 6 steps of 4 rows "
                    "(pipeline check only: nothing is learnt)",
    ),
    "smollm2_bio": FinetunePreset(
        train=FinetuneConfig(base_model="smollm2-135m", method="lora", rank=16, alpha=32.0,
                             steps=3000, lr=1e-3, warmup_steps=100, batch_size=16, max_length=96,
                             device="cuda"),
        testbed="biographies", testbed_overrides=dict(n_people=200, augmentation=1),
        description="The knowledge-storage population on a GPU: 200 people, LoRA r=16 on every "
                    "linear layer, 3000 steps of 16 rows (grid task.augmentation = [1, 5])",
    ),
}


for _name, _preset in _FINETUNE_PRESETS.items():
    PRESETS.register(_name, _preset)
del _FINETUNE_PRESETS

#: The registry of every training preset (fine-tune and testbed presets alike); the name of the
#: fine-tune presets' former table, kept for old imports.
FINETUNE_PRESETS = PRESETS


def finetune_preset(name: str) -> FinetunePreset:
    """The :class:`FinetunePreset` called ``name``.

    Raises:
        ConfigError: an unknown name (listing the presets, suggesting a close one), or a
            testbed preset (listing the fine-tune presets).
    """
    preset = PRESETS.get(name)
    if not isinstance(preset, FinetunePreset):
        tunes = [n for n, p in PRESETS.items() if isinstance(p, FinetunePreset)]
        raise ConfigError(f"preset {name!r} trains a testbed model from scratch; this needs a "
                          f"fine-tune preset: one of {tunes}")
    return preset


def is_finetune_preset(name: str | None) -> bool:
    """True when ``name`` is a registered preset that fine-tunes a pretrained LM.

    The preset's own answer (``PRESETS.get(name).pretrained``), ``False`` for an unknown name or
    ``None``: the one question callers with an optional preset ask (the diagnosis's population
    and spec, real-model checks).
    """
    return bool(getattr(PRESETS.get(name, None), "pretrained", False))


@dataclass(frozen=True, kw_only=True)
class FinetuneSetup:
    """A resolved fine-tune: its config and the testbed config generating its data (or None)."""

    config: FinetuneConfig
    testbed: str | None
    testbed_config: Any = None

    def extra(self) -> dict[str, Any]:
        """The testbed part of the run's identity (recorded with it)."""
        if self.testbed is None:
            return {}
        return {"testbed": self.testbed, "task_config": dataclasses.asdict(self.testbed_config)}


def _testbed_class(name: str) -> type:
    from ..testbeds.biographies import BiographiesConfig

    return {"biographies": BiographiesConfig}[name]


def _parse_sets(sets: list[str], preset: FinetunePreset) -> dict[str, dict[str, Any]]:
    """``["train.lr=1e-3", "task.augmentation=3"]`` -> ``{"train": {...}, "task": {...}}``.

    :func:`probekit.train.sets.parse_sets` over the preset's sections: ``train``
    (:class:`FinetuneConfig`) and, with a testbed, ``task`` (its config).
    """
    from .sets import parse_sets

    sections: dict[str, type] = {"train": FinetuneConfig}
    if preset.testbed is not None:
        sections["task"] = _testbed_class(preset.testbed)
    return parse_sets(sets, sections, what="this fine-tune preset")


def base_model_of(name: str, sets: list[str] | None = None) -> str:
    """The base model of fine-tune preset ``name`` under ``--set`` overrides (``train.base_model``).

    Raises:
        ConfigError: an unknown preset, or a ``--set`` item the preset refuses (named).
    """
    return finetune_preset(name).base_model(name, sets)


def build_finetune(
    name: str, *, steps: int | None = None, seed: int | None = None,
    sets: list[str] | None = None, device: str | None = None,
) -> FinetuneSetup:
    """Resolve fine-tune preset ``name`` with overrides (:meth:`FinetunePreset.build`).

    Raises:
        ConfigError: an unknown preset or key, or a value a config refuses (named).
    """
    return finetune_preset(name).build(name, steps=steps, seed=seed, sets=sets, device=device)


def finetune_run(run: Any) -> History:
    """Train one :class:`~probekit.train.population.TrainRun` of a fine-tune preset."""
    return finetune_preset(run.preset).train_run(run)
