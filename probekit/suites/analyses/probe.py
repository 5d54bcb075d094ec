"""``[[probe]]`` and ``[[correctness]]``: linear probes per site with hypothesis tests.

``[[probe]]``: one registered probe kind (:mod:`probekit.probes.kind`; built in: ``logistic``
accuracy, ``ridge`` R^2, ``diffmeans`` AUROC) swept over the captured sites, with an optional
control task (Hewitt & Liang 2019) and permutation tests (labels shuffled, probe refit; Holm/BH
over sites): :func:`probekit.probes.decodability.decodability`.

``[[correctness]]``: in-advance correctness ("No Answer Needed", arXiv 2509.10625:
diff-of-means direction, k-fold AUROC per site, baselines, best-of-sites permutation test):
:func:`probekit.probes.correctness_sites.correctness_by_site`.

Each adapter is spec -> one method call -> hypotheses and blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from ...errors import KeyedValueError
from ...util.constraints import Ge, NonEmpty, Validated
from ..registry import register_analysis
from ..result import AnalysisResult, Hypothesis
from ..spec import SuiteError

if TYPE_CHECKING:  # heavy imports happen inside the run functions: validation stays fast
    from ...probes.sweep import SweepResult

__all__ = [
    "CorrectnessSpec",
    "ProbeResult",
    "ProbeSpec",
    "run_correctness",
    "run_probe",
]

_MOVED = {"correctness": 'it is its own section now: write [[correctness]] (keys label, cv, '
                         'group_column, group_split, baselines) instead of [[probe]] kind = '
                         '"correctness"'}


_FOLDS = Ge(2, hint="cross-validation folds")


@dataclass(frozen=True, kw_only=True)
class ProbeSpec(Validated):
    """One ``[[probe]]`` table.

    Attributes:
        kind: a registered probe kind (:func:`probekit.probes.kind.registered_probe_kinds`).
        label: label column (default ``[data] label``).
        Cs, alphas: sizes of the logistic C / ridge alpha grids; cv: CV folds.
        control: also fit a control task (labels re-drawn per ``[data] control_column`` type;
            kinds with a control task only).
        permutation_test: test decodability at the selected site (kinds with a permutation
            test: logistic, diffmeans).
    """

    kind: str
    label: Annotated[str | None, NonEmpty(hint="a column name")] = None
    Cs: Annotated[int, Ge(1, hint="values of the C grid")] = 10
    alphas: Annotated[int, Ge(1, hint="values of the alpha grid")] = 9
    cv: Annotated[int, _FOLDS] = 5
    control: bool = False
    permutation_test: bool = True

    def __post_init__(self) -> None:
        """The declared rules, then the kind among the registered probe kinds."""
        super().__post_init__()
        if self.kind in _MOVED:
            raise KeyedValueError("kind", f"kind = {self.kind!r}: {_MOVED[self.kind]}")
        from ...probes.kind import probe_kind

        probe_kind(self.kind)  # ConfigError listing the registered kinds


@dataclass(frozen=True, kw_only=True)
class CorrectnessSpec(Validated):
    """One ``[[correctness]]`` table (needs ``[data] answer_column`` or a 0/1 label).

    Attributes:
        label: the 0/1 correctness column (default ``[data] label``).
        cv: CV folds (stratified; grouped with ``group_column``).
        group_column: a ``[data]`` column grouping the questions (relation, region, dataset):
            grouped folds, within-group AUROC, the group-base-rate baseline.
        group_split: ``"logo"`` (leave one group out) or ``"kfold"`` (group k-fold, ``cv``).
        baselines: also score the question-text (TF-IDF + logistic, on the ``text`` column) and
            answer-confidence (max next-token probability) baselines.
    """

    label: Annotated[str | None, NonEmpty(hint="a column name")] = None
    cv: Annotated[int, _FOLDS] = 5
    group_column: Annotated[str | None, NonEmpty(hint="a column name")] = None
    group_split: Literal["logo", "kfold"] = "logo"
    baselines: bool = True


@dataclass(frozen=True, kw_only=True, repr=False)
class ProbeResult(AnalysisResult):
    """A probe's result: the report data plus the typed sweep (None for correctness)."""

    sweep: SweepResult | None = None


