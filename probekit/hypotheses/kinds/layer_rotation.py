"""``measure = "layer_rotation"``: cosine distance of weights from their initialisation.

Carbonnelle & De Vleeschouwer, "Layer rotation: a surprisingly powerful indicator of
generalization in deep networks?" (arXiv 1806.01603): per weight matrix (no biases or norm
gains), ``rotation = 1 - cos(w_t, w_0)`` between the flattened weights at the checkpoint and at
initialisation; larger final rotation of all layers went with better test accuracy there.
Computed with :func:`probekit.geometry.layer_rotation` / :func:`~probekit.geometry.weight_rotation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class LayerRotationSpec:
    """Keys of a ``layer_rotation`` claim.

    ``weight``: ``"all"`` (the mean over every weight matrix of the state dict; units =
    matrices) or one weight by state-dict key or TransformerLens name (``"W_E"``,
    ``"blocks.0.mlp.W_in"``; exact, no sampling unit); ``init``: where the initial weights
    come from: ``"auto"`` (the run's step-0 checkpoint when the model is a checkpoint of a
    training run, else ``"rebuild"``), ``"run"`` (the step-0 checkpoint, required),
    ``"rebuild"`` (re-initialise from the checkpoint's recorded ``ModelConfig``, whose
    ``seed`` fixes the trainer's initialisation) or a checkpoint directory (relative to the file).
    """

    weight: str = "all"
    init: str = "auto"


def initial_model(ctx: Any, init: str) -> tuple[Any, str]:
    """(model with the initial weights, where they came from) for the ``ctx`` model."""
    import re
    from pathlib import Path

    from ...errors import ConfigError, NotApplicableError
    from ...models import build_model, load_checkpoint
    from ...models.checkpoint import read_checkpoint_meta
    from ...models.config import ModelConfig

    if init not in ("auto", "run", "rebuild"):
        path = ctx.suite.resolve(init)
        return load_checkpoint(path), f"checkpoint {path}"
    path = getattr(ctx.model, "probekit_checkpoint", None)
    if path is None:
        raise NotApplicableError(
            "layer_rotation needs the model's initial weights; this model is not a probekit "
            "checkpoint (no run, no recorded init); give init = \"DIR\" of its initial weights"
        )
    path = Path(path)
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


@register_measurement("layer_rotation", spec=LayerRotationSpec)
def layer_rotation(spec: LayerRotationSpec, ctx: Any) -> Measurement:
    """``1 - cos(w_t, w_0)`` of one weight (exact), or its mean over all weight matrices.

    ``"all"``: one value per weight matrix, their mean bootstrapped over matrices; a named
    weight: exact (a degenerate CI, like ``weight_norm``).
    """
    import numpy as np

    from ...geometry import layer_rotation as rotations
    from ...geometry import weight_rotation
    from ...models.weights import named_weight

    init_model, source = initial_model(ctx, spec.init)
    if spec.weight == "all":
        current = {k: v.detach().cpu() for k, v in ctx.model.state_dict().items()}
        rot = rotations([init_model.state_dict(), current])  # the init is loaded on the CPU
        per = {k: float(v[-1]) for k, v in rot.items()}
        return Measurement(
            metric="layer rotation (mean over weights)", values=np.array(list(per.values())),
            unit="weight matrices",
            method=f"mean over {len(per)} weight matrices of 1 - cos(w, w_0), w_0 {source} "
            "(Carbonnelle & De Vleeschouwer 2019)",
            details={"per_weight": per, "init": source},
        )
    value = weight_rotation(named_weight(init_model, spec.weight), named_weight(ctx.model, spec.weight))
    return Measurement(
        metric=f"layer rotation of {spec.weight}", estimate=value,
        resamples=np.full(ctx.stats.n_bootstrap, value), n=1, unit="weight matrix",
        method=f"1 - cos(w, w_0) of {spec.weight}, w_0 {source} (Carbonnelle & De "
        "Vleeschouwer 2019); exact, no resampling",
        details={"init": source},
    )
