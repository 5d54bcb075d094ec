"""Matplotlib renderings of report blocks: drawn on an axes, or returned as PNG bytes.

``draw_line_plot`` / ``draw_heatmap`` draw a block onto a given ``Axes`` (a result's
``.plot(ax=...)`` in a notebook); ``line_plot`` / ``heatmap`` draw it on a new figure and return
the PNG the HTML report embeds (no CDN). Figures are made with ``matplotlib.figure.Figure``,
never through ``pyplot``: no global figure registry, no backend switch, so importing this in a
notebook leaves the inline backend alone.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = [
    "draw_heatmap", "draw_line_plot", "draw_scatter", "heatmap", "heatmap_figsize", "line_plot",
    "line_plot_figsize", "scatter", "series_colors",
]

_STYLE = {"line": "o-", "dashed": "--", "dotted": ":"}
_COLORS = ["tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _arr(values: list[Any] | None) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in (values or [])], dtype=float)


def _plain_ticks(axis: Any) -> None:
    """Tick labels written out (``1250``, never ``1.25e+03`` or an offset)."""
    from matplotlib.ticker import FuncFormatter

    from .numbers import plain_number

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain_number(float(v))))


def series_colors(series: list[dict[str, Any]]) -> list[str]:
    """One colour per series: its own ``color``, else the next palette colour no series fixed."""
    taken = {s.get("color") for s in series}
    free = iter([c for c in _COLORS if c not in taken])
    return [s.get("color") or next(free, "black") for s in series]


def line_plot_figsize(block: dict[str, Any]) -> tuple[float, float]:
    """Figure size (inches) of a ``lineplot`` block: wider with more x labels."""
    return (max(6.0, 0.35 * len(block["x_labels"]) + 3), 3.8)


def line_plot(block: dict[str, Any]) -> bytes:
    """PNG of a ``lineplot`` block (:func:`draw_line_plot` on a new figure)."""
    fig = Figure(figsize=line_plot_figsize(block))
    draw_line_plot(block, fig.subplots())
    return _png(fig)


def draw_line_plot(block: dict[str, Any], ax: Axes) -> None:
    """Draw a ``lineplot`` block on ``ax``: series over the x labels, CI bands, reference lines, a marker.

    Series with no finite value are neither drawn nor listed in the legend; bars of several
    ``bar`` series sit side by side. The legend goes outside the axes so it covers no data.
    """
    labels = block["x_labels"]
    x = np.arange(len(labels))
    bars = [s for s in block["series"] if s["style"] == "bar"]
    width = 0.8 / max(len(bars), 1)
    for s, color in zip(block["series"], series_colors(block["series"]), strict=True):
        y = _arr(s["values"])
        if not np.isfinite(y).any():
            continue
        if s["style"] == "bar":
            k = bars.index(s)
            ax.bar(x + (k - (len(bars) - 1) / 2) * width, np.nan_to_num(y), width,
                   label=s["name"], color=color)
        else:
            ax.plot(x, y, _STYLE[s["style"]], color=color, label=s["name"],
                    alpha=0.7 if s["style"] != "line" else 1.0)
        if s.get("low") is not None and s.get("high") is not None:
            ax.fill_between(x, _arr(s["low"]), _arr(s["high"]), color=color, alpha=0.15)
    for value, name in block.get("hlines", []):
        if value is not None and math.isfinite(value):
            ax.axhline(value, color="black", lw=0.8, ls="-.", label=name)
    if block.get("marker") is not None:
        ax.axvline(block["marker"], color="green", lw=0.8, alpha=0.6,
                   label=block.get("marker_label", "selected"))
    if block.get("ylim"):
        ax.set_ylim(*block["ylim"])
    ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    _plain_ticks(ax.yaxis)
    ax.set_xlabel(block.get("xlabel", ""))
    ax.set_ylabel(block.get("ylabel", ""))
    ax.set_title(block["title"])
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(alpha=0.3)


def heatmap_figsize(block: dict[str, Any]) -> tuple[float, float]:
    """Figure size (inches) of a ``heatmap`` block: grows with its rows and columns."""
    return (max(4.0, 0.35 * len(block["col_labels"]) + 2.5),
            max(3.0, 0.3 * len(block["row_labels"]) + 1.5))


def heatmap(block: dict[str, Any]) -> bytes:
    """PNG of a ``heatmap`` block (:func:`draw_heatmap` on a new figure)."""
    fig = Figure(figsize=heatmap_figsize(block))
    draw_heatmap(block, fig.subplots())
    return _png(fig)


def draw_heatmap(block: dict[str, Any], ax: Axes) -> None:
    """Draw a ``heatmap`` block on ``ax``: ``values[row][col]``, labelled axes, a colour bar."""
    values = np.array([_arr(r) for r in block["values"]])
    rows, cols = block["row_labels"], block["col_labels"]
    im = ax.imshow(values, aspect="auto", cmap=block.get("cmap", "viridis"),
                   vmin=block.get("vmin"), vmax=block.get("vmax"))
    ax.set_xticks(np.arange(len(cols)), cols, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(np.arange(len(rows)), rows, fontsize=7)
    ax.set_xlabel(block.get("xlabel", ""))
    ax.set_ylabel(block.get("ylabel", ""))
    ax.set_title(block["title"])
    ax.figure.colorbar(im, ax=ax, label=block.get("colorbar", ""))


def scatter(block: dict[str, Any]) -> bytes:
    """PNG of a ``scatter`` block (:func:`draw_scatter` on a new figure)."""
    fig = Figure(figsize=(5.0, 3.8))
    draw_scatter(block, fig.subplots())
    return _png(fig)


def draw_scatter(block: dict[str, Any], ax: Axes) -> None:
    """Draw a ``scatter`` block on ``ax``: points coloured by category, shaped by ``shapes``.

    Horizontal error bars where the block has a finite ``x_low`` / ``x_high`` per point; the
    legends (colour, then shape) go outside the axes so they cover no data.
    """
    from matplotlib import colormaps

    x, y = _arr(block["x"]), _arr(block["y"])
    n = len(x)
    cats = block.get("categories") or ["" for _ in range(n)]
    shapes = block.get("shapes") or ["" for _ in range(n)]
    order = list(dict.fromkeys(cats))
    shape_order = list(dict.fromkeys(shapes))
    cmap = colormaps["viridis"].resampled(max(len(order), 2))
    color = {c: (cmap(k) if block.get("categories") else "tab:blue") for k, c in enumerate(order)}
    marker = {s: "os^Dv*P"[k % 7] for k, s in enumerate(shape_order)}
    low, high = block.get("x_low"), block.get("x_high")
    if low is not None and high is not None:
        lo, hi = _arr(low), _arr(high)
        ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(x) & np.isfinite(y)
        for i in np.flatnonzero(ok):
            ax.plot([lo[i], hi[i]], [y[i], y[i]], color=color[cats[i]], alpha=0.5, lw=1)
    for c in order:
        for s in shape_order:
            sel = np.array([a == c and b == s for a, b in zip(cats, shapes, strict=True)])
            if sel.any():
                ax.scatter(x[sel], y[sel], s=18, color=color[c], marker=marker[s], alpha=0.85)
    handles = []
    from matplotlib.lines import Line2D

    if block.get("categories"):
        handles += [Line2D([], [], ls="", marker="o", color=color[c], label=str(c)) for c in order]
    if block.get("shapes"):
        handles += [Line2D([], [], ls="", marker=marker[s], color="0.35", label=str(s))
                    for s in shape_order]
    if handles:
        title = " / ".join(t for t in (block.get("color_label"), block.get("shape_label")) if t)
        ax.legend(handles=handles, title=title or None, fontsize=7, title_fontsize=7,
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.locator_params(axis="x", nbins=6)  # long tick labels (residuals: -0.075) must not collide
    _plain_ticks(ax.xaxis)
    _plain_ticks(ax.yaxis)
    ax.set_xlabel(block.get("xlabel", ""))
    ax.set_ylabel(block.get("ylabel", ""), fontsize=8)
    ax.set_title(block["title"], fontsize=9, wrap=True)
    ax.grid(alpha=0.3)
