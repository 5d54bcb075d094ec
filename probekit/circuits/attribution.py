"""Attribution patching (Nanda 2023; Syed et al. 2023): a first-order estimate of every patch.

``effect(cell) ~ (a_source - a_base) . dm/da |_base``: one forward + one backward on the base run
(plus one forward of the source run for ``a_source``) estimates the whole grid that
:func:`~probekit.circuits.activation_patching` measures exactly. Summing the cell attributions of
one site over every position gives the first-order change of the metric when that whole site is
patched. Built only on :mod:`probekit.interventions` (:class:`Read`, :class:`Grad`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..capture.batching import PaddingSide
from ..errors import ConfigError
from ..interventions import Grad, Read, run_with_interventions
from ..models.protocol import HookedModel
from ..sites import HEAD_KINDS, Site
from .patching import (
    _BY,
    HEAD_PATCH_KINDS,
    RESID_KINDS,
    Metric,
    PatchingResult,
    as_token_lists,
    check_pairs,
    run_metric,
    token_labels,
)


def attribution_patching(
    model: HookedModel,
    clean_tokens: Tensor | Sequence[Sequence[int]],
    corrupt_tokens: Tensor | Sequence[Sequence[int]],
    metric: Metric,
    *,
    kind: str = "resid_pre",
    by: tuple[str, ...] | None = None,
    direction: str = "denoise",
    layers: Sequence[int] | None = None,
    padding_side: PaddingSide = "right",
) -> PatchingResult:
    """Estimate the :func:`activation_patching` grid of ``kind`` by ``by`` from gradients.

    Arguments as for :func:`~probekit.circuits.activation_patching`; the result has the same
    axes (``values`` = estimated metric after the patch, i.e. base metric + attribution).
    Compare with the exact grid using :func:`patching_correlation`.
    """
    clean = as_token_lists(clean_tokens, "clean_tokens")
    corrupt = as_token_lists(corrupt_tokens, "corrupt_tokens")
    check_pairs(clean, corrupt)
    if kind not in RESID_KINDS + HEAD_PATCH_KINDS:
        raise ConfigError(
            f"attribution kind {kind!r} not supported; use one of {list(RESID_KINDS + HEAD_PATCH_KINDS)}"
        )
    by = tuple(by or (("layer", "head") if kind in HEAD_KINDS else ("layer", "pos")))
    if by not in _BY or kind not in _BY[by]:
        valid = [list(b) for b, kinds in _BY.items() if kind in kinds]
        raise ConfigError(f"by={list(by)} does not fit kind {kind!r}; use one of {valid}")
    if direction not in ("denoise", "noise"):
        raise ConfigError(f"direction {direction!r} unknown; use 'denoise' or 'noise'")
    n_layers = model.cfg.n_layers
    layer_list = list(range(n_layers)) if layers is None else [int(x) for x in layers]
    bad = [x for x in layer_list if not 0 <= x < n_layers]
    if bad:
        raise ConfigError(f"layers {bad} out of range; the model has {n_layers} layers")
    base_toks, src_toks = (corrupt, clean) if direction == "denoise" else (clean, corrupt)
    sites = [Site(layer, kind) for layer in layer_list]
    every = torch.arange(len(base_toks))

    def objective(last_logits: Tensor, batch: object) -> Tensor:
        return metric(last_logits, every.to(last_logits.device))

    src = run_with_interventions(model, src_toks, [Read(site=s) for s in sites],
                                 padding_side=padding_side, logits="last")
    base = run_with_interventions(
        model, base_toks, [op for s in sites for op in (Read(site=s), Grad(site=s))],
        padding_side=padding_side, logits="last", objective=objective,
    )
    m_src = run_metric(metric, src.output, every)
    m_base = run_metric(metric, base.output, every)
    lengths = torch.tensor([len(t) for t in base_toks])
    n_pos = int(lengths.max())
    per_layer = []
    for s in sites:
        diff = (src.reads[s] - base.reads[s]) * base.grads[s]  # (pair, pos, [head,] d)
        attr = diff.sum(-1).float().cpu()  # (pair, pos[, head])
        real = torch.arange(attr.shape[1])[None, :] < lengths[:, None]
        if "pos" in by:
            nan = torch.full_like(attr, float("nan"))
            attr = torch.where(real.reshape(real.shape + (1,) * (attr.ndim - 2)), attr, nan)
        else:  # (layer, head): the head patched at every position
            attr = attr.sum(1)
        per_layer.append(attr)
    per_pair = torch.stack(per_layer, 1) + m_base.cpu().reshape(-1, *([1] * per_layer[0].ndim))
    values = per_pair.nanmean(0)
    normalized = (values - m_base.mean().cpu()) / (m_src.mean() - m_base.mean()).cpu()
    n_heads = sites[0].n_heads(model) if kind in HEAD_KINDS else 0
    labels = {"layer": [str(x) for x in layer_list], "pos": token_labels(model, base_toks[0])
              if len(set(map(tuple, base_toks))) == 1 else [str(t) for t in range(n_pos)],
              "head": [str(h) for h in range(n_heads)]}
    return PatchingResult(
        values=values, per_pair=per_pair, normalized=normalized, axes=by,
        labels={a: labels[a] for a in by}, kind=kind, direction=direction,
        base=m_base.cpu(), source=m_src.cpu(),
    )


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
