"""Typed results of suite analyses: hypotheses (a test with its site) and report sections."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..report.blocks import Block, Table, Text, blocks_to_dicts, strict_json
from ..report.notebook import NotebookMixin
from ..sites import site_label
from ..stats.result import StatTestResult

if TYPE_CHECKING:
    from ..sites import Site

__all__ = ["AnalysisResult", "Hypothesis"]


@dataclass(frozen=True, kw_only=True, repr=False)
class Hypothesis(StatTestResult):
    """A hypothesis test of a suite, at a site: a :class:`StatTestResult` with its context.

    Attributes:
        name: the claim tested, e.g. ``"'answer' is linearly decodable at the selected site"``.
        site: where it was measured (``None`` for model-level claims).
        metric: what ``statistic`` is (``"accuracy"``, ``"auroc"`` ...).
        alpha: the level it is judged at.
        outcome: what rejecting H0 means here (``"decodable"``), shown in the verdict.
        not_testable: why the data cannot test the hypothesis (e.g. a test split with a single
            class); when set the verdict is ``"not testable"`` and H0 is never rejected.
    """

    name: str
    site: Site | None = None
    metric: str = ""
    alpha: float = 0.05
    outcome: str = ""
    not_testable: str = ""

    @classmethod
    def from_test(cls, test: StatTestResult, **context: Any) -> Hypothesis:
        """Attach ``context`` to a test result.

        ``context``: name, site, metric, alpha, outcome; or overrides of the test's fields such
        as ``statistic=``/``effect_size=``.
        """
        values = {f.name: getattr(test, f.name) for f in dataclasses.fields(StatTestResult)}
        return cls(**{**values, **context})

    def _summary(self) -> str:
        p = "n/a" if self.p_value is None or self.p_value != self.p_value else f"{self.p_value:.3g}"
        return (f"{self.name!r}: {self.metric or 'statistic'} {self.statistic:.4g}, "
                f"p={p} -> {self.decision()}")

    def reject(self, alpha: float = 0.05) -> bool:
        """True when ``p_value <= alpha``; never for a hypothesis the data cannot test."""
        return False if self.not_testable else super().reject(alpha)

    def decision(self) -> str:
        """``"reject H0 (decodable)"``, ``"do not reject H0"`` or ``"not testable: ..."``."""
        if self.not_testable:
            return f"not testable: {self.not_testable}"
        if self.reject(self.alpha):
            return f"reject H0 ({self.outcome})" if self.outcome else "reject H0"
        return "do not reject H0"

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON form (site as hook name plus its short label)."""
        return strict_json({
            "name": self.name,
            "site": None if self.site is None else self.site.name,
            "site_label": site_label(self.site),
            "statistic": float(self.statistic),
            "metric": self.metric,
            "effect_size": float(self.effect_size),
            "effect_size_name": self.effect_size_name,
            "p_value": float(self.p_value),
            "n": int(self.n),
            "method": self.method,
            "verdict": self.decision(),
            "alpha": self.alpha,
            "testable": not self.not_testable,
        })


@dataclass(frozen=True, kw_only=True, repr=False)
class AnalysisResult(NotebookMixin):
    """What one analysis section of a suite produced.

    Subclass it to add typed fields (e.g. the sweep object); the report only needs these.

    Attributes:
        section: the registered TOML section (``"probe"``).
        title: heading of its report section.
        data: JSON-ready numbers for ``report.json``.
        hypotheses: its hypothesis tests.
        blocks: report blocks (tables, plots, text) in display order.
        warnings: sentences the reader must see (rendered first, also printed by the CLI).
    """

    section: str
    title: str
    data: Mapping[str, Any] = field(default_factory=dict)
    hypotheses: tuple[Hypothesis, ...] = ()
    blocks: tuple[Block, ...] = ()
    warnings: tuple[str, ...] = ()

    def sections(self) -> list[Block]:
        """Report blocks: warnings first, then the analysis' own blocks."""
        return [Text(text=w, level="warning") for w in self.warnings] + list(self.blocks)

    def to_records(self) -> list[dict[str, Any]]:
        """The rows of the section's last table (its per-site / per-cell table), as in the report."""
        tables = [b for b in self.blocks if isinstance(b, Table)]
        return [dict(r) for r in tables[-1].rows] if tables else []

    def _blocks(self) -> tuple[Block, ...]:
        return tuple(self.sections())

    def _title(self) -> str:
        return self.title

    def _summary(self) -> str:
        return (f"[{self.section}] {self.title!r}: {len(self.blocks)} blocks, "
                f"{len(self.hypotheses)} hypotheses, {len(self.warnings)} warnings")

    def to_dict(self) -> dict[str, Any]:
        """JSON form: section, title, data, warnings, hypotheses and rendered blocks."""
        return strict_json({
            "section": self.section,
            "title": self.title,
            "data": dict(self.data),
            "warnings": list(self.warnings),
            "hypotheses": [h.to_dict() for h in self.hypotheses],
            "blocks": blocks_to_dicts(self.sections()),
        })
