"""A diagnosis in a notebook: the report's blocks, the ranking's records (issue 35)."""

from __future__ import annotations

from typing import Any

from probekit.report.blocks import Block, Fold, Heatmap, LinePlot, Scatter, Table, Text
from probekit.report.notebook import BlockView, NotebookMixin

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

    def population(self) -> BlockView:
        """The report's Population section (design, outcomes, markers), shown in a notebook."""
        from .population_section import population_blocks

        return BlockView("Population", tuple(population_blocks(self.to_dict())))

    def parts(self) -> dict[str, BlockView]:
        """The report's parts, each displayable on its own in a notebook.

        Each is a :class:`~probekit.report.notebook.BlockView` (``_repr_html_``, ``plot()``,
        ``to_records()``). Keys, in report order, those present: ``"ranking"`` (the verdict table and the
        sentences), ``"levels"``, ``"scatters"``, ``"granulated"`` (tau and CMI),
        ``"early_warning"``, ``"causal"``, ``"calibration"``, ``"not_applicable"``; the
        warnings before the ranking are part of it. A part runs from its first block to the
        next part's.
        """
        out: dict[str, list[Block]] = {}
        current = "ranking"
        for b in self.blocks:
            head = _part_of(b)
            if head is not None and head != current and (head not in out or head == "scatters"):
                current = head
            out.setdefault(current, []).append(b)
        titles = {"ranking": self._title(), "levels": "Level means (An & Du's unit)",
                  "scatters": "Scatter plots", "granulated": "Granulated tau and CMI",
                  "early_warning": "Early warning", "causal": "Causal evidence",
                  "calibration": "What this population can detect",
                  "not_applicable": "Markers not applicable"}
        return {k: BlockView(titles.get(k, k), tuple(v)) for k, v in out.items()}

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


_HEADS = (("level means", "levels"), ("Granulated Kendall tau", "granulated"),
          ("Conditional mutual information", "granulated"), ("early warning", "early_warning"),
          ("What this population can detect", "calibration"),
          ("Markers not applicable", "not_applicable"), ("Causal evidence", "causal"))


def _part_of(block: Block) -> str | None:
    """The part a block opens (by its kind and title), or None when it continues one."""
    if isinstance(block, Scatter) or (isinstance(block, Fold) and block.anchor == "scatters"):
        return "scatters"
    title = block.text if isinstance(block, Text) else getattr(block, "title", "")
    if isinstance(block, Table) and block.anchor == "verdicts":
        return "ranking"
    for prefix, part in _HEADS:
        if title.startswith(prefix) and (not isinstance(block, Text) or part == "causal"):
            return part
    return None
