"""``measure = "necessity"``: accuracy lost when a marker's substrate is ablated (or steered), vs a random one.

:func:`probekit.hypotheses.necessity.necessity` on a
:func:`~probekit.hypotheses.necessity.probe_direction_substrate` (amnesic probing / INLP), a
:func:`~probekit.hypotheses.necessity.unit_substrate`, the key frequencies or the
:func:`~probekit.hypotheses.necessity.modifier_subspace_substrate` (SCAN's modifier operator).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from ...context import Context
from ...stats.limits import MAX_PERMUTATIONS
from ...util.constraints import Distinct, Each, Finite, Ge, Gt, Le, NonEmpty, Validated
from ..measurement import Measurement
from ..registry import register_measurement

Substrate = Literal["probe_direction", "units", "key_frequencies", "modifier_subspace"]


@dataclass(frozen=True, kw_only=True)
class SubstrateChoice(Validated):
    """Which substrate a necessity claim removes (its keys are the substrate class's, below)."""

    substrate: Substrate = "probe_direction"


@dataclass(frozen=True, kw_only=True)
class SiteSubstrate(Validated):
    """A substrate found in one site's activations (``site``, e.g. ``"resid_post@0"``)."""

    site: str = ""


@dataclass(frozen=True, kw_only=True)
class TopDirections(Validated):
    """A substrate of the top ``k`` directions (key frequencies, modifier subspace)."""

    k: Annotated[int, Ge(1, hint="key frequencies or subspace directions")] = 5


@dataclass(frozen=True, kw_only=True)
class ProbeDirectionSubstrate(SiteSubstrate):
    """``substrate = "probe_direction"``: INLP directions of ``label`` at ``site``.

    The span of ``n_directions`` rounds of logistic probes, inverse regularisation ``C``
    (Ravfogel et al. 2020; Elazar et al. 2021).
    """

    label: str | None = None
    n_directions: Annotated[int, Ge(1, hint="INLP rounds")] = 1
    C: Annotated[float, Gt(0, hint="inverse regularisation")] = 1.0


@dataclass(frozen=True, kw_only=True)
class UnitSubstrate(SiteSubstrate):
    """``substrate = "units"``: ``units``, indices of ``site``'s last axis."""

    units: Annotated[tuple[int, ...], Each(Ge(0, hint="indices of the site's last axis")),
                     Distinct()] = ()


@dataclass(frozen=True, kw_only=True)
class KeyFrequencySubstrate(Validated):
    """``substrate = "key_frequencies"``: key Fourier frequencies of the embeddings.

    The ``k`` (:class:`TopDirections`) key frequencies of the residue tokens ``0..p-1``'s
    embeddings (Nanda et al. 2023; the site is ``embed``).
    """

    p: int = 0


@dataclass(frozen=True, kw_only=True)
class ModifierSubspaceSubstrate(TopDirections, SiteSubstrate):
    """``substrate = "modifier_subspace"``: the top-``k`` directions of SCAN's modifier displacements."""


#: each substrate's own keys, declared once in its class (the claim's flat keys are their union)
SUBSTRATES: dict[str, tuple[type, ...]] = {
    "probe_direction": (ProbeDirectionSubstrate,),
    "units": (UnitSubstrate,),
    "key_frequencies": (KeyFrequencySubstrate, TopDirections),
    "modifier_subspace": (ModifierSubspaceSubstrate,),
}


@dataclass(frozen=True, kw_only=True)
class NecessitySpec(ModifierSubspaceSubstrate, KeyFrequencySubstrate, UnitSubstrate,
                    ProbeDirectionSubstrate, SubstrateChoice):
    """Keys of a ``necessity`` claim (or diagnosis marker).

    One flat table: ``substrate`` picks the substrate, whose keys are declared in its own class
    (:data:`SUBSTRATES`: :class:`ProbeDirectionSubstrate`, :class:`UnitSubstrate`,
    :class:`KeyFrequencySubstrate`, :class:`ModifierSubspaceSubstrate`); a key of another
    substrate is refused. The base order keeps the keys in their historical order (reports and
    cell caches list them).

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

    ``substrate = "modifier_subspace"``: the top-``k`` directions of SCAN's modifier
    displacements ``h(x m) - h(x)`` at ``site`` (a block site, e.g. ``"resid_post@1"``), over the
    primitive-modifier pairs of ``select_split`` (whose examples need SCAN's parse columns:
    ``[data] prompt_only = false``); the control ablates ``k`` random directions. ``score``:
    ``"first_token"`` (the above) or ``"output_tokens"``: teacher-forced token accuracy of the
    position-aligned output sequence in ``output_column`` (text of vocabulary tokens separated
    by spaces, or token ids; SCAN's ``output``), pooled over the split's tokens as the trainer's
    ``token_acc`` (SCAN's OOD accuracy); each example's value is its share of the pooled drop.

    ``method = "steer"`` steers instead of ablating (activation addition along the substrate,
    :mod:`probekit.hypotheses.necessity`): ``strength`` standard deviations (finite, may be
    negative; 0, the identity, is refused: it intervenes on nothing) along the class-mean difference toward class ``steer_toward``
    within the probe directions' span (default the last of the sorted label values), or added to
    each of the ``units``; control: random directions with a step of the same norm (random unit
    sets). ``key_frequencies`` and ``modifier_subspace`` cannot be steered. ``strength`` (default
    :data:`DEFAULT_STEER_STRENGTH` sd) and ``steer_toward`` belong to ``method = "steer"`` and are
    refused with any other method; the details' ``ablated_accuracy`` is then the steered accuracy.
    """

    method: Literal["mean", "zero", "resample", "steer"] = "mean"
    answer_column: str = "answer"
    select_split: str = "train"
    split: str = "test"
    also_split: str | None = None
    n_random: Annotated[int, Ge(1), Le(MAX_PERMUTATIONS)] = 10
    excess: bool = False
    batch_size: Annotated[int, Ge(1)] = 64
    strength: Annotated[float, Finite()] | None = None
    steer_toward: int | str | bool | None = None
    score: Literal["first_token", "output_tokens"] = "first_token"
    output_column: Annotated[str, NonEmpty(hint='e.g. "output" (SCAN)')] = "output"

    def __post_init__(self) -> None:
        """Check the fields' rules, keys of the chosen substrate only, and that ``method = "steer"`` has a substrate to push along."""
        super().__post_init__()
        self._check_substrate_keys()
        if self.method != "steer":
            from ...errors import KeyedValueError

            for key in ("strength", "steer_toward"):
                if getattr(self, key) is not None:
                    raise KeyedValueError(key, f"{key} = {getattr(self, key)!r} is read by method \"steer\" only "
                                          f"(method is {self.method!r}); remove it, or set method = \"steer\"")
        if self.substrate == "key_frequencies" and self.p >= 3:
            from ...errors import ConfigError, KeyedValueError
            from ...util.list_option import check_top_k

            try:
                check_top_k(self.k, (self.p - 1) // 2, what="the non-constant frequencies")
            except ConfigError as err:
                raise KeyedValueError("k", f"k = {self.k} with p = {self.p}: {err}") from None
        if self.method == "steer" and self.strength == 0:
            from ...errors import KeyedValueError

            raise KeyedValueError("strength", "strength = 0 steers by zero standard deviations (the "
                                  "identity): the claim would measure no intervention and fail; "
                                  f"give a nonzero strength (default {DEFAULT_STEER_STRENGTH:g})")
        if self.method == "steer" and self.substrate in ("key_frequencies", "modifier_subspace"):
            from ...errors import ConfigError

            raise ConfigError(f"necessity method 'steer' is not defined for substrate {self.substrate!r} (no class "
                              "direction to push along); use method 'mean' (removal) or substrate 'probe_direction'/'units'")


    def _check_substrate_keys(self) -> None:
        """Refuse a key of another substrate set to a non-default value (it would be ignored)."""
        from ...errors import KeyedValueError

        mine = self.substrate_keys()
        for cls in (ProbeDirectionSubstrate, UnitSubstrate, KeyFrequencySubstrate, TopDirections):
            for f in dataclasses.fields(cls):
                value = getattr(self, f.name)
                if f.name not in mine and value != f.default:
                    owners = [s for s, classes in SUBSTRATES.items()
                              if any(f.name in _keys(c) for c in classes)]
                    raise KeyedValueError(f.name, f"{f.name} = {value!r} is a key of substrate "
                                          f"{' / '.join(repr(o) for o in owners)}, not of "
                                          f"{self.substrate!r}: remove it, or set substrate")

    def substrate_keys(self) -> dict[str, Any]:
        """The chosen substrate's own keys and values (its classes in :data:`SUBSTRATES`)."""
        return {k: getattr(self, k) for c in SUBSTRATES[self.substrate] for k in _keys(c)}


def _keys(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


#: steering step in standard deviations when ``strength`` is not given
DEFAULT_STEER_STRENGTH = 4.0


def _strength(spec: NecessitySpec) -> float:
    return DEFAULT_STEER_STRENGTH if spec.strength is None else float(spec.strength)


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
            sub = steer_probe_directions(site, sub, X.numpy(), y, strength=_strength(spec), toward=spec.steer_toward)
    elif spec.substrate == "modifier_subspace":
        sub = _modifier_subspace(spec, ctx)
    else:
        site, X = site_rows(ctx, spec.site, spec.select_split)
        sub = (steer_units(site, spec.units, X.numpy(), strength=_strength(spec)) if steer
               else unit_substrate(site, spec.units, X.numpy(), method=spec.method))
    what = sub.description if steer else f"ablating {sub.description} ({spec.method})"
    kw = {"n_random": spec.n_random, "seed": ctx.stats.seed, "batch_size": spec.batch_size}

    def gold(rows: Any) -> dict[str, Any]:
        if spec.score == "output_tokens":
            return {"answer_ids": [], "score": spec.score, "targets": _output_ids(ctx, spec.output_column, rows)}
        return {"answer_ids": answer_ids(ctx, spec.answer_column, rows)}

    idx = ex.split(spec.split)
    res = run(ctx.model, [ex.tokens[i] for i in idx], substrate=sub, control=control or spec.excess,
              **gold(idx), **kw)
    values, ctl = (res.drop - res.control, None) if spec.excess else (res.drop, res.control)
    details = {"substrate": sub.description, "size": sub.size, "base_accuracy": float(res.base.mean()),
               "ablated_accuracy": float(res.ablated.mean()), "random_accuracy": res.random_accuracy,
               **sub.details}
    if spec.also_split is not None:
        other = ex.split(spec.also_split)
        also = run(ctx.model, [ex.tokens[i] for i in other], substrate=sub, control=False, **gold(other),
                   **kw)
        details[f"{spec.also_split}_drop"] = float(also.drop.mean())
    return Measurement(
        metric="accuracy drop beyond random" if spec.excess else "accuracy drop", values=values,
        control=ctl, n=len(idx), unit=f"{spec.split} examples",
        method=f"{what} on {len(idx)} {spec.split} examples; "
        f"{'token' if spec.score == 'output_tokens' else 'first-token'} accuracy {res.base.mean():.3f} -> "
        f"{res.ablated.mean():.3f}",
        details=details,
    )


def _modifier_subspace(spec: NecessitySpec, ctx: Context) -> Any:
    """:func:`~probekit.hypotheses.necessity.modifier_subspace_substrate` on ``select_split``."""
    from ...errors import ConfigError
    from ...homomorphism.pairs import MODIFIER_COLUMNS
    from ...sites import Site
    from ...testbeds.base import TaskDataset
    from ..necessity import modifier_displacements, modifier_subspace_substrate

    ex = ctx.examples
    missing = [c for c in MODIFIER_COLUMNS if c not in ex.columns]
    if missing:
        raise ConfigError(f"substrate 'modifier_subspace' needs SCAN's parse columns {list(MODIFIER_COLUMNS)}; "
                          f"the examples lack {missing}: use a SCAN task with [data] prompt_only = false")
    rows = ex.split(spec.select_split)
    n = len(rows)
    ds = TaskDataset(name=spec.select_split, tokens=[list(ex.tokens[i]) for i in rows],
                     targets=[[] for _ in range(n)], target_positions=[[] for _ in range(n)],
                     metadata={c: [ex.columns[c][i] for i in rows] for c in MODIFIER_COLUMNS})
    site = Site.parse(spec.site)
    pad = getattr(ex.vocab, "pad_id", 0) if ex.vocab is not None else 0
    D, X, _ = modifier_displacements(ctx.model, ds, site, pad_id=pad)
    return modifier_subspace_substrate(site, D, X, k=spec.k, method=spec.method)


def _output_ids(ctx: Context, column: str, rows: Any) -> list[list[int]]:
    """Each row's output sequence as token ids: ids as given, text split on spaces and encoded."""
    from ...errors import DataError

    values = ctx.examples.column(column)
    vocab = ctx.examples.vocab
    out = []
    for i in rows:
        v = values[int(i)]
        if isinstance(v, str) and vocab is not None:
            out.append([int(t) for t in vocab.encode(v.split())])
        elif isinstance(v, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in v):
            out.append([int(t) for t in v])
        else:
            raise DataError(f"output column {column!r} row {int(i)} holds {v!r}; expected a list of token ids "
                            "or space-separated text of the task vocabulary (SCAN's 'output')")
    return out
