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
from dataclasses import dataclass, field
from typing import Annotated, Literal

from ...context import RunContext
from ...neurons.config import DeactivationConfig
from ...util.constraints import Distinct
from ..registry import register_analysis
from ..result import AnalysisResult, Hypothesis


@dataclass(frozen=True, kw_only=True)
class NeuronsSpec(DeactivationConfig):
    """``[[neurons]]`` keys: :class:`~probekit.neurons.DeactivationConfig`'s options plus the data's.

    Every deactivation option (k, fraction, method, n_random, n_spread, shares, n_single,
    generation, post, max_new_tokens, batch_size) is a key, declared and validated once in
    :class:`DeactivationConfig`; ``alpha`` and ``seed`` are the suite's ``[stats]`` ones (not
    keys). ``n_random``'s default here is the fewest sets with which Holm over the relations can
    reach ``[stats] alpha`` (e.g. 139 for 7 relations at 0.05); ``k`` replaces ``fraction``.

    Attributes:
        object_column: gold objects (aliases separated by ``|``; the answer's token id for a
            model without a tokenizer, e.g. a testbed checkpoint).
        kinds: site kinds ranked together at every layer (default: ``mlp_pre`` and, for gated
            MLPs, ``mlp_pre_linear`` — the lineage code's units).
        response: ``mean`` over prompt tokens (the paper's) or ``last`` token.
    """

    object_column: str = "object"
    kinds: Annotated[tuple[str, ...], Distinct()] = ()
    response: Literal["mean", "last"] = "mean"
    alpha: float = field(default=0.05, init=False)
    seed: int = field(default=0, init=False)


@register_analysis("neurons", spec=NeuronsSpec)
def run_neurons(spec: NeuronsSpec, ctx: RunContext) -> AnalysisResult:
    """Rank units by AP per relation, deactivate them, test against matched random sets."""
    from ...neurons import relation_neuron_study
    from ...neurons.blocks import study_blocks, study_warnings
    from ...util.constraints import base_config

    cfg = base_config(spec, DeactivationConfig, alpha=ctx.stats.alpha, seed=ctx.stats.seed,
                      fraction=None if spec.k is not None else spec.fraction)
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
