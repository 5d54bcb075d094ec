"""``measure = "bridge_entity_rank"``: is the bridge entity decodable at r1? (Wang et al. 2024).

Two-hop queries ``(h, r1, r2) -> t``, bridge ``b = r1(h)`` (``kg_composition`` columns ``bridge``,
``t``): :func:`probekit.kg.bridge_entity_lens`, the share of queries whose target ranks in
the top ``top_k`` after block ``layer``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...context import Context
from ..keys import check_layer, two_hop_rows
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class BridgeEntityRankSpec:
    """Keys of a ``bridge_entity_rank`` claim.

    ``layer``: the block whose output is decoded; ``split``: ``"test"`` (the suite's
    ``test_split``, e.g. ``test_id``) or an OOD split name; ``target``: ``"bridge"`` (at
    ``position``, default 1 = r1) or ``"answer"`` (at the last token); ``top_k``: a query scores
    1 when the target's rank is below it; ``bridge_column`` / ``answer_column``: entity indices,
    turned into tokens with ``entity_token`` (a format string of the task vocabulary).
    """

    layer: int
    split: str = "test"
    target: Literal["bridge", "answer"] = "bridge"
    position: int = 1
    top_k: int = 1
    bridge_column: str = "bridge"
    answer_column: str = "t"
    entity_token: str = "<e{}>"


@register_measurement("bridge_entity_rank", spec=BridgeEntityRankSpec,
                      needs_testbed="a kg_composition task's entity tokens (<e{}> of its vocabulary)")
def bridge_entity_rank(spec: BridgeEntityRankSpec, ctx: Context) -> Measurement:
    """Share of queries whose bridge (at r1) or answer (last token) is top-``k`` after ``layer``."""
    from ...kg import bridge_entity_lens, entity_token_lookup, kg_column
    from ...kg.blocks import bridge_lens_plot

    check_layer(ctx.model, spec.layer, spec.top_k, kind="bridge_entity_rank")
    ex = ctx.examples
    bridges = kg_column(ex, spec.bridge_column, kind="bridge_entity_rank")
    answers = kg_column(ex, spec.answer_column, kind="bridge_entity_rank")
    token = entity_token_lookup(ex, spec.entity_token, kind="bridge_entity_rank")
    idx = two_hop_rows(ctx, spec.split, bridges, column=spec.bridge_column)
    res = bridge_entity_lens(ctx.model, [ex.tokens[i] for i in idx],
                             [token(bridges[i]) for i in idx], [token(answers[i]) for i in idx],
                             position=spec.position)
    rank = res.bridge_rank if spec.target == "bridge" else res.answer_rank
    where = f"position {spec.position}" if spec.target == "bridge" else "the last token"
    return Measurement(
        metric=f"{spec.target} top-{spec.top_k} rate",
        values=(rank[:, spec.layer] < spec.top_k).double().numpy(),
        unit=f"{spec.split} two-hop queries",
        method=f"logit lens after block {spec.layer} at {where} ({spec.target} entity)",
        details={"layers": res.layers,
                 "bridge_top_k_by_layer": res.bridge_top_k(spec.top_k).tolist(),
                 "bridge_mrr_by_layer": res.bridge_mrr().tolist(),
                 "answer_top_k_by_layer": res.answer_top_k(spec.top_k).tolist(),
                 "median_rank": float(rank[:, spec.layer].double().median())},
        blocks=(bridge_lens_plot(res, top_k=spec.top_k, marker=spec.layer, title=f"logit lens on "
                                 f"{spec.split!r} queries: top-{spec.top_k} rate per block"),),
    )
