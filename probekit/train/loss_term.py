"""Extra loss terms trained jointly with the model: ``L = CE + sum_t w_t * L_t(model, step)``.

The trainer (:func:`probekit.train.train`) names no term: its caller passes ``loss_terms``,
factories called once the model exists, and the run's :class:`~probekit.train.TrainConfig`
gives each term's weight by name (:meth:`~probekit.train.TrainConfig.loss_term_weights`), so the
weights are recorded in ``run.json`` and checked on resume like every other hyperparameter.
:func:`probekit.train.build.loss_terms` builds the terms a config asks for (today the HE
regulariser of An & Du (2026) [C], :class:`probekit.homomorphism.regulariser.HELossTerm`). A term
is any object with this shape; it need not import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from ..models.protocol import HookedModel

__all__ = ["LossTerm", "LossTermFactory"]


@runtime_checkable
class LossTerm(Protocol):
    """A loss term added to the trainer's cross-entropy.

    Attributes:
        name: the key of its weight in ``TrainConfig.loss_term_weights()``; also the prefix of
            its parameters in the optimiser state and in a checkpoint's ``aux.safetensors``.
        module: parameters learned jointly with the model, in the same optimiser (an empty
            ``torch.nn.Module()`` for a term without parameters).
    """

    name: str
    module: torch.nn.Module

    def loss(self, model: HookedModel, step: int) -> Tensor:
        """The term's scalar loss at optimiser step ``step`` (1-based), differentiable in the model."""
        ...


#: builds a term once the model exists, on the training device: ``make(model, device)``
LossTermFactory = Callable[[HookedModel, torch.device], LossTerm]
