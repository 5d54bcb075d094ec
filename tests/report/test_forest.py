"""The forest plot block: a hover title on every point, the band and shades where they belong."""

from xml.etree import ElementTree

import pytest

from probekit.errors import ConfigError
from probekit.report.blocks import Forest
from probekit.report.forest import forest_svg
from probekit.report.write import render_block

SVG = "{http://www.w3.org/2000/svg}"


def _block(**kw) -> Forest:
    base = dict(title="partial r", labels=("a", "b", "c"), values=(0.5, -0.1, None),
                low=(0.3, -0.4, None), high=(0.7, 0.2, None),
                categories=("adds", "inconclusive", "not_applicable"),
                colors=(("adds", "#1b7837"), ("inconclusive", "#8c8c8c")),
                hover=("Holm p < 0.001", "Holm p 1", ""), band=0.2, band_label="equivalence +-0.2",
                shade=(0.3, 0.3, None), shade_label="below the MDE", xlabel="partial r")
    return Forest(**{**base, **kw})


def test_every_point_has_a_title_and_the_band_spans_the_margin():
    root = ElementTree.fromstring(forest_svg(_block().to_dict()))
    points = root.findall(f".//{SVG}g[@class='pt']")
    titles = [p.find(f"{SVG}title").text for p in points]
    assert len(points) == 3
    assert titles[0] == "a\nadds\npartial r +0.50 [+0.30, +0.70]\nHolm p < 0.001"
    assert titles[2].startswith("c\nnot_applicable\npartial r not estimated")
    # the first point is drawn in its category's colour
    assert points[0].find(f"{SVG}circle").get("fill") == "#1b7837"
    # band [-0.2, 0.2] over an axis [-1, 1]: a fifth of the plot's width, centred on 0
    band = root.find(f".//{SVG}rect[@class='band']")
    ticks = {t.text: float(t.get("x")) for t in root.iter(f"{SVG}text") if t.text in ("-1", "1")}
    width = ticks["1"] - ticks["-1"]
    assert float(band.get("width")) / width == pytest.approx(0.2, abs=2e-3)
    assert float(band.get("x")) - ticks["-1"] == pytest.approx(0.4 * width, abs=0.2)
    shades = root.findall(f".//{SVG}rect[@class='shade']")
    assert len(shades) == 2 and all(s.find(f"{SVG}title") is not None for s in shades)
    assert float(shades[0].get("width")) / width == pytest.approx(0.3, abs=2e-3)


def test_paired_series_share_a_row_and_the_legend_names_them():
    block = _block(labels=("a", "a", "b", "b"), values=(0.5, 0.1, -0.1, 0.0),
                   low=(0.3, -0.1, -0.4, -0.2), high=(0.7, 0.3, 0.2, 0.2),
                   categories=("adds", "inconclusive", "inconclusive", "inconclusive"),
                   series=("A", "B", "A", "B"), hover=None, shade=None)
    root = ElementTree.fromstring(forest_svg(block.to_dict()))
    points = root.findall(f".//{SVG}g[@class='pt']")
    assert [p.find(f"{SVG}title").text.split("\n")[0] for p in points] == [
        "a (A)", "a (B)", "b (A)", "b (B)"]
    rows = [t.find(f"{SVG}title").text for t in root.iter(f"{SVG}text")
            if t.find(f"{SVG}title") is not None]
    assert rows == ["a", "b"]  # one row per label
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "A" in labels and "B" in labels  # the series' legend entries


def test_render_block_embeds_the_svg_and_bad_blocks_are_refused():
    out = render_block(_block().to_dict())
    assert str(out["svg"]).startswith('<svg class="forest"')
    with pytest.raises(ConfigError, match="3 labels but"):
        _block(values=(0.1, 0.2))
    with pytest.raises(ConfigError, match="xlim"):
        _block(xlim=(1.0, -1.0))
