"""The Scatter report block: JSON form, validation, rendering (PNG for plot(), SVG in HTML)."""

import re
from xml.etree import ElementTree

import pytest
from matplotlib.figure import Figure

from probekit.errors import ConfigError
from probekit.report import plots
from probekit.report.blocks import Scatter
from probekit.report.svg import scatter_svg
from probekit.report.write import render_block

SVG = "{http://www.w3.org/2000/svg}"


def test_scatter_json_and_render():
    s = Scatter(title="m vs y", x=(0.0, 1.0, float("nan")), y=(1.0, 2.0, 3.0), xlabel="m",
                ylabel="y", categories=("a", "b", "a"), color_label="knob")
    d = s.to_dict()
    assert d == {"block": "scatter", "title": "m vs y", "x": [0.0, 1.0, None], "y": [1.0, 2.0, 3.0],
                 "xlabel": "m", "ylabel": "y", "categories": ["a", "b", "a"], "color_label": "knob"}
    for block in (d, Scatter(title="plain", x=(0.0, 1.0), y=(1.0, 0.0)).to_dict()):
        svg = str(render_block(block)["svg"])
        root = ElementTree.fromstring(svg)
        # one hover group per finite point (the NaN point is not drawn)
        finite = sum(x is not None for x in block["x"])
        assert len(root.findall(f".//{SVG}g[@class='pt']")) == finite
        assert 'viewBox="0 0 ' in svg and "max-width:100%" in svg
    png = plots.scatter(d)
    assert png[:4] == b"\x89PNG" and len(png) > 1000


def test_svg_titles_error_bars_and_shapes():
    """One <title> per model naming its checkpoint; error bars exactly where a CI exists."""
    names = ("run-a step_500", "run-b step_500", "run-c step_500", "run-d step_500")
    s = Scatter(title="circuit_faithfulness vs ood", x=(0.84, 0.5, 0.2, 0.1),
                y=(0.1, 0.2, 0.3, 0.4), xlabel="circuit_faithfulness", ylabel="ood",
                categories=("phi=3.6", "phi=3.6", "phi=7.2", "phi=7.2"), color_label="phi",
                shapes=("seed=0", "seed=1", "seed=0", "seed=1"), shape_label="seed",
                labels=names, x_low=(-2.82, 0.4, None, 0.05), x_high=(3.93, 0.6, None, 0.15))
    svg = scatter_svg(s.to_dict())
    root = ElementTree.fromstring(svg)
    groups = root.findall(f".//{SVG}g[@class='pt']")
    titles = [g.find(f"{SVG}title").text for g in groups]
    assert [t.split("\n")[0] for t in titles] == list(names)
    assert "circuit_faithfulness = 0.84 [-2.82, 3.93]" in titles[0]
    assert "seed=1" in titles[1] and "phi=3.6" in titles[1]
    bars = [g.find(f"{SVG}line[@class='errbar']") for g in groups]
    assert [b is not None for b in bars] == [True, True, False, True]
    # the bar spans the CI on the plot's x scale: the widest CI gives the longest bar
    widths = [abs(float(b.get("x2")) - float(b.get("x1"))) for b in bars if b is not None]
    assert widths[0] == max(widths) and widths[0] > 10 * widths[1]
    # colour by the knob, shape by the seed: two colours and two shapes among the markers
    marks = [next(iter(g.findall("*")[-1:]), None) for g in groups]
    assert {m.get("fill") for m in marks} == {m.get("fill") for m in marks[:1] + marks[2:3]}
    assert len({m.tag for m in marks}) == 2


def test_svg_never_prints_negative_zero():
    s = Scatter(title="t", x=(-0.0001, 0.0001), y=(-1e-12, 1.0), xlabel="x", ylabel="y")
    svg = scatter_svg(s.to_dict())
    assert not re.search(r"-0(\.0+)?(?![\d.])", svg.replace("-90", ""))


def test_scatter_lengths_checked():
    with pytest.raises(ConfigError, match=r"x has 2 points but \{'y': 1\}; pass one entry"):
        Scatter(title="bad", x=(0.0, 1.0), y=(1.0,))
    with pytest.raises(ConfigError, match="'labels': 1"):
        Scatter(title="bad", x=(0.0, 1.0), y=(1.0, 2.0), labels=("a",))


def test_draw_scatter_with_error_bars_and_shapes():
    s = Scatter(title="t", x=(0.1, 0.5), y=(1.0, 2.0), categories=("a", "b"), shapes=("s0", "s1"),
                x_low=(0.0, 0.4), x_high=(0.2, 0.6)).to_dict()
    fig = Figure()
    ax = fig.subplots()
    plots.draw_scatter(s, ax)
    assert len(ax.collections) >= 2


def test_censored_points_are_open_markers_with_an_arrow_up():
    """A right-censored outcome: the point is a lower bound, drawn open with an arrow; hover says so."""
    s = Scatter(title="m vs crossing step", x=(0.1, 0.2, 0.3), y=(400.0, 1225.0, 1225.0),
                xlabel="m", ylabel="id_step_0.9", censored=(False, True, True))
    d = s.to_dict()
    assert d["censored"] == [False, True, True]
    assert "censored" not in Scatter(title="t", x=(0.0,), y=(1.0,), censored=(False,)).to_dict()
    root = ElementTree.fromstring(scatter_svg(d))
    groups = root.findall(f".//{SVG}g[@class='pt']")
    titles = [g.find(f"{SVG}title").text for g in groups]
    assert "id_step_0.9 = 400" in titles[0] and "censored" not in titles[0]
    assert all("id_step_0.9 >= 1225 (censored: never reached)" in t for t in titles[1:])
    marks = [g.findall("*")[-1] for g in groups]
    assert [m.get("fill") for m in marks] == ["#1f77b4", "#fff", "#fff"]  # open = white fill
    arrows = [g.find(f"{SVG}path") for g in groups]
    assert [a is not None for a in arrows] == [False, True, True]
    # the arrow rises 10 px above the marker: "M x y-5 V y-15 ..."
    d0 = arrows[1].get("d")
    y = float(marks[1].get("cy"))
    assert d0.startswith("M") and f"V{y - 15:.1f}" in d0
    # plain tick labels: 1225 is written out, never 1.22e+03
    assert "e+0" not in scatter_svg(d) and ">1200<" in scatter_svg(d)
    with pytest.raises(ConfigError, match="censored"):
        Scatter(title="t", x=(0.0, 1.0), y=(1.0, 2.0), censored=(True,))
