"""Report blocks of the grokking progress measures (Nanda et al. 2023): their curves, one place.

:class:`~probekit.grokking.progress_measures.ProgressSeries` (its notebook display) and the
``restricted_loss_lead`` claim kind call :func:`progress_plots`, so a notebook cell shows the
same curves as the report.
"""

from __future__ import annotations

from typing import Any

from ..report.blocks import LinePlot, Series

__all__ = ["PROGRESS_COLUMNS", "progress_plots"]


#: (key, table header, format) of the progress measures shown per checkpoint.
PROGRESS_COLUMNS = (
    ("train_loss", "train loss", ".3g"), ("test_loss", "held-out loss", ".3g"),
    ("restricted_loss", "restricted loss", ".3g"), ("excluded_loss", "excluded loss", ".3g"),
    ("train_acc", "train acc", ".3f"), ("test_acc", "held-out acc", ".3f"),
    ("gini_embed", "Gini W_E", ".3f"), ("gini_neuron_logit", "Gini W_L", ".3f"),
    ("sum_sq_weights", "sum sq. weights", ".4g"), ("key_power_share", "key power share", ".3f"),
)


def progress_plots(series: Any, *, threshold: float | None = None) -> list[LinePlot]:
    """Losses over training (full, restricted, excluded; Nanda et al. 2023) and Gini / norm.

    ``threshold``: a loss level drawn as a reference line (the ``restricted_loss_lead`` claim).
    """
    steps = series.steps
    curves = ("train_loss", "test_loss", "restricted_loss", "excluded_loss")
    styles = ("dotted", "line", "line", "dashed")
    plot = LinePlot(
        title=f"progress measures over training (keys {list(series.keys)})",
        x_labels=tuple(str(s) for s in steps), xlabel="step", ylabel="loss (nats)",
        series=tuple(Series(name=n.replace("_", " "), values=tuple(series.curve(n).tolist()),
                            style=s) for n, s in zip(curves, styles)),
        hlines=() if threshold is None else ((threshold, "threshold"),),
    )
    gini_plot = LinePlot(
        title="Fourier Gini and weight norm over training", x_labels=plot.x_labels, xlabel="step",
        ylabel="Gini / relative", series=(
            Series(name="Gini W_E", values=tuple(series.curve("gini_embed").tolist())),
            Series(name="Gini W_L", values=tuple(series.curve("gini_neuron_logit").tolist())),
            Series(name="sum sq. weights / max", style="dashed", values=tuple(
                (series.curve("sum_sq_weights") / series.curve("sum_sq_weights").max()).tolist())),
        ),
    )
    return [plot, gini_plot]
