"""The training step runs under a ThreadTuner on the CPU; its choice does not change the weights.

The count a tuner picks depends on the load, so a cached run must not depend on it: a run whose
steps alternate between 1 and 2 threads gives the bit-identical weights of runs on 1 or 2 threads
throughout (the presets' shapes on this CPU; a machine where this fails must not tune training).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib

import pytest
import torch
from safetensors.torch import load_file

from probekit.testbeds import get_task
from probekit.train import presets, trainer
from probekit.util.threads import ThreadTuner


def _weights_digest(out_dir) -> str:
    h = hashlib.sha256()
    for f in sorted(out_dir.rglob("*.safetensors")):
        w = load_file(f)
        for k in sorted(w):
            h.update(k.encode())
            h.update(w[k].numpy().tobytes())
    return h.hexdigest()


def _train(preset: str, out_dir, candidates: tuple[int, ...], monkeypatch) -> tuple[str, list[int]]:
    """``preset`` for 12 steps with the trainer's tuner limited to ``candidates``; counts used."""
    used: list[int] = []

    class Recording(ThreadTuner):
        def __init__(self) -> None:
            super().__init__(candidates, reprobe=2)

        @contextlib.contextmanager
        def run(self, work=1.0):
            with super().run(work) as count:
                assert torch.get_num_threads() == count  # the count is in force in the step
                used.append(count)
                yield count

    monkeypatch.setattr(trainer, "ThreadTuner", Recording)
    p = presets.get_preset(preset)
    task = get_task(p.task, **p.task_overrides, seed=0)
    cfg = dataclasses.replace(p.train, steps=12, n_evals=1, n_checkpoints=1, eval_steps=None,
                              checkpoint_steps=None, eval_every=None)
    trainer.train(task, task.model_config(**p.model_overrides), cfg, out_dir=out_dir,
                  progress=False, plot=False)
    return _weights_digest(out_dir), used


@pytest.mark.parametrize("preset", ["scan", "modular_addition"])
def test_thread_choice_leaves_the_weights_bit_identical(preset, tmp_path, monkeypatch):
    mixed, used = _train(preset, tmp_path / "mixed", (1, 2), monkeypatch)
    assert len(used) == 12 and set(used) == {1, 2}  # warm-up, each count timed, re-probes
    one, used_one = _train(preset, tmp_path / "one", (1,), monkeypatch)
    two, used_two = _train(preset, tmp_path / "two", (2,), monkeypatch)
    assert set(used_one) == {1} and set(used_two) == {2}
    assert mixed == one == two


def test_no_tuning_off_the_cpu(monkeypatch):
    monkeypatch.setattr(trainer, "ThreadTuner", lambda: pytest.fail("tuner made for a GPU run"))
    with trainer._step_threads(torch.device("meta"))(128) as inside:
        assert inside is None
