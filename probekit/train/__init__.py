"""Training on the built-in testbeds: AdamW, log-spaced evals, resumable safetensors checkpoints.

Exports are lazy (:mod:`probekit.lazy`), so the ``train`` CLI parser loads without torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {
    "build_run": ".build",
    "loss_terms": ".build",
    "LossTerm": ".loss_term",
    "ForwardLossTerm": ".loss_term",
    "StepBatch": ".loss_term",
    "TrainConfig": ".config",
    "History": ".history",
    "load_optimizer": ".optim_state",
    "save_optimizer": ".optim_state",
    "plot_history": ".plot",
    "TrainRun": ".population",
    "train_population": ".population",
    "train_run": ".population",
    "PRESETS": ".training_preset",
    "TrainingPreset": ".training_preset",
    "Preset": ".presets",
    "get_preset": ".presets",
    "eval_schedule": ".schedule",
    "log_spaced_steps": ".schedule",
    "lr_at": ".schedule",
    "evaluate": ".trainer",
    "list_checkpoints": ".trainer",
    "train": ".trainer",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .build import build_run as build_run
    from .build import loss_terms as loss_terms
    from .config import TrainConfig as TrainConfig
    from .history import History as History
    from .loss_term import ForwardLossTerm as ForwardLossTerm
    from .loss_term import LossTerm as LossTerm
    from .loss_term import StepBatch as StepBatch
    from .optim_state import load_optimizer as load_optimizer
    from .optim_state import save_optimizer as save_optimizer
    from .plot import plot_history as plot_history
    from .population import TrainRun as TrainRun
    from .population import train_population as train_population
    from .population import train_run as train_run
    from .presets import Preset as Preset
    from .presets import get_preset as get_preset
    from .schedule import eval_schedule as eval_schedule
    from .schedule import log_spaced_steps as log_spaced_steps
    from .schedule import lr_at as lr_at
    from .trainer import evaluate as evaluate
    from .trainer import list_checkpoints as list_checkpoints
    from .trainer import train as train
    from .training_preset import PRESETS as PRESETS
    from .training_preset import TrainingPreset as TrainingPreset
