"""``measure = "neuron_deactivation"``: accuracy lost when a relation's neurons are zeroed (Liu et al. 2025).

:func:`probekit.neurons.relation_deactivation.relation_deactivation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ...context import Context
from ...neurons.config import RandomSets, TopK
from ...util.constraints import Ge, Validated
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class NeuronDeactivationSpec(Validated):
    """Keys of a ``neuron_deactivation`` claim.

    ``relation``: the relation whose top-``k`` units (zeroed at every position, Liu et al.'s
    default) by AP (:func:`probekit.neurons.
    select_neurons`, statistics on ``select_split``) are deactivated; ``relation_column``: each
    example's relation (default ``[data] label``); ``answer_column``: the gold answer (token id,
    or text whose first token is used); the effect is scored on the ``split`` facts of
    ``relation`` (first-token correctness); control: ``n_random`` random unit sets of the same
    per-site sizes. ``k`` and ``n_random`` take their rules from :mod:`probekit.neurons.config`
    (``TopK``, ``RandomSets``: at least 5 random sets, the method's control), declared once for
    this claim and the ``[[neurons]]`` experiments.
    """

    relation: str
    sites: tuple[str, ...]
    k: TopK = 50
    answer_column: str = "answer"
    relation_column: str | None = None
    select_split: str = "train"
    split: str = "test"
    response: Literal["mean", "last"] = "mean"
    n_random: RandomSets = 10
    batch_size: Annotated[int, Ge(1)] = 32


@register_measurement("neuron_deactivation", spec=NeuronDeactivationSpec, control=True)
def neuron_deactivation(spec: NeuronDeactivationSpec, ctx: Context, *, control: bool = False) -> Measurement:
    """Per fact: correct without minus correct with the relation's units deactivated (in {-1, 0, 1}).

    The mean is the accuracy drop; control (paired per fact): the mean drop over ``n_random``
    random unit sets with the set's per-site counts.
    """
    from ...neurons.relation_deactivation import relation_deactivation
    from ...sites import Site
    from ..keys import label_name

    ex = ctx.examples
    sites = [Site.parse(s) for s in spec.sites]
    sel = ex.split(spec.select_split)
    res = relation_deactivation(
        ctx.model, ex.tokens, [str(r) for r in ex.column(label_name(ctx, spec.relation_column))],
        ex.column(spec.answer_column), sites, relation=spec.relation, select=sel,
        evaluate=ex.split(spec.split), k=spec.k, response=spec.response,
        batch_size=spec.batch_size, n_random=spec.n_random, seed=ctx.stats.seed, control=control)
    return Measurement(
        metric="accuracy drop", values=res.drop, control=res.control, unit=f"{spec.split} facts",
        method=f"zeroing the top-{res.n_units} AP units of {spec.relation!r} "
        f"at {[s.key for s in sites]} (selected on {len(sel)} {spec.select_split} prompts); "
        f"first-token accuracy {res.base.mean():.3f} before",
        details={"base_accuracy": float(res.base.mean()), "n_units": res.n_units},
    )
