"""Accuracy a relation loses when its top neurons are zeroed, against random unit sets.

Liu et al. (2025), relation-specific neurons: the top-``k`` units by average precision for one
relation (:func:`~probekit.neurons.neuron_statistics` on selection prompts,
:func:`~probekit.neurons.select_neurons`) are deactivated (zeroed at every position,
:func:`~probekit.neurons.deactivation_ops`) and the first-token correctness of that relation's
evaluation facts is compared before and after: per fact ``drop = correct - correct_deactivated``
in ``{-1, 0, 1}``, its mean the accuracy drop. The control deactivates random unit sets with the
same per-site counts (:func:`~probekit.neurons.random_like`), every set scored in shared forward
passes (:func:`~probekit.neurons.first_token_correct_sets`), and averages their drops per fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import DataError
from ..sites import Site

__all__ = ["RelationDeactivation", "relation_deactivation"]


@dataclass(frozen=True, kw_only=True)
class RelationDeactivation:
    """Per evaluated fact: correctness before, the drop, the random-set control (or None).

    Attributes:
        base: ``(fact,)`` first-token correctness of the intact model.
        drop: ``(fact,)`` correct minus correct with the relation's units zeroed.
        control: ``(fact,)`` mean drop over the random unit sets, or None when not measured.
        n_units: units deactivated (over all sites).
    """

    base: np.ndarray
    drop: np.ndarray
    control: np.ndarray | None
    n_units: int


def _first_token(model: Any, answer: Any) -> int:
    if isinstance(answer, (int, np.integer)) and not isinstance(answer, bool):
        return int(answer)
    return int(model.to_tokens(str(answer), prepend_bos=False)[0, 0])


def relation_deactivation(
    model: Any, tokens: Sequence[Sequence[int]], relations: Sequence[str], answers: Sequence[Any],
    sites: Sequence[Site], *, relation: str, select: Sequence[int] | np.ndarray, evaluate: Sequence[int] | np.ndarray,
    k: int = 50, response: Literal["mean", "last"] = "mean", batch_size: int = 32,
    n_random: int = 10, seed: int = 0, control: bool = False,
) -> RelationDeactivation:
    """Drop in first-token accuracy on ``relation``'s facts when its top-``k`` AP units are zeroed.

    Args:
        model: the hooked model.
        tokens: every example's prompt token ids.
        relations: every example's relation.
        answers: every example's gold answer (a token id, or text whose first token is scored).
        sites: the sites whose units are ranked.
        relation: the relation whose units are deactivated and whose facts are scored.
        select: rows whose statistics select the units (every relation: AP is one against all).
        evaluate: rows scored (only those of ``relation`` are kept; >= 2 needed).
        k: units selected (:func:`~probekit.neurons.select_neurons`).
        response: ``"mean"`` or ``"last"`` position response (:func:`~probekit.neurons.neuron_statistics`).
        batch_size: prompts per forward pass.
        n_random: random unit sets of the control.
        seed: the random sets' seeds ``seed, seed + 1, ...``.
        control: also measure the random-set control.
    """
    from .deactivation import (
        FactSet,
        deactivation_ops,
        first_token_correct,
        first_token_correct_sets,
    )
    from .selection import random_like, select_neurons
    from .statistics import neuron_statistics

    stats = neuron_statistics(model, [tokens[i] for i in select], [relations[i] for i in select],
                              list(sites), response=response, batch_size=batch_size)
    units = select_neurons(stats, relation, k=k)
    idx = [i for i in evaluate if relations[i] == relation]
    if len(idx) < 2:
        raise DataError(f"{len(idx)} evaluated facts of relation {relation!r}; need >= 2")
    facts = FactSet(tuple(tuple(tokens[i]) for i in idx), tuple(relations[i] for i in idx),
                    tuple(str(answers[i]) for i in idx),
                    tuple(_first_token(model, answers[i]) for i in idx))

    def correct(unit_set: Any) -> np.ndarray:
        ops = deactivation_ops(unit_set, method="zero")
        return first_token_correct(model, facts, ops, batch_size=batch_size).astype(float)

    base = correct(None)
    drop = base - correct(units)
    ctl = None
    if control:
        widths = {s: int(stats.ap[s].shape[0]) for s in stats.sites}
        from ..stats.permutation import check_n_permutations

        check_n_permutations(n_random, name="n_random")
        sets = [random_like(units, widths, seed=seed + j) for j in range(n_random)]
        # all random sets in shared forward passes, each set's ops on its own rows
        rand = first_token_correct_sets(model, facts, [deactivation_ops(u, method="zero") for u in sets],
                                        batch_size=batch_size).astype(float)
        ctl = (base[None, :] - rand).mean(axis=0)
    return RelationDeactivation(base=base, drop=drop, control=ctl, n_units=len(units))
