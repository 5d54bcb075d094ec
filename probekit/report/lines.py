"""Inline SVG of a ``lineplot`` block: curves over an ordered axis, with hover on every point.

Each series is a polyline over the x labels (``None`` values break it), its band
``[low, high]`` a translucent polygon, and every point a group whose ``<title>`` (the
browser's hover text) names the x label, the series and the value with its interval. Tick
labels are written out (:func:`~probekit.report.numbers.plain_number`, never ``1.25e+03``);
``hlines`` are dash-dotted reference levels, ``marker`` a vertical line at one x position.
Self-contained (no script, no network); a ``viewBox`` with ``max-width: 100%`` scales it.
"""

from __future__ import annotations

import math
import textwrap
from html import escape
from typing import Any

from .numbers import plain_number
from .svg import _num

__all__ = ["line_plot_svg"]

_H = 340
_LEFT, _RIGHT, _BOTTOM = 64, 190, 92
_PALETTE = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf", "#1f77b4", "#2ca02c")
_DASH = {"line": "", "dashed": ' stroke-dasharray="6 4"', "dotted": ' stroke-dasharray="2 3"',
         "bar": ""}
_NAMED = {"tab:red": "#d62728", "tab:orange": "#ff7f0e", "tab:purple": "#9467bd",
          "tab:brown": "#8c564b", "tab:pink": "#e377c2", "tab:olive": "#bcbd22",
          "tab:cyan": "#17becf", "tab:blue": "#1f77b4", "tab:green": "#2ca02c",
          "tab:gray": "#7f7f7f", "black": "#000000"}


def _finite(v: Any) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(float(v))


def _colors(series: list[dict[str, Any]]) -> list[str]:
    """A colour per series: its own (``tab:`` names resolved), else the next free palette one."""
    own = [_NAMED.get(str(s.get("color")), s.get("color")) for s in series]
    free = iter([c for c in _PALETTE if c not in own])
    return [c or next(free, "#000000") for c in own]


def _ticks(lo: float, hi: float) -> list[float]:
    from matplotlib.ticker import MaxNLocator

    return [float(t) for t in MaxNLocator(nbins=5).tick_values(lo, hi)
            if lo - 1e-12 <= t <= hi + 1e-12]


def _value(v: float, lo: Any, hi: Any) -> str:
    ci = f" [{_num(float(lo))}, {_num(float(hi))}]" if _finite(lo) and _finite(hi) else ""
    return f"{_num(v)}{ci}"


def _y_range(block: dict[str, Any]) -> tuple[float, float]:
    if block.get("ylim"):
        lo, hi = (float(v) for v in block["ylim"])
        return lo, hi
    vals = [float(v) for s in block["series"] for key in ("values", "low", "high")
            for v in (s.get(key) or []) if _finite(v)]
    vals += [float(v) for v, _ in block.get("hlines", []) if _finite(v)]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    if hi - lo <= 0:
        lo, hi = lo - 0.5, hi + 0.5
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def line_plot_svg(block: dict[str, Any]) -> str:
    """The ``<svg>`` markup of a JSON-form ``lineplot`` block (escaped, safe to embed)."""
    labels = [str(v) for v in block["x_labels"]]
    n = len(labels)
    series = block["series"]
    colors = _colors(series)
    width = max(640, _LEFT + _RIGHT + 26 * n)
    # ~7 px a character at 12 px: a title line never runs past the plot's own box
    title_lines = textwrap.wrap(block.get("title", ""), max(int((width - 16) / 7.0), 20)) or [""]
    top = 14 + 15 * len(title_lines)
    pw, ph = width - _LEFT - _RIGHT, _H - top - _BOTTOM
    y0, y1 = _y_range(block)
    step = pw / max(n, 1)

    def px(i: int) -> float:
        return _LEFT + step * (i + 0.5)

    def py(v: float) -> float:
        return top + (y1 - min(max(v, y0), y1)) / (y1 - y0) * ph

    out = [f'<svg class="lineplot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {_H}" '
           f'width="{width}" height="{_H}" role="img" aria-label="{escape(block.get("title", ""))}"'
           ' style="max-width:100%;height:auto;font-family:system-ui,sans-serif">']
    for k, line in enumerate(title_lines):
        out.append(f'<text x="{width / 2:.0f}" y="{14 + 15 * k}" font-size="12" '
                   f'text-anchor="middle">{escape(line)}</text>')
    out.append(f'<rect x="{_LEFT}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    for t in _ticks(y0, y1):
        y = py(t)
        out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + pw}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{_LEFT - 5}" y="{y + 3:.1f}" font-size="10" text-anchor="end">'
                   f'{plain_number(t)}</text>')
    every = max(1, math.ceil(n / 40))  # at most ~40 x labels; every point keeps its hover
    for i, lab in enumerate(labels):
        if i % every:
            continue
        x = px(i)
        short = textwrap.shorten(lab, 22, placeholder="...")
        out.append(f'<g transform="translate({x:.1f},{top + ph + 8}) rotate(-55)"><text x="0" '
                   f'y="0" font-size="9" text-anchor="end"><title>{escape(lab)}</title>'
                   f'{escape(short)}</text></g>')
    out.append(f'<text x="{_LEFT + pw / 2:.0f}" y="{_H - 6}" font-size="11" text-anchor="middle">'
               f'{escape(block.get("xlabel", ""))}</text>')
    ylabel = block.get("ylabel", "")
    if ylabel:
        out.append(f'<g transform="translate(14,{top + ph / 2 + min(5.8 * len(ylabel), ph) / 2:.0f})'
                   f' rotate(-90)"><text x="0" y="0" font-size="10">'
                   f'{escape(textwrap.shorten(ylabel, int(ph / 5.8) or 12))}</text></g>')
    legend: list[tuple[str, str, str]] = []  # (kind, colour, label)
    for value, name in block.get("hlines", []):
        if _finite(value) and y0 <= float(value) <= y1:
            y = py(float(value))
            out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + pw}" y2="{y:.1f}" '
                       f'stroke="#000" stroke-width="0.8" stroke-dasharray="6 2 1 2"><title>'
                       f'{escape(name or "reference")} = {plain_number(float(value))}</title></line>')
            if name:
                legend.append(("hline", "#000", str(name)))
    mark = block.get("marker")
    if mark is not None and 0 <= int(mark) < n:
        x = px(int(mark))
        label = block.get("marker_label", "selected")
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#2ca02c" '
                   f'stroke-width="1.2" stroke-opacity="0.7"><title>{escape(label)}: '
                   f'{escape(labels[int(mark)])}</title></line>')
        legend.append(("marker", "#2ca02c", str(label)))
    bars = [s for s in series if s["style"] == "bar"]
    bw = 0.8 * step / max(len(bars), 1)
    for s, color in zip(series, colors, strict=True):
        vals = s["values"]
        if not any(_finite(v) for v in vals):
            continue
        legend.append((s["style"], color, str(s["name"])))
        low, high = s.get("low"), s.get("high")
        if low is not None and high is not None:
            out += _bands(low, high, px, py, color)
        if s["style"] != "bar":
            out += _polylines(vals, px, py, color, _DASH[s["style"]])
        for i, v in enumerate(vals):
            if not _finite(v):
                continue
            lo = low[i] if low is not None else None
            hi = high[i] if high is not None else None
            tip = f"{labels[i]}\n{s['name']} = {_value(float(v), lo, hi)}"
            if s["style"] == "bar":
                k = bars.index(s)
                x = px(i) + (k - (len(bars) - 1) / 2) * bw - bw / 2
                base = py(min(max(0.0, y0), y1))
                yv = py(float(v))
                shape = (f'<rect x="{x:.1f}" y="{min(yv, base):.1f}" width="{bw:.1f}" '
                         f'height="{abs(base - yv):.1f}" fill="{color}"/>')
            else:
                shape = (f'<circle cx="{px(i):.1f}" cy="{py(float(v)):.1f}" r="3.2" '
                         f'fill="{color}"/>')
            out.append(f'<g class="pt"><title>{escape(tip)}</title>{shape}</g>')
    out.append(_legend(legend, float(_LEFT + pw + 12), float(top)))
    out.append("</svg>")
    return "".join(out)


