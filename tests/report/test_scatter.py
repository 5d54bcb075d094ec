"""The Scatter report block: JSON form, validation, rendering."""

import base64

import pytest

from probekit.errors import ConfigError
from probekit.report.blocks import Scatter
from probekit.report.write import render_block


def test_scatter_json_and_render():
    s = Scatter(title="m vs y", x=(0.0, 1.0, float("nan")), y=(1.0, 2.0, 3.0), xlabel="m",
                ylabel="y", categories=("a", "b", "a"), color_label="knob")
    d = s.to_dict()
    assert d == {"block": "scatter", "title": "m vs y", "x": [0.0, 1.0, None], "y": [1.0, 2.0, 3.0],
                 "xlabel": "m", "ylabel": "y", "categories": ["a", "b", "a"], "color_label": "knob"}
    for block in (d, Scatter(title="plain", x=(0.0, 1.0), y=(1.0, 0.0)).to_dict()):
        png = base64.b64decode(render_block(block)["png"])
        assert png[:4] == b"\x89PNG" and len(png) > 1000


def test_scatter_lengths_checked():
    with pytest.raises(ConfigError, match="x has 2 points, y 1, categories None; pass one per point"):
        Scatter(title="bad", x=(0.0, 1.0), y=(1.0,))
