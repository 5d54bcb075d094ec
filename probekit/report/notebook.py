"""Results that show themselves in a notebook: one mixin over the report's own renderer.

A result class defines two things:

* ``to_records() -> list[dict]``: one plain dict per row (numbers as Python floats/ints);
* ``_blocks() -> tuple[Block, ...]``: the report blocks (:mod:`probekit.report.blocks`) the
  HTML report shows for it -- the suite analyses call the same method (or the function it
  wraps), so a table or plot is built in one place only.

and, optionally, ``_summary() -> str`` (the headline numbers of ``repr``) and ``_title()``.
:class:`NotebookMixin` then gives

* ``to_frame()``: a ``pandas.DataFrame`` of ``to_records()`` (pandas is the ``notebook``
  extra; a :class:`~probekit.errors.ConfigError` names it when absent);
* ``_repr_html_()``: the blocks rendered by the report's own block template and plot code
  (:func:`probekit.report.write.render_blocks_html`, plots as base64 PNG): evaluating a result
  in a Jupyter cell shows its table and plot;
* ``plot(ax=None)``: the matplotlib ``Figure`` of its main plot block (the report's plot,
  drawn by :mod:`probekit.report.plots`), on ``ax`` when given;
* a short ``__repr__`` for terminals: ``TypeName(headline numbers)``.

Result classes are dataclasses: declare them with ``repr=False`` so the mixin's ``__repr__``
is not replaced by the generated field dump.

This module imports nothing heavy at import time (matplotlib, jinja2 and pandas load inside
the methods), so low layers such as :mod:`probekit.stats` can use it.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .blocks import Block, Heatmap, LinePlot, Scatter

__all__ = ["NOTEBOOK_INSTALL_HINT", "BlockView", "NotebookMixin", "require_pandas"]

NOTEBOOK_INSTALL_HINT = "pip install 'probekit-interp[notebook]'"
_MAX_REPR = 280


def require_pandas() -> Any:
    """The ``pandas`` module, or a one-line :class:`ConfigError` naming the extra to install."""
    try:
        import pandas
    except ImportError:
        raise ConfigError(
            f"to_frame() needs pandas, which is not installed; {NOTEBOOK_INSTALL_HINT} "
            "(or use to_records(), a list of dicts)"
        ) from None
    return pandas


class NotebookMixin:
    """``to_frame``, ``_repr_html_``, ``plot`` and a short ``repr`` from ``to_records`` + ``_blocks``."""

    __slots__ = ()

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per row of the result's table."""
        raise NotImplementedError(f"{type(self).__name__} must define to_records()")

    def _blocks(self) -> tuple[Block, ...]:
        raise NotImplementedError(f"{type(self).__name__} must define _blocks()")

    def _title(self) -> str:
        return type(self).__name__

    def _summary(self) -> str:
        return f"{len(self.to_records())} rows"

    def to_frame(self) -> Any:
        """``to_records()`` as a ``pandas.DataFrame`` (needs the ``notebook`` extra)."""
        pd = require_pandas()
        return pd.DataFrame.from_records(self.to_records())

    def _repr_html_(self) -> str:
        from .write import render_blocks_html

        return render_blocks_html([b.to_dict() for b in self._blocks()], title=self._title())

    def _main_plot(self) -> LinePlot | Heatmap | Scatter | None:
        """The first plot block (override to choose another)."""
        return next((b for b in self._blocks() if isinstance(b, (LinePlot, Heatmap))), None)

    def plot(self, ax: Any = None) -> Any:
        """The matplotlib ``Figure`` of the result's main plot (the one the report shows).

        Args:
            ax: a matplotlib ``Axes`` to draw on; ``None`` draws on a new ``Figure`` (closed
                in ``pyplot`` at once, so a notebook shows it once, as the cell's value).

        Returns:
            The figure holding the plot.

        Raises:
            ConfigError: the result has no plot in the report (show its table instead).
        """
        block = self._main_plot()
        if block is None:
            raise ConfigError(
                f"{type(self).__name__} has no plot in the report; show its table with "
                "to_frame() or by evaluating the result in a notebook cell"
            )
        from . import plots

        data = block.to_dict()
        if isinstance(block, LinePlot):
            draw, size = plots.draw_line_plot, plots.line_plot_figsize(data)
        elif isinstance(block, Scatter):
            draw, size = plots.draw_scatter, (5.0, 3.8)
        else:
            draw, size = plots.draw_heatmap, plots.heatmap_figsize(data)
        if ax is None:
            import matplotlib.pyplot as plt

            # a pyplot figure (so the notebook's inline backend can draw it), closed at once:
            # pyplot does not show it again at the end of the cell; the returned value shows it
            fig = plt.figure(figsize=size, layout="constrained")
            plt.close(fig)
            ax = fig.subplots()
        draw(data, ax)
        return ax.figure

    def __repr__(self) -> str:
        text = f"{type(self).__name__}({self._summary()})"
        return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 4] + "...)"


class BlockView(NotebookMixin):
    """A titled run of report blocks shown on its own in a notebook (one part of a report).

    ``to_records()`` is the rows of its first table (else one ``{"text": ...}`` per
    paragraph); ``_repr_html_()`` and ``plot()`` are the mixin's, on these blocks.
    """

    __slots__ = ("_items", "_name")

    def __init__(self, title: str, blocks: tuple[Block, ...]) -> None:
        """``title``: the cell's heading; ``blocks``: the report blocks of this part."""
        self._name = title
        self._items = tuple(blocks)

    def _blocks(self) -> tuple[Block, ...]:
        return self._items

    def _title(self) -> str:
        return self._name

    def to_records(self) -> list[dict[str, Any]]:
        """Rows of the first table, else one ``{"text": ...}`` per paragraph."""
        from .blocks import Table, Text

        table = next((b for b in _opened(self._items) if isinstance(b, Table)), None)
        if table is not None:
            return [dict(r) for r in table.rows]
        return [{"text": b.text} for b in _opened(self._items) if isinstance(b, Text)]

    def _main_plot(self) -> LinePlot | Heatmap | Scatter | None:
        return next((b for b in _opened(self._items)
                     if isinstance(b, (LinePlot, Heatmap, Scatter))), None)

    def _summary(self) -> str:
        return f"{self._name!r}, {len(self._items)} blocks"


def _opened(blocks: tuple[Block, ...]) -> list[Block]:
    """``blocks`` with every :class:`~probekit.report.blocks.Fold` replaced by its blocks."""
    from .blocks import Fold

    out: list[Block] = []
    for b in blocks:
        out.extend(_opened(tuple(b.blocks)) if isinstance(b, Fold) else [b])
    return out
