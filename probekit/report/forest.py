"""Inline SVG of a ``forest`` block: each row's estimate and interval on one shared axis.

Every point is an SVG group whose ``<title>`` (the browser's hover text) names the row, its
series and category, the estimate with its interval and the block's extra hover text; the
per-row shade (e.g. the minimal detectable effect) carries its own ``<title>``. The band
``[-band, band]`` (e.g. the equivalence margin) spans every row. Self-contained: no script,
no network; a ``viewBox`` with ``max-width: 100%`` scales it to the page.
"""

from __future__ import annotations

import math
import textwrap
from html import escape
from typing import Any

from .numbers import plain_number
from .svg import _marker

__all__ = ["forest_svg"]

_W = 960
_LEFT, _RIGHT, _ROW, _BOTTOM = 236, 190, 21, 40
_SHAPES = ("circle", "square", "diamond", "triangle")
_BAND, _SHADE = "#d6e6f5", "#000000"


def _finite(v: Any) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(float(v))


def _signed(v: float) -> str:
    text = f"{v:+.2f}"
    return text[1:] if float(text) == 0 else text


def _interval(v: Any, lo: Any, hi: Any) -> str:
    if not _finite(v):
        return "not estimated"
    ci = f" [{_signed(lo)}, {_signed(hi)}]" if _finite(lo) and _finite(hi) else ""
    return f"{_signed(v)}{ci}"


def _ticks(lo: float, hi: float) -> list[float]:
    from matplotlib.ticker import MaxNLocator

    loc = MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10])
    return [float(t) for t in loc.tick_values(lo, hi) if lo - 1e-12 <= t <= hi + 1e-12]


def forest_svg(block: dict[str, Any]) -> str:
    """The ``<svg>`` markup of a JSON-form ``forest`` block (escaped, safe to embed)."""
    labels = [str(v) for v in block["labels"]]
    n = len(labels)
    rows = list(dict.fromkeys(labels))
    series = block.get("series") or [""] * n
    series_order = list(dict.fromkeys(series))
    cats = block.get("categories")
    colors = {c: col for c, col in block.get("colors") or []}
    hover = block.get("hover")
    shade = block.get("shade")
    x0, x1 = (float(v) for v in block.get("xlim") or (-1.0, 1.0))
    legend, n_lines = _legend(block, cats, colors, series_order)
    top = 10 + 16 * n_lines
    k_series = max(len(series_order), 1)
    row_h = _ROW if k_series == 1 else 13 * k_series + 6  # paired rows: each series its line
    height = top + row_h * len(rows) + _BOTTOM
    pw = _W - _LEFT - _RIGHT
    bottom = top + row_h * len(rows)

    def px(v: float) -> float:
        return _LEFT + (min(max(v, x0), x1) - x0) / (x1 - x0) * pw

    out = [f'<svg class="forest" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {height}" '
           f'width="{_W}" height="{height}" role="img" aria-label="{escape(block.get("title", ""))}"'
           ' style="max-width:100%;height:auto;font-family:system-ui,sans-serif">']
    out.append(legend)
    band = block.get("band")
    if _finite(band) and band > 0:
        out.append(f'<rect class="band" x="{px(-band):.1f}" y="{top}" '
                   f'width="{px(band) - px(-band):.1f}" height="{bottom - top}" fill="{_BAND}">'
                   f'<title>{escape(block.get("band_label") or f"band +-{band:g}")}</title></rect>')
    for t in _ticks(x0, x1):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
                   f'stroke="{"#888" if t == 0 else "#e4e4e4"}"/>'
                   f'<text x="{x:.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle">'
                   f'{plain_number(t)}</text>')
    out.append(f'<text x="{_LEFT + pw / 2:.0f}" y="{height - 8}" font-size="11" '
               f'text-anchor="middle">{escape(block.get("xlabel", ""))}</text>')
    for k, row in enumerate(rows):
        y = top + row_h * k + row_h / 2
        if k % 2:
            out.append(f'<rect x="0" y="{y - row_h / 2:.1f}" width="{_LEFT - 4}" height="{row_h}" '
                       'fill="#f6f6f6"/>')
        short = textwrap.shorten(row, 34, placeholder="...")
        out.append(f'<text x="{_LEFT - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
                   f'<title>{escape(row)}</title>{escape(short)}</text>')
    for i in range(n):
        k = rows.index(labels[i])
        j = series_order.index(series[i])
        dy = (j - (k_series - 1) / 2) * (row_h - 6) / k_series
        y = top + row_h * k + row_h / 2 + dy
        color = colors.get(cats[i], "#1f77b4") if cats else "#1f77b4"
        v, lo, hi = block["values"][i], block["low"][i], block["high"][i]
        name = f"{labels[i]} ({series[i]})" if series[i] else labels[i]
        if shade is not None and _finite(shade[i]) and shade[i] > 0:
            w = float(shade[i])
            half = (row_h - 6) / (2 * k_series)
            out.append(f'<rect class="shade" x="{px(-w):.1f}" y="{y - half:.1f}" '
                       f'width="{px(w) - px(-w):.1f}" height="{2 * half:.1f}" fill="{_SHADE}" '
                       f'fill-opacity="0.09"><title>{escape(name)}: '
                       f'{escape(block.get("shade_label") or "shade")} {w:.2f}</title></rect>')
        tip = [name]
        if cats:
            tip.append(str(cats[i]))
        tip.append(f"{block.get('xlabel') or 'estimate'} {_interval(v, lo, hi)}")
        if hover is not None and hover[i]:
            tip.append(str(hover[i]))
        parts = [f'<g class="pt"><title>{escape(chr(10).join(tip))}</title>']
        if _finite(v):
            if _finite(lo) and _finite(hi):
                parts.append(f'<line x1="{px(float(lo)):.1f}" y1="{y:.1f}" x2="{px(float(hi)):.1f}"'
                             f' y2="{y:.1f}" stroke="{color}" stroke-width="2"/>')
            parts.append(_marker(_SHAPES[j % len(_SHAPES)], px(float(v)), y, color, r=4.0))
        else:  # an invisible target that still carries the hover
            parts.append(f'<rect x="{_LEFT}" y="{y - 5:.1f}" width="{pw}" height="10" '
                         'fill="#fff" fill-opacity="0"/>')
        text = _interval(v, lo, hi)
        if series[i] and k_series > 1:
            text = f"{series[i]}: {text}"
        size = 11 if k_series == 1 else 10
        parts.append(f'<text x="{_LEFT + pw + 8}" y="{y + size / 3:.1f}" font-size="{size}">'
                     f'{escape(text)}</text>')
        out.append("".join(parts) + "</g>")
    out.append("</svg>")
    return "".join(out)


