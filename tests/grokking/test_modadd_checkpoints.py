"""Modular-addition checkpoints on disk: the recorded train split and a run's checkpoint series."""

from pathlib import Path

import pytest

from probekit.errors import ConfigError
from probekit.grokking.modadd_checkpoints import (
    check_modadd_model,
    checkpoint_series,
    run_series_pattern,
    train_mask,
)

SERIES = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53-series"


def test_train_mask_is_the_testbeds_split():
    from probekit.testbeds import get_task

    mask = train_mask(SERIES / "step_0001000")
    assert mask.shape == (53, 53) and mask.sum() == round(0.6 * 53 * 53)
    train = get_task("modular_addition", p=53, train_fraction=0.6, seed=0).splits()["train"]
    assert mask[train.metadata["a"], train.metadata["b"]].all()


def test_series_is_the_runs_checkpoints_in_step_order():
    pattern = run_series_pattern(SERIES / "step_0000100")
    assert pattern == SERIES / "step_*"
    found = checkpoint_series(pattern)
    assert [s for s, _ in found] == [0, 50, 100, 200, 1000]
    assert [d.name for _, d in found] == [f"step_{s:07d}" for s, _ in found]
    with pytest.raises(ConfigError, match="matched 1 checkpoint directory"):
        checkpoint_series(SERIES / "step_00010*", key="checkpoints = 'x'")


def test_a_model_without_a_recorded_task_passes_the_modadd_check():
    check_modadd_model(object(), kind="fourier_key_share")  # nothing says it is another task
