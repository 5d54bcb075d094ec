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

from ...errors import ConfigError
from ...report.blocks import Text
from ..registry import register_analysis
from ..result import AnalysisResult

__all__ = ["PATCH_KINDS", "PatchingSpec", "answer_token", "patching_grids", "position_labels",
           "run_patching"]

PATCH_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_post",
               "attn_z", "attn_q", "attn_k", "attn_v")
_HEAD_KINDS = ("attn_z", "attn_q", "attn_k", "attn_v")


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
        answer_column: each row's answer (token id, or text whose first token is used).
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

    def __post_init__(self) -> None:
        """Refuse unknown kinds, an empty kind list, bad sizes and a window without exact patching."""
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


def answer_token(model: Any, value: Any, vocab: Any = None) -> int:
    """A row's answer as a token id: an int as is, a string via the task vocabulary or tokenizer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if vocab is not None and str(value) in getattr(vocab, "tokens", ()):
        return int(vocab.id(str(value)))
    if getattr(model, "tokenizer", None) is None:
        raise ConfigError(
            f"answer {value!r} is text but the model has no tokenizer; give answers as token ids"
        )
    return int(model.to_tokens(str(value), prepend_bos=False)[0, 0])


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


def patching_grids(
    model: Any,
    clean: Sequence[Sequence[int]],
    corrupt: Sequence[Sequence[int]],
    spec: PatchingSpec,
    *,
    answer: Sequence[int],
    foil: Sequence[int],
    vocab: Any = None,
) -> AnalysisResult:
    """Patch every cell of each ``spec.kinds`` grid over the pairs; numbers, heatmaps and a table.

    ``answer``/``foil``: the clean and corrupt rows' answer token ids (one per pair). The
    report heatmaps show the normalised effect ``(m_patched - m_base) / (m_source - m_base)``
    with layers as rows and positions (labelled with the prompts' tokens) or heads as columns.
    """
    from functools import partial

    import torch

    from ...circuits import (
        activation_patching,
        answer_logprob,
        attribution_patching,
        logit_diff,
        patching_correlation,
    )
    from ...circuits.blocks import largest_effect_table, patching_view

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
            res = fn(model, clean, corrupt, metric, kind=kind, by=by, direction=spec.direction,
                     layers=layers, **kwargs)
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
            "clean_metric": first.clean.tolist(), "corrupt_metric": first.corrupt.tolist(),
            "grids": grids, "correlation": corr}
    if spec.edges != "none":
        data["edges"], edge_blocks = edge_circuits(model, clean, corrupt, metric, spec)
        blocks.extend(edge_blocks)
    return AnalysisResult(
        section="patching", title=f"Patching ({', '.join(spec.kinds)})",
        data=data, blocks=(Text(text=text), summary, *blocks),
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
def run_patching(spec: PatchingSpec, ctx: Any) -> AnalysisResult:
    """Patching grids over the suite's clean/corrupt prompt pairs (Meng et al. 2022; Nanda 2023)."""
    ex = ctx.examples
    clean_idx, corrupt_idx = ex.pairs(pair_column=spec.pair_column, role_column=spec.role_column)
    model = ctx.model
    answers = ex.column(spec.answer_column)
    return patching_grids(
        model, [ex.tokens[i] for i in clean_idx], [ex.tokens[i] for i in corrupt_idx], spec,
        answer=[answer_token(model, answers[i], ex.vocab) for i in clean_idx],
        foil=[answer_token(model, answers[i], ex.vocab) for i in corrupt_idx], vocab=ex.vocab,
    )
