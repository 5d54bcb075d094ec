"""Attribution patching (Nanda 2023; Syed et al. 2023): a first-order estimate of every patch.

``effect(cell) ~ (a_source - a_base) . dm/da |_base``: one forward + one backward on the base run
(plus one forward of the source run for ``a_source``) estimates the whole grid that
:func:`~probekit.circuits.activation_patching` measures exactly. Summing the cell attributions of
one site over every position gives the first-order change of the metric when that whole site is
patched. Built only on :mod:`probekit.interventions` (:class:`Read`, :class:`Grad`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError
from ..interventions import Grad, Read, run_with_interventions
from ..models.protocol import HookedModel
from ..sites import Site
from .metrics import as_pair_metric
from .patch_grid import Metric, PatchingResult, PatchOptions, grid_result, prepare_grid, run_metric


def attribution_patching(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    options: PatchOptions | None = None,
    /,
    **keywords: Any,
) -> PatchingResult:
    """Estimate the :func:`activation_patching` grid of ``kind`` by ``by`` from gradients.

    Arguments as for :func:`~probekit.circuits.activation_patching`; the result has the same
    axes (``values`` = estimated metric after the patch, i.e. base metric + attribution).
    Compare with the exact grid using :func:`patching_correlation`. Options as one
    :class:`~probekit.circuits.PatchOptions` and/or keywords (``window`` must be 1: the
    estimate is linear in one block's activation; ``batch_size`` is unused: one forward and one
    backward over all pairs).

    Raises:
        ConfigError: ``window`` > 1.
    """
    opts = PatchOptions.build(options, **keywords)
    if opts.window != 1:
        raise ConfigError(f"window = {opts.window}: attribution patching estimates single-block "
                          "cells; use window = 1 (or activation_patching for a window)")
    metric = as_pair_metric(metric)  # a TransformerLens-style metric(logits) is adapted
    padding_side = opts.padding_side
    grid = prepare_grid(model, clean_tokens, corrupt_tokens, opts)
    sites = grid.sites
    every = torch.arange(len(grid.base))

    def objective(last_logits: Tensor, batch: object) -> Tensor:
        return metric(last_logits, every.to(last_logits.device))

    src = run_with_interventions(model, grid.source, [Read(site=s) for s in sites],
                                 padding_side=padding_side, logits="last")
    base = run_with_interventions(
        model, grid.base, [op for s in sites for op in (Read(site=s), Grad(site=s))],
        padding_side=padding_side, logits="last", objective=objective,
    )
    m_src = run_metric(metric, src.output, every)
    m_base = run_metric(metric, base.output, every)
    lengths = torch.tensor([len(t) for t in grid.base])
    per_layer = []
    for layer in grid.layers:
        s = Site(layer, grid.kind)
        diff = (src.reads[s] - base.reads[s]) * base.grads[s]  # (pair, pos, [head,] d)
        attr = diff.sum(-1).float().cpu()  # (pair, pos[, head])
        real = torch.arange(attr.shape[1])[None, :] < lengths[:, None]
        if "pos" in grid.by:
            nan = torch.full_like(attr, float("nan"))
            attr = torch.where(real.reshape(real.shape + (1,) * (attr.ndim - 2)), attr, nan)
        else:  # (layer, head): the head patched at every position
            attr = attr.sum(1)
        per_layer.append(attr)
    per_pair = torch.stack(per_layer, 1) + m_base.cpu().reshape(-1, *([1] * per_layer[0].ndim))
    return grid_result(model, grid, per_pair, m_base, m_src, method="attribution")


def patching_correlation(estimate: PatchingResult, exact: PatchingResult) -> float:
    """Pearson correlation of two grids' effects over the cells both define (e.g. attribution vs exact)."""
    if estimate.values.shape != exact.values.shape:
        raise ConfigError(
            f"grids differ: {tuple(estimate.values.shape)} vs {tuple(exact.values.shape)}; "
            "compare results of the same kind, by and layers"
        )
    a = estimate.values.flatten().double()
    b = exact.values.flatten().double()
    ok = a.isfinite() & b.isfinite()
    a, b = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    return float((a * b).sum() / (a.norm() * b.norm()))
