"""Run a hypothesis file: measure every claim with its registered kind, judge, report."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..progress import progress_settings
from ..report.blocks import Block, blocks_to_dicts, strict_json
from ..report.notebook import NotebookMixin
from .calls import call_kind
from .measurement import Measurement
from .registry import get_kind
from .spec import Claim, HypothesisFile, load_hypotheses
from .verdict import PASS, ClaimResult, claims_table, judge_all

__all__ = ["HypothesisResult", "MeasureTask", "measure_claim", "run"]


@dataclass(frozen=True, kw_only=True)
class MeasureTask:
    """One claim with the shared context: a picklable executor task."""

    claim: Claim
    context: Any


def measure_claim(task: MeasureTask) -> Measurement:
    """Run the claim's registered kind (with its control when the comparison needs one).

    A plug-in kind's failure is one line naming the claim, the kind and its module
    (:func:`~probekit.hypotheses.calls.call_kind`).
    """
    kind = get_kind(task.claim.measure)
    control = task.claim.compare == "greater_than_control" if kind.control else None
    return call_kind(kind, task.claim.spec, task.context, subject=f"claim {task.claim.name!r}",
                     control=control)


@dataclass(frozen=True, kw_only=True, repr=False)
class HypothesisResult(NotebookMixin):
    """Verdicts of one hypothesis file; ``to_dict()`` is its ``report.json``.

    Attributes:
        spec: the validated file.
        claims: one :class:`ClaimResult` per ``[[claim]]``, in file order.
        model, data: provenance (as suite reports).
        provenance: timestamp, run time.
    """

    spec: HypothesisFile
    claims: tuple[ClaimResult, ...]
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True iff every claim passed."""
        return all(c.verdict == PASS for c in self.claims)

    def lines(self) -> list[str]:
        """One terminal line per claim."""
        return [c.line() for c in self.claims]

    def to_records(self) -> list[dict[str, Any]]:
        """One row per claim (:meth:`ClaimResult.to_records`), in file order."""
        return [r for c in self.claims for r in c.to_records()]

    def _blocks(self) -> tuple[Block, ...]:
        out: list[Block] = [claims_table(self.claims)]
        for c in self.claims:
            out.extend(c.detail_blocks())
        return tuple(out)

    def _title(self) -> str:
        return f"Claims of {self.spec.suite.name}"

    def _summary(self) -> str:
        n_pass = sum(c.verdict == PASS for c in self.claims)
        return f"{self.spec.suite.name!r}: {n_pass} of {len(self.claims)} claims PASS"

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON report: the suite-report layout plus ``claims`` and ``passed``."""
        hyps = [
            {"name": c.claim.name, "site": None, "site_label": c.claim.measure,
             "statistic": c.effect, "metric": c.metric, "effect_size": None,
             "effect_size_name": "", "p_value": c.p_holm, "n": c.n, "method": c.method,
             "verdict": f"{c.verdict} ({c.claim.describe()}, CI [{c.ci_low:.3f}, {c.ci_high:.3f}])",
             "alpha": c.alpha}
            for c in self.claims
        ]
        return strict_json({
            "suite": self.spec.to_dict(),
            "model": self.model,
            "data": self.data,
            "provenance": self.provenance,
            "hypotheses": hyps,
            "claims": [c.to_dict() for c in self.claims],
            "passed": self.passed,
            "analyses": [{"section": "claims", "title": "Claims", "data": {},
                          "warnings": [], "hypotheses": [], "blocks": blocks_to_dicts(self._blocks())}],
        })


def run(
    path_or_spec: str | Path | HypothesisFile, *, model: Any = None, progress: bool = False,
    executor: Any = None, cache_dir: str | Path | None = None, out: str | Path | None = None,
) -> HypothesisResult:
    """Measure and judge every claim of a hypothesis file; with ``out``, write its report.

    Args:
        path_or_spec: a ``circuits/*.toml`` path or a loaded :class:`HypothesisFile`.
        model: an already loaded model (default: from ``[model]``, loaded when first needed).
        progress: progress bars.
        executor: runs the claims' measurements (name or executor; default in-process).
        cache_dir: activation cache root (default ``PROBEKIT_CACHE``).
        out: directory for ``report.html`` + ``report.json`` (nothing written when None).
    """
    from ..report.write import check_report_dir
    from ..suites.context import AnalysisContext

    if out is not None:  # the user's own report files are refused before any measurement
        check_report_dir(out, flag="out")
    spec = path_or_spec if isinstance(path_or_spec, HypothesisFile) else load_hypotheses(path_or_spec)
    start = time.perf_counter()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    ctx = AnalysisContext(spec.suite, model=model, progress=progress, executor=executor,
                          cache_dir=cache_dir)
    tasks = [MeasureTask(claim=c, context=ctx) for c in spec.claims]
    with progress_settings(enabled=progress):  # every phase of every claim: off unless progress
        measured = ctx.executor.map(measure_claim, tasks, desc="claims")
    st = spec.suite.stats
    claims = judge_all(
        list(zip(spec.claims, measured)), n_bootstrap=st.n_bootstrap,
        n_permutations=max(st.n_permutations, 1000), confidence_level=st.confidence_level,
        alpha=st.alpha, seed=st.seed,
    )
    ex = ctx.examples
    result = HypothesisResult(
        spec=spec, claims=tuple(claims), model=ctx.model_info(),
        data={"n_examples": len(ex.tokens), "splits": {k: int(len(v)) for k, v in ex.splits.items()},
              "positions": spec.suite.capture.positions, "probe_device": ctx.device,
              **ctx.data_info()},
        provenance={"timestamp": stamp, "run_seconds": round(time.perf_counter() - start, 2),
                    "forward_passes": ctx.forward_passes},
    )
    if out is not None:
        from ..report.write import write_report

        write_report(result, out)
    return result
