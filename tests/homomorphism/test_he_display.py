"""HE results display themselves in a notebook (issue 35): the [[homomorphism]] report blocks."""

from probekit.homomorphism import HEConfig, composition_he
from probekit.homomorphism.blocks import he_blocks
from tests.homomorphism.conftest import planted
from tests.report.notebook_checks import check_display


def test_he_result_displays_plots_and_table():
    res = composition_he(*planted(noise=0.3), config=HEConfig(families=("affine", "bilinear")))
    parsed = check_display(res, headers=["kind", "site", "HE [C]", "95% CI", "1 - R^2 (ours)",
                                         "affine MSE", "bilinear MSE"],
                           numbers={"he": ".4g", "he_normalised": ".4g", "mse/affine": ".4g"})
    (table,) = parsed.tables
    assert len(table["cells"]) == len(res.layers) * len(table["headers"])
    assert len(parsed.images) == 2  # HE [C] and 1 - R^2 by layer
    rec = res.to_records()[1]
    assert rec["layer"] == res.layers[1] and rec["he"] == float(res.he[1])
    assert f"[{rec['he_low']:.3g}, {rec['he_high']:.3g}]" in table["cells"]
    fig = res.plot()
    assert fig.axes[0].get_ylabel() == "held-out MSE"
    assert res._blocks() == tuple(he_blocks({res.kind: res}, [f"L{x}" for x in res.layers]))
    assert f"HE {res.headline:.4g}" in repr(res)
