"""``[[patching]]``: activation / attribution patching grids over clean-corrupt prompt pairs.

For each site kind, one grid over the suite's prompt pairs (rows paired by ``pair_column``,
``role_column`` = ``"clean"`` / ``"corrupt"``): residual-width kinds (``resid_pre``,
``attn_out``, ``mlp_out`` ...) by layer x position, head kinds (``attn_z`` ...) by layer x head
(the head at every position). Metric: ``logit(clean answer) - logit(corrupt answer)`` at the
last token (Wang et al. 2022) or the clean answer's log-probability. ``method``: exact
activation patching (:func:`probekit.circuits.activation_patching`), attribution patching
(:func:`probekit.circuits.attribution_patching`, Nanda 2023; Syed et al. 2023) or both with
their correlation. The same grids back ``probekit patch MODEL DATA`` (:mod:`probekit.suites.patch_cli`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...errors import ConfigError
from ...report.blocks import Column, Heatmap, Table, Text
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
    batch_size: int = 64

    def __post_init__(self) -> None:
        """Refuse unknown kinds, an empty kind list and a batch size below 1."""
        bad = [k for k in self.kinds if k not in PATCH_KINDS]
        if bad or not self.kinds:
            what = f"{bad[0]!r} is not a patching kind" if bad else "no kind given"
            raise ValueError(f"kinds {list(self.kinds)}: {what}; choose from {list(PATCH_KINDS)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size = {self.batch_size}: must be >= 1")
        if len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"kinds {list(self.kinds)} lists a kind twice; give each once")


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
    return {"kind": res.kind, "by": list(res.axes), "method": method,
            "values": res.values.tolist(), "normalized": res.normalized.tolist(),
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
        by = ("layer", "head") if kind in _HEAD_KINDS else ("layer", "pos")
        results = {}
        for method in methods:
            fn = activation_patching if method == "activation" else attribution_patching
            kwargs = {"batch_size": spec.batch_size} if method == "activation" else {}
            res = fn(model, clean, corrupt, metric, kind=kind, by=by, direction=spec.direction,
                     layers=layers, **kwargs)
            results[method] = res
            first = first or res
            row_labels = [f"L{x}" for x in res.labels["layer"]]
            col_labels = pos_labels if by[1] == "pos" else [f"H{h}" for h in res.labels["head"]]
            grids.append(_grid_dict(res, method, row_labels, col_labels))
            norm = res.normalized
            top = float(norm.nan_to_num(0.0).abs().max()) or 1.0
            blocks.append(Heatmap(
                title=f"{method} patching of {kind} ({spec.direction}): normalised effect",
                values=tuple(tuple(None if v != v else float(v) for v in r) for r in norm.tolist()),
                row_labels=tuple(row_labels), col_labels=tuple(col_labels),
                xlabel="position (token)" if by[1] == "pos" else "head",
                ylabel="layer", colorbar="normalised effect", vmin=-top, vmax=top, cmap="RdBu_r",
            ))
            flat = norm.flatten().nan_to_num(float("-inf"))
            best = int(flat.argmax())
            cell = [int(x) for x in torch.unravel_index(torch.tensor(best), norm.shape)]
            rows.append({"kind": kind, "method": method,
                         "cell": f"{row_labels[cell[0]]} x {col_labels[cell[1]]}",
                         "effect": float(norm[tuple(cell)])})
        if len(results) == 2:
            corr[kind] = patching_correlation(results["attribution"], results["activation"])
    if first is None:
        raise ConfigError("[patching] kinds is empty; name at least one site kind")
    summary = Table(
        title="largest effect per grid",
        columns=(Column(key="kind", header="site kind", fmt="", align="left"),
                 Column(key="method", header="method", fmt="", align="left"),
                 Column(key="cell", header="cell", fmt="", align="left"),
                 Column(key="effect", header="normalised effect")),
        rows=tuple(rows),
    )
    metric_name = ("logit(clean answer) - logit(corrupt answer)" if spec.metric == "logit_diff"
                   else "log p(clean answer)")
    text = (f"{len(clean)} prompt pairs; metric {metric_name} at the last token: clean "
            f"{float(first.clean.mean()):.3f}, corrupt {float(first.corrupt.mean()):.3f} (mean over "
            "pairs). Normalised effect = (m_patched - m_base) / (m_source - m_base); "
            "positions marked * hold different tokens in different pairs (pair 0's shown).")
    if corr:
        text += " Attribution vs activation patching (Pearson r): " + ", ".join(
            f"{k} {v:.3f}" for k, v in corr.items()) + "."
    return AnalysisResult(
        section="patching", title=f"Patching ({', '.join(spec.kinds)})",
        data={"n_pairs": len(clean), "metric": spec.metric, "direction": spec.direction,
              "clean_metric": first.clean.tolist(), "corrupt_metric": first.corrupt.tolist(),
              "grids": grids, "correlation": corr},
        blocks=(Text(text=text), summary, *blocks),
    )


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
