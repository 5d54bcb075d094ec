"""Grad-carrying reads of hidden states, for losses on them during training.

:func:`capture` detaches what it records (analysis only). Training losses on hidden states
(e.g. the HE regulariser of An & Du 2026) need the activations *with* their autograd graph:
:func:`record_with_grad` is the same always-cleaned-up hook scope, without the detach. It only
reads; it never changes the forward pass. (Scoped stand-in until the interventions layer offers a
grad-capable scope; callers use only this function.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch import Tensor

from .sites import Site, as_sites, validate_sites


@contextmanager
def record_with_grad(model: Any, sites: Sequence[Site | str]) -> Iterator[dict[Site, Tensor]]:
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
    validate_sites(model, resolved)
    acts: dict[Site, Tensor] = {}

    def keep(site: Site) -> Callable[..., None]:
        def hook(activation: Tensor, hook: Any) -> None:
            acts[site] = activation

        return hook

    with model.hooks(fwd_hooks=[(s.name, keep(s)) for s in resolved]):
        yield acts
