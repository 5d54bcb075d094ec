"""Inline SVG of a ``scatter`` block: a plot the reader can interrogate in the HTML report.

Each point is an SVG group whose ``<title>`` (the browser's hover text) names the point
(its checkpoint) with its coordinates, colour and shape labels and, where the block has one,
its x interval (the marker's own CI), drawn as a horizontal error bar. Colour encodes
``categories`` (e.g. the main design knob), the marker shape encodes ``shapes`` (e.g. the
seed); a ``censored`` point (its y a lower bound: a run that never reached the crossing) is an
open marker with an arrow up. The SVG has a ``viewBox`` and ``max-width: 100%``, so it scales down to any page width
(never clipped), and it is self-contained: no script, no network.
"""

from __future__ import annotations

import math
import textwrap
from html import escape
from typing import Any

from .numbers import plain_number

__all__ = ["scatter_svg"]

_W, _H = 660, 420
_LEFT, _RIGHT, _BOTTOM = 78, 170, 52
_SHAPES = ("circle", "square", "triangle", "diamond", "down", "plus", "cross")


def _num(v: float) -> str:
    """``v`` in 3 significant digits written out, its integer part whole (``1225``, ``0.0123``)."""
    return plain_number(v, max(3, len(str(int(abs(v)))))) if math.isfinite(v) else str(v)


def _finite(v: Any) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(float(v))


def _colors(n: int) -> list[str]:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["viridis"].resampled(max(n, 2))
    return [to_hex(cmap(k)) for k in range(n)]


def _ticks(lo: float, hi: float) -> list[float]:
    from matplotlib.ticker import MaxNLocator

    return [float(t) for t in MaxNLocator(nbins=6).tick_values(lo, hi) if lo <= t <= hi]


def _marker(shape: str, cx: float, cy: float, color: str, r: float = 4.2,
            style: str = "full") -> str:
    """One marker of ``shape`` at ``(cx, cy)``.

    ``style``: ``"full"`` (filled, outlined), ``"fill"`` (filled only: the opacity comes from
    the parent group) or ``"open"`` (outline only: a censored point).
    """
    fill = {"full": f'fill="{color}" fill-opacity="0.85" stroke="{color}"',
            "fill": f'fill="{color}"',
            "open": f'fill="#fff" stroke="{color}" stroke-width="1.5" stroke-opacity="1"'}[style]
    if shape == "circle":
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}" {fill}/>'
    if shape == "square":
        return f'<rect x="{cx - r:.1f}" y="{cy - r:.1f}" width="{2 * r}" height="{2 * r}" {fill}/>'
    if shape in ("triangle", "down"):
        s = 1 if shape == "triangle" else -1
        pts = [(cx, cy - s * r * 1.2), (cx - r * 1.1, cy + s * r * 0.8), (cx + r * 1.1, cy + s * r * 0.8)]
    elif shape == "diamond":
        pts = [(cx, cy - r * 1.3), (cx + r, cy), (cx, cy + r * 1.3), (cx - r, cy)]
    else:
        d = r * 1.1
        seg = ([(cx - d, cy, cx + d, cy), (cx, cy - d, cx, cy + d)] if shape == "plus"
               else [(cx - d, cy - d, cx + d, cy + d), (cx - d, cy + d, cx + d, cy - d)])
        return "".join(f'<line x1="{a:.1f}" y1="{b:.1f}" x2="{c:.1f}" y2="{e:.1f}" '
                       f'stroke="{color}" stroke-width="2"/>' for a, b, c, e in seg)
    return f'<polygon points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}" {fill}/>'


def _short(label: str) -> str:
    """An axis label for the hover text: ``"m | a, b"`` (a residual) -> ``"m (residual)"``."""
    head, sep, _ = label.partition(" | ")
    return f"{head} (residual)" if sep else label


