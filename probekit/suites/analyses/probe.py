"""``[[probe]]``: linear probes per site with hypothesis tests (the first registered analysis).

Kinds: ``logistic`` (accuracy), ``ridge`` (R^2), ``diffmeans`` (AUROC) layer sweeps
(:func:`probekit.probes.sweep_layers`; best site chosen on CV validation, reported on test with
bootstrap CIs, ID - OOD gaps), optional control task (Hewitt & Liang 2019), permutation tests
(labels shuffled, probe refit; Holm/BH over sites) and ``correctness`` (in-advance correctness,
"No Answer Needed", arXiv 2509.10625: diff-of-means direction, k-fold AUROC per site).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ...sites import site_label
from ..registry import register_analysis
from ..result import AnalysisResult, Hypothesis
from ..spec import SuiteError

if TYPE_CHECKING:  # heavy imports happen inside the run functions: validation stays fast
    import numpy as np
    import torch

    from ...probes.sweep import SweepResult
    from ...sites import Site

__all__ = ["PermutationTask", "ProbeResult", "ProbeSpec", "permutation_p_value", "run_probe"]


@dataclass(frozen=True, kw_only=True)
class ProbeSpec:
    """One ``[[probe]]`` table.

    Attributes:
        kind: probe family (``correctness`` needs ``[data] answer_column`` or a 0/1 label).
        label: label column (default ``[data] label``).
        Cs, alphas: sizes of the logistic C / ridge alpha grids; cv: CV folds.
        control: also fit a control task (labels re-drawn per ``[data] control_column`` type).
        permutation_test: test decodability at the selected site (logistic, diffmeans).
        group_column: ``correctness``: a ``[data]`` column grouping the questions (relation,
            region, dataset): grouped folds, within-group AUROC, the group-base-rate baseline.
        group_split: ``"logo"`` (leave one group out) or ``"kfold"`` (group k-fold, ``cv``).
        baselines: ``correctness``: also score the question-text (TF-IDF + logistic, on the
            ``text`` column) and answer-confidence (max next-token probability) baselines.
    """

    kind: Literal["logistic", "ridge", "diffmeans", "correctness"]
    label: str | None = None
    Cs: int = 10
    alphas: int = 9
    cv: int = 5
    control: bool = False
    permutation_test: bool = True
    group_column: str | None = None
    group_split: Literal["logo", "kfold"] = "logo"
    baselines: bool = True


@dataclass(frozen=True, kw_only=True, repr=False)
class ProbeResult(AnalysisResult):
    """A probe's result: the report data plus the typed sweep (None for correctness)."""

    sweep: SweepResult | None = None


@dataclass(frozen=True, kw_only=True)
class PermutationTask:
    """One site's permutation test (labels shuffled, probe refit): a picklable executor task."""

    X: torch.Tensor
    y: np.ndarray
    train_idx: np.ndarray
    test_idx: np.ndarray
    probe: str
    C: float | None
    n_permutations: int
    random_state: int
    device: str | None


def permutation_test_of(task: PermutationTask) -> Any:
    """The :class:`~probekit.stats.StatTestResult` of ``task``."""
    from ...probes import probe_permutation_test

    return probe_permutation_test(
        task.X, task.y, train_idx=task.train_idx, test_idx=task.test_idx, probe=task.probe,
        C=task.C, n_permutations=task.n_permutations, random_state=task.random_state,
        device=task.device,
    )


def permutation_p_value(task: PermutationTask) -> float:
    """p-value of ``task`` (:func:`probekit.probes.probe_permutation_test`)."""
    return float(permutation_test_of(task).p_value)


def _chance(kind: str, y: np.ndarray) -> float:
    """Majority-class rate (logistic), 0.5 (AUROC), 0 (R^2 of the mean predictor)."""
    import numpy as np

    if kind == "logistic":
        _, counts = np.unique(y, return_counts=True)
        return float(counts.max() / counts.sum())
    return 0.5 if kind == "diffmeans" else 0.0


