"""Run a suite: context (model, examples, cached activations) -> every analysis section."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..executor import Executor
from ..models.protocol import HookedModel
from ..progress import progress_settings
from ..report.blocks import Block, Column, Table, Text, strict_json
from ..report.notebook import NotebookMixin
from .check import check_suite_data, check_task_vocab
from .context import AnalysisContext
from .registry import analysis_for_spec
from .result import AnalysisResult, Hypothesis
from .spec import Suite

__all__ = ["AnalysisTask", "SuiteResult", "run_analysis", "run_suite"]


@dataclass(frozen=True, kw_only=True, repr=False)
class SuiteResult(NotebookMixin):
    """Everything a suite run produced; :mod:`probekit.report` renders ``to_dict()``.

    Attributes:
        suite: the suite that ran.
        model, data: provenance (model id/fingerprint, splits, sites, device ...).
        analyses: one result per analysis table, in file order.
        provenance: timestamp, run time and the like.
    """

    suite: Suite
    model: dict[str, Any]
    data: dict[str, Any]
    analyses: tuple[AnalysisResult, ...] = ()
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def hypotheses(self) -> list[Hypothesis]:
        """Every analysis' hypothesis tests, in order."""
        return [h for a in self.analyses for h in a.hypotheses]

    @property
    def probes(self) -> list[dict[str, Any]]:
        """Report data of the ``[[probe]]`` analyses (in ``report.json``: their ``analyses`` entries)."""
        return [dict(a.data) for a in self.analyses if a.section == "probe"]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON form (NaN -> null) of the whole run: what ``report.json`` holds."""
        return strict_json({
            "suite": self.suite.to_dict(),
            "model": self.model,
            "data": self.data,
            "provenance": self.provenance,
            "hypotheses": [h.to_dict() for h in self.hypotheses],
            "analyses": [a.to_dict() for a in self.analyses],
        })

    def to_records(self) -> list[dict[str, Any]]:
        """One row per analysis: section, title and how many blocks, hypotheses, warnings."""
        return [{"section": a.section, "title": a.title, "n_blocks": len(a.blocks),
                 "n_hypotheses": len(a.hypotheses), "n_warnings": len(a.warnings)}
                for a in self.analyses]

    def _blocks(self) -> tuple[Block, ...]:
        """A contents table, then each analysis' heading and its report blocks, in order."""
        contents = Table(
            title=f"{self.suite.name}: analyses",
            columns=(Column(key="section", header="section", fmt="", align="left"),
                     Column(key="title", header="title", fmt="", align="left"),
                     Column(key="n_blocks", header="blocks", fmt="d"),
                     Column(key="n_hypotheses", header="hypotheses", fmt="d"),
                     Column(key="n_warnings", header="warnings", fmt="d")),
            rows=tuple(self.to_records()),
        )
        body: list[Block] = [contents]
        for a in self.analyses:
            body.append(Text(text=f"[{a.section}] {a.title}"))
            body.extend(a.sections())
        return tuple(body)

    def _title(self) -> str:
        return self.suite.name

    def _summary(self) -> str:
        return (f"{self.suite.name} on {self.model.get('id', '?')}: {len(self.analyses)} "
                f"analyses, {len(self.hypotheses)} hypotheses")


@dataclass(frozen=True, kw_only=True)
class AnalysisTask:
    """One analysis table of a suite with its context: a picklable executor task."""

    spec: Any
    context: AnalysisContext


def run_analysis(task: AnalysisTask) -> AnalysisResult:
    """Run the registered analysis of ``task.spec``."""
    return analysis_for_spec(task.spec).run(task.spec, task.context)


def run_suite(
    suite: Suite, *, progress: bool = True, model: HookedModel | None = None,
    executor: str | Executor | None = None, cache_dir: str | Path | None = None,
) -> SuiteResult:
    """Run every analysis of ``suite``; returns numbers and report blocks, writes no report.

    Args:
        suite: a validated suite (:func:`probekit.suites.load_suite`).
        progress: progress bars (shown only on a terminal).
        model: an already loaded model (default: loaded from ``[model]`` when first needed).
        executor: runs the independent tasks (analyses, per-site permutation tests); a name or
            :class:`probekit.executor.Executor`, default the suite's ``[execution]`` table (in-process when absent).
        cache_dir: root of the activation cache (default ``PROBEKIT_CACHE``).
    """
    start = time.perf_counter()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    check_suite_data(suite)  # FILE:LINE errors before the model loads
    check_task_vocab(suite)  # the --check rule: a task's vocabulary within the model's
    ctx = AnalysisContext(suite, model=model, progress=progress, executor=executor,
                          cache_dir=cache_dir)
    tasks = [AnalysisTask(spec=spec, context=ctx) for spec in suite.analyses]
    with progress_settings(enabled=progress):  # the analyses' own phases too
        results = ctx.executor.map(run_analysis, tasks, desc="analyses")
    ex = ctx.examples
    sites = ctx.default_sites()
    return SuiteResult(
        suite=suite,
        model=ctx.model_info(),
        data={
            "n_examples": len(ex.tokens),
            "splits": {k: int(len(v)) for k, v in ex.splits.items()},
            "sites": [s.name for s in sites],
            "positions": suite.capture.positions,
            "probe_device": ctx.device,
            **ctx.data_info(),
        },
        analyses=tuple(results),
        provenance={
            "timestamp": stamp,
            "run_seconds": round(time.perf_counter() - start, 2),
            "forward_passes": ctx.forward_passes,
        },
    )
