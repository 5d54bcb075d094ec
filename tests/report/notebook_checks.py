"""Shared checks of a result's notebook display (issue 35): HTML table, frame, plot, repr."""

from __future__ import annotations

import math
from html.parser import HTMLParser
from typing import Any


class _Tables(HTMLParser):
    """Collects every ``<table>``'s header cells and body cells, and the ``<img>`` sources."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, list[str]]] = []
        self.images: list[str] = []
        self._cell: list[str] | None = None
        self._tag = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append({"headers": [], "cells": []})
        elif tag in ("th", "td") and self.tables:
            self._cell, self._tag = [], tag
        elif tag == "img":
            self.images.append(dict(attrs).get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            text = "".join(self._cell).strip()
            self.tables[-1]["headers" if self._tag == "th" else "cells"].append(text)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse_html(text: str) -> _Tables:
    parser = _Tables()
    parser.feed(text)
    parser.close()
    return parser


def check_display(
    result: Any,
    *,
    headers: list[str],
    numbers: dict[str, str],
    plot: bool = True,
    max_rows_checked: int | None = None,
) -> _Tables:
    """Assert the display contract and return the parsed HTML.

    ``headers``: header cells that must appear in the HTML tables; ``numbers``: record key ->
    format spec; each record's value, formatted so, must be a cell of some table (the table
    shows the numbers of ``to_records``).
    """
    import pandas as pd
    from matplotlib.figure import Figure

    records = result.to_records()
    assert isinstance(records, list) and records and all(isinstance(r, dict) for r in records)
    html = result._repr_html_()
    parsed = parse_html(html)
    assert parsed.tables, "no <table> in _repr_html_()"
    all_headers = {h for t in parsed.tables for h in t["headers"]}
    missing = [h for h in headers if h not in all_headers]
    assert not missing, f"headers {missing} not in {sorted(all_headers)}"
    cells = {c for t in parsed.tables for c in t["cells"]}
    for rec in records[:max_rows_checked]:
        for key, fmt in numbers.items():
            value = rec[key]
            if isinstance(value, float) and not math.isfinite(value):
                continue
            assert format(value, fmt) in cells, f"{key}={value:{fmt}} not among the table cells"
    # to_frame() holds exactly to_records(), record by record, columns in order
    frame = result.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(records[0])
    assert len(frame) == len(records)
    for got, want in zip(frame.to_dict("records"), records, strict=True):
        for key, value in want.items():
            g = got[key]
            if isinstance(value, float) and math.isnan(value):
                assert isinstance(g, float) and math.isnan(g), key
            elif value is None:
                assert g is None or (isinstance(g, float) and math.isnan(g)), key
            else:
                assert g == value, (key, g, value)
    text = repr(result)
    assert text.startswith(type(result).__name__ + "(") and len(text) < 300, text
    assert text.count("\n") <= 1, text
    if plot:
        # plots: PNG line plots / heatmaps, inline SVG scatters (hover labels per point)
        assert parsed.images or "<svg" in html
        assert all(s.startswith("data:image/png;base64,") for s in parsed.images)
        fig = result.plot()
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        assert ax.get_xlabel() and ax.get_ylabel(), (ax.get_xlabel(), ax.get_ylabel())
        assert ax.has_data()
        # drawing on a given axes returns that axes' figure
        other = Figure()
        target = other.subplots()
        assert result.plot(ax=target) is other and target.has_data()
    return parsed
