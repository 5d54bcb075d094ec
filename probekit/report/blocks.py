"""Typed report blocks: what an analysis asks the report to show, rendered generically.

An analysis result exposes ``sections()`` -> a list of blocks; the HTML template renders each
block by its type (a table, a line/bar plot over sites, a heatmap, a paragraph or a warning),
never by which analysis made it. Blocks serialise to plain JSON (``to_dict``), so a saved
``report.json`` re-renders without running anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError

__all__ = [
    "Block", "Bullets", "Column", "Fold", "Forest", "Heatmap", "LinePlot", "Links", "Scatter",
    "Series", "Table", "Text", "strict_json",
]


def strict_json(value: Any) -> Any:
    """``value`` with NaN/inf floats replaced by ``None`` (JSON ``null``), recursively.

    ``json.dumps(strict_json(x), allow_nan=False)`` then never writes the non-standard ``NaN``
    literal that strict JSON parsers reject.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy / torch scalar
        return strict_json(value.item())
    if hasattr(value, "tolist"):
        return strict_json(value.tolist())
    return value


@dataclass(frozen=True, kw_only=True)
class Column:
    """One table column: ``key`` into each row dict, its header and a format.

    ``fmt``: a ``str.format`` spec for numbers (``".3f"``, ``"+.3f"``, ``".3g"``), ``"ci"`` for a
    ``[low, high]`` pair (3 decimals), ``"p"`` for a p-value (:func:`probekit.report.numbers.
    format_p`, its floor from the row's ``p_floor`` key), or ``""`` for text. Missing / null
    cells render as ``-``; a cell ``{"text": ..., "hover": ...}`` renders its text with the
    hover text on it. ``group``: a header spanning the consecutive columns that name it
    (``"partial"`` over r, CI and p); ``nowrap``: the cell never wraps (names, verdicts).
    """

    key: str
    header: str
    fmt: str = ".3f"
    align: Literal["left", "right"] = "right"
    group: str = ""
    nowrap: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form; ``group`` / ``nowrap`` only when set."""
        out: dict[str, Any] = {"key": self.key, "header": self.header, "fmt": self.fmt,
                               "align": self.align}
        if self.group:
            out["group"] = self.group
        if self.nowrap:
            out["nowrap"] = True
        return out


@dataclass(frozen=True, kw_only=True)
class Table:
    """A table of rows (dicts keyed by column key); ``highlight`` marks rows (e.g. the selected).

    ``anchor``: an HTML id for the table (linked from the report's contents, e.g.
    ``"verdicts"``); ``collapsed``: the report shows it inside a closed ``<details>`` (detail a
    reader opens on demand: level means, granulated tau, not-applicable cells).
    """

    title: str = ""
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]
    highlight: tuple[int, ...] = ()
    caption: str = ""
    anchor: str = ""
    collapsed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "table", ...}``); ``anchor`` / ``collapsed`` only when set."""
        out = {
            "block": "table", "title": self.title, "caption": self.caption,
            "columns": [c.to_dict() for c in self.columns],
            "rows": strict_json([dict(r) for r in self.rows]), "highlight": list(self.highlight),
        }
        if self.anchor:
            out["anchor"] = self.anchor
        if self.collapsed:
            out["collapsed"] = True
        return out


@dataclass(frozen=True, kw_only=True)
class Series:
    """One line (or bars) of a :class:`LinePlot`: a value per x label, optional band.

    ``style``: ``"line"`` (solid with markers), ``"dashed"``, ``"dotted"`` or ``"bar"``.
    Values that are ``None``/NaN are not drawn and the series is left out of the legend when
    it has no finite value at all.
    """

    name: str
    values: tuple[float | None, ...]
    low: tuple[float | None, ...] | None = None
    high: tuple[float | None, ...] | None = None
    style: Literal["line", "dashed", "dotted", "bar"] = "line"
    color: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return strict_json({
            "name": self.name, "values": list(self.values), "style": self.style,
            "low": None if self.low is None else list(self.low),
            "high": None if self.high is None else list(self.high), "color": self.color,
        })


