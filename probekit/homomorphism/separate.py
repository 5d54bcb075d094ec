"""Part and composite states from separate forward passes ([O]; ``HEConfig(parts="separate")``).

[C]'s HE reads both parts of a pair from the input's one forward pass and takes their mean as
the composite, so the target ``(a + b) / 2`` is linear in ``[a; b]`` by construction and only
the second part has seen the first. A homomorphism in the usual sense asks whether the
composite's representation is a function of the parts' representations computed *without each
other* (our [O] variant; ``docs/homomorphism.md``). Here, for a pair with spans
``a = [s_a, t_a)`` and ``b = [s_b, t_b)`` of input ``x`` (``t_a <= s_b``):

* part ``a``: ``a`` in its own left context, i.e. a pass over ``x[:t_a]`` pooled over ``a``. For a
  causal model this equals the input's own pass at those positions, so it is read from one
  capture of the whole inputs;
* part ``b``: ``b`` in its own context with ``a`` deleted, a pass over ``x[:s_a] + x[s_b:t_b]``
  pooled over ``b``'s tokens (for a modifier: the modifier right after the context that
  preceded its primitive; it never attends to the primitive);
* composite: the span ``[s_a, t_b)`` pooled in its own pass over ``x[:t_b]`` (again the input's
  own pass, by causality).

We keep the left context rather than encoding each part alone because the SCAN-style
language has 4 primitives and 2 modifiers: context-free parts give only 8 distinct composites,
and one operator per modifier would fit them exactly (a vacuous 0). The spans of both pair
kinds mined by :mod:`probekit.homomorphism.pairs` are adjacent (``t_a = s_b``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import DataError
from ..models.protocol import HookedModel
from .pairs import PairIndex
from .states import Pooling, TokenStates, capture_states, pair_vectors

__all__ = ["deleted_part_inputs", "separate_pass_vectors"]


def deleted_part_inputs(
    tokens: Sequence[Sequence[int]], pairs: PairIndex
) -> tuple[list[list[int]], PairIndex]:
    """Inputs ``x[:s_a] + x[s_b:t_b]`` (part ``a`` deleted) and where ``b`` sits in each.

    Returns one input per pair and a :class:`PairIndex` over those inputs whose ``a_span`` and
    ``b_span`` are both ``b``'s span there (``pair_vectors`` pools it).
    """
    inputs, spans = [], []
    for e, (s_a, t_a), (s_b, t_b) in zip(pairs.example, pairs.a_span, pairs.b_span):
        x = tokens[int(e)]
        if t_a > s_b:
            raise DataError(f"pair spans a=[{s_a}, {t_a}) and b=[{s_b}, {t_b}) overlap; part b "
                            "must follow part a")
        if t_b > len(x):
            raise DataError(f"span b=[{s_b}, {t_b}) reaches past example {int(e)}'s {len(x)} "
                            "tokens; mine the pairs from the same dataset")
        inputs.append([int(t) for t in x[:s_a]] + [int(t) for t in x[s_b:t_b]])
        spans.append((int(s_a), int(s_a) + int(t_b - s_b)))
    span = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    idx = PairIndex(kind=pairs.kind, example=np.arange(len(inputs), dtype=np.int64),
                    a_span=span, b_span=span, label=pairs.label)
    return inputs, idx


def separate_pass_vectors(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    pairs: PairIndex,
    *,
    site: str = "resid_post",
    layers: Sequence[int] | None = None,
    pooling: Pooling = "mean",
    batch_size: int = 128,
    pad_id: int = 0,
    states: TokenStates | None = None,
) -> tuple[
    Float[Tensor, "layer pair d"], Float[Tensor, "layer pair d"], Float[Tensor, "layer pair d"],
    tuple[int, ...],
]:
    """``(a, b, composite, layers)`` from separate passes (module docstring).

    Args:
        model: the model (``b``'s inputs differ from the dataset's, so it is always run).
        tokens: the inputs the pairs were mined from.
        pairs: :func:`~probekit.homomorphism.modifier_pairs` or ``sequence_pairs`` of them.
        site: hook kind read at every block.
        layers: blocks to read (None = every block).
        pooling: span pooling, ``"mean"`` [C] or ``"last"``.
        batch_size: capture batch size.
        pad_id: padding token.
        states: an existing all-token capture of ``tokens`` at ``site`` (reused for ``a`` and
            the composite); None captures it.
    """
    if states is None:
        states = capture_states(model, tokens, site=site, layers=layers, batch_size=batch_size,
                                pad_id=pad_id)
    elif layers is not None:
        states = states.select(layers)
    a, _ = pair_vectors(states, pairs, pooling=pooling)
    whole = PairIndex(
        kind=pairs.kind, example=pairs.example,
        a_span=np.stack([pairs.a_span[:, 0], pairs.b_span[:, 1]], axis=1), b_span=pairs.b_span,
        label=pairs.label,
    )
    composite, _ = pair_vectors(states, whole, pooling=pooling)
    inputs, b_idx = deleted_part_inputs(tokens, pairs)
    b_states = capture_states(model, inputs, site=site, layers=states.layers,
                              batch_size=batch_size, pad_id=pad_id)
    b, _ = pair_vectors(b_states, b_idx, pooling=pooling)
    return a, b, composite.to(torch.float64), tuple(states.layers)