def _polylines(vals: list[Any], px: Any, py: Any, color: str, dash: str) -> list[str]:
    """One polyline per run of finite values (a missing value breaks the curve)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for i, v in enumerate(vals):
        if _finite(v):
            runs[-1].append((px(i), py(float(v))))
        elif runs[-1]:
            runs.append([])
    return [f'<polyline points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in r)}" fill="none" '
            f'stroke="{color}" stroke-width="1.6"{dash}/>' for r in runs if len(r) > 1]


def _bands(low: list[Any], high: list[Any], px: Any, py: Any, color: str) -> list[str]:
    """The band ``[low, high]`` as one polygon per run of positions where both are finite."""
    runs: list[list[int]] = [[]]
    for i, (lo, hi) in enumerate(zip(low, high, strict=True)):
        if _finite(lo) and _finite(hi):
            runs[-1].append(i)
        elif runs[-1]:
            runs.append([])
    out = []
    for r in runs:
        if not r:
            continue
        if len(r) == 1:  # a lone interval: a vertical bar
            i = r[0]
            out.append(f'<line x1="{px(i):.1f}" y1="{py(float(low[i])):.1f}" x2="{px(i):.1f}" '
                       f'y2="{py(float(high[i])):.1f}" stroke="{color}" stroke-width="6" '
                       'stroke-opacity="0.18"/>')
            continue
        pts = [(px(i), py(float(high[i]))) for i in r] + [(px(i), py(float(low[i])))
                                                         for i in reversed(r)]
        out.append(f'<polygon points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}" '
                   f'fill="{color}" fill-opacity="0.15" stroke="none"/>')
    return out


def _legend(entries: list[tuple[str, str, str]], x: float, y: float) -> str:
    parts = []
    for kind, color, label in entries[:14]:
        y += 14
        if kind == "bar":
            swatch = f'<rect x="{x:.0f}" y="{y - 8:.0f}" width="14" height="9" fill="{color}"/>'
        else:
            dash = {"hline": ' stroke-dasharray="6 2 1 2"', "marker": ""}.get(kind, _DASH.get(kind, ""))
            swatch = (f'<line x1="{x:.0f}" y1="{y - 4:.0f}" x2="{x + 14:.0f}" y2="{y - 4:.0f}" '
                      f'stroke="{color}" stroke-width="1.6"{dash}/>')
        parts.append(swatch + f'<text x="{x + 18:.0f}" y="{y:.0f}" font-size="10">'
                     f'<title>{escape(label)}</title>{escape(textwrap.shorten(label, 26, placeholder="..."))}</text>')
    if len(entries) > 14:
        parts.append(f'<text x="{x:.0f}" y="{y + 14:.0f}" font-size="10">... {len(entries) - 14} '
                     'more (hover the points)</text>')
    return "".join(parts)
