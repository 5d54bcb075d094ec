"""``[[patching]]``: activation / attribution patching grids over clean-corrupt prompt pairs.

For each site kind, one grid over the suite's prompt pairs (rows paired by ``pair_column``,
``role_column`` = ``"clean"`` / ``"corrupt"``): residual-width kinds (``resid_pre``,
``attn_out``, ``mlp_out`` ...) by layer x position, head kinds (``attn_z`` ...) by layer x head
(the head at every position). Metric: ``logit(clean answer) - logit(corrupt answer)`` at the
last token (Wang et al. 2022) or the clean answer's log-probability. ``method``: exact
activation patching (:func:`probekit.circuits.activation_patching`), attribution patching
(:func:`probekit.circuits.attribution_patching`, Nanda 2023; Syed et al. 2023) or both with
their correlation; ``window`` patches blocks ``l..l+w-1`` of a cell together. ``edges``: also
edge attribution over the residual graph (EAP or EAP-IG, :func:`probekit.circuits.edge_attribution`;
Syed et al. 2023, Hanna et al. 2024) with the top edges and the faithfulness curve of the top-k
circuits. The same grids back ``probekit patch MODEL DATA`` (:mod:`probekit.suites.patch_cli`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...context import RunContext
from ...errors import ConfigError, DataError
from ...report.blocks import Text
from ..registry import register_analysis
from ..result import AnalysisResult

__all__ = ["PATCH_KINDS", "PatchingSpec", "patching_grids", "position_labels", "run_patching"]

PATCH_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_post",
               "attn_z", "attn_q", "attn_k", "attn_v")
_HEAD_KINDS = ("attn_z", "attn_q", "attn_k", "attn_v")
AnswerTokens = Literal["single", "first"]  # = probekit.circuits.AnswerTokens (kept light here)


@dataclass(frozen=True, kw_only=True)
class PatchingSpec:
    """One ``[[patching]]`` table.

    Attributes:
        kinds: site kinds, one grid each (``resid_pre``/``resid_mid``/``resid_post``/
            ``attn_out``/``mlp_out``/``mlp_post`` by layer x position; ``attn_z``/``attn_q``/
            ``attn_k``/``attn_v`` by layer x head).
        method: ``"activation"`` (exact, one patched run per cell, batched), ``"attribution"``
            (one forward + one backward) or ``"both"`` (and their Pearson correlation).
        metric: ``"logit_diff"`` (clean answer vs corrupt answer) or ``"answer_logprob"``.
        direction: ``"denoise"`` (clean activations into the corrupt run) or ``"noise"``.
        answer_column: each row's answer (a token id, or text of one token).
        answer_tokens: ``"single"`` refuses a multi-token answer; ``"first"`` scores such an
            answer by its first token (recorded in the report, with a warning).
        pair_column, role_column: pair rows into clean / corrupt prompts.
        layers: blocks to patch (default all).
        window: blocks patched together per cell (``l..l+window-1``; activation method only).
        head_grid: head kinds by ``"layer_head"`` (each head at every position) or
            ``"layer_pos_head"`` (each head at each position; shown as (layer, head) rows x
            position columns).
        edges: ``"none"``, ``"eap"`` or ``"eap-ig"``: also score every edge of the residual
            graph and evaluate the top-k edge circuits (complement patched to corrupt).
        edge_ks: circuit sizes of the faithfulness curve (the whole graph is added).
        edge_top: edges listed in the report table.
        batch_size: patched (pair, cell) rows per forward pass.
    """

    kinds: tuple[str, ...] = ("resid_pre", "attn_out", "mlp_out", "attn_z")
    method: Literal["activation", "attribution", "both"] = "activation"
    metric: Literal["logit_diff", "answer_logprob"] = "logit_diff"
    direction: Literal["denoise", "noise"] = "denoise"
    answer_column: str = "answer"
    pair_column: str = "pair_id"
    role_column: str = "role"
    layers: tuple[int, ...] = ()
    window: int = 1
    head_grid: Literal["layer_head", "layer_pos_head"] = "layer_head"
    edges: Literal["none", "eap", "eap-ig"] = "none"
    edge_ks: tuple[int, ...] = (10, 100, 1000)
    edge_top: int = 20
    batch_size: int = 64
    answer_tokens: AnswerTokens = "single"

    def __post_init__(self) -> None:
        """Refuse unknown kinds, an empty kind list, bad sizes and a window without exact patching."""
        if self.answer_tokens not in ("single", "first"):
            raise ValueError(f"answer_tokens = {self.answer_tokens!r}: use 'single' (refuse "
                             "multi-token answers) or 'first' (score their first token)")
        bad = [k for k in self.kinds if k not in PATCH_KINDS]
        if bad or not self.kinds:
            what = f"{bad[0]!r} is not a patching kind" if bad else "no kind given"
            raise ValueError(f"kinds {list(self.kinds)}: {what}; choose from {list(PATCH_KINDS)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size = {self.batch_size}: must be >= 1")
        if len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"kinds {list(self.kinds)} lists a kind twice; give each once")
        if self.window < 1:
            raise ValueError(f"window = {self.window}: must be >= 1 (1 = one block per cell)")
        if self.window > 1 and self.method != "activation":
            raise ValueError(
                f"window = {self.window} needs method = 'activation' (got {self.method!r}): "
                "attribution patching estimates single-block cells only"
            )
        if not self.edge_ks or min(self.edge_ks) < 1 or self.edge_top < 1:
            raise ValueError(
                f"edge_ks = {list(self.edge_ks)}, edge_top = {self.edge_top}: need circuit sizes "
                ">= 1 and edge_top >= 1"
            )


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


def _grid_dict(res: Any, method: str, rows: list[str], cols: list[str]) -> dict[str, Any]:
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


def check_gap(res: Any, metric: str) -> None:
    """Raise when the clean and corrupt runs have the same mean metric (normalised effect 0/0)."""
    clean, corrupt = float(res.clean.mean()), float(res.corrupt.mean())
    if not clean != corrupt:
        raise DataError(
            f"the clean and corrupted runs give the same mean {metric} ({clean:.4g}): the "
            "normalised effect (m_patched - m_corrupt) / (m_clean - m_corrupt) is 0/0 in every "
            "cell; use prompt pairs on which the model's metric differs"
        )


def patching_grids(
    model: Any,
    clean: Sequence[Sequence[int]],
    corrupt: Sequence[Sequence[int]],
    spec: PatchingSpec,
    *,
    answer: Sequence[int],
    foil: Sequence[int],
    vocab: Any = None,
    reduced: Sequence[str] = (),
) -> AnalysisResult:
    """Patch every cell of each ``spec.kinds`` grid over the pairs; numbers, heatmaps and a table.

    ``answer``/``foil``: the clean and corrupt rows' answer token ids (one per pair);
    ``reduced``: the answers scored by their first token (``answer_tokens = "first"``). The
    report heatmaps show the normalised effect ``(m_patched - m_base) / (m_source - m_base)``
    with layers as rows and positions (labelled with the prompts' tokens) or heads as columns.
    """
    from functools import partial
    from warnings import catch_warnings, simplefilter

    import torch

    from ...circuits import (
        activation_patching,
        answer_logprob,
        attribution_patching,
        logit_diff,
        patching_correlation,
        reduction_warning,
    )
    from ...circuits.blocks import largest_effect_table, patching_view

    warnings = contrast_problems(clean, corrupt, answer, foil, metric=spec.metric)
    a, f = torch.tensor(list(answer)), torch.tensor(list(foil))
    metric = (partial(logit_diff, answer=a, foil=f) if spec.metric == "logit_diff"
              else partial(answer_logprob, answer=a))
    layers = list(spec.layers) or None
    methods = ("activation", "attribution") if spec.method == "both" else (spec.method,)
    base_prompts = corrupt if spec.direction == "denoise" else clean
    pos_labels = position_labels(model, base_prompts, vocab)
    grids, blocks, rows, corr = [], [], [], {}
    first = None
    for kind in spec.kinds:
        by = ("layer", "pos")
        if kind in _HEAD_KINDS:
            by = ("layer", "pos", "head") if spec.head_grid == "layer_pos_head" else ("layer", "head")
        results = {}
        for method in methods:
            fn = activation_patching if method == "activation" else attribution_patching
            kwargs = ({"batch_size": spec.batch_size, "window": spec.window}
                      if method == "activation" else {})
            with catch_warnings():  # a zero gap is raised below, in one line
                simplefilter("ignore", UserWarning)
                res = fn(model, clean, corrupt, metric, kind=kind, by=by,
                         direction=spec.direction, layers=layers, **kwargs)
            if first is None:
                check_gap(res, spec.metric)
            results[method] = res
            first = first or res
            view = patching_view(res, method=method,
                                 pos_labels=pos_labels if by[1] == "pos" else None)
            grids.append(_grid_dict(res, method, list(view.row_labels), list(view.col_labels)))
            blocks.append(view.heatmap)
            rows.append(view.largest)
        if len(results) == 2:
            corr[kind] = patching_correlation(results["attribution"], results["activation"])
    if first is None:
        raise ConfigError("[patching] kinds is empty; name at least one site kind")
    summary = largest_effect_table(rows)
    metric_name = ("logit(clean answer) - logit(corrupt answer)" if spec.metric == "logit_diff"
                   else "log p(clean answer)")
    text = (f"{len(clean)} prompt pairs; metric {metric_name} at the last token: clean "
            f"{float(first.clean.mean()):.3f}, corrupt {float(first.corrupt.mean()):.3f} (mean over "
            "pairs). Normalised effect = (m_patched - m_base) / (m_source - m_base); "
            "positions marked * hold different tokens in different pairs (pair 0's shown).")
    if spec.window > 1:
        text += f" Each cell patches {spec.window} consecutive blocks (rows: first-last block)."
    if corr:
        text += " Attribution vs activation patching (Pearson r): " + ", ".join(
            f"{k} {v:.3f}" for k, v in corr.items()) + "."
    data = {"n_pairs": len(clean), "metric": spec.metric, "direction": spec.direction,
            "answer_tokens": spec.answer_tokens, "first_token_answers": list(reduced),
            "clean_metric": first.clean.tolist(), "corrupt_metric": first.corrupt.tolist(),
            "grids": grids, "correlation": corr}
    if reduced:
        warnings.append(reduction_warning(reduced, 2 * len(clean)))
    if spec.edges != "none":
        data["edges"], edge_blocks = edge_circuits(model, clean, corrupt, metric, spec)
        blocks.extend(edge_blocks)
    return AnalysisResult(
        section="patching", title=f"Patching ({', '.join(spec.kinds)})",
        data=data, blocks=(Text(text=text), summary, *blocks), warnings=tuple(warnings),
    )


def edge_circuits(
    model: Any, clean: Sequence[Sequence[int]], corrupt: Sequence[Sequence[int]], metric: Any,
    spec: PatchingSpec,
) -> tuple[dict[str, Any], list[Any]]:
    """EAP / EAP-IG edge scores, the top edges and the faithfulness curve of top-k circuits."""
    from ...circuits import edge_attribution, faithfulness_curve
    from ...circuits.blocks import edge_table, faithfulness_plot

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


@register_analysis("patching", spec=PatchingSpec)
def run_patching(spec: PatchingSpec, ctx: RunContext) -> AnalysisResult:
    """Patching grids over the suite's clean/corrupt prompt pairs (Meng et al. 2022; Nanda 2023)."""
    from ...circuits import answer_ids

    ex = ctx.examples
    clean_idx, corrupt_idx = ex.pairs(pair_column=spec.pair_column, role_column=spec.role_column)
    model = ctx.model
    answers = ex.column(spec.answer_column)
    order = [*clean_idx.tolist(), *corrupt_idx.tolist()]
    ids, reduced = answer_ids(
        model, [answers[i] for i in order],
        [f"row {i} ({'clean' if k < len(clean_idx) else 'corrupt'})" for k, i in enumerate(order)],
        ex.vocab, answer_tokens=spec.answer_tokens,
    )
    return patching_grids(
        model, [ex.tokens[i] for i in clean_idx], [ex.tokens[i] for i in corrupt_idx], spec,
        answer=ids[:len(clean_idx)], foil=ids[len(clean_idx):], vocab=ex.vocab, reduced=reduced,
    )
