"""A diagnosis in a notebook: the report's blocks, the ranking's records (issue 35)."""

from __future__ import annotations

from typing import Any

from probekit.report.blocks import Block, Heatmap, LinePlot, Scatter
from probekit.report.notebook import NotebookMixin

__all__ = ["DiagnosisDisplay"]


class DiagnosisDisplay(NotebookMixin):
    """Notebook display of a diagnosis result that holds ``analysis``, ``table`` and ``blocks``.

    ``to_records()`` is the ranking (one row per marker, :meth:`MarkerAnalysis.to_records`),
    or one row per model of the table when no marker was applicable; ``_repr_html_()`` renders
    the report's own blocks; ``plot()`` is the analysis's main plot (the top marker's
    partial-residual scatter), else the report's first line plot or heatmap.
    """

    __slots__ = ()
    analysis: Any
    table: dict[str, list[Any]]
    blocks: tuple[Any, ...]
    settings: Any

    def to_records(self) -> list[dict[str, Any]]:
        """The ranking's rows; without an analysis, one dict per row of the table."""
        if self.analysis is not None:
            return list(self.analysis.to_records())
        n = len(next(iter(self.table.values()), []))
        return [{k: v[i] for k, v in self.table.items()} for i in range(n)]

    def _blocks(self) -> tuple[Block, ...]:
        return tuple(self.blocks)

    def _title(self) -> str:
        return f"Diagnosis: which markers predict {self.settings.outcome}"

    def _main_plot(self) -> LinePlot | Heatmap | Scatter | None:
        if self.analysis is not None:
            block = self.analysis._main_plot()
            if block is not None:
                return block
        return super()._main_plot()

    def _summary(self) -> str:
        if self.analysis is not None:
            return self.analysis._summary()
        n = len(next(iter(self.table.values()), []))
        return f"{n} rows, outcome {self.settings.outcome}: no applicable marker"
