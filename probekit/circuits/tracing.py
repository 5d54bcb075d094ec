"""Causal tracing (Meng et al. 2022, ROME): noise the subject, restore one clean state at a time.

The corrupted run adds Gaussian noise to the token embeddings of the subject span
(``noise_scale`` x the standard deviation of the embedding matrix's entries; Meng et al. use 3x
the subject embeddings' std over a corpus); each cell of the grid restores the clean activation
of ``kind`` at one (layer, position) in the noised run. The normalised effect is the fraction of
the clean metric recovered. This is :func:`~probekit.circuits.activation_patching`'s batched
grid with a noised base run instead of corrupted tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..capture.batching import PaddingSide
from ..errors import ConfigError, DataError
from ..interventions import Add
from ..models.protocol import HookedModel
from ..sites import Site
from .patch_grid import RESID_KINDS, Grid, Metric, PatchingResult, as_token_lists, check_layers
from .patching import patch_grid


def causal_tracing(
    model: HookedModel,
    tokens: Tensor | Sequence[Sequence[int]],
    subject_spans: Sequence[tuple[int, int]],
    metric: Metric,
    *,
    kind: str = "resid_post",
    noise_scale: float = 3.0,
    seed: int = 0,
    layers: Sequence[int] | None = None,
    window: int = 1,
    batch_size: int = 64,
    padding_side: PaddingSide = "right",
) -> PatchingResult:
    """Restore each (layer, position) of ``kind`` from the clean run into the subject-noised run.

    ``subject_spans[i] = (start, end)`` (unpadded token indices, end exclusive) of prompt ``i``.
    The noise is drawn once (``seed``) and shared by every restored run of a prompt. With
    ``window=w`` a cell restores blocks ``l..l+w-1`` at once (Meng et al. restore windows of 10
    for MLP and attention outputs).
    """
    toks = as_token_lists(tokens, "tokens")
    if len(subject_spans) != len(toks):
        raise DataError(
            f"{len(subject_spans)} subject spans for {len(toks)} prompts; give one (start, end) "
            "per prompt"
        )
    for i, ((a, b), t) in enumerate(zip(subject_spans, toks)):
        if not 0 <= a < b <= len(t):
            raise DataError(
                f"prompt {i}: subject span {(a, b)} must satisfy 0 <= start < end <= {len(t)}"
            )
    if kind not in RESID_KINDS:
        raise ConfigError(f"causal tracing kind {kind!r} not supported; use one of {list(RESID_KINDS)}")
    if noise_scale <= 0:
        raise ConfigError(f"noise_scale must be > 0, got {noise_scale}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"window must be an int >= 1 (blocks restored per cell), got {window!r}")
    grid = Grid(base=toks, source=toks, kind=kind, by=("layer", "pos"), direction="denoise",
                layers=check_layers(model, layers), window=window, n_layers=int(model.cfg.n_layers))
    n, n_pos, d = len(toks), max(len(t) for t in toks), int(model.cfg.d_model)
    std = float(model.W_E.detach().float().std())
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(n, n_pos, d, generator=gen) * (noise_scale * std)
    mask = torch.zeros(n, n_pos, dtype=torch.bool)
    for i, (a, b) in enumerate(subject_spans):
        mask[i, a:b] = True
    embed = Site(None, "embed")

    def noise_ops(pairs: Tensor) -> list:
        return [Add(site=embed, vector=noise[pairs], positions=mask[pairs])]

    return patch_grid(model, grid, metric, batch_size=batch_size, padding_side=padding_side,
                      base_ops=noise_ops)
