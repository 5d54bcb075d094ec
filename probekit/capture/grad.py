"""Grad-carrying reads of hidden states, for losses on them during training.

:func:`capture` detaches what it records (analysis only). Training losses on hidden states
(e.g. the HE regulariser of An & Du 2026) need the activations *with* their autograd graph:
:func:`record_with_grad` is the same always-cleaned-up hook scope
(:func:`~probekit.capture.hooks.hook_scope`), without the detach. It only reads; it never
changes the forward pass. For reads, writes and gradients at positions in unpadded coordinates
use :mod:`probekit.interventions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from torch import Tensor

from ..models.protocol import HookedModel
from ..sites import Site, as_sites
from .hooks import hook_scope


@contextmanager
def record_with_grad(model: HookedModel, sites: Sequence[Site | str]) -> Iterator[dict[Site, Tensor]]:
    """Record ``sites`` during forward passes in the block, keeping the autograd graph.

    ``acts[site]`` is the hook point's output ``(batch, pos, ...)`` of the latest forward pass,
    not detached, so a loss on it backpropagates into the model. Sites are validated before any
    hook is attached; hooks are removed on exit, also when the block raises.

    Example:
        >>> with record_with_grad(model, [Site(1, "resid_post")]) as acts:
        ...     model(tokens, stop_at_layer=2)
        >>> loss = acts[Site(1, "resid_post")].pow(2).mean()   # differentiable
    """
    resolved = as_sites(sites)
    acts: dict[Site, Tensor] = {}

    def keep(site: Site) -> Callable[[Tensor], None]:
        def hook(activation: Tensor) -> None:
            acts[site] = activation

        return hook

    with hook_scope(model, [(s, keep(s)) for s in resolved]):
        yield acts
