"""Weight-space markers of one model by weight name: condition numbers and rotation from init.

* condition number ``s_max / s_min`` (:func:`~probekit.geometry.matrix_condition_number`) of one
  weight (a state-dict key or TransformerLens name, :func:`probekit.models.weights.named_weight`)
  or of every weight matrix (:func:`~probekit.geometry.weight_condition_numbers`); KappaTune
  (Ludwig, arXiv 2506.16289) ranks tensors by it, reading it as a generalization marker is our
  extension;
* layer rotation ``1 - cos(w, w_0)`` (Carbonnelle & De Vleeschouwer, arXiv 1806.01603) of one
  weight or of every weight matrix, against the initial model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError, NonFiniteError
from .dynamics import (
    layer_rotation,
    matrix_condition_number,
    weight_condition_numbers,
    weight_rotation,
)

__all__ = ["condition_numbers", "rotations_from_init"]


def condition_numbers(model: Any, weight: str, *, head: int | None = None) -> dict[str, float]:
    """``{name: s_max / s_min}`` of ``weight`` (``"all"``: every weight matrix).

    ``head``: one head of a per-head attention weight (not with ``"all"``). Raises
    :class:`~probekit.errors.NonFiniteError` when a weight is singular (infinite condition).
    """
    from ..models.weights import named_weight

    if weight == "all":
        if head is not None:
            raise ConfigError("head is for one attention weight; drop it with weight = \"all\"")
        conds = weight_condition_numbers(model.state_dict())
    else:
        conds = {weight: matrix_condition_number(named_weight(model, weight, head=head))}
    singular = [k for k, v in conds.items() if not np.isfinite(v)]
    if singular:
        raise NonFiniteError(f"weight(s) {singular} are singular (smallest singular value 0): "
                             "the condition number is infinite; measure another weight")
    return {k: float(v) for k, v in conds.items()}


def rotations_from_init(init_model: Any, model: Any, weight: str = "all") -> dict[str, float]:
    """``{name: 1 - cos(w, w_0)}`` of ``weight`` (``"all"``: every weight matrix) from ``init_model``.

    ``"all"`` compares the state dicts (``model``'s moved to the CPU, where ``init_model`` is
    loaded); a named weight is read with :func:`probekit.models.weights.named_weight`.
    """
    from ..models.weights import named_weight

    if weight != "all":
        return {weight: weight_rotation(named_weight(init_model, weight), named_weight(model, weight))}
    current = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return {k: float(v[-1]) for k, v in layer_rotation([init_model.state_dict(), current]).items()}
