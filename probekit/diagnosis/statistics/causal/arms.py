"""Intervention arms and mediations of a diagnosis: the report's "Causal evidence" section.

An **intervention arm** is a design knob that intervenes on a marker during training, declared
in ``[population] interventions = [{ knob = "he_lambda", target = "modifier_he" }]`` (the HE
regulariser's weight on the modifier HE). Per arm the section gives (all on the exogenous
design of :mod:`.design`, with the design's resampling unit for every p and CI):

- the **first stage**: the knob's effect on its target marker (coefficient, CI, p) and the
  first-stage F (:mod:`.iv`; the weak-instrument warning when it does not pass the
  Montiel Olea-Pflueger test for the number of groups, or the Anderson-Rubin set is unbounded);
- the **reduced form**: the knob's effect on the outcome (coefficient, CI, p);
- the **IV estimate** of the target marker's effect on the outcome (2SLS, CR1 SE, Wald CI,
  Anderson-Rubin CI and p with the design's resamples; OLS beside it);
- the arm's **mediation** (knob -> target -> outcome; :mod:`.mediation`): its direct effect is
  the part of the knob's effect that does not go through the marker, i.e. a measured departure
  from the exclusion restriction the IV estimate assumes.

``[diagnosis] mediation = [{ knob = "noise", marker = "modifier_he" }]`` adds a mediation of any
design knob through any marker (e.g. how much of noise's effect on OOD accuracy goes through
HE), with the sequential-ignorability assumption stated beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from probekit.errors import ProbekitError
from probekit.report.blocks import Block, Column, Table, Text, strict_json
from probekit.report.notebook import NotebookMixin

from .design import build_design
from .iv import IVEstimate, iv_estimate
from .mediation import SEQUENTIAL_IGNORABILITY, Mediation, mediation

__all__ = ["IV_ASSUMPTIONS", "CausalEvidence", "causal_blocks", "causal_evidence", "causal_section"]

IV_ASSUMPTIONS = (
    "The IV estimate reads the knob as an instrument for its target marker: it assumes the knob "
    "moves the marker (relevance: the first stage), is set by the design (independence: true "
    "for a grid knob), and affects the outcome only through that marker (exclusion; the arm's "
    "direct effect in the mediation table measures a departure from it). Its Anderson-Rubin "
    "interval stays valid with a weak first stage (it is then wide or unbounded); the Wald "
    "interval does not.")


def _g(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    return f"{x:.3g}"


def _ci(low: float, high: float) -> str:
    return f"[{_g(low)}, {_g(high)}]"


def _p(p: float) -> str:
    return "-" if not math.isfinite(p) else f"{p:.2g}"


def _boot_unit(ev: CausalEvidence) -> str:
    """What the mediation bootstrap resamples (:mod:`.mediation`), in words."""
    if ev.groups is None:
        return "models"
    if ev.settings.get("inference") == "cluster":
        return f"{ev.groups} groups"
    return f"models within {ev.groups} strata"


def _weak_why(iv: IVEstimate) -> str:
    """Why the instrument is flagged weak (:mod:`.iv`), in words."""
    why = []
    if not iv.first_stage_f > iv.first_stage_f_critical:
        why.append(f"effective first-stage F {iv.first_stage_f:.3g} <= "
                   f"{iv.first_stage_f_critical:.3g}, the 95% critical value of the "
                   f"Montiel Olea-Pflueger test with {iv.n_groups} groups")
    if iv.ar_unbounded:
        why.append("the Anderson-Rubin set is unbounded")
    return "; ".join(why)


@dataclass(frozen=True, kw_only=True, repr=False)
class CausalEvidence(NotebookMixin):
    """The causal estimates of one table: per arm an :class:`IVEstimate` and its mediation.

    Attributes:
        outcome: the outcome column.
        covariates: the covariates (each arm's knob is left out of its own design).
        groups: the groups column (None: models are the unit).
        unit: the unit of every p and CI, in words.
        arms: ``(knob, target, IVEstimate | None, Mediation | None, reason)`` per arm.
        mediations: ``(knob, marker, Mediation | None, reason)`` per declared mediation.
        settings: confidence level, permutations, bootstrap draws, seed, inference.
    """

    outcome: str
    covariates: tuple[str, ...]
    groups: str | None
    unit: str
    arms: tuple[tuple[str, str, IVEstimate | None, Mediation | None, str], ...]
    mediations: tuple[tuple[str, str, Mediation | None, str], ...]
    settings: dict[str, Any]

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per arm (``kind = "arm"``) and per mediation (``kind = "mediation"``)."""
        out: list[dict[str, Any]] = []
        for knob, target, iv, med, reason in self.arms:
            rec: dict[str, Any] = {"kind": "arm", "knob": knob, "marker": target,
                                   "reason": reason}
            if iv is not None:
                rec.update(iv.to_record())
            if med is not None:
                rec.update({f"mediation_{k}": v for k, v in med.to_record().items()})
            out.append(rec)
        for knob, marker, med, reason in self.mediations:
            rec = {"kind": "mediation", "knob": knob, "marker": marker, "reason": reason}
            if med is not None:
                rec.update({f"mediation_{k}": v for k, v in med.to_record().items()})
            out.append(rec)
        keys = list(dict.fromkeys(k for r in out for k in r))  # one layout for every record
        return [{k: r.get(k, math.nan) for k in keys} for r in out]

    def to_dict(self) -> dict[str, Any]:
        """Strict JSON: settings, assumptions, records and one sentence per arm."""
        return strict_json({
            "outcome": self.outcome, "covariates": list(self.covariates), "groups": self.groups,
            "unit": self.unit, "settings": dict(self.settings),
            "assumptions": {"iv": IV_ASSUMPTIONS, "mediation": SEQUENTIAL_IGNORABILITY},
            "records": self.to_records(), "sentences": self.sentences()})

    def _title(self) -> str:
        return f"Causal evidence on {self.outcome}"

    def _summary(self) -> str:
        return (f"{len(self.arms)} intervention arm(s), {len(self.mediations)} mediation(s), "
                f"outcome {self.outcome}")

    def sentences(self) -> list[str]:
        """One sentence per arm and per mediation: effects, CIs, p and the caveats."""
        level = f"{self.settings['confidence_level']:.0%}"
        out = []
        for knob, target, iv, med, reason in self.arms:
            if iv is None:
                out.append(f"arm {knob} -> {target}: not estimated ({reason}).")
                continue
            fs, rf = iv.first_stage, iv.reduced_form
            weak = (f"; the first stage may be weak ({_weak_why(iv)}): trust only the "
                    "Anderson-Rubin interval" if iv.weak else "")
            ar = ("unbounded" if iv.ar_unbounded and math.isinf(iv.ar_low) and
                  math.isinf(iv.ar_high) else _ci(iv.ar_low, iv.ar_high)
                  + (" (and values beyond: unbounded set)" if iv.ar_unbounded else ""))
            text = (f"arm {knob} -> {target} -> {self.outcome}: the knob moves {target} by "
                    f"{_g(fs.beta)} per unit {_ci(fs.low, fs.high)} (p {_p(fs.p)}, first-stage "
                    f"F {iv.first_stage_f:.3g}) and {self.outcome} by {_g(rf.beta)} "
                    f"{_ci(rf.low, rf.high)} (p {_p(rf.p)}); the IV estimate of {target}'s "
                    f"effect on {self.outcome} is {_g(iv.beta)} per unit of {target} (CR1 SE "
                    f"{_g(iv.se)}; Anderson-Rubin {level} CI {ar}, p {_p(iv.ar_p)}; OLS "
                    f"{_g(iv.ols_beta)}){weak}")
            if med is not None:
                dz = med.t1 - med.t0
                text += (f"; from {knob} {_g(med.t0)} to {_g(med.t1)}, {target} moves by "
                         f"{_g(fs.beta * dz)} and {self.outcome} by {_g(rf.beta * dz)}, and the "
                         f"knob's direct effect (not through {target}) is "
                         f"{_g(med.direct)} {_ci(med.direct_low, med.direct_high)}")
            out.append(text + f"; p and CIs from {self.unit}.")
        for knob, marker, med, reason in self.mediations:
            if med is None:
                out.append(f"mediation {knob} -> {marker}: not estimated ({reason}).")
                continue
            out.append(
                f"mediation {knob} -> {marker} -> {self.outcome}, {knob} from {_g(med.t0)} to "
                f"{_g(med.t1)}: total effect {_g(med.total)} {_ci(med.total_low, med.total_high)}"
                f", through {marker} {_g(med.indirect)} "
                f"{_ci(med.indirect_low, med.indirect_high)} (joint-significance p "
                f"{_p(med.p_indirect)}), direct {_g(med.direct)} "
                f"{_ci(med.direct_low, med.direct_high)}; proportion mediated "
                f"{_g(med.proportion)} {_ci(med.proportion_low, med.proportion_high)} "
                f"({level} CIs: bootstrap over {_boot_unit(self)}; assumes sequential "
                "ignorability).")
        return out

    def _blocks(self) -> tuple[Block, ...]:
        return causal_blocks(self)


def causal_blocks(ev: CausalEvidence, note: str = "") -> tuple[Block, ...]:
    """The report's "Causal evidence" blocks: arms table, IV table, mediation table, sentences.

    ``note`` is appended to the opening paragraph (e.g. the covariates left out).
    """
    sizes = [iv.n_groups for _, _, iv, _, _ in ev.arms if iv is not None] + \
        [m.n_groups for _, _, m, _ in ev.mediations if m is not None]
    if ev.groups is not None and sizes and min(sizes) < 10:
        note += (f" Only {min(sizes)} {ev.groups} groups: the CR1 standard error is rough (the "
                 "weak-instrument test allows for it) and the resampling-based Anderson-Rubin "
                 "interval is the one to read.")
    blocks: list[Block] = [Text(text=(
        f"Causal evidence on {ev.outcome} (Angrist & Pischke 2009 for the IV estimate; Imai, "
        f"Keele & Tingley 2010 for mediation). p-values and CIs from {ev.unit}; mediation CIs "
        f"from a bootstrap over {_boot_unit(ev)}. {IV_ASSUMPTIONS} "
        f"{SEQUENTIAL_IGNORABILITY}{note}"))]
    arm_rows, iv_rows = [], []
    for knob, target, iv, _, reason in ev.arms:
        if iv is None:
            arm_rows.append({"arm": f"{knob} -> {target}", "first": reason})
            continue
        fs, rf = iv.first_stage, iv.reduced_form
        arm_rows.append({"arm": f"{knob} -> {target}", "first": _g(fs.beta),
                         "first_ci": _ci(fs.low, fs.high), "first_p": fs.p,
                         "F": iv.first_stage_f, "reduced": _g(rf.beta),
                         "reduced_ci": _ci(rf.low, rf.high), "reduced_p": rf.p})
        iv_rows.append({"arm": f"{target} (instrument {knob})", "beta": _g(iv.beta),
                        "se": _g(iv.se), "wald": _ci(iv.wald_low, iv.wald_high),
                        "ar": ("unbounded" if math.isinf(iv.ar_low) and math.isinf(iv.ar_high)
                               else _ci(iv.ar_low, iv.ar_high)
                               + (" + unbounded" if iv.ar_unbounded else "")),
                        "ar_p": iv.ar_p, "ols": _g(iv.ols_beta)})
        if iv.weak:
            blocks.append(Text(text=(
                f"weak instrument: {knob} on {target}: {_weak_why(iv)}; the 2SLS estimate may be "
                "biased towards OLS and its Wald interval undercover; read the Anderson-Rubin "
                "interval"),
                level="warning"))
    if arm_rows:
        blocks.append(Table(title="Intervention arms: first stage and reduced form", columns=(
            Column(key="arm", header="knob -> target", fmt="", align="left"),
            Column(key="first", header="effect on target", fmt=""),
            Column(key="first_ci", header="CI", fmt=""),
            Column(key="first_p", header="p", fmt=".2g"),
            Column(key="F", header="first-stage F", fmt=".3g"),
            Column(key="reduced", header=f"effect on {ev.outcome}", fmt=""),
            Column(key="reduced_ci", header="CI", fmt=""),
            Column(key="reduced_p", header="p", fmt=".2g")), rows=tuple(arm_rows),
            caption="Coefficients per unit of the knob, given the covariates (and seeds); F = "
                    "cluster-robust (effective) first-stage F; weak at or below the Montiel "
                    "Olea-Pflueger 95% critical value for the number of groups (68 at 5 seeds, "
                    "37 at 10, 23 with many) or with an unbounded Anderson-Rubin set."))
    if iv_rows:
        blocks.append(Table(title=f"IV estimate of each target's effect on {ev.outcome}", columns=(
            Column(key="arm", header="marker", fmt="", align="left"),
            Column(key="beta", header="2SLS", fmt=""), Column(key="se", header="CR1 SE", fmt=""),
            Column(key="wald", header="Wald CI", fmt=""),
            Column(key="ar", header="Anderson-Rubin CI", fmt=""),
            Column(key="ar_p", header="AR p", fmt=".2g"),
            Column(key="ols", header="OLS (confounded)", fmt="")), rows=tuple(iv_rows),
            caption="Per unit of the marker. The Anderson-Rubin CI and p use the design's "
                    "resamples and stay valid under a weak first stage."))
    med_rows = []
    meds = [(k, t, m, r, "arm") for k, t, _, m, r in ev.arms] + \
        [(k, t, m, r, "declared") for k, t, m, r in ev.mediations]
    for knob, marker, med, reason, source in meds:
        if med is None:
            med_rows.append({"path": f"{knob} -> {marker}", "source": source,
                             "total": reason})
            continue
        med_rows.append({"path": f"{knob} -> {marker}", "source": source,
                         "contrast": f"{_g(med.t0)} -> {_g(med.t1)}",
                         "total": f"{_g(med.total)} {_ci(med.total_low, med.total_high)}",
                         "indirect": f"{_g(med.indirect)} "
                                     f"{_ci(med.indirect_low, med.indirect_high)}",
                         "p_indirect": med.p_indirect,
                         "direct": f"{_g(med.direct)} {_ci(med.direct_low, med.direct_high)}",
                         "proportion": f"{_g(med.proportion)} "
                                       f"{_ci(med.proportion_low, med.proportion_high)}"})
    if med_rows:
        blocks.append(Table(title=f"Mediation: knob -> marker -> {ev.outcome}", columns=(
            Column(key="path", header="knob -> marker", fmt="", align="left"),
            Column(key="source", header="from", fmt=""),
            Column(key="contrast", header="knob", fmt=""),
            Column(key="total", header="total [CI]", fmt=""),
            Column(key="indirect", header="indirect [CI]", fmt=""),
            Column(key="p_indirect", header="indirect p", fmt=".2g"),
            Column(key="direct", header="direct [CI]", fmt=""),
            Column(key="proportion", header="proportion mediated [CI]", fmt="")),
            rows=tuple(med_rows),
            caption="Effects of moving the knob over the stated contrast; CIs: percentile "
                    f"bootstrap over {_boot_unit(ev)}, rescaled for few units; indirect p: joint significance "
                    "max(p_a, p_b) with the design's resamples. Causal only under sequential "
                    "ignorability."))
    blocks += [Text(text=s) for s in ev.sentences()]
    return tuple(blocks)


def causal_evidence(
    table: Mapping[str, Sequence[Any]] | Any, outcome: str, *,
    interventions: Sequence[tuple[str, str]] = (), mediations: Sequence[tuple[str, str]] = (),
    covariates: Sequence[str] = (), groups: str | None = None,
    inference: str = "within_groups", n_permutations: int = 1000, n_bootstrap: int = 1000,
    seed: int = 0, confidence_level: float = 0.95,
    covariate_coding: Mapping[str, str] | None = None, spline_df: int = 4,
) -> CausalEvidence:
    """Per intervention arm the IV estimate and its mediation; per declared pair the mediation.

    Args:
        table: the marker table (final models).
        outcome: the outcome column.
        interventions: ``(knob, target marker)`` per arm.
        mediations: ``(knob, marker)`` per mediation to estimate.
        covariates: the covariates (each pair's knob is left out of its design).
        groups: the groups column (seed) or None.
        inference: ``"within_groups"`` or ``"cluster"`` (:mod:`.design`).
        n_permutations: Freedman-Lane permutations of every test.
        n_bootstrap: wild cluster bootstrap draws (``cluster``) and the mediation's
            bootstrap draws.
        seed: seeds the permutations, weights and bootstrap draws.
        confidence_level: of every CI.
        covariate_coding: covariate -> ``"factor" | "linear" | "spline"``
            (:mod:`probekit.diagnosis.statistics.coding`).
        spline_df: columns of each spline covariate.

    A pair the data cannot support (a constant knob, too few groups with the marker) is kept
    with its reason instead of estimates.
    """
    common = dict(covariates=tuple(covariates), groups=groups, inference=inference,
                  n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed,
                  covariate_coding=dict(covariate_coding or {}), spline_df=spline_df)
    unit = ""
    arms = []
    for knob, target in interventions:
        try:
            design = build_design(table, outcome, knob, target, **common)
        except ProbekitError as err:
            arms.append((knob, target, None, None, str(err)))
            continue
        unit = design.unit
        arms.append((knob, target, iv_estimate(design, confidence_level=confidence_level),
                     mediation(design, n_bootstrap=n_bootstrap, seed=seed,
                               confidence_level=confidence_level), ""))
    meds = []
    for knob, marker in mediations:
        try:
            design = build_design(table, outcome, knob, marker, **common)
        except ProbekitError as err:
            meds.append((knob, marker, None, str(err)))
            continue
        unit = design.unit
        meds.append((knob, marker, mediation(design, n_bootstrap=n_bootstrap, seed=seed,
                                             confidence_level=confidence_level), ""))
    return CausalEvidence(
        outcome=outcome, covariates=tuple(covariates), groups=groups,
        unit=unit or "(nothing estimated)", arms=tuple(arms), mediations=tuple(meds),
        settings={"confidence_level": confidence_level, "n_permutations": n_permutations,
                  "n_bootstrap": n_bootstrap, "seed": seed, "inference": inference})


def causal_section(
    table: Mapping[str, Sequence[Any]], outcome: str, *, interventions: Sequence[Any],
    mediations: Sequence[Any], covariates: Sequence[str], knobs: Sequence[str],
    groups: str | None, settings: Any, extras: dict[str, Any],
) -> tuple[Block, ...]:
    """The report's "Causal evidence" blocks (the runner's one call); records in ``extras``.

    ``interventions`` / ``mediations``: objects with ``knob`` and ``marker``
    (:class:`~probekit.diagnosis.spec.CausalPair`); nothing is returned when both are empty.
    Only the covariates that are design knobs enter the causal designs: a measured covariate
    (ID accuracy, train loss) is itself an outcome of training, and conditioning on it would
    bias a causal estimate (a post-treatment variable). ``settings``: the ``[diagnosis]``
    section (``n_permutations``, ``n_bootstrap``, ``seed``, ``inference``, ``covariate_coding``,
    ``spline_df``).
    """
    if not interventions and not mediations:
        return ()
    design_covs = tuple(c for c in covariates if c in set(knobs))
    left_out = [c for c in covariates if c not in design_covs]
    coding = {k: v for k, v in (getattr(settings, "covariate_coding", None) or {}).items()
              if k in design_covs}
    spline_df = getattr(settings, "spline_df", None)
    try:
        ev = causal_evidence(
            table, outcome, interventions=[(p.knob, p.marker) for p in interventions],
            mediations=[(p.knob, p.marker) for p in mediations], covariates=design_covs,
            groups=groups, inference=getattr(settings, "inference", None) or "within_groups",
            n_permutations=int(settings.n_permutations), n_bootstrap=int(settings.n_bootstrap),
            seed=int(settings.seed), covariate_coding=coding,
            spline_df=4 if spline_df is None else int(spline_df))
    except ProbekitError as err:
        return (Text(text=f"Causal evidence: not estimated ({err})", level="warning"),)
    record = ev.to_dict()
    record["covariates_left_out"] = left_out
    extras["causal"] = record
    note = ((f" Left out of the causal designs: {', '.join(left_out)} (measured after "
             "training starts: conditioning on a post-treatment variable biases a causal "
             "estimate).") if left_out else "")
    return causal_blocks(ev, note=note)
