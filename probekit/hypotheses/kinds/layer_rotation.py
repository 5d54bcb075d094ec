"""``measure = "layer_rotation"``: cosine distance of weights from their initialisation.

Carbonnelle & De Vleeschouwer, "Layer rotation: a surprisingly powerful indicator of
generalization in deep networks?" (arXiv 1806.01603): per weight matrix (no biases or norm
gains), ``rotation = 1 - cos(w_t, w_0)`` between the flattened weights at the checkpoint and at
initialisation (:func:`probekit.geometry.weight_markers.rotations_from_init`; ``w_0`` from
:func:`probekit.models.initial.initial_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import exact
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


@register_measurement("layer_rotation", spec=LayerRotationSpec)
def layer_rotation(spec: LayerRotationSpec, ctx: Context) -> Measurement:
    """``1 - cos(w_t, w_0)`` of one weight (exact), or its mean over all weight matrices."""
    import numpy as np

    from ...geometry.weight_markers import rotations_from_init
    from ...models import load_checkpoint
    from ...models.initial import initial_weights

    if spec.init in ("auto", "run", "rebuild"):
        init_model, source = initial_weights(getattr(ctx.model, "probekit_checkpoint", None),
                                             init=spec.init, what="layer_rotation")
    else:
        init_model = load_checkpoint(path := ctx.suite.resolve(spec.init))
        source = f"checkpoint {path}"
    per = rotations_from_init(init_model, ctx.model, spec.weight)
    cite = "(Carbonnelle & De Vleeschouwer 2019)"
    if spec.weight == "all":
        return Measurement(
            metric="layer rotation (mean over weights)", values=np.array(list(per.values())),
            unit="weight matrices", details={"per_weight": per, "init": source},
            method=f"mean over {len(per)} weight matrices of 1 - cos(w, w_0), w_0 {source} {cite}",
        )
    return Measurement(
        metric=f"layer rotation of {spec.weight}", **exact(ctx, per[spec.weight]),
        unit="weight matrix", details={"init": source},
        method=f"1 - cos(w, w_0) of {spec.weight}, w_0 {source} {cite}; exact, no resampling",
    )
