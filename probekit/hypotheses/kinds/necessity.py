"""``measure = "necessity"``: accuracy lost when a marker's substrate is ablated (or steered), vs a random one.

:func:`probekit.hypotheses.necessity.necessity` on a
:func:`~probekit.hypotheses.necessity.probe_direction_substrate` (amnesic probing / INLP) or a
:func:`~probekit.hypotheses.necessity.unit_substrate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ...context import Context
from ...stats.limits import MAX_PERMUTATIONS
from ...util.constraints import Finite, Ge, Le, Validated
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class NecessitySpec(Validated):
    """Keys of a ``necessity`` claim (or diagnosis marker).

    ``substrate``: ``"probe_direction"`` (the span of ``n_directions`` INLP rounds of logistic
    probes, inverse regularisation ``C``, for ``label`` at ``site``), ``"units"`` (``units``,
    indices of ``site``'s last axis) or ``"key_frequencies"`` (the ``k`` key Fourier frequencies
    of the residue tokens ``0..p-1``'s embeddings, removed; ``site`` is ignored: ``embed``). The
    first two are found on ``select_split`` (its activations at the
    ``[capture] positions``), ablated at every prompt position by ``method`` (``"mean"``: the
    selection split's mean; ``"zero"``; ``"resample"``, directions only), and the first-token
    correctness of ``answer_column`` (a token id, or text whose first token is scored) is compared
    on ``split`` (e.g. an OOD split) and, for the report, on ``also_split``. Control: ``n_random``
    random substrates of the same size. ``excess = true`` makes each value the drop minus the
    random substrates' drop (a diagnosis marker reads no control: this builds it in).

    ``method = "steer"`` steers instead of ablating (activation addition along the substrate,
    :mod:`probekit.hypotheses.necessity`): ``strength`` standard deviations (finite, may be
    negative; 0 is the identity) along the class-mean difference toward class ``steer_toward``
    within the probe directions' span (default the last of the sorted label values), or added to
    each of the ``units``; control: random directions with a step of the same norm (random unit
    sets). ``key_frequencies`` cannot be steered. ``strength`` and ``steer_toward`` are read by
    ``method = "steer"`` only; the details' ``ablated_accuracy`` is then the steered accuracy.
    """

    substrate: Literal["probe_direction", "units", "key_frequencies"] = "probe_direction"
    site: str = ""
    label: str | None = None
    n_directions: int = 1
    C: float = 1.0
    units: tuple[int, ...] = ()
    p: int = 0
    k: int = 5
    method: Literal["mean", "zero", "resample", "steer"] = "mean"
    answer_column: str = "answer"
    select_split: str = "train"
    split: str = "test"
    also_split: str | None = None
    n_random: Annotated[int, Ge(1), Le(MAX_PERMUTATIONS)] = 10
    excess: bool = False
    batch_size: int = 64
    strength: Annotated[float, Finite()] = 4.0
    steer_toward: int | str | bool | None = None

    def __post_init__(self) -> None:
        """Check the fields' rules, then that ``method = "steer"`` has a substrate to push along."""
        super().__post_init__()
        if self.method == "steer" and self.substrate == "key_frequencies":
            from ...errors import ConfigError

            raise ConfigError("necessity method 'steer' is not defined for substrate 'key_frequencies' (no direction "
                              "to push along); use method 'mean' (removal) or substrate 'probe_direction'/'units'")


@register_measurement("necessity", spec=NecessitySpec, control=True)
def necessity(spec: NecessitySpec, ctx: Context, *, control: bool = False) -> Measurement:
    """Per example of ``split``: correct intact minus correct with the substrate ablated (or steered).

    The mean is the accuracy drop; control (paired per example): the mean drop over
    ``n_random`` random substrates of the same size.
    """
    from ...errors import ConfigError
    from ..keys import answer_ids, labels, site_rows
    from ..necessity import (
        key_frequency_substrate,
        probe_direction_substrate,
        steer_probe_directions,
        steer_units,
        unit_substrate,
    )
    from ..necessity import necessity as run

    ex = ctx.examples
    if spec.substrate != "key_frequencies" and not spec.site:
        raise ConfigError(f"necessity with substrate {spec.substrate!r} needs a site, e.g. site = \"resid_post@0\"")
    steer = spec.method == "steer"
    if spec.substrate == "key_frequencies":
        sub = key_frequency_substrate(ctx.model, spec.p, k=spec.k)
    elif spec.substrate == "probe_direction":
        site, X = site_rows(ctx, spec.site, spec.select_split)
        y = labels(ctx, spec.label)[ex.split(spec.select_split)]
        sub = probe_direction_substrate(site, X.numpy(), y, n_directions=spec.n_directions,
                                        C=spec.C, method="mean" if steer else spec.method)
        if steer:
            sub = steer_probe_directions(site, sub, X.numpy(), y, strength=spec.strength, toward=spec.steer_toward)
    else:
        site, X = site_rows(ctx, spec.site, spec.select_split)
        sub = (steer_units(site, spec.units, X.numpy(), strength=spec.strength) if steer
               else unit_substrate(site, spec.units, X.numpy(), method=spec.method))
    what = sub.description if steer else f"ablating {sub.description} ({spec.method})"
    kw = {"n_random": spec.n_random, "seed": ctx.stats.seed, "batch_size": spec.batch_size}
    idx = ex.split(spec.split)
    res = run(ctx.model, [ex.tokens[i] for i in idx], answer_ids(ctx, spec.answer_column, idx), sub,
              control=control or spec.excess, **kw)
    values, ctl = (res.drop - res.control, None) if spec.excess else (res.drop, res.control)
    details = {"substrate": sub.description, "size": sub.size, "base_accuracy": float(res.base.mean()),
               "ablated_accuracy": float(res.ablated.mean()), "random_accuracy": res.random_accuracy,
               **sub.details}
    if spec.also_split is not None:
        other = ex.split(spec.also_split)
        also = run(ctx.model, [ex.tokens[i] for i in other], answer_ids(ctx, spec.answer_column, other),
                   sub, control=False, **kw)
        details[f"{spec.also_split}_drop"] = float(also.drop.mean())
    return Measurement(
        metric="accuracy drop beyond random" if spec.excess else "accuracy drop", values=values,
        control=ctl, n=len(idx), unit=f"{spec.split} examples",
        method=f"{what} on {len(idx)} {spec.split} examples; "
        f"first-token accuracy {res.base.mean():.3f} -> {res.ablated.mean():.3f}",
        details=details,
    )
