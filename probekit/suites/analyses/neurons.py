"""``[[neurons]]``: relation-specific neurons and their deactivation (Liu et al. 2025, EMNLP).

Uses the suite's ``[data]``: the label column is the relation, ``object_column`` the gold
object (``|``-separated aliases); neurons are ranked by AP on the ``train`` split (the
identification prompts) and deactivated on the ``test`` split (disjoint subjects). Reports each
relation's baseline accuracy, the relation x relation accuracy-change matrix with the matched
random-set spread, cumulativity, and per relation the test "r's neurons hurt r more than random
sets of the same per-site size do" (Holm-adjusted over relations), on the first token, and with
``generation`` / ``post`` also on greedy generation / at ``mlp_post`` (one family each).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from ...context import RunContext
from ..registry import register_analysis
from ..result import AnalysisResult, Hypothesis


@dataclass(frozen=True, kw_only=True)
class NeuronsSpec:
    """``[[neurons]]`` keys.

    Attributes:
        object_column: gold objects (aliases separated by ``|``; the answer's token id for a
            model without a tokenizer, e.g. a testbed checkpoint).
        fraction / k: neurons per relation, as a share of all candidate units or a count.
        kinds: site kinds ranked together at every layer (default: ``mlp_pre`` and, for gated
            MLPs, ``mlp_pre_linear`` — the lineage code's units).
        response: ``mean`` over prompt tokens (the paper's) or ``last`` token.
        method: deactivate to ``zero`` (the paper's) or each unit's ``mean`` response.
        n_random: matched random sets per relation, scored on r's test facts (default: the
            fewest with which Holm over the relations can reach ``[stats] alpha``, e.g. 139 for
            7 relations at 0.05).
        n_spread: how many of them are also scored on every relation (the matrix's spread).
        generation: also score greedy generation (the paper's metric; slower).
        post: also deactivate the same neurons at ``mlp_post`` (zero ablation; neurons.md).
    """

    object_column: str = "object"
    fraction: float | None = 0.001
    k: int | None = None
    kinds: tuple[str, ...] = ()
    response: Literal["mean", "last"] = "mean"
    method: Literal["zero", "mean"] = "zero"
    n_random: int | None = None
    n_spread: int = 19
    shares: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0)
    generation: bool = True
    post: bool = False
    max_new_tokens: int = 8
    batch_size: int = 32


@register_analysis("neurons", spec=NeuronsSpec)
def run_neurons(spec: NeuronsSpec, ctx: RunContext) -> AnalysisResult:
    """Rank units by AP per relation, deactivate them, test against matched random sets."""
    from ...neurons import DeactivationConfig, relation_neuron_study
    from ...neurons.blocks import study_blocks, study_warnings

    cfg = DeactivationConfig(
        k=spec.k, fraction=None if spec.k is not None else spec.fraction, method=spec.method,
        n_random=spec.n_random, n_spread=spec.n_spread, alpha=ctx.stats.alpha,
        shares=spec.shares, generation=spec.generation, post=spec.post,
        max_new_tokens=spec.max_new_tokens, batch_size=spec.batch_size, seed=ctx.stats.seed,
    )
    study = relation_neuron_study(ctx, object_column=spec.object_column, kinds=spec.kinds,
                                  response=spec.response, config=cfg)
    ctx.forward_passes += 1
    res, alpha = study.experiments, ctx.stats.alpha
    rels = list(res.relations)

    def tested(tests, p_holm, metric: str, how: str) -> tuple[Hypothesis, ...]:
        return () if not tests else tuple(
            Hypothesis.from_test(
                dataclasses.replace(t, p_value=p, method=t.method + f"; Holm over {len(rels)} relations"),
                name=f"deactivating the {r} neurons{how} hurts {r} facts more than matched random sets",
                metric=metric, alpha=alpha, outcome="relation-specific",
            )
            for r, t, p in zip(rels, tests, p_holm, strict=True)
        )

    hyps = (tested(res.tests, res.p_holm, "first-token accuracy drop", "")
            + tested(res.tests_generation, res.p_holm_generation,
                     "greedy-generation accuracy drop", " (scored by greedy generation)")
            + tested(res.tests_post, res.p_holm_post, "first-token accuracy drop", " at mlp_post"))
    return AnalysisResult(
        section="neurons",
        title=("Relation-specific neurons (Liu et al. 2025), relations from column "
               f"{ctx.suite.data.label!r}"),
        data={"statistics": study.statistics.to_dict(), "experiments": res.to_dict()},
        hypotheses=hyps,
        blocks=tuple(study_blocks(study, response=spec.response, method=spec.method)),
        warnings=tuple(study_warnings(res, alpha=alpha)),
    )
