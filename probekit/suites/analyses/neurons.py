"""``[[neurons]]``: relation-specific neurons and their deactivation (Liu et al. 2025, EMNLP).

Uses the suite's ``[data]``: the label column is the relation, ``object_column`` the gold
object (``|``-separated aliases); neurons are ranked by AP on the ``train`` split (the
identification prompts) and deactivated on the ``test`` split (disjoint subjects). Reports each
relation's baseline accuracy, the relation x relation accuracy-change matrix with the matched
random-set spread, cumulativity, and per relation the test "r's neurons hurt r more than random
sets of the same per-site size do" (Holm-adjusted over relations).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from ...context import RunContext
from ...errors import ConfigError, DataError
from ...report.blocks import Text
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


STORE_FORMAT = 2  # identification-store layout of neuron_statistics (256 rows per shard, prompts)


@register_analysis("neurons", spec=NeuronsSpec)
def run_neurons(spec: NeuronsSpec, ctx: RunContext) -> AnalysisResult:
    """Rank units by AP per relation, deactivate them, test against matched random sets."""
    from ...fingerprint import dataset_fingerprint
    from ...neurons import DeactivationConfig, FactSet, relation_neuron_experiments
    from ...neurons.blocks import ap_by_layer_plot, experiment_blocks
    from ...neurons.statistics import neuron_statistics
    from ...neurons.study import candidate_sites
    from ...sites import Site
    from ...stats.permutation import n_permutations_for
    from ...util.io import sha256_bytes

    ex = ctx.examples
    label = ctx.suite.data.label
    if spec.object_column not in ex.columns:
        raise ConfigError(
            f"{ctx.suite.source}: [[neurons]] object_column {spec.object_column!r} is not a "
            f"column of [data] (have {sorted(ex.columns)})"
        )
    model = ctx.model
    if spec.kinds:
        sites = tuple(Site(layer, k) for layer in range(model.cfg.n_layers) for k in spec.kinds)
    else:
        sites = candidate_sites(model)
    for site in sites:
        site.validate(model)
    rel = [str(v) for v in ex.column(label)]
    gold = [str(v) for v in ex.column(spec.object_column)]

    tok = getattr(model, "tokenizer", None)

    def first_token(g: str) -> int:
        alias = g.split("|")[0]
        if tok is None:  # a testbed model: the object column holds the answer's token id
            if not alias.lstrip("-").isdigit():
                raise ConfigError(
                    f"{ctx.suite.source}: the model has no tokenizer, so [[neurons]] needs the "
                    f"object column {spec.object_column!r} as token ids; got {alias!r}"
                )
            return int(alias)
        return int(tok(" " + alias, add_special_tokens=False)["input_ids"][0])

    def facts(split: str) -> FactSet:
        idx = ex.split(split)
        first = [first_token(gold[i]) for i in idx]
        return FactSet(tuple(tuple(ex.tokens[i]) for i in idx), tuple(rel[i] for i in idx),
                       tuple(gold[i] for i in idx), tuple(first))

    if "subject" in ex.columns:
        subj = [str(v) for v in ex.column("subject")]
        shared = {subj[i] for i in ex.split("train")} & {subj[i] for i in ex.split("test")}
        if shared:
            raise DataError(
                f"{ctx.suite.source}: [[neurons]] identification and test facts share subjects "
                f"{sorted(shared)[:5]}; split the facts by subject"
            )
    ident, test = facts("train"), facts("test")
    # STORE_FORMAT: bump when the store's layout changes (shard size, prompt columns), so that a
    # store left by an older probekit is not found under the same key and refused as different
    key = sha256_bytes(repr((ctx.model_fingerprint, dataset_fingerprint(list(ident.tokens)),
                             [s.key for s in sites], spec.response, STORE_FORMAT)).encode())[:20]
    stats = neuron_statistics(
        model, ident.tokens, ident.relations, sites, response=spec.response,
        store_dir=ctx.cache_dir / "neurons" / key, batch_size=spec.batch_size,
    )
    ctx.forward_passes += 1
    cfg = DeactivationConfig(
        k=spec.k, fraction=None if spec.k is not None else spec.fraction, method=spec.method,
        n_random=spec.n_random, n_spread=spec.n_spread, alpha=ctx.stats.alpha,
        shares=spec.shares, generation=spec.generation, post=spec.post,
        max_new_tokens=spec.max_new_tokens, batch_size=spec.batch_size, seed=ctx.stats.seed,
    )
    res = relation_neuron_experiments(model, stats, test, cfg, progress=ctx.progress)
    rels = list(res.relations)
    alpha = ctx.stats.alpha
    hyps = tuple(
        Hypothesis.from_test(
            dataclasses.replace(t, p_value=p, method=t.method + f"; Holm over {len(rels)} relations"),
            name=f"deactivating the {r} neurons hurts {r} facts more than matched random sets",
            metric="first-token accuracy drop", alpha=alpha, outcome="relation-specific",
        )
        for r, t, p in zip(rels, res.tests, res.p_holm, strict=True)
    )
    n_set = len(next(iter(res.sets.values())))
    table, heat, cumulative = experiment_blocks(res)
    layers, _ = stats.max_ap_by_layer()
    ap_plot = ap_by_layer_plot(stats)
    notes = [Text(text=(
        f"{n_set} neurons per relation ({stats.n_units} candidate units: "
        f"{', '.join(sorted({s.kind for s in sites}))} of {len(layers)} layers), ranked by the "
        f"average precision of their {spec.response} response on {len(ident.tokens)} "
        f"identification prompts; deactivated ({spec.method}) at every position on "
        f"{len(test.tokens)} test prompts with disjoint subjects. Controls: {res.n_random} "
        "random sets with the same number of units per layer and module (scored on r's facts; "
        f"the first {res.random_change.shape[1]} on every relation, for the spread), and the "
        "lowest-AP units."
    ))]
    warnings = []
    floor = min(1.0, len(rels) / (res.n_random + 1))
    if floor > alpha:
        need = n_permutations_for(alpha, len(rels))
        warnings.append(
            f"with {res.n_random} random sets the smallest Holm-adjusted p over {len(rels)} "
            f"relations is {floor:.3g} > alpha = {alpha}: no relation can be significant; use "
            f"n_random >= {need} or leave it unset (raw p-values are shown too)"
        )
    weak = [r for i, r in enumerate(rels) if float(res.baseline_first[i]) < 0.2]
    if weak:
        warnings.append(
            f"the model recalls few test facts of {weak} (first-token accuracy < 20%), so a "
            "drop there is bounded by a small baseline"
        )
    if res.interference:
        notes.append(Text(text=(
            f"Interference (gains beyond every one of the {res.random_change.shape[1]} random "
            "sets scored on every relation): ") + "; ".join(
            f"{a} off -> {b} {100 * v:+.0f} pts" for a, b, v in res.interference)))
    return AnalysisResult(
        section="neurons",
        title=f"Relation-specific neurons (Liu et al. 2025), relations from column {label!r}",
        data={"statistics": stats.to_dict(), "experiments": res.to_dict()},
        hypotheses=hyps,
        blocks=(*notes, table, heat, cumulative, ap_plot),
        warnings=tuple(warnings),
    )