_CHANCE_TEXT = {
    "logistic": "majority-class rate of the test split",
    "diffmeans": "AUROC of a random score",
    "ridge": "R^2 of predicting the training mean",
    "correctness": "AUROC of a random score",
}


@register_analysis("probe", spec=ProbeSpec)
def run_probe(spec: ProbeSpec, ctx: Any) -> ProbeResult:
    """Fit one probe kind at every captured site and test it."""
    import numpy as np

    from ...probes import selectivity_sweep, sweep_layers
    from ...stats import adjust_pvalues

    if spec.kind == "correctness":
        return _run_correctness(spec, ctx)
    suite, st, ex = ctx.suite, ctx.stats, ctx.examples
    acts = ctx.activations()
    sites = list(acts)
    label = spec.label or suite.data.label
    y_raw = ex.column(label)
    if spec.kind == "ridge":
        y = np.asarray(y_raw, dtype=float)
    else:
        y = np.asarray([str(v) for v in y_raw])
    split_check = None
    if spec.kind in ("logistic", "diffmeans"):  # degenerate class splits: errors or not testable
        from ...probes.splits import check_class_splits

        split_check = check_class_splits(y, ex.splits["train"], ex.splits["test"], cv=spec.cv,
                                         name=f"label {label!r}")
    kw = dict(
        train_idx=ex.splits["train"], test_idx=ex.splits["test"], ood_idx=ex.ood_splits,
        probe=spec.kind, Cs=spec.Cs, alphas=spec.alphas, cv=spec.cv, n_bootstrap=st.n_bootstrap,
        confidence_level=st.confidence_level, random_state=st.seed, device=suite.device,
    )
    entry: dict[str, Any] = {"kind": spec.kind, "label": label}
    control = None
    if spec.control and spec.kind != "ridge":
        column = suite.data.control_column or label
        types = [str(v) for v in ex.column(column)]
        sel = selectivity_sweep(acts, y, types, **kw)
        sweep, control = sel.task, sel
        entry["control"] = sel.control.to_dict()
        entry["selectivity"] = [float(v) for v in sel.selectivity]
        entry["control_column"] = column
    else:
        sweep = sweep_layers(acts, y, **kw)
    entry["sweep"] = sweep.to_dict()
    entry["chance"] = _chance(spec.kind, y[ex.splits["test"]])
    best = sweep.best_row
    site_of = dict(zip([s.name for s in sites], sites, strict=True))
    warnings: list[str] = []
    hypotheses: list[Hypothesis] = []
    if split_check is not None:
        warnings += [*split_check.problems, *split_check.warnings]
        entry["class_counts"] = {"train": split_check.train_counts,
                                 "test": split_check.test_counts}
    if spec.permutation_test and split_check is not None and not split_check.testable:
        reason = "; ".join(p.split(": ", 1)[1].split(" (not testable)")[0]
                           for p in split_check.problems)
        hypotheses.append(Hypothesis(
            name=f"{label!r} is linearly decodable ({spec.kind}) at the validation-selected site",
            site=site_of[sweep.sites[best]], metric=sweep.metric,
            statistic=float(sweep.test[best]), p_value=float("nan"),
            n=int(len(ex.splits["test"])), method="permutation test not run (degenerate split)",
            effect_size=float(sweep.test[best]) - entry["chance"],
            effect_size_name=f"{sweep.metric} - chance", alpha=st.alpha, outcome="decodable",
            not_testable=reason,
        ))
    elif spec.permutation_test and spec.kind in ("logistic", "diffmeans"):
        rows = range(len(sweep.sites)) if st.permutation_sites == "all" else [best]
        tasks = [
            PermutationTask(
                X=acts[site_of[sweep.sites[row]]], y=y, train_idx=ex.splits["train"],
                test_idx=ex.splits["test"], probe=spec.kind,
                C=float(sweep.hyperparameter[row]) if spec.kind == "logistic" else None,
                n_permutations=st.n_permutations, random_state=st.seed + row,
                device=suite.device,
            )
            for row in rows
        ]
        tests = ctx.executor.map(permutation_test_of, tasks, desc="permutation tests")
        pvals = [float(t.p_value) for t in tests]
        at_floor = 1.0 / (1 + st.n_permutations)
        if len(pvals) > 1 and all(p <= at_floor * (1 + 1e-9) for p in pvals):
            warnings.append(
                f"every site's p-value is at its floor 1/(1+{st.n_permutations}) = "
                f"{at_floor:.3g} (the permutation test's smallest): the tests cannot rank the "
                f"sites (each p <= {at_floor:.3g}); a larger [stats] permutation count resolves "
                "them"
            )
        if st.permutation_sites == "all":
            adj = adjust_pvalues(np.asarray(pvals), method=st.correction, alpha=st.alpha).p_adjusted
            floor = float(
                min(1.0, len(pvals) / (1 + st.n_permutations))
                if st.correction == "holm" else 1 / (1 + st.n_permutations)
            )
            entry["permutation"] = {
                "n_permutations": st.n_permutations, "p_values": pvals,
                "p_adjusted": adj.tolist(), "correction": st.correction,
                "min_achievable_adjusted_p": floor,
            }
            entry["n_significant_sites"] = int((adj <= st.alpha).sum())
            if floor > st.alpha:
                need = int(np.ceil(len(pvals) / st.alpha))
                warnings.append(
                    f"with {st.n_permutations} permutations and {len(pvals)} sites the smallest "
                    f"achievable {st.correction}-adjusted p is {floor:.3g} > alpha={st.alpha}: no "
                    f"site can be significant in the per-site family (the headline test at the "
                    f"validation-selected site is a single test, uncorrected); set [stats] "
                    f"n_permutations >= {need}"
                )
            test_best = tests[best]
        else:
            test_best = tests[0]
        if 1 / (1 + st.n_permutations) > st.alpha:
            warnings.append(
                f"with {st.n_permutations} permutations the smallest possible p-value is "
                f"{1 / (1 + st.n_permutations):.3g} > alpha={st.alpha}: the test cannot reject; "
                f"set [stats] n_permutations >= {int(np.ceil(1 / st.alpha))}"
            )
        # The tested site was chosen by CV on the training split only, so its test-split
        # permutation p-value is a single pre-specified test and needs no correction; the
        # per-site family (entry["permutation"]) is corrected.
        hypotheses.append(Hypothesis.from_test(
            test_best,
            name=f"{label!r} is linearly decodable ({spec.kind}) at the validation-selected site",
            site=site_of[sweep.sites[best]], metric=sweep.metric,
            statistic=float(sweep.test[best]),
            effect_size=float(sweep.test[best]) - entry["chance"],
            effect_size_name=f"{sweep.metric} - chance",
            method=f"permutation test, {st.n_permutations} label shuffles with refits",
            alpha=st.alpha, outcome="decodable",
        ))
    for name, gaps in sweep.ood_gap.items():
        entry.setdefault("ood_gap_at_best", {})[name] = float(gaps[best])
    warnings += _sweep_warnings(sweep, entry["chance"], sites)
    if warnings:
        entry["warnings"] = list(warnings)
    blocks = _sweep_blocks(spec, entry, sweep, control, sites, st.alpha)
    return ProbeResult(
        section="probe", title=f"{spec.kind} probe: {label}", data=entry,
        hypotheses=tuple(hypotheses), blocks=tuple(blocks), warnings=tuple(warnings), sweep=sweep,
    )


