"""Training on the built-in testbeds: AdamW, log-spaced evals, resumable safetensors checkpoints."""

from .cli import add_train_parser as add_train_parser
from .cli import build_run as build_run
from .config import TrainConfig as TrainConfig
from .history import History as History
from .optim_state import load_optimizer as load_optimizer
from .optim_state import save_optimizer as save_optimizer
from .plot import plot_history as plot_history
from .presets import PRESETS as PRESETS
from .presets import Preset as Preset
from .presets import get_preset as get_preset
from .schedule import eval_schedule as eval_schedule
from .schedule import log_spaced_steps as log_spaced_steps
from .schedule import lr_at as lr_at
from .trainer import evaluate as evaluate
from .trainer import list_checkpoints as list_checkpoints
from .trainer import train as train