@dataclass(frozen=True, kw_only=True)
class LinePlot:
    """Values over an ordered x axis (usually sites, labelled by :func:`site_label`).

    ``hlines``: reference levels ``(value, label)`` (chance, alpha); ``marker``: index of an
    x position to mark (the validation-selected site) with its legend label.
    """

    title: str
    x_labels: tuple[str, ...]
    series: tuple[Series, ...]
    xlabel: str = "site"
    ylabel: str = ""
    hlines: tuple[tuple[float, str], ...] = ()
    marker: int | None = None
    marker_label: str = "selected"
    ylim: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "lineplot", ...}``)."""
        return strict_json({
            "block": "lineplot", "title": self.title, "x_labels": list(self.x_labels),
            "series": [s.to_dict() for s in self.series], "xlabel": self.xlabel,
            "ylabel": self.ylabel, "hlines": [list(h) for h in self.hlines],
            "marker": self.marker, "marker_label": self.marker_label,
            "ylim": None if self.ylim is None else list(self.ylim),
        })


@dataclass(frozen=True, kw_only=True)
class Heatmap:
    """A matrix ``values[row][col]`` with labelled axes and a colour bar."""

    title: str
    values: tuple[tuple[float | None, ...], ...]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    xlabel: str = ""
    ylabel: str = ""
    colorbar: str = ""
    vmin: float | None = None
    vmax: float | None = None
    cmap: str = "viridis"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "heatmap", ...}``)."""
        return strict_json({
            "block": "heatmap", "title": self.title, "values": [list(r) for r in self.values],
            "row_labels": list(self.row_labels), "col_labels": list(self.col_labels),
            "xlabel": self.xlabel, "ylabel": self.ylabel, "colorbar": self.colorbar,
            "vmin": self.vmin, "vmax": self.vmax, "cmap": self.cmap,
        })


@dataclass(frozen=True, kw_only=True)
class Text:
    """A paragraph; ``level="warning"`` renders it highlighted with a "Warning:" prefix."""

    text: str
    level: Literal["info", "warning"] = "info"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "text", ...}``)."""
        return {"block": "text", "text": self.text, "level": self.level}


@dataclass(frozen=True, kw_only=True)
class Scatter:
    """Points ``(x[i], y[i])``, optionally coloured by a category per point (one legend entry each).

    ``categories``: one label per point (e.g. a design knob's value), drawn in order of first
    appearance; ``color_label`` titles the legend. ``None`` coordinates are not drawn.
    ``shapes``: a second label per point drawn as the marker shape (e.g. the seed), titled
    ``shape_label``; ``labels``: a name per point (the checkpoint), the hover text of the HTML
    report's SVG; ``x_low`` / ``x_high``: a per-point interval on x (the marker's own CI), drawn
    as a horizontal error bar where both ends are finite; ``censored``: per point whether its y
    is a lower bound (a right-censored outcome), drawn as an open marker with an arrow up.
    """

    title: str
    x: tuple[float | None, ...]
    y: tuple[float | None, ...]
    xlabel: str = ""
    ylabel: str = ""
    categories: tuple[str, ...] | None = None
    color_label: str = ""
    shapes: tuple[str, ...] | None = None
    shape_label: str = ""
    labels: tuple[str, ...] | None = None
    x_low: tuple[float | None, ...] | None = None
    x_high: tuple[float | None, ...] | None = None
    censored: tuple[bool, ...] | None = None

    def __post_init__(self) -> None:
        """Check that the coordinate (and per-point label) sequences have one entry per point."""
        n = len(self.x)
        sizes = {"y": self.y, "categories": self.categories, "shapes": self.shapes,
                 "labels": self.labels, "x_low": self.x_low, "x_high": self.x_high,
                 "censored": self.censored}
        bad = {k: len(v) for k, v in sizes.items() if v is not None and len(v) != n}
        if bad:
            raise ConfigError(
                f"Scatter {self.title!r}: x has {n} points but {bad}; pass one entry per point"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "scatter", ...}``)."""
        return strict_json({
            "block": "scatter", "title": self.title, "x": list(self.x), "y": list(self.y),
            "xlabel": self.xlabel, "ylabel": self.ylabel,
            "categories": None if self.categories is None else list(self.categories),
            "color_label": self.color_label,
            **{k: list(v) for k, v in (("shapes", self.shapes), ("labels", self.labels),
                                       ("x_low", self.x_low), ("x_high", self.x_high))
               if v is not None},
            **({"censored": [bool(v) for v in self.censored]}
               if self.censored is not None and any(self.censored) else {}),
            **({"shape_label": self.shape_label} if self.shape_label else {}),
        })