def _sweep_warnings(sweep: SweepResult, chance: float, sites: list[Site]) -> list[str]:
    """Warnings a reader needs: overfitting, ceiling ties, a label readable at the embedding."""
    import numpy as np

    from ...sites import Site

    out = []
    best = sweep.best_row
    label = site_label(sweep.sites[best])
    gap = float(sweep.train[best] - sweep.test[best])
    if gap > 0.2:
        out.append(
            f"overfitting at the selected site {label}: train {sweep.metric} "
            f"{sweep.train[best]:.3f} vs test {sweep.test[best]:.3f}"
        )
    top = float(np.nanmax(sweep.val))
    ties = [i for i in range(len(sweep.val)) if sweep.val[i] >= top - 1e-12]
    if len(ties) > 1:
        msg = (
            f"{len(ties)} sites tie at the best validation {sweep.metric} ({top:.3f}); the "
            f"selection takes the earliest ({label})"
        )
        for name, vals in sweep.ood.items():
            peak = int(np.nanargmax(vals))
            msg += f"; OOD {name} peaks at {site_label(sweep.sites[peak])} ({vals[peak]:.3f})"
        out.append(msg)
    for i, name in enumerate(sweep.sites):
        embed = name == Site(None, "embed").name and sweep.metric != "r2"
        if embed and sweep.test_ci_low[i] > chance + 0.05:
            out.append(
                f"the label is decodable at the token embedding (test {sweep.metric} "
                f"{sweep.test[i]:.3f}, CI low {sweep.test_ci_low[i]:.3f} > chance "
                f"{chance:.3f}): the input tokens alone carry it, so decodability at later "
                "sites need not reflect computation"
            )
    return out