def scatter_svg(block: dict[str, Any]) -> str:
    """The ``<svg>`` markup of a JSON-form ``scatter`` block (escaped, safe to embed)."""
    n = len(block["x"])
    x_low, x_high = block.get("x_low"), block.get("x_high")
    labels = block.get("labels") or [f"point {i + 1}" for i in range(n)]
    cats = block.get("categories")
    shapes = block.get("shapes")
    keep = [i for i in range(n) if _finite(block["x"][i]) and _finite(block["y"][i])]
    bars = {i: (float(x_low[i]), float(x_high[i])) for i in keep
            if x_low is not None and x_high is not None and _finite(x_low[i]) and _finite(x_high[i])}
    title_lines = textwrap.wrap(block.get("title", ""), 78) or [""]
    top = 18 + 16 * len(title_lines)
    pw, ph = _W - _LEFT - _RIGHT, _H - top - _BOTTOM
    xs = [float(block["x"][i]) for i in keep] + [v for b in bars.values() for v in b]
    ys = [float(block["y"][i]) for i in keep]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if x1 - x0 <= 0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    if y1 - y0 <= 0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    padx, pady = 0.05 * (x1 - x0), 0.05 * (y1 - y0)
    x0, x1, y0, y1 = x0 - padx, x1 + padx, y0 - pady, y1 + pady

    def px(v: float) -> float:
        return _LEFT + (v - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return top + (y1 - v) / (y1 - y0) * ph

    out = [f'<svg class="scatter" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" '
           f'width="{_W}" height="{_H}" role="img" aria-label="{escape(block.get("title", ""))}" '
           'style="max-width:100%;height:auto;font-family:system-ui,sans-serif">']
    for k, line in enumerate(title_lines):
        out.append(f'<text x="{_LEFT + pw / 2:.0f}" y="{16 + 16 * k}" font-size="12" '
                   f'text-anchor="middle">{escape(line)}</text>')
    out.append(f'<rect x="{_LEFT}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    for t in _ticks(x0, x1):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">'
                   f'{plain_number(t)}</text>')
    for t in _ticks(y0, y1):
        y = py(t)
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + pw}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{_LEFT - 5}" y="{y + 3:.1f}" font-size="10" text-anchor="end">'
                   f'{plain_number(t)}</text>')
    xlabel, ylabel = block.get("xlabel", ""), block.get("ylabel", "")
    out.append(f'<text x="{_LEFT + pw / 2:.0f}" y="{_H - 14}" font-size="11" '
               f'text-anchor="middle">{escape(xlabel)}</text>')
    # the y label runs along the axis, left of the tick labels: it never meets the title
    # start-anchored in a rotated frame (a middle anchor puts half the text at negative
    # coordinates, which a browser reports as content wider than its box); long labels wrap
    for k, line in enumerate(textwrap.wrap(ylabel, max(int(ph / 5.8), 12))[:2]):
        est = min(5.8 * len(line), ph)
        out.append(f'<g transform="translate({12 + 12 * k},{top + ph / 2 + est / 2:.0f}) '
                   f'rotate(-90)"><text x="0" y="0" font-size="10">{escape(line)}</text></g>')
    cat_order = list(dict.fromkeys(cats)) if cats else []
    colors = dict(zip(cat_order, _colors(len(cat_order)), strict=True))
    shape_order = list(dict.fromkeys(shapes)) if shapes else []
    shape_of = {s: _SHAPES[k % len(_SHAPES)] for k, s in enumerate(shape_order)}
    censored = block.get("censored") or [False] * n
    short_x, short_y = _short(xlabel or "x"), _short(ylabel or "y")
    # one opacity for every point (set here once: the markup per point stays short)
    out.append('<g fill-opacity="0.85" stroke-opacity="0.6">')
    for i in keep:
        x, y = float(block["x"][i]), float(block["y"][i])
        color = colors.get(cats[i], "#1f77b4") if cats else "#1f77b4"
        shape = shape_of.get(shapes[i], "circle") if shapes else "circle"
        tip = [str(labels[i]), f"{short_x} = {_num(x)}"]
        if i in bars:
            tip[-1] += f" [{_num(bars[i][0])}, {_num(bars[i][1])}]"
        tip.append(f"{short_y} {'>=' if censored[i] else '='} {_num(y)}"
                   + (" (censored: never reached)" if censored[i] else ""))
        tip.append(", ".join(str(v[i]) for v in (cats, shapes) if v))
        parts = [f'<g class="pt"><title>{escape(chr(10).join(t for t in tip if t))}</title>']
        if i in bars:
            lo, hi = px(bars[i][0]), px(bars[i][1])
            parts.append(f'<line class="errbar" x1="{lo:.1f}" y1="{py(y):.1f}" x2="{hi:.1f}" '
                         f'y2="{py(y):.1f}" stroke="{color}"/>')
        if censored[i]:  # open marker, arrow up: the true value lies above
            cx, cy = px(x), py(y)
            parts.append(f'<path d="M{cx:.1f} {cy - 5:.1f}V{cy - 15:.1f}M{cx - 3:.1f} '
                         f'{cy - 11:.1f}L{cx:.1f} {cy - 15:.1f}L{cx + 3:.1f} {cy - 11:.1f}" '
                         f'fill="none" stroke="{color}"/>')
        parts.append(_marker(shape, px(x), py(y), color, style="open" if censored[i] else "fill"))
        out.append("".join(parts) + "</g>")
    out.append("</g>")
    entries_note = any(censored[i] for i in keep)
    ly = float(top + 4)
    lx = float(_LEFT + pw + 12)
    for name, entries in ((block.get("color_label", ""), [(c, colors[c], "circle") for c in cat_order]),
                          (block.get("shape_label", ""), [(s, "#555", shape_of[s]) for s in shape_order])):
        if not entries:
            continue
        if name:
            out.append(f'<text x="{lx}" y="{ly + 8}" font-size="10" font-weight="600">'
                       f'{escape(textwrap.shorten(name, 26))}</text>')
            ly += 14
        for label, color, shape in entries[:12]:
            out.append(_marker(shape, lx + 5, ly + 4, color, r=3.5)
                       + f'<text x="{lx + 14}" y="{ly + 8}" font-size="10">'
                       f'{escape(textwrap.shorten(str(label), 24))}</text>')
            ly += 13
        if len(entries) > 12:
            out.append(f'<text x="{lx}" y="{ly + 8}" font-size="10">... {len(entries) - 12} more</text>')
            ly += 13
        ly += 8
    if bars:
        out.append(f'<text x="{lx}" y="{min(ly + 8, _H - 6)}" font-size="9" fill="#555">bars: each '
                   'marker\'s own CI</text>')
        ly += 13
    if entries_note:
        out.append(_marker("circle", lx + 5, min(ly + 4, _H - 10), "#555", r=3.5, style="open")
                   + f'<text x="{lx + 14}" y="{min(ly + 8, _H - 6)}" font-size="9" fill="#555">'
                   'censored (true value above)</text>')
    out.append("</svg>")
    return "".join(out)
