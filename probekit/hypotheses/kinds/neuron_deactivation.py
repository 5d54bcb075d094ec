"""``measure = "neuron_deactivation"``: accuracy lost when a relation's neurons are zeroed (Liu et al. 2025)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class NeuronDeactivationSpec:
    """Keys of a ``neuron_deactivation`` claim.

    ``relation``: the relation whose top-``k`` units (zeroed at every position, Liu et al.'s
    default) by AP (:func:`probekit.neurons.
    select_neurons`, statistics on ``select_split``) are deactivated; ``relation_column``: each
    example's relation (default ``[data] label``); ``answer_column``: the gold answer (token id,
    or text whose first token is used); the effect is scored on the ``split`` facts of
    ``relation`` (first-token correctness); control: ``n_random`` random unit sets of the same
    per-site sizes.
    """

    relation: str
    sites: tuple[str, ...]
    k: int = 50
    answer_column: str = "answer"
    relation_column: str | None = None
    select_split: str = "train"
    split: str = "test"
    response: Literal["mean", "last"] = "mean"
    n_random: int = 10
    batch_size: int = 32


@register_measurement("neuron_deactivation", spec=NeuronDeactivationSpec, control=True)
def neuron_deactivation(spec: NeuronDeactivationSpec, ctx: Any, *, control: bool = False) -> Measurement:
    """Per fact: correct without minus correct with the relation's units deactivated (in {-1, 0, 1}).

    The mean is the accuracy drop. Control (paired per fact): the mean drop over ``n_random``
    random unit sets with the set's per-site counts (:func:`probekit.neurons.random_like`),
    scored many sets per forward pass (:func:`probekit.neurons.first_token_correct_sets`).
    """
    import numpy as np

    from ...errors import DataError
    from ...neurons import (
        FactSet,
        deactivation_ops,
        first_token_correct,
        first_token_correct_sets,
        neuron_statistics,
        random_like,
        select_neurons,
    )
    from ...sites import Site

    model, ex = ctx.model, ctx.examples
    rel = [str(r) for r in ex.column(spec.relation_column or ctx.suite.data.label)]
    answers = ex.column(spec.answer_column)
    sites = [Site.parse(s) for s in spec.sites]
    sel = ex.split(spec.select_split)
    stats = neuron_statistics(model, [ex.tokens[i] for i in sel], [rel[i] for i in sel], sites,
                              response=spec.response, batch_size=spec.batch_size)
    units = select_neurons(stats, spec.relation, k=spec.k)
    idx = [i for i in ex.split(spec.split) if rel[i] == spec.relation]
    if len(idx) < 2:
        raise DataError(f"{len(idx)} {spec.split} facts of relation {spec.relation!r}; need >= 2")

    def first(v: Any) -> int:
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return int(v)
        return int(model.to_tokens(str(v), prepend_bos=False)[0, 0])

    facts = FactSet(tuple(tuple(ex.tokens[i]) for i in idx), tuple(rel[i] for i in idx),
                    tuple(str(answers[i]) for i in idx), tuple(first(answers[i]) for i in idx))

    def correct(unit_set: Any) -> np.ndarray:
        ops = deactivation_ops(unit_set, method="zero")
        return first_token_correct(model, facts, ops, batch_size=spec.batch_size).astype(float)

    base = correct(None)
    drop = base - correct(units)
    ctl = None
    if control:
        widths = {s: int(stats.ap[s].shape[0]) for s in stats.sites}
        sets = [random_like(units, widths, seed=ctx.stats.seed + j) for j in range(spec.n_random)]
        # all random sets in shared forward passes, each set's ops on its own rows
        rand = first_token_correct_sets(model, facts, [deactivation_ops(u, method="zero") for u in sets],
                                        batch_size=spec.batch_size).astype(float)
        ctl = (base[None, :] - rand).mean(axis=0)
    return Measurement(
        metric="accuracy drop", values=drop, control=ctl, unit=f"{spec.split} facts",
        method=f"zeroing the top-{len(units)} AP units of {spec.relation!r} "
        f"at {[s.key for s in sites]} (selected on {len(sel)} {spec.select_split} prompts); "
        f"first-token accuracy {base.mean():.3f} before",
        details={"base_accuracy": float(base.mean()), "n_units": len(units)},
    )