def _sweep_blocks(
    spec: ProbeSpec, entry: dict[str, Any], sweep: SweepResult, control: Any,
    sites: list[Site], alpha: float,
) -> list[Any]:
    """The sweep's blocks (:func:`probekit.probes.blocks.sweep_blocks`) with the suite's extras."""
    from ...probes.blocks import sweep_blocks

    return sweep_blocks(
        sweep, label=entry["label"], chance=entry["chance"], chance_text=_CHANCE_TEXT[spec.kind],
        control_test=None if control is None else control.control.test.tolist(),
        selectivity=None if control is None else entry["selectivity"],
        permutation=entry.get("permutation"), alpha=alpha,
    )


def answer_confidence(model: Any, tokens: list[list[int]], batch_size: int = 16) -> np.ndarray:
    """Max next-token probability after each prompt: the model's confidence in its first answer.

    A black-box baseline of "No Answer Needed"; one batched forward pass, no hooks.
    """
    import numpy as np
    import torch

    from ...capture.batching import iter_batches, model_device

    tok = getattr(model, "tokenizer", None)
    pad = getattr(tok, "pad_token_id", None) if tok is not None else None
    out = []
    with torch.inference_mode():
        for batch in iter_batches(tokens, batch_size=batch_size, pad_id=int(pad or 0), side="left"):
            batch = batch.to(model_device(model))
            logits = model(batch.input_ids, attention_mask=batch.attention_mask)
            out.append(torch.softmax(logits[:, -1].double(), -1).amax(-1).cpu().numpy())
    return np.concatenate(out)


