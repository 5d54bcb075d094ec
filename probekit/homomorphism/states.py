"""Token states for HE: one all-layer capture, then span pooling per pair.

:func:`capture_states` runs the model once over the examples with every block's site captured
at every token (``probekit.capture``, ``AllTokens``); :func:`pair_vectors` pools each pair's spans
(mean over the span's tokens [C], or its last token) for all layers at once from prefix sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..capture import AllTokens, Site, all_layers, collect_activations
from ..errors import DataError, NonFiniteError
from ..models.protocol import HookedModel
from .config import Pooling
from .pairs import PairIndex


@dataclass(frozen=True, kw_only=True)
class TokenStates:
    """Every token's state at several layers: rows are (example, position), example-major.

    Attributes:
        acts: ``(layer, row, d)`` states.
        example, position: each row's example index and (unpadded) token position.
        layers: block index of each entry of ``acts``' first axis.
    """

    acts: Float[Tensor, "layer row d"]
    example: Int[Tensor, " row"]
    position: Int[Tensor, " row"]
    layers: tuple[int, ...]

    def __post_init__(self) -> None:
        n = self.acts.shape[1]
        if len(self.example) != n or len(self.position) != n:
            raise DataError(
                f"TokenStates: acts has {n} rows but example has {len(self.example)} and position "
                f"{len(self.position)}; give each row its example and position"
            )
        if len(self.layers) != self.acts.shape[0]:
            raise DataError(
                f"TokenStates: acts has {self.acts.shape[0]} layers but layers={self.layers}"
            )
        if not torch.isfinite(self.acts).all():
            raise NonFiniteError("TokenStates.acts contains NaN/inf; the model diverged?")

    def select(self, layers: Sequence[int]) -> TokenStates:
        """The states of the given block indices only."""
        idx = [self.layers.index(layer) for layer in layers]
        return TokenStates(
            acts=self.acts[idx], example=self.example, position=self.position, layers=tuple(layers)
        )


def capture_states(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    *,
    site: str = "resid_post",
    layers: Sequence[int] | None = None,
    batch_size: int = 128,
    pad_id: int = 0,
) -> TokenStates:
    """All tokens' states at ``site`` of every block (or ``layers``) from ONE capture pass.

    The default ``resid_post`` of the last block is [C]'s reading (hidden state after the last
    block, before the final LayerNorm).
    """
    sites = all_layers(model, site) if layers is None else [Site(int(i), site) for i in layers]
    with torch.no_grad():
        res = collect_activations(
            model, tokens, sites, positions=AllTokens(), batch_size=batch_size, pad_id=pad_id,
            progress=False,
        )
    return TokenStates(
        acts=torch.stack([res.acts[s] for s in sites]).to(torch.float64),
        example=res.example,
        position=res.position,
        layers=tuple(int(s.layer) for s in sites),
    )


def _row_table(states: TokenStates) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows sorted example-major; ``offset[e]`` = first row of example ``e``, ``length[e]``."""
    ex = states.example.numpy().astype(np.int64)
    pos = states.position.numpy().astype(np.int64)
    order = np.lexsort((pos, ex))
    ex, pos = ex[order], pos[order]
    n_ex = int(ex.max()) + 1 if ex.size else 0
    length = np.bincount(ex, minlength=n_ex)
    offset = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    if ex.size and not np.array_equal(pos, np.arange(ex.size) - offset[ex]):
        raise DataError(
            "TokenStates rows are not every token of each example (positions 0..len-1); capture "
            "with positions=AllTokens() (probekit.homomorphism.capture_states)"
        )
    return order, offset, length


def pair_vectors(
    states: TokenStates, pairs: PairIndex, *, pooling: Pooling = "mean"
) -> tuple[Float[Tensor, "layer pair d"], Float[Tensor, "layer pair d"]]:
    """Pooled part states ``(h(a), h(b))`` of every pair at every layer of ``states``.

    ``h(span) = mean_{t in span} h_t`` [C] (``pooling="mean"``) or ``h_{end-1}`` (``"last"``).
    """
    if pooling not in ("mean", "last"):
        raise DataError(f"pooling={pooling!r}; choose 'mean' ([C]) or 'last'")
    order, offset, length = _row_table(states)
    n_ex = len(length)
    ex = pairs.example
    if len(ex) and int(ex.max()) >= n_ex:
        raise DataError(
            f"pair indices refer to example {int(ex.max())} but the states hold {n_ex} examples; "
            "mine the pairs from the same dataset (and subset) that was captured"
        )
    ends = np.maximum(pairs.a_span[:, 1], pairs.b_span[:, 1])
    bad = ends > length[ex]
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"{int(bad.sum())} of {len(pairs)} pairs reach past their example's captured tokens "
            f"(pair {i}: example {int(ex[i])} has {int(length[ex[i]])} tokens, span ends at "
            f"{int(ends[i])}); states and pair indices disagree: capture the dataset the pairs "
            "were mined from"
        )
    acts = states.acts[:, torch.from_numpy(order)].to(torch.float64)
    if pooling == "last":
        a_rows = torch.from_numpy(offset[ex] + pairs.a_span[:, 1] - 1)
        b_rows = torch.from_numpy(offset[ex] + pairs.b_span[:, 1] - 1)
        return acts[:, a_rows], acts[:, b_rows]
    csum = torch.cat([torch.zeros_like(acts[:, :1]), acts.cumsum(1)], dim=1)

    def pool(span: np.ndarray) -> Tensor:
        lo = torch.from_numpy(offset[ex] + span[:, 0])
        hi = torch.from_numpy(offset[ex] + span[:, 1])
        width = (hi - lo).to(acts.dtype)[None, :, None]
        return (csum[:, hi] - csum[:, lo]) / width

    return pool(pairs.a_span), pool(pairs.b_span)
