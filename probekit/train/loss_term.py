"""Extra loss terms trained jointly with the model: ``L = CE + sum_t w_t * L_t``.

The trainer (:func:`probekit.train.train`) names no term: its caller passes ``loss_terms``,
factories called once the model exists, and the run's :class:`~probekit.train.TrainConfig`
gives each term's weight by name (:meth:`~probekit.train.TrainConfig.loss_term_weights`), so the
weights are recorded in ``run.json`` and checked on resume like every other hyperparameter.
:func:`probekit.train.build.loss_terms` builds the terms a config asks for (today the HE
regulariser of An & Du (2026) [C]). A term is any object of one of two shapes; it need not
import this module:

* :class:`LossTerm` computes its loss itself, ``term.loss(model, step)`` (e.g. with a forward
  pass of its own: [C]'s regulariser on a separate pair pool,
  :class:`probekit.homomorphism.regulariser.HELossTerm`);
* :class:`ForwardLossTerm` reads the step's own training forward pass: it declares ``sites``,
  the trainer records them (with the autograd graph, :func:`probekit.capture.record_with_grad`)
  during the cross-entropy forward of the minibatch and calls
  ``term.loss_from_forward(acts, batch, step)`` with the :class:`StepBatch` (its tokens and the
  training-set rows it holds). No second forward pass: the batch-pair HE regulariser,
  :class:`probekit.homomorphism.regulariser_batch.HEBatchLossTerm`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from ..models.protocol import HookedModel
from ..sites import Site

__all__ = ["ForwardLossTerm", "LossTerm", "LossTermFactory", "StepBatch", "reads_forward"]


class StepBatch(NamedTuple):
    """The minibatch of one training step, as a :class:`ForwardLossTerm` sees it.

    Attributes:
        tokens: ``(batch, pos)`` right-padded input tokens (on the training device).
        labels: ``(batch, pos)`` scored targets, ``IGNORE_INDEX`` elsewhere.
        rows: ``(batch,)`` index of each row in the training split (``tokens[i]`` is example
            ``rows[i]`` of ``task.splits()["train"]``).
    """

    tokens: Tensor
    labels: Tensor
    rows: np.ndarray


@runtime_checkable
class LossTerm(Protocol):
    """A loss term added to the trainer's cross-entropy, computed by the term itself.

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


@runtime_checkable
class ForwardLossTerm(Protocol):
    """A loss term computed from the activations of the step's training forward pass.

    Attributes:
        name, module: as for :class:`LossTerm`.
        sites: the sites the trainer records, with their graph, during the cross-entropy forward
            pass of the minibatch (the union over terms is recorded once).
    """

    name: str
    module: torch.nn.Module
    sites: tuple[Site, ...]

    def loss_from_forward(
        self, acts: Mapping[Site, Tensor], batch: StepBatch, step: int
    ) -> Tensor:
        """The scalar loss at step ``step`` from ``acts[site]`` ``(batch, pos, ...)`` of ``batch``."""
        ...


def reads_forward(term: object) -> bool:
    """Whether ``term`` is a :class:`ForwardLossTerm` (it has ``loss_from_forward``)."""
    return callable(getattr(term, "loss_from_forward", None))


#: builds a term once the model exists, on the training device: ``make(model, device)``
LossTermFactory = Callable[[HookedModel, torch.device], LossTerm | ForwardLossTerm]