def _legend(block: dict[str, Any], cats: list[str] | None, colors: dict[str, str],
            series_order: list[str]) -> tuple[str, int]:
    """The legend above the rows: categories' colours, series' shapes, band and shade.

    Returns the markup and its number of lines (entries wrap at the plot's width).
    """
    entries: list[tuple[str, str]] = []  # (swatch kind, label)
    entries += [(f"cat:{c}", c) for c in (dict.fromkeys(cats) if cats else [])]
    if len(series_order) > 1:
        entries += [(f"series:{j}", s) for j, s in enumerate(series_order)]
    band = block.get("band")
    if _finite(band) and band > 0 and block.get("band_label"):
        entries.append(("band", block["band_label"]))
    if block.get("shade") is not None and block.get("shade_label"):
        entries.append(("shade", block["shade_label"]))
    parts, x, line = [], 8.0, 0
    for kind, label in entries:
        width = 26 + 6.2 * len(label)
        if x > 8 and x + width > _W:
            x, line = 8.0, line + 1
        y = 14.0 + 16 * line
        if kind.startswith("cat:"):
            swatch = _marker("circle", x + 5, y, colors.get(kind[4:], "#1f77b4"), r=4.0)
        elif kind.startswith("series:"):
            swatch = _marker(_SHAPES[int(kind[7:]) % len(_SHAPES)], x + 5, y, "#555", r=4.0)
        else:
            fill = _BAND if kind == "band" else f'{_SHADE}" fill-opacity="0.09'
            swatch = f'<rect x="{x:.0f}" y="{y - 6}" width="14" height="12" fill="{fill}"/>'
        parts.append(swatch + f'<text x="{x + 18:.0f}" y="{y + 4}" font-size="11">'
                     f'{escape(label)}</text>')
        x += width
    return "".join(parts), (line + 1 if entries else 0)
