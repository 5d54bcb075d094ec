"""Decodability of a label at every site: layer sweep, control task and permutation tests.

What a ``[[probe]]`` suite section computes, as one function of activations and labels
(:func:`decodability`): the batched layer sweep of one probe kind
(:func:`~probekit.probes.sweep_layers`; best site chosen on CV validation, reported on test
with bootstrap CIs, ID - OOD gaps), optionally the control task of Hewitt & Liang (2019)
(:func:`~probekit.probes.selectivity_sweep`), and permutation tests (labels shuffled, probe
refit; Phipson & Smyth 2010) at the validation-selected site and, with ``sites="all"``, at every
site (Holm/BH-adjusted). Degenerate class splits (:func:`~probekit.probes.splits.check_class_splits`)
make the test *not testable* instead of a rejection. The probe kind decides what applies
(:class:`~probekit.probes.kind.ProbeKind`: classifier, permutation and control support).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..executor import Executor, get_executor
from ..sites import Site, site_label
from ..stats.result import StatTestResult
from ._validation import IndexLike
from .control import SelectivityResult, selectivity_sweep
from .kind import ProbeKind, probe_kind
from .permutation import probe_permutation_test
from .splits import check_class_splits
from .sweep import SweepConfig, SweepResult, sweep_layers

__all__ = [
    "DecodabilityResult",
    "PermutationPlan",
    "PermutationTask",
    "decodability",
    "permutation_test_of",
]


@dataclass(frozen=True, kw_only=True)
class PermutationPlan:
    """How :func:`decodability` runs permutation tests.

    Attributes:
        n_permutations: label shuffles per test.
        sites: ``"best"`` (the validation-selected site only) or ``"all"`` (every site, as a
            family adjusted with ``correction``).
        correction: ``"holm"`` or ``"bh"`` over the per-site family.
        alpha: significance level (for the family count and the warnings).
        seed: seed of row ``i``'s shuffles is ``seed + i``.
    """

    n_permutations: int
    sites: str = "all"
    correction: str = "holm"
    alpha: float = 0.05
    seed: int = 0


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


def permutation_test_of(task: PermutationTask) -> StatTestResult:
    """The :class:`~probekit.stats.StatTestResult` of ``task``."""
    return probe_permutation_test(
        task.X, task.y, train_idx=task.train_idx, test_idx=task.test_idx, probe=task.probe,
        C=task.C, n_permutations=task.n_permutations, random_state=task.random_state,
        device=task.device,
    )


@dataclass(frozen=True, kw_only=True)
class DecodabilityResult:
    """What :func:`decodability` found.

    Attributes:
        kind: the probe kind.
        sweep: the task sweep (the control task's sweep is in ``control``).
        control: task and control sweeps with selectivity (None without a control task).
        chance: the kind's chance level on the test labels.
        test: permutation test at the validation-selected site (None: not run).
        not_testable: why the test could not be run (a degenerate class split), else empty.
        n_test: test examples.
        data: the report's JSON numbers (``kind``, ``label``, ``sweep``, ``chance`` ...).
        warnings: sentences the reader must see.
    """

    kind: ProbeKind
    sweep: SweepResult
    control: SelectivityResult | None
    chance: float
    test: StatTestResult | None
    not_testable: str
    n_test: int
    data: dict[str, Any]
    warnings: tuple[str, ...]


def decodability(
    acts: Mapping[Any, torch.Tensor],
    labels: Sequence[Any] | np.ndarray,
    *,
    label: str,
    train_idx: IndexLike,
    test_idx: IndexLike,
    ood_idx: Mapping[str, IndexLike] | None = None,
    config: SweepConfig,
    control_types: Sequence[Any] | None = None,
    control_column: str | None = None,
    permutation: PermutationPlan | None = None,
    executor: str | Executor | None = None,
) -> DecodabilityResult:
    """Sweep ``config.probe`` over the sites of ``acts``, with control task and permutation tests.

    Args:
        acts: site -> ``(n, d)`` activations (every split's examples).
        labels: ``(n,)`` raw label values (strings for classifiers, numbers otherwise).
        label: the label's name (messages, ``data``).
        train_idx: the ID training split.
        test_idx: the ID test split.
        ood_idx: named OOD splits.
        config: the sweep's options (probe kind, grids, CV, bootstrap, seed, device).
        control_types: ``(n,)`` word types for a control task (None: no control; ignored by
            kinds without ``supports_control``).
        control_column: the types' column name (recorded in ``data``).
        permutation: the permutation tests to run (None: none).
        executor: runs one task per tested site (default in-process).
    """
    from ..stats import adjust_pvalues

    kind = probe_kind(config.probe)
    y = kind.suite_labels(labels)
    tr, te = np.asarray(train_idx), np.asarray(test_idx)
    split_check = None
    if kind.is_classifier:  # degenerate class splits: errors or not testable
        split_check = check_class_splits(y, tr, te, cv=config.cv, name=f"label {label!r}")
    entry: dict[str, Any] = {"kind": kind.name, "label": label}
    control = None
    if control_types is not None and kind.supports_control:
        control = selectivity_sweep(acts, y, [str(v) for v in control_types], train_idx=tr,
                                    test_idx=te, ood_idx=ood_idx, config=config)
        sweep = control.task
        entry["control"] = control.control.to_dict()
        entry["selectivity"] = [float(v) for v in control.selectivity]
        entry["control_column"] = control_column
    else:
        sweep = sweep_layers(acts, y, train_idx=tr, test_idx=te, ood_idx=ood_idx, config=config)
    entry["sweep"] = sweep.to_dict()
    entry["chance"] = kind.chance(y[te])
    best = sweep.best_row
    warnings: list[str] = []
    if split_check is not None:
        warnings += [*split_check.problems, *split_check.warnings]
        entry["class_counts"] = {"train": split_check.train_counts, "test": split_check.test_counts}
    test, not_testable = None, ""
    if permutation is not None and split_check is not None and not split_check.testable:
        not_testable = "; ".join(p.split(": ", 1)[1].split(" (not testable)")[0]
                                 for p in split_check.problems)
    elif permutation is not None and kind.supports_permutation:
        test, more = _permutation_tests(acts, y, tr, te, sweep, kind, permutation, config,
                                        executor, entry, adjust_pvalues)
        warnings += more
    for name, gaps in sweep.ood_gap.items():
        entry.setdefault("ood_gap_at_best", {})[name] = float(gaps[best])
    warnings += sweep_warnings(sweep, entry["chance"], kind)
    if warnings:
        entry["warnings"] = list(warnings)
    return DecodabilityResult(
        kind=kind, sweep=sweep, control=control, chance=entry["chance"], test=test,
        not_testable=not_testable, n_test=len(te), data=entry, warnings=tuple(warnings),
    )


def _permutation_tests(
    acts: Mapping[Any, torch.Tensor], y: np.ndarray, tr: np.ndarray, te: np.ndarray,
    sweep: SweepResult, kind: ProbeKind, plan: PermutationPlan, config: SweepConfig,
    executor: str | Executor | None, entry: dict[str, Any], adjust_pvalues: Any,
) -> tuple[StatTestResult, list[str]]:
    """The headline test (and the per-site family in ``entry``) with its warnings."""
    site_of = {str(getattr(s, "name", s)): s for s in acts}
    best = sweep.best_row
    rows = range(len(sweep.sites)) if plan.sites == "all" else [best]
    n_perm, alpha = plan.n_permutations, plan.alpha
    device = None if config.device is None else str(config.device)
    tasks = []
    for row in rows:
        h = float(sweep.hyperparameter[row])
        tasks.append(PermutationTask(
            X=acts[site_of[sweep.sites[row]]], y=y, train_idx=tr, test_idx=te, probe=kind.name,
            C=None if np.isnan(h) else h, n_permutations=n_perm, random_state=plan.seed + row,
            device=device,
        ))  # fmt: skip
    tests = get_executor(executor).map(permutation_test_of, tasks, desc="permutation tests")
    pvals = [float(t.p_value) for t in tests]
    warnings = []
    at_floor = 1.0 / (1 + n_perm)
    if len(pvals) > 1 and all(p <= at_floor * (1 + 1e-9) for p in pvals):
        warnings.append(
            f"every site's p-value is at its floor 1/(1+{n_perm}) = {at_floor:.3g} (the "
            f"permutation test's smallest): the tests cannot rank the sites (each p <= "
            f"{at_floor:.3g}); a larger [stats] permutation count resolves them"
        )
    if plan.sites == "all":
        adj = adjust_pvalues(np.asarray(pvals), method=plan.correction, alpha=alpha).p_adjusted
        floor = float(min(1.0, len(pvals) / (1 + n_perm)) if plan.correction == "holm"
                      else 1 / (1 + n_perm))
        entry["permutation"] = {
            "n_permutations": n_perm, "p_values": pvals, "p_adjusted": adj.tolist(),
            "correction": plan.correction, "min_achievable_adjusted_p": floor,
        }
        entry["n_significant_sites"] = int((adj <= alpha).sum())
        if floor > alpha:
            need = int(np.ceil(len(pvals) / alpha))
            warnings.append(
                f"with {n_perm} permutations and {len(pvals)} sites the smallest achievable "
                f"{plan.correction}-adjusted p is {floor:.3g} > alpha={alpha}: no site can be "
                "significant in the per-site family (the headline test at the "
                "validation-selected site is a single test, uncorrected); set [stats] "
                f"n_permutations >= {need}"
            )
        test_best = tests[best]
    else:
        test_best = tests[0]
    if 1 / (1 + n_perm) > alpha:
        warnings.append(
            f"with {n_perm} permutations the smallest possible p-value is "
            f"{1 / (1 + n_perm):.3g} > alpha={alpha}: the test cannot reject; set [stats] "
            f"n_permutations >= {int(np.ceil(1 / alpha))}"
        )
    return test_best, warnings


def sweep_warnings(sweep: SweepResult, chance: float, kind: ProbeKind) -> list[str]:
    """Warnings a reader needs: overfitting, ceiling ties, a label readable at the embedding."""
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
        embed = name == Site(None, "embed").name and kind.is_classifier
        if embed and sweep.test_ci_low[i] > chance + 0.05:
            out.append(
                f"the label is decodable at the token embedding (test {sweep.metric} "
                f"{sweep.test[i]:.3f}, CI low {sweep.test_ci_low[i]:.3f} > chance "
                f"{chance:.3f}): the input tokens alone carry it, so decodability at later "
                "sites need not reflect computation"
            )
    return out
