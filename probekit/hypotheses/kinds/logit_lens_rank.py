"""``measure = "logit_lens_rank"``: is the answer top-k under the logit lens at a layer? (nostalgebraist 2020)."""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import check_layer, label_name
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class LogitLensRankSpec:
    """Keys of a ``logit_lens_rank`` claim.

    ``layer``: the block whose output is decoded (final norm + unembedding) at each example's
    last token; ``answer_column``: the answer (token id, or text whose first token is used;
    default ``[data] label``); ``top_k``: a unit scores 1 when the answer's rank is below it.
    """

    layer: int
    split: str = "test"
    answer_column: str | None = None
    top_k: int = 1


@register_measurement("logit_lens_rank", spec=LogitLensRankSpec)
def logit_lens_rank(spec: LogitLensRankSpec, ctx: Context) -> Measurement:
    """Share of examples whose answer ranks in the top ``top_k`` under the logit lens at ``layer``."""
    import numpy as np
    import torch

    from ...capture.answers import answer_token
    from ...circuits import logit_lens

    model, ex = ctx.model, ctx.examples
    check_layer(model, spec.layer, spec.top_k, kind="logit_lens_rank")
    idx = ex.split(spec.split)
    tokens = [ex.tokens[i] for i in idx]
    col = ex.column(label_name(ctx, spec.answer_column))
    answers = torch.tensor([answer_token(model, col[i], ex.vocab, where=f"row {i}") for i in idx])
    res = logit_lens(model, tokens, answers, layers=[spec.layer])
    last = torch.tensor([len(t) - 1 for t in tokens])
    rank = res.rank[torch.arange(len(tokens)), 0, last, 0].numpy()
    return Measurement(
        metric=f"top-{spec.top_k} rate", values=(rank < spec.top_k).astype(np.float64),
        unit=f"{spec.split} examples",
        method=f"logit lens after block {spec.layer} at the last token",
        details={"median_rank": float(np.median(rank)), "mean_rank": float(rank.mean())},
    )
