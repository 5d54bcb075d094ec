"""Grokking results display themselves in a notebook (issue 35): the claim's plots and table."""

import numpy as np

from tests.report.notebook_checks import check_display


def test_progress_series_displays_the_claim_plots_and_table():
    from probekit.executor import InProcessExecutor
    from probekit.grokking.progress_measures import progress_measures
    from probekit.testbeds import get_task
    from tests.grokking.test_progress_measures import SERIES

    p = 53
    train = get_task("modular_addition", p=p, train_fraction=0.6, seed=0).splits()["train"]
    mask = np.zeros((p, p), bool)
    mask[train.metadata["a"], train.metadata["b"]] = True
    series = progress_measures([(s, SERIES / f"step_{s:07d}") for s in (100, 1000)],
                               train_mask=mask, keys=(2, 7, 12, 13, 20),
                               executor=InProcessExecutor(progress=False))
    parsed = check_display(series, headers=["step", "held-out loss", "restricted loss", "Gini W_E"],
                           numbers={"test_loss": ".3g", "restricted_loss": ".3g", "test_acc": ".3f"})
    assert [r["step"] for r in series.to_records()] == [100, 1000]
    assert series.to_records()[1]["test_acc"] == series.points[1].test_acc
    assert len(parsed.images) == 2
    assert series.plot().axes[0].get_ylabel() == "loss (nats)"
