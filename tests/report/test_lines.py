"""Line plots as inline SVG (the diagnosis report): hover on every point, CI bands, plain ticks."""

from xml.etree import ElementTree

from probekit.report.blocks import LinePlot, Series
from probekit.report.lines import line_plot_svg
from probekit.report.write import render_block

SVG = "{http://www.w3.org/2000/svg}"


def _plot(**kw):
    return LinePlot(
        title="probe: partial r with ood per layer", x_labels=("L0: inconclusive", "L1: adds",
                                                              "L2: adds", "L3: inconclusive"),
        series=(Series(name="partial r", values=(0.1, 0.5, None, 0.2),
                       low=(-0.2, 0.3, None, -0.1), high=(0.4, 0.7, None, 0.5)),),
        xlabel="layer", ylabel="partial r (CI)", hlines=((0.0, "0"),), marker=1,
        marker_label="strongest layer (smallest p)", **kw).to_dict()


def test_every_point_has_its_hover_and_the_band_breaks_at_a_gap():
    root = ElementTree.fromstring(line_plot_svg(_plot(ylim=(-1.0, 1.0))))
    groups = root.findall(f".//{SVG}g[@class='pt']")
    titles = [g.find(f"{SVG}title").text for g in groups]
    assert titles == ["L0: inconclusive\npartial r = 0.1 [-0.2, 0.4]",
                      "L1: adds\npartial r = 0.5 [0.3, 0.7]",
                      "L3: inconclusive\npartial r = 0.2 [-0.1, 0.5]"]  # the None layer: none
    # the missing layer breaks the curve and its band: one 2-point line, one 2-point band,
    # and the lone L3 interval as a bar
    lines = root.findall(f"{SVG}polyline")
    assert [len(p.get("points").split()) for p in lines] == [2]
    bands = root.findall(f"{SVG}polygon")
    assert [len(p.get("points").split()) for p in bands] == [4]
    # the marked layer is a vertical line with its own hover
    marked = [e for e in root.iter(f"{SVG}line") if e.find(f"{SVG}title") is not None
              and e.find(f"{SVG}title").text.startswith("strongest layer")]
    assert len(marked) == 1 and marked[0].find(f"{SVG}title").text.endswith("L1: adds")
    # y = 0.5 lies a quarter of the way down from y = 1 on the (-1, 1) axis
    top, bottom = (float(root.find(f"{SVG}rect").get(k)) for k in ("y", "height"))
    cy = float(groups[1].find(f"{SVG}circle").get("cy"))
    assert abs(cy - (top + 0.25 * bottom)) <= 0.05  # coordinates are written to 0.1 px


def test_plain_tick_labels_and_the_diagnosis_report_renders_svg():
    block = LinePlot(title="steps", x_labels=("250", "500"), xlabel="step",
                     series=(Series(name="crossing", values=(1250.0, 2500.0)),)).to_dict()
    svg = line_plot_svg(block)
    assert "e+0" not in svg and ">1500<" in svg
    assert "png" in render_block(block) and "svg" in render_block(block, svg_lines=True)
