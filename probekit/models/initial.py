"""The initial weights of a probekit checkpoint: its run's step-0 checkpoint, or a rebuild.

Markers that compare a model with its initialisation (layer rotation, Carbonnelle & De
Vleeschouwer, arXiv 1806.01603) need ``w_0``. The trainer saves step 0 of every run
(``<run>/checkpoints/step_0000000``), and a checkpoint records its ``ModelConfig``, whose
``seed`` fixes the initialisation, so ``w_0`` is either read back or rebuilt.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, NotApplicableError

__all__ = ["initial_weights"]


def initial_weights(
    checkpoint: str | Path | None, *, init: Literal["auto", "run", "rebuild"] = "auto",
    what: str = "this measure",
) -> tuple[Any, str]:
    """``(model with the initial weights, where they came from)`` for a checkpoint directory.

    ``checkpoint=None`` (a model that is no probekit checkpoint) raises
    :class:`~probekit.errors.NotApplicableError` naming ``what`` needs the initial weights.

    ``init``: ``"run"``: the step-0 checkpoint beside ``checkpoint`` (a ``step_NNNNNNN``
    directory of one run; ConfigError when absent or of another model config); ``"rebuild"``:
    :func:`~probekit.models.build_model` of the recorded ``ModelConfig`` (its seed fixes the
    trainer's initialisation); ``"auto"``: the step-0 checkpoint when there is one, else a
    rebuild.
    """
    from .checkpoint import load_checkpoint, read_checkpoint_meta
    from .config import ModelConfig
    from .native import build_model

    if checkpoint is None:
        raise NotApplicableError(
            f"{what} needs the model's initial weights; this model is not a probekit "
            "checkpoint (no run, no recorded init); give init = \"DIR\" of its initial weights"
        )
    path = Path(checkpoint)
    step0 = path.parent / "step_0000000"
    in_run = re.fullmatch(r"step_\d{7,}", path.name) is not None
    if init != "rebuild" and in_run and (step0 / "config.json").is_file():
        if read_checkpoint_meta(step0)["model"] != read_checkpoint_meta(path)["model"]:
            raise ConfigError(f"{step0} has another model config than {path}; they are not one "
                              "run. Give init = \"DIR\" of this model's initial weights")
        return load_checkpoint(step0), f"the run's step-0 checkpoint {step0}"
    if init == "run":
        raise ConfigError(
            f"init = \"run\": {path} has no step-0 checkpoint beside it ({step0}); the trainer "
            "saves step 0 of every run (`probekit train ... --out DIR` writes "
            "DIR/checkpoints/step_0000000), so measure a checkpoint of that run, or use init = "
            "\"rebuild\" (re-initialise from the recorded seed) or init = \"DIR\""
        )
    config = ModelConfig.from_dict(read_checkpoint_meta(path)["model"])
    return build_model(config), f"re-initialised from the recorded ModelConfig (seed {config.seed})"
