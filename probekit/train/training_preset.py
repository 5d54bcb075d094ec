"""One protocol and one registry for every named training preset.

A preset is a named recipe that ``probekit train NAME`` and a diagnosis grid
(``[population] preset = NAME``) train. Two kinds exist: a testbed trained from scratch
(:class:`~probekit.train.presets.Preset`) and a pretrained LM fine-tuned
(:class:`~probekit.train.finetune_presets.FinetunePreset`). Both satisfy :class:`TrainingPreset`
and live in the one registry :data:`PRESETS`: a caller looks a preset up by name and asks it to
plan or train a run, instead of testing which kind the name belongs to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..util.registry import Registry

__all__ = ["PRESETS", "TrainingPreset"]


@runtime_checkable
class TrainingPreset(Protocol):
    """What every training preset answers (the methods take the preset's registered name).

    Attributes:
        description: one paragraph: the recipe, its source paper, what it measured.
        pretrained: ``True``: a run fine-tunes a pretrained LM and is a Hugging Face model
            directory (no probekit checkpoint metadata, no evaluation schedule of its own);
            ``False``: a run trains a testbed model from scratch into probekit checkpoints.
    """

    description: str
    pretrained: ClassVar[bool]

    def planned_steps(
        self, name: str, *, steps: int | None = None, seed: int | None = None,
        sets: Sequence[str] | None = None, device: str | None = None,
    ) -> int:
        """The final step of a run with these overrides; validates them (nothing trains).

        Raises:
            ConfigError: an unknown key or a refused value (named, with its ``--set`` item).
        """
        ...

    def train_run(self, run: Any, *, loss_terms: Callable[..., tuple[Any, ...]]) -> Any:
        """Train one :class:`~probekit.train.population.TrainRun` of this preset; its history.

        ``loss_terms(task, train_config)`` builds the extra loss terms of a from-scratch run
        (:func:`probekit.train.build.loss_terms`): the caller supplies it, so no preset names
        a method package (the ``trainer`` import contract).
        """
        ...

    def base_model(self, name: str, sets: Sequence[str] | None = None) -> str | None:
        """The pretrained model a run starts from under ``sets`` (``None``: from scratch)."""
        ...


#: The training presets by name, both kinds (testbed presets of :mod:`probekit.train.presets`,
#: fine-tune presets of :mod:`probekit.train.finetune_presets`, imported on first lookup).
PRESETS: Registry[TrainingPreset] = Registry(
    "preset", plugins=(f"{__package__}.presets", f"{__package__}.finetune_presets"),
)