@dataclass(frozen=True, kw_only=True)
class Bullets:
    """An ordered list of one-line items (e.g. one line per marker: the report's answer).

    ``colors``: a colour per item (a swatch before it, e.g. the verdict's), or None.
    """

    items: tuple[str, ...]
    colors: tuple[str | None, ...] | None = None
    anchor: str = ""

    def __post_init__(self) -> None:
        """Check one colour per item."""
        if self.colors is not None and len(self.colors) != len(self.items):
            raise ConfigError(f"Bullets: {len(self.items)} items but {len(self.colors)} colors; "
                              "pass one colour per item (or None)")

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "bullets", ...}``)."""
        return {"block": "bullets", "items": list(self.items), "anchor": self.anchor,
                "colors": None if self.colors is None else list(self.colors)}


@dataclass(frozen=True, kw_only=True)
class Forest:
    """A forest plot: per row an estimate with its interval on one shared x axis.

    ``labels[i]`` names the row of point ``i``; points with the same label share the row,
    offset by their ``series`` (e.g. population A and B). ``categories`` colour the points
    through ``colors`` (``(category, colour)`` pairs, e.g. verdicts); ``hover`` adds text to
    each point's hover; ``band``: a band ``[-band, band]`` over every row (an equivalence
    margin) named ``band_label``; ``shade``: per point a half-width ``w`` shaded ``[-w, w]`` on
    its row (e.g. the minimal detectable effect), named ``shade_label``. ``None`` values are not
    drawn (the row says "not estimated").
    """

    title: str
    labels: tuple[str, ...]
    values: tuple[float | None, ...]
    low: tuple[float | None, ...]
    high: tuple[float | None, ...]
    categories: tuple[str, ...] | None = None
    colors: tuple[tuple[str, str], ...] = ()
    series: tuple[str, ...] | None = None
    hover: tuple[str, ...] | None = None
    band: float | None = None
    band_label: str = ""
    shade: tuple[float | None, ...] | None = None
    shade_label: str = ""
    xlabel: str = ""
    xlim: tuple[float, float] = (-1.0, 1.0)
    anchor: str = ""

    def __post_init__(self) -> None:
        """Check one entry per point in every per-point sequence."""
        n = len(self.labels)
        sizes = {"values": self.values, "low": self.low, "high": self.high,
                 "categories": self.categories, "series": self.series, "hover": self.hover,
                 "shade": self.shade}
        bad = {k: len(v) for k, v in sizes.items() if v is not None and len(v) != n}
        if bad:
            raise ConfigError(f"Forest {self.title!r}: {n} labels but {bad}; pass one entry "
                              "per point")
        if not self.xlim[0] < self.xlim[1]:
            raise ConfigError(f"Forest {self.title!r}: xlim={self.xlim} is empty; pass (low, "
                              "high) with low < high")

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "forest", ...}``)."""
        return strict_json({
            "block": "forest", "title": self.title, "labels": list(self.labels),
            "values": list(self.values), "low": list(self.low), "high": list(self.high),
            "categories": None if self.categories is None else list(self.categories),
            "colors": [list(c) for c in self.colors],
            "series": None if self.series is None else list(self.series),
            "hover": None if self.hover is None else list(self.hover),
            "band": self.band, "band_label": self.band_label,
            "shade": None if self.shade is None else list(self.shade),
            "shade_label": self.shade_label, "xlabel": self.xlabel, "xlim": list(self.xlim),
            "anchor": self.anchor,
        })


@dataclass(frozen=True, kw_only=True)
class Fold:
    """Blocks a reader opens on demand: a closed ``<details>`` whose summary is ``title``.

    The report stays short (per-layer rows of a family, per-marker sentences and scatters);
    the folded blocks are rendered like any others once opened.
    """

    title: str
    blocks: tuple[Any, ...]
    anchor: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "fold", ...}``)."""
        return {"block": "fold", "title": self.title, "anchor": self.anchor,
                "blocks": [b.to_dict() for b in self.blocks]}


@dataclass(frozen=True, kw_only=True)
class Links:
    """Relative links (e.g. to the two per-population reports of a comparison).

    ``items``: ``(text, href)`` pairs; ``href`` must be a relative path (no scheme), so that the
    report stays self-contained and never points off the folder tree it ships in.
    """

    items: tuple[tuple[str, str], ...]
    anchor: str = ""

    def __post_init__(self) -> None:
        """Refuse an absolute or scheme-bearing href."""
        for _, href in self.items:
            if ":" in href or href.startswith("/"):
                raise ConfigError(f"Links: href {href!r} is not a relative path; give a path "
                                  "relative to the report (e.g. 'A/report.html')")

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``{"block": "links", ...}``)."""
        return {"block": "links", "items": [list(i) for i in self.items], "anchor": self.anchor}


Block = Table | LinePlot | Heatmap | Scatter | Text | Bullets | Forest | Fold | Links


def blocks_to_dicts(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    """JSON form of a list of blocks."""
    return [b.to_dict() for b in blocks]

