"""Initial weights of a checkpoint: the run's step 0, or rebuilt from the recorded seed."""

import shutil
from pathlib import Path

import pytest
import torch

from probekit.errors import ConfigError, NotApplicableError
from probekit.models import ModelConfig, build_model, load_checkpoint
from probekit.models.checkpoint import read_checkpoint_meta
from probekit.models.initial import initial_weights

SERIES = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53-series"


def test_step_zero_of_the_run_and_the_rebuild_are_the_same_init():
    model, source = initial_weights(SERIES / "step_0001000")
    assert "step-0 checkpoint" in source
    torch.testing.assert_close(model.W_E, load_checkpoint(SERIES / "step_0000000").W_E)
    rebuilt, source = initial_weights(SERIES / "step_0001000", init="rebuild")
    config = ModelConfig.from_dict(read_checkpoint_meta(SERIES / "step_0001000")["model"])
    assert source.endswith(f"(seed {config.seed})")
    torch.testing.assert_close(rebuilt.W_E, build_model(config).W_E)
    torch.testing.assert_close(rebuilt.W_E.detach(), model.W_E.detach())  # the trainer's init


def test_run_init_needs_a_step_zero_and_a_model_needs_a_checkpoint(tmp_path):
    shutil.copytree(SERIES / "step_0000100", tmp_path / "step_0000100")
    with pytest.raises(ConfigError, match="no step-0 checkpoint"):
        initial_weights(tmp_path / "step_0000100", init="run")
    with pytest.raises(NotApplicableError, match="layer_rotation needs the model's initial"):
        initial_weights(None, what="layer_rotation")
