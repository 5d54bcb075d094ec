"""The patching report: one grid per site kind over a set of prompt pairs, with its blocks.

Backs the ``[[patching]]`` suite section and ``probekit patch``; each grid is one
:mod:`.patch_grid` (:class:`~.patch_grid.PatchingResult`).

For each site kind, one grid over the clean / corrupt prompt pairs: residual-width kinds by
layer x position, head kinds by layer x head (or layer x position x head); exact activation
patching (:func:`activation_patching`), attribution patching (:func:`attribution_patching`,
Nanda 2023; Syed et al. 2023) or both with their correlation; optionally edge attribution over
the residual graph (EAP / EAP-IG, :func:`edge_attribution`; Syed et al. 2023, Hanna et al. 2024)
with the faithfulness curve of the top-k circuits. Metric: ``logit(clean answer) -
logit(corrupt answer)`` at the last token (Wang et al. 2022) or the clean answer's
log-probability.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from ..errors import ConfigError, DataError
from ..report.blocks import Block, Text
from .patch_grid import HEAD_PATCH_KINDS, PatchingResult, PatchOptions

__all__ = ["PatchingGrids", "check_gap", "contrast_problems", "edge_circuits", "grid_record",
           "patching_grids", "position_labels"]


@dataclass(frozen=True, kw_only=True)
class PatchingGrids:
    """The grids of :func:`patching_grids`: report numbers, blocks and warnings.

    Attributes:
        data: ``report.json`` numbers (``n_pairs``, ``metric``, ``grids`` with ``values`` /
            ``normalized`` per grid, ``correlation``, ``edges`` ...).
        blocks: summary text, largest-effect table, one heatmap per grid, edge blocks.
        warnings: pairs without contrast, answers reduced to their first token.
    """

    data: dict[str, Any]
    blocks: tuple[Block, ...]
    warnings: tuple[str, ...] = field(default=())


def position_labels(model: Any, prompts: Sequence[Sequence[int]], vocab: Any = None) -> list[str]:
    """``"pos:token"`` per position of the prompts (pair 0's token; ``"*"`` where pairs differ)."""
    tok = getattr(model, "tokenizer", None)

    def text(i: int) -> str:
        if vocab is not None and 0 <= i < len(vocab.tokens):
            return str(vocab.tokens[i])
        return tok.decode([i]) if tok is not None else str(i)

    n = max(len(p) for p in prompts)
    out = []
    for t in range(n):
        ids = {p[t] for p in prompts if t < len(p)}
        first = next(p[t] for p in prompts if t < len(p))
        out.append(f"{t}:{text(first)}{'*' if len(ids) > 1 else ''}")
    return out


def grid_record(res: PatchingResult, method: str, rows: list[str], cols: list[str]) -> dict[str, Any]:
    """JSON of one grid: ``values``/``normalized`` shaped like ``by``, axis and heatmap labels.

    For a ``(layer, pos, head)`` grid the heatmap rows are (layer, head) pairs.
    """
    return {"kind": res.kind, "by": list(res.axes), "method": method,
            "values": res.values.tolist(), "normalized": res.normalized.tolist(),
            "labels": {k: [str(x) for x in v] for k, v in res.labels.items()},
            "row_labels": rows, "col_labels": cols}


def contrast_problems(
    clean: Sequence[Sequence[int]], corrupt: Sequence[Sequence[int]], answer: Sequence[int],
    foil: Sequence[int], *, metric: str,
) -> list[str]:
    """Pairs that cannot contrast: warnings for some, a :class:`DataError` when all are such.

    A pair with identical clean and corrupt prompts, or (``logit_diff``) the same clean and
    corrupt answer, has ``m_clean = m_corrupt``: it adds nothing, and if every pair is like
    that the normalised effect is 0/0 in every cell.
    """
    same_prompt = [i for i, (c, r) in enumerate(zip(clean, corrupt)) if list(c) == list(r)]
    same_answer = ([i for i, (a, f) in enumerate(zip(answer, foil)) if a == f]
                   if metric == "logit_diff" else [])
    n = len(clean)
    if len(same_prompt) == n:
        raise DataError(
            f"every pair's clean and corrupt prompts are identical (pair 0: {list(clean[0])}): "
            "patching changes nothing and the normalised effect is 0/0 in every cell; make each "
            "corrupt prompt differ from its clean prompt (e.g. swap the subject)"
        )
    if len(same_answer) == n:
        raise DataError(
            f"every pair's clean and corrupt answers are the same token (pair 0: {answer[0]}): "
            "logit(answer) - logit(corrupt answer) is 0 in every run and the normalised effect "
            "0/0; give the corrupt rows the answer the corrupt prompt calls for"
        )
    out = []
    if same_prompt:
        out.append(f"{len(same_prompt)} of {n} pairs have identical clean and corrupt prompts "
                   f"(pairs {same_prompt[:5]}): they add no contrast, only dilute the means")
    if same_answer:
        out.append(f"{len(same_answer)} of {n} pairs have the same clean and corrupt answer "
                   f"(pairs {same_answer[:5]}): their logit difference is 0 in every run")
    return out


def check_gap(res: PatchingResult, metric: str) -> None:
    """Raise when the clean and corrupt runs have the same mean metric (normalised effect 0/0)."""
    clean, corrupt = float(res.clean.mean()), float(res.corrupt.mean())
    if not clean != corrupt:
        raise DataError(
            f"the clean and corrupted runs give the same mean {metric} ({clean:.4g}): the "
            "normalised effect (m_patched - m_corrupt) / (m_clean - m_corrupt) is 0/0 in every "
            "cell; use prompt pairs on which the model's metric differs"
        )


def _kind_grids(
    model: Any, clean: Sequence[Sequence[int]], corrupt: Sequence[Sequence[int]],
    metric: Callable[..., Tensor], spec: Any, kind: str, pos_labels: list[str], check: bool,
) -> tuple[dict[str, PatchingResult], list[dict[str, Any]], list[Block], list[dict[str, Any]]]:
    """One kind's grid per method: results, JSON records, heatmaps and largest-effect rows."""
    from warnings import catch_warnings, simplefilter

    from .attribution import attribution_patching
    from .blocks import patching_view
    from .patching import activation_patching

    by = ("layer", "pos")
    if kind in HEAD_PATCH_KINDS:
        by = ("layer", "pos", "head") if spec.head_grid == "layer_pos_head" else ("layer", "head")
    options = PatchOptions.build(kind=kind, by=by, direction=spec.direction,
                                 layers=tuple(spec.layers) or None, window=spec.window,
                                 batch_size=spec.batch_size)
    methods = ("activation", "attribution") if spec.method == "both" else (spec.method,)
    results, records, heatmaps, rows = {}, [], [], []
    for method in methods:
        fn = activation_patching if method == "activation" else attribution_patching
        with catch_warnings():  # a zero gap is raised below, in one line
            simplefilter("ignore", UserWarning)
            res = fn(model, clean, corrupt, metric, options)
        if check and not results:
            check_gap(res, spec.metric)
        results[method] = res
        view = patching_view(res, method=method, pos_labels=pos_labels if by[1] == "pos" else None)
        records.append(grid_record(res, method, list(view.row_labels), list(view.col_labels)))
        heatmaps.append(view.heatmap)
        rows.append(view.largest)
    return results, records, heatmaps, rows


def _summary(spec: Any, n_pairs: int, first: PatchingResult, corr: dict[str, float]) -> str:
    metric_name = ("logit(clean answer) - logit(corrupt answer)" if spec.metric == "logit_diff"
                   else "log p(clean answer)")
    text = (f"{n_pairs} prompt pairs; metric {metric_name} at the last token: clean "
            f"{float(first.clean.mean()):.3f}, corrupt {float(first.corrupt.mean()):.3f} (mean over "
            "pairs). Normalised effect = (m_patched - m_base) / (m_source - m_base); "
            "positions marked * hold different tokens in different pairs (pair 0's shown).")
    if spec.window > 1:
        text += f" Each cell patches {spec.window} consecutive blocks (rows: first-last block)."
    if corr:
        text += " Attribution vs activation patching (Pearson r): " + ", ".join(
            f"{k} {v:.3f}" for k, v in corr.items()) + "."
    return text


def patching_grids(
    model: Any, clean: Sequence[Sequence[int]], corrupt: Sequence[Sequence[int]], spec: Any, *,
    answer: Sequence[int], foil: Sequence[int], vocab: Any = None, reduced: Sequence[str] = (),
) -> PatchingGrids:
    """Patch every cell of each ``spec.kinds`` grid over the pairs; numbers, heatmaps and a table.

    ``spec``: the ``[[patching]]`` keys (``kinds``, ``method``, ``metric``, ``direction``,
    ``layers``, ``window``, ``head_grid``, ``edges``, ``edge_ks``, ``edge_top``,
    ``batch_size``, ``answer_tokens``); ``answer``/``foil``: the clean and corrupt rows' answer
    token ids (one per pair); ``reduced``: the answers scored by their first token. The heatmaps
    show the normalised effect ``(m_patched - m_base) / (m_source - m_base)`` with layers as
    rows and positions (labelled with the prompts' tokens) or heads as columns.
    """
    from functools import partial

    import torch

    from ..capture.answers import reduction_warning
    from .attribution import patching_correlation
    from .blocks import largest_effect_table
    from .metrics import answer_logprob, logit_diff

    warnings = contrast_problems(clean, corrupt, answer, foil, metric=spec.metric)
    a, f = torch.tensor(list(answer)), torch.tensor(list(foil))
    metric = (partial(logit_diff, answer=a, foil=f) if spec.metric == "logit_diff"
              else partial(answer_logprob, answer=a))
    pos_labels = position_labels(model, corrupt if spec.direction == "denoise" else clean, vocab)
    grids, heatmaps, rows, corr, first = [], [], [], {}, None
    for kind in spec.kinds:
        results, records, maps, largest = _kind_grids(
            model, clean, corrupt, metric, spec, kind, pos_labels, check=first is None)
        first = first or next(iter(results.values()))
        grids += records
        heatmaps += maps
        rows += largest
        if len(results) == 2:
            corr[kind] = patching_correlation(results["attribution"], results["activation"])
    if first is None:
        raise ConfigError("[patching] kinds is empty; name at least one site kind")
    data = {"n_pairs": len(clean), "metric": spec.metric, "direction": spec.direction,
            "answer_tokens": spec.answer_tokens, "first_token_answers": list(reduced),
            "clean_metric": first.clean.tolist(), "corrupt_metric": first.corrupt.tolist(),
            "grids": grids, "correlation": corr}
    if reduced:
        warnings.append(reduction_warning(reduced, 2 * len(clean)))
    if spec.edges != "none":
        data["edges"], edge_blocks = edge_circuits(model, clean, corrupt, metric, spec)
        heatmaps.extend(edge_blocks)
    blocks = (Text(text=_summary(spec, len(clean), first, corr)), largest_effect_table(rows),
              *heatmaps)
    return PatchingGrids(data=data, blocks=blocks, warnings=tuple(warnings))


def edge_circuits(
    model: Any, clean: Sequence[Sequence[int]], corrupt: Sequence[Sequence[int]],
    metric: Callable[..., Tensor], spec: Any,
) -> tuple[dict[str, Any], list[Block]]:
    """EAP / EAP-IG edge scores, the top edges and the faithfulness curve of top-k circuits."""
    from .blocks import edge_table, faithfulness_plot
    from .eap import edge_attribution, faithfulness_curve

    scores = edge_attribution(model, clean, corrupt, metric, method=spec.edges,
                              batch_size=spec.batch_size)
    n_edges = scores.graph.n_edges
    ks = sorted({k for k in spec.edge_ks if k < n_edges} | {n_edges})
    curve = faithfulness_curve(model, clean, corrupt, metric, scores, ks, batch_size=spec.batch_size)
    top = scores.top(spec.edge_top)
    table = edge_table(scores, spec.edge_top)
    plot = faithfulness_plot(curve)
    faithfulness = curve.to_dict()
    del faithfulness["top_edges"]  # every edge up to max(ks) = the whole graph; "top" has the head
    data = {"method": spec.edges, "n_edges": n_edges, "top": [list(t) for t in top],
            "faithfulness": faithfulness}
    return data, [table, plot]
