"""LeaveOneOutResult in a notebook (issue 35): per-point table, error sentence, scatter."""

import numpy as np
import pytest

from probekit.stats.correlation import loo_linear_error
from tests.report.notebook_checks import check_display


def test_loo_result_shows_points_and_observed_vs_prediction_scatter():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    y = np.array([0.1, 0.9, 2.2, 2.8, 4.1])
    res = loo_linear_error(x, y)
    check_display(res, headers=["point", "observed y", "LOO prediction", "LOO residual"],
                  numbers={"observed": ".4g", "prediction": ".4g", "residual": "+.4g"})
    rec = res.to_records()
    assert [r["observed"] for r in rec] == pytest.approx(y.tolist())
    # brute force: refit without point 0, predict it
    b, a = np.polyfit(x[1:], y[1:], 1)
    assert rec[0]["prediction"] == pytest.approx(a + b * x[0])
    fig = res.plot()
    pts = fig.axes[0].collections[0].get_offsets()
    assert pts[:, 0].tolist() == pytest.approx(y.tolist())
    assert pts[:, 1].tolist() == pytest.approx(res.predictions.tolist())
    assert f"RMSE {res.rmse:.4g}" in res._repr_html_()
    assert repr(res) == f"LeaveOneOutResult(n=5, RMSE {res.rmse:.4g}, MAE {res.mae:.4g})"