def _run_correctness(spec: ProbeSpec, ctx: Any) -> ProbeResult:
    """In-advance correctness probe (No Answer Needed, arXiv 2509.10625) with its controls.

    Diff-of-means direction on raw last-token activations, per-site CV AUROC on the ID questions
    (stratified k-fold, or grouped folds with ``group_column``), fold-wise OOD AUROC, baselines
    on the same folds (group base rate, question text, answer confidence) compared with the
    nested-selection probe (site chosen by inner CV) by paired bootstrap CIs, and the
    best-of-sites statistic tested by max-statistic permutation (all sites refit per shuffle).
    The JSON keeps the sweep layout (val = test = mean CV AUROC, CI = mean +- 1.96 SE over
    folds, clipped to [0, 1]).
    """
    import numpy as np
    import torch

    from ...probes import correctness_probe
    from ...probes.blocks import (
        baseline_rows,
        correctness_blocks,
        correctness_rows,
        survives_controls,
    )

    suite, st, ex = ctx.suite, ctx.stats, ctx.examples
    label = spec.label or suite.data.label
    acts = ctx.activations()
    sites = list(acts)
    widths = {acts[s].shape[1] for s in sites}
    if len(widths) != 1:
        raise SuiteError(
            f"{suite.source}: correctness probes need sites of one width, got {sorted(widths)}"
        )
    stack = torch.stack([acts[s] for s in sites])
    y_all = np.asarray(ex.column(label)).astype(int).astype(bool)
    ids = np.concatenate([ex.splits["train"], ex.splits["test"]])
    ood = {k: (stack[:, v], y_all[v]) for k, v in ex.ood_splits.items()}
    groups = None
    if spec.group_column is not None:
        if spec.group_column not in ex.columns:
            raise SuiteError(
                f"{suite.source}: [[probe]] group_column {spec.group_column!r} is not a data "
                f"column; have {sorted(ex.columns)}"
            )
        groups = np.asarray([str(v) for v in ex.column(spec.group_column)])[ids]
    texts = conf = None
    if spec.baselines:
        if "text" in ex.columns:
            texts = [str(t) for t in np.asarray(ex.column("text"), dtype=object)[ids]]
        conf = answer_confidence(ctx.model, [ex.tokens[i] for i in ids])
    res = correctness_probe(
        stack[:, ids], y_all[ids], n_folds=spec.cv, groups=groups, group_split=spec.group_split,
        ood=ood, texts=texts, confidence=conf, n_permutations=st.n_permutations,
        n_bootstrap=max(st.n_bootstrap, 1000), confidence_level=st.confidence_level,
        random_state=st.seed,
    )  # fmt: skip
    rows = correctness_rows(res, [s.name for s in sites], [s.layer for s in sites])
    best = sites.index(next(s for s, lay in zip(sites, res.layers) if lay == res.best_layer))
    grouped = res.within_group_auroc is not None
    metric_name = "within-group AUROC" if grouped else "mean CV AUROC"
    base_rows = baseline_rows(res)
    significant, beats_all = survives_controls(res, st.alpha)
    mx = res.max_stat_test
    entry = {
        "kind": "correctness", "label": label, "chance": 0.5,
        "n_correct": int(res.n_correct), "n_incorrect": int(res.n_incorrect),
        "evaluation": res.evaluation, "group_column": spec.group_column,
        "sweep": {"probe": "correctness", "metric": "auroc", "confidence_level": 0.95,
                  "n_bootstrap": 0, "rows": rows,
                  "best": {"site": sites[best].name, "layer": sites[best].layer,
                           "cv_auroc": rows[best]["cv_auroc"]}},
        "ood_gap_at_best": {k: rows[best][f"gap/{k}"] for k in ood},
        "nested_selection": {
            "sites": [sites[res.layers.index(lay)].name for lay in res.selected_layers],
            "pooled_auroc": res.selected_pooled_auroc,
            "within_group_auroc": res.selected_within_group_auroc if grouped else None,
        },
        "baselines": base_rows,
        "max_statistic": None if mx is None else {
            "statistic": mx.statistic, "p_value": mx.p_value, "method": mx.method},
        "survives_controls": bool(significant and beats_all),
    }
    hypotheses = ()
    if mx is not None:
        hypotheses = (Hypothesis.from_test(
            mx, name="the answer's correctness is predictable from the question alone "
                     f"(best of {len(sites)} sites, {metric_name})",
            site=sites[best], metric=f"max over sites of {metric_name}",
            effect_size=float(mx.statistic) - 0.5, effect_size_name="AUROC - 0.5",
            alpha=st.alpha, outcome="predictable",
        ),)  # fmt: skip
    blocks = correctness_blocks(res, [s.name for s in sites], label=label, alpha=st.alpha)
    return ProbeResult(
        section="probe", title=f"correctness probe: {label}", data=entry,
        hypotheses=hypotheses, blocks=tuple(blocks),
    )
