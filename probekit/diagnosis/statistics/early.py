"""Early warning: markers at each step of a training series against the final outcome.

Guide: ``docs/diagnosis.md``. The marker at series step ``s`` (e.g. 10%, 25%, 50% of
training) against the final outcome, with covariates measured at the same step (train accuracy
or loss so far); the earliest step at which the verdict is ``adds_beyond_covariates``. Each step
is one :func:`~probekit.diagnosis.statistics.analysis.marker_analysis` on that step's rows (Holm over the
markers within the step, not across steps: the earliest-step rule is descriptive and reported
with every step's statistics).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probekit.errors import ConfigError, ProbekitError
from probekit.report.notebook import NotebookMixin

from .analysis import ADDS, MarkerAnalysis, marker_analysis
from .table import as_marker_table

__all__ = ["EarlyWarning", "early_warning"]


@dataclass(frozen=True, kw_only=True, repr=False)
class EarlyWarning(NotebookMixin):
    """Per-step marker analyses of a series and the earliest step each marker adds.

    In a notebook it shows the report's early-warning curves and sentences
    (:func:`.blocks.early_blocks`); ``plot()`` draws the partial-r curve.

    Attributes:
        outcome, step, markers, covariates, groups: the columns.
        steps: the step values in increasing order.
        analyses: one :class:`MarkerAnalysis` per step.
        earliest: marker -> the first step whose verdict is ``adds_beyond_covariates`` (None if
            never).
    """

    outcome: str
    step: str
    markers: tuple[str, ...]
    covariates: tuple[str, ...]
    groups: str | None
    steps: tuple[Any, ...]
    analyses: tuple[MarkerAnalysis, ...]
    earliest: dict[str, Any]

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per (step, marker): ``step`` plus the marker's record at that step."""
        return [{"step": s, **rec} for s, a in zip(self.steps, self.analyses, strict=True)
                for rec in a.to_records()]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON form: steps, the earliest step per marker and every record."""
        from probekit.report.blocks import strict_json

        return strict_json({"outcome": self.outcome, "step": self.step, "steps": list(self.steps),
                            "covariates": list(self.covariates), "groups": self.groups,
                            "earliest": dict(self.earliest), "records": self.to_records()})

    def _title(self) -> str:
        return f"Early warning: markers per {self.step} vs the final {self.outcome}"

    def _summary(self) -> str:
        first = ", ".join(f"{m} {'never' if s is None else s}" for m, s in self.earliest.items())
        return f"{len(self.steps)} steps, outcome {self.outcome}, earliest {self.step}: {first}"

    def _blocks(self) -> tuple[Any, ...]:
        from .blocks import early_blocks

        return tuple(early_blocks(self))

    def sentence(self, marker: str) -> str:
        """One sentence: the earliest step at which ``marker`` adds beyond the covariates.

        E.g. ``"gini first adds beyond wd, train_acc at step 200 (steps 100, 200, 300)."``
        """
        first = self.earliest[marker]
        given = f"beyond {', '.join(self.covariates)}" if self.covariates else "out of sample"
        where = ", ".join(str(s) for s in self.steps)
        if first is None:
            return f"{marker} adds {given} at no step (steps {where})."
        return f"{marker} first adds {given} at step {first} (steps {where})."


def early_warning(
    table: Mapping[str, Sequence[Any]] | Any,
    outcome: str,
    *,
    step: str,
    markers: Sequence[str],
    covariates: Sequence[str] = (),
    groups: str | None = None,
    n_permutations: int = 1000,
    n_bootstrap: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    confidence_level: float = 0.95,
    covariate_coding: Mapping[str, str] | None = None,
    spline_df: int = 4,
) -> EarlyWarning:
    """Run :func:`marker_analysis` at every step of a long-form series table.

    Args:
        table: one row per (model, step); ``outcome`` is the model's *final* outcome repeated
            on each of its rows; markers and covariates are measured at that row's step.
        outcome: the final outcome column.
        step: the step column (numbers or labels; sorted).
        markers: marker columns.
        covariates: covariates measured at the same step (e.g. train accuracy so far) and
            design knobs.
        groups: the resampling / leave-out unit, as in :func:`marker_analysis`.
        n_permutations: permutations per step.
        n_bootstrap: bootstrap resamples per step.
        alpha: level of the Holm-adjusted tests (within each step).
        seed: the same seed at every step.
        confidence_level: level of the intervals.
        covariate_coding: how each covariate enters, as in :func:`marker_analysis` (coded
            per step: a column's levels at that step).
        spline_df: columns of each spline covariate.

    Returns:
        An :class:`EarlyWarning`.

    Raises:
        ConfigError / DataError: as :func:`marker_analysis`, with the step named.
    """
    t = as_marker_table(table)
    t.check_names([step], "step")
    if step == outcome or step in covariates or step in markers:
        raise ConfigError(f"the step column {step!r} is also the outcome, a covariate or a marker")
    code, levels = t.codes(step, "step")
    markers = (markers,) if isinstance(markers, str) else tuple(markers)
    covariates = (covariates,) if isinstance(covariates, str) else tuple(covariates)
    analyses = []
    for k, level in enumerate(levels):
        rows = np.flatnonzero(code == k)
        sub = {name: col[rows].tolist() for name, col in t.columns.items()}
        try:
            analyses.append(marker_analysis(
                sub, outcome, markers=markers, covariates=covariates, groups=groups,
                n_permutations=n_permutations, n_bootstrap=n_bootstrap, alpha=alpha, seed=seed,
                confidence_level=confidence_level, covariate_coding=covariate_coding,
                spline_df=spline_df,
            ))
        except ProbekitError as e:
            raise type(e)(f"step {step}={level!r}: {e}") from e
    earliest = {}
    for name in markers:
        earliest[name] = next((s for s, a in zip(levels, analyses, strict=True)
                               if a[name].verdict == ADDS), None)
    return EarlyWarning(outcome=outcome, step=step, markers=markers, covariates=covariates,
                        groups=groups, steps=tuple(levels), analyses=tuple(analyses),
                        earliest=earliest)
