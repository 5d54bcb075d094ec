"""Relation neurons on a suite's examples: facts, candidate units, statistics and experiments.

The suite entry point of the method package (the ``[[neurons]]`` analysis): the label column is
the relation, ``object_column`` the gold object (``|``-separated aliases); units are ranked by
average precision on the ``train`` split (the identification prompts, statistics kept in a store
under the context's cache) and deactivated on the ``test`` split, whose subjects must differ
(Liu et al. 2025, EMNLP).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..context import RunContext
from ..errors import ConfigError, DataError
from ..sites import Site
from .deactivation import FactSet
from .experiments import DeactivationConfig, RelationNeuronResult
from .statistics import NeuronStatistics

__all__ = ["STORE_FORMAT", "RelationNeuronStudy", "relation_facts", "relation_neuron_study"]

#: Identification-store layout of :func:`neuron_statistics` (256 rows per shard, prompts): bump it
#: when the layout changes, so a store left by an older probekit is not found under the same key.
STORE_FORMAT = 2


@dataclass(frozen=True, kw_only=True)
class RelationNeuronStudy:
    """What :func:`relation_neuron_study` ran and found.

    Attributes:
        sites: the candidate sites ranked together.
        identification, test: the fact sets units were ranked on / deactivated on.
        statistics: per-unit selection statistics (AP per relation) on the identification facts.
        experiments: the deactivation experiments on the test facts.
    """

    sites: tuple[Site, ...]
    identification: FactSet
    test: FactSet
    statistics: NeuronStatistics
    experiments: RelationNeuronResult


def relation_facts(
    ctx: RunContext, split: str, *, relation_column: str, object_column: str
) -> FactSet:
    """The ``split``'s prompts with their relation and gold object as a :class:`FactSet`.

    The gold's first token is that of ``" " + first alias`` under the model's tokenizer; a model
    without one (a testbed checkpoint) reads the object column as the answer's token id.

    Raises:
        ConfigError: the object column is missing, or is not token ids for a tokenizer-less model.
    """
    ex, model, src = ctx.examples, ctx.model, ctx.suite.source
    if object_column not in ex.columns:
        raise ConfigError(f"{src}: [[neurons]] object_column {object_column!r} is not a "
                          f"column of [data] (have {sorted(ex.columns)})")
    rel = [str(v) for v in ex.column(relation_column)]
    gold = [str(v) for v in ex.column(object_column)]
    tok = getattr(model, "tokenizer", None)

    def first_token(g: str) -> int:
        alias = g.split("|")[0]
        if tok is None:  # a testbed model: the object column holds the answer's token id
            if not alias.lstrip("-").isdigit():
                raise ConfigError(
                    f"{src}: the model has no tokenizer, so [[neurons]] needs the "
                    f"object column {object_column!r} as token ids; got {alias!r}"
                )
            return int(alias)
        return int(tok(" " + alias, add_special_tokens=False)["input_ids"][0])

    idx = ex.split(split)
    return FactSet(tuple(tuple(ex.tokens[i]) for i in idx), tuple(rel[i] for i in idx),
                   tuple(gold[i] for i in idx), tuple(first_token(gold[i]) for i in idx))


def relation_neuron_study(
    ctx: RunContext, *, object_column: str, kinds: tuple[str, ...] = (),
    response: str = "mean", config: DeactivationConfig,
) -> RelationNeuronStudy:
    """Rank units by AP per relation on ``train``, deactivate them on ``test`` (Liu et al. 2025).

    ``kinds``: site kinds ranked together at every layer (default :func:`candidate_sites`);
    ``response``: ``mean`` over prompt tokens or ``last`` token. The identification statistics
    are kept in ``<cache>/neurons/<key>`` (model fingerprint, identification prompts, sites,
    response, :data:`STORE_FORMAT`), so a rerun reads them; the experiments' finished blocks
    (baseline, one per relation) in ``<cache>/neurons/<key>-experiments``, so an interrupted run
    resumes at the relation it was on (:mod:`.resume`).

    Raises:
        DataError: identification and test facts share a subject (column ``subject``).
    """
    from ..fingerprint import dataset_fingerprint
    from ..util.io import sha256_bytes
    from .experiments import relation_neuron_experiments
    from .statistics import neuron_statistics
    from .study import candidate_sites

    ex, model = ctx.examples, ctx.model
    label = ctx.suite.data.label
    if kinds:
        sites = tuple(Site(layer, k) for layer in range(model.cfg.n_layers) for k in kinds)
    else:
        sites = candidate_sites(model)
    for site in sites:
        site.validate(model)
    if "subject" in ex.columns:
        subj = [str(v) for v in ex.column("subject")]
        shared = {subj[i] for i in ex.split("train")} & {subj[i] for i in ex.split("test")}
        if shared:
            raise DataError(
                f"{ctx.suite.source}: [[neurons]] identification and test facts share subjects "
                f"{sorted(shared)[:5]}; split the facts by subject"
            )
    ident, test = (relation_facts(ctx, split, relation_column=label, object_column=object_column)
                   for split in ("train", "test"))
    key = sha256_bytes(repr((ctx.model_fingerprint, dataset_fingerprint(list(ident.tokens)),
                             [s.key for s in sites], response, STORE_FORMAT)).encode())[:20]
    stats = neuron_statistics(
        model, ident.tokens, ident.relations, sites, response=response,
        store_dir=ctx.cache_dir / "neurons" / key, batch_size=config.batch_size,
    )
    res = relation_neuron_experiments(model, stats, test, config, progress=ctx.progress,
                                      resume_dir=ctx.cache_dir / "neurons" / f"{key}-experiments")
    return RelationNeuronStudy(sites=sites, identification=ident, test=test, statistics=stats,
                               experiments=res)
