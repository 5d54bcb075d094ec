"""Training-time dropout at typed sites, for TL-native models (whose blocks have none).

An & Du (2026) [C] train post-LN blocks with dropout 0.1 in three places: on the attention
weights (``nn.MultiheadAttention(dropout=0.1)``), on the attention output and on the feed-forward
output, each before its residual add; none on the embeddings and none inside the feed-forward.
On a TransformerLens block those places are the hook points ``attn.hook_pattern`` (the native
attention applies it before the value product), ``hook_attn_out`` and ``hook_mlp_out``
(:func:`dropout_sites`). :func:`dropout` applies inverted dropout (Srivastava et al. 2014) there
through :func:`probekit.capture.hook_scope`, only while ``model.training`` is true, so an
evaluation inside the scope (``model.eval()``) runs the plain model.

    >>> gen = torch.Generator().manual_seed(0)
    >>> with dropout(model, p=0.1, sites=dropout_sites(model.cfg.n_layers), generator=gen):
    ...     loss = model(tokens).mean()     # train mode: masks drawn from ``gen``
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor

from ..capture.hooks import hook_scope
from ..errors import ConfigError
from ..models.protocol import HookedModel
from ..sites import Site

__all__ = ["C_DROPOUT_KINDS", "dropout", "dropout_sites"]

#: where [C]'s blocks drop: attention weights, attention output, MLP output
C_DROPOUT_KINDS: tuple[str, ...] = ("attn_pattern", "attn_out", "mlp_out")


def dropout_sites(n_layers: int, kinds: Sequence[str] = C_DROPOUT_KINDS) -> tuple[Site, ...]:
    """``Site(layer, kind)`` for every block ``0..n_layers-1`` and kind, block-major."""
    return tuple(Site(layer, kind) for layer in range(n_layers) for kind in kinds)


@contextmanager
def dropout(
    model: HookedModel, *, p: float, sites: Sequence[Site], generator: torch.Generator
) -> Iterator[None]:
    """Inverted dropout with rate ``p`` at ``sites`` for forward passes in train mode.

    Each cell of a site's activation is kept with probability ``1 - p`` and scaled by
    ``1 / (1 - p)`` (so its expectation is unchanged), zeroed otherwise; the masks are drawn
    from ``generator`` (on the model's device), in the order the hooks fire. In eval mode
    (``model.training`` false) the hooks change nothing. Hooks are removed on exit, also when
    the block raises.

    Args:
        model: a hooked model.
        p: drop probability in ``[0, 1)``; 0 attaches nothing.
        sites: where to drop (e.g. :func:`dropout_sites`).
        generator: source of the masks; reseed it for reproducible (resumable) masks.
    """
    if not (isinstance(p, (int, float)) and 0 <= p < 1):
        raise ConfigError(f"dropout p must be in [0, 1), got {p!r}; use 0 for no dropout")
    if p == 0:
        yield
        return
    keep_prob = 1.0 - float(p)

    def drop(activation: Tensor) -> Tensor | None:
        if not model.training:
            return None
        keep = torch.rand(activation.shape, generator=generator, device=activation.device,
                          dtype=activation.dtype) < keep_prob
        return activation * keep / keep_prob

    with hook_scope(model, [(site, drop) for site in sites]):
        yield