@register_analysis("probe", spec=ProbeSpec)
def run_probe(spec: ProbeSpec, ctx: Any) -> ProbeResult:
    """Fit one probe kind at every captured site and test it."""
    from ...probes.blocks import sweep_blocks
    from ...probes.decodability import PermutationPlan, decodability
    from ...probes.sweep import SweepConfig

    suite, st, ex = ctx.suite, ctx.stats, ctx.examples
    acts = ctx.activations()
    label = spec.label or suite.data.label
    column = suite.data.control_column or label
    res = decodability(
        acts, ex.column(label), label=label, train_idx=ex.splits["train"],
        test_idx=ex.splits["test"], ood_idx=ex.ood_splits,
        config=SweepConfig(probe=spec.kind, Cs=spec.Cs, alphas=spec.alphas, cv=spec.cv,
                           n_bootstrap=st.n_bootstrap, confidence_level=st.confidence_level,
                           random_state=st.seed, device=suite.device),
        control_types=ex.column(column) if spec.control else None, control_column=column,
        permutation=PermutationPlan(n_permutations=st.n_permutations, sites=st.permutation_sites,
                                    correction=st.correction, alpha=st.alpha, seed=st.seed)
        if spec.permutation_test else None,
        executor=ctx.executor,
    )  # fmt: skip
    sweep, best = res.sweep, res.sweep.best_row
    site = dict(zip([s.name for s in acts], acts, strict=True))[sweep.sites[best]]
    what = dict(name=f"{label!r} is linearly decodable ({spec.kind}) at the validation-selected "
                "site", site=site, metric=sweep.metric, statistic=float(sweep.test[best]),
                effect_size=float(sweep.test[best]) - res.chance,
                effect_size_name=f"{sweep.metric} - chance", alpha=st.alpha, outcome="decodable")
    hypotheses: list[Hypothesis] = []
    if res.not_testable:
        hypotheses.append(Hypothesis(**what, p_value=float("nan"), n=res.n_test,
                                     method="permutation test not run (degenerate split)",
                                     not_testable=res.not_testable))
    elif res.test is not None:
        # The tested site was chosen by CV on the training split only, so its test-split
        # permutation p-value is a single pre-specified test and needs no correction; the
        # per-site family (data["permutation"]) is corrected.
        hypotheses.append(Hypothesis.from_test(
            res.test, **what,
            method=f"permutation test, {st.n_permutations} label shuffles with refits"))
    ctl = res.control
    blocks = sweep_blocks(
        sweep, label=label, chance=res.chance, chance_text=res.kind.chance_text,
        control_test=None if ctl is None else ctl.control.test.tolist(),
        selectivity=None if ctl is None else res.data["selectivity"],
        permutation=res.data.get("permutation"), alpha=st.alpha,
    )
    return ProbeResult(
        section="probe", title=f"{spec.kind} probe: {label}", data=res.data,
        hypotheses=tuple(hypotheses), blocks=tuple(blocks), warnings=res.warnings, sweep=sweep,
    )


@register_analysis("correctness", spec=CorrectnessSpec)
def run_correctness(spec: CorrectnessSpec, ctx: Any) -> ProbeResult:
    """In-advance correctness probe (No Answer Needed, arXiv 2509.10625) with its controls.

    Diff-of-means direction on raw last-token activations, per-site CV AUROC on the ID questions
    (stratified k-fold, or grouped folds with ``group_column``), fold-wise OOD AUROC, baselines
    on the same folds (group base rate, question text, answer confidence) compared with the
    nested-selection probe, and the best-of-sites statistic tested by max-statistic permutation.
    Labels that cannot test it (all answers right or all wrong, fewer of a kind than folds)
    give a "not testable" hypothesis, never a verdict.
    """
    import numpy as np

    from ...probes.blocks import correctness_blocks
    from ...probes.correctness import CorrectnessConfig
    from ...probes.correctness_baselines import answer_confidence
    from ...probes.correctness_sites import correctness_by_site

    suite, st, ex = ctx.suite, ctx.stats, ctx.examples
    label = spec.label or suite.data.label
    if spec.group_column is not None and spec.group_column not in ex.columns:
        raise SuiteError(f"{suite.source}: [[correctness]] group_column {spec.group_column!r} is "
                         f"not a data column; have {sorted(ex.columns)}")
    acts = ctx.activations()
    ids = np.concatenate([ex.splits["train"], ex.splits["test"]])
    res = correctness_by_site(
        acts, ex.column(label), label=label, id_idx=ids, ood_idx=ex.ood_splits,
        groups=None if spec.group_column is None else ex.column(spec.group_column),
        group_column=spec.group_column,
        texts=ex.column("text") if spec.baselines and "text" in ex.columns else None,
        confidence=answer_confidence(ctx.model, [ex.tokens[i] for i in ids])
        if spec.baselines else None,
        alpha=st.alpha,
        config=CorrectnessConfig(n_folds=spec.cv, group_split=spec.group_split,
                                 n_permutations=st.n_permutations,
                                 n_bootstrap=max(st.n_bootstrap, 1000),
                                 confidence_level=st.confidence_level, random_state=st.seed),
    )  # fmt: skip
    mx, n_sites = res.result.max_stat_test, len(res.sites)
    what = dict(name="the answer's correctness is predictable from the question alone (best of "
                f"{n_sites} sites, {res.metric_name})", site=res.sites[res.best],
                metric=f"max over sites of {res.metric_name}", effect_size_name="AUROC - 0.5",
                alpha=st.alpha, outcome="predictable")
    hypotheses: tuple[Hypothesis, ...] = ()
    if res.not_testable:
        hypotheses = (Hypothesis(**what, statistic=float("nan"), p_value=float("nan"),
                                 n=res.result.n_correct + res.result.n_incorrect,
                                 method="max-statistic permutation test not run",
                                 effect_size=float("nan"), not_testable=res.not_testable),)
    elif mx is not None:
        hypotheses = (Hypothesis.from_test(mx, **what, effect_size=float(mx.statistic) - 0.5),)
    blocks = correctness_blocks(res.result, [str(getattr(s, "name", s)) for s in res.sites],
                                label=label, alpha=st.alpha)
    return ProbeResult(
        section="correctness", title=f"correctness probe: {label}", data=res.data,
        hypotheses=hypotheses, blocks=tuple(blocks), warnings=tuple(res.data.get("warnings", ())),
    )
