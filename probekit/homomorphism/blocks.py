"""Report blocks of homomorphism-error results: the one place their plots and table are built.

``[[homomorphism]]`` (``suites/analyses/homomorphism.py``) calls :func:`he_blocks` with the
suite's site labels and split; ``HEResult._blocks()`` calls it with one result, so a notebook
cell shows the same plots and table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..report.blocks import Block, Column, LinePlot, Series, Table, Text

if TYPE_CHECKING:
    from .result import HEResult

__all__ = ["he_blocks", "he_rows"]


def he_rows(res: HEResult, labels: Sequence[str]) -> list[dict[str, Any]]:
    """The report table's rows: kind, site, HE [C] with its CI, 1 - R^2, MSE per family."""
    rows = []
    for i, _ in enumerate(res.layers):
        row: dict[str, Any] = {
            "kind": res.kind, "site": labels[i], "he": float(res.he[i]),
            "ci": f"[{res.he_low[i]:.3g}, {res.he_high[i]:.3g}]",
            "norm": float(res.he_normalised[i]),
        }
        row.update({f: float(v) for f, v in zip(res.families, res.mse[i])})
        rows.append(row)
    return rows


def he_blocks(
    results: Mapping[str, HEResult], labels: Sequence[str], *, split: str | None = None,
) -> list[Block]:
    """Summary text, HE [C] and 1 - R^2 by layer (one series per kind), the per-layer table.

    Args:
        results: kind (``"modifier"``/``"sequence"``) -> its result, on the same layers.
        labels: a label per layer (e.g. ``"resid_post@3"``).
        split: the data split the pairs come from (named in the text when given).
    """
    first = next(iter(results.values()))
    cfg = first.config
    where = f"the {split!r} pairs" if split is not None else "the pairs"
    rows = [r for res in results.values() for r in he_rows(res, labels)]
    fam_cols = tuple(Column(key=f, header=f"{f} MSE", fmt=".4g") for f in first.families)
    return [
        Text(text=(
            f"Operators ({', '.join(cfg.families)}; solver {cfg.solver}) fit on the first "
            f"{cfg.train_fraction:.0%} of {where}, scored on the rest. "
            + ("Parts from one forward pass, composite (a + b) / 2, one operator for all "
               "modifiers [C]. " if cfg.parts == "same_pass" else
               "Parts from separate forward passes (b with a deleted from its input), the "
               "composite's span from its own pass, one operator per modifier / connective "
               "([O]; 1 - R^2 within groups). ")
            + "HE [C] = mean over families of held-out MSE (95% bootstrap CI "
            "over scored pairs); 1 - R^2 (ours) does not scale with the hidden states. "
            + ", ".join(f"{k}: {r.n_pairs} pairs" for k, r in results.items())
        )),
        LinePlot(
            title="HE [C] by layer", x_labels=tuple(labels), ylabel="held-out MSE",
            series=tuple(
                Series(name=k, values=tuple(map(float, r.he)), low=tuple(map(float, r.he_low)),
                       high=tuple(map(float, r.he_high)))
                for k, r in results.items()
            ),
        ),
        LinePlot(
            title="1 - R^2 (ours) by layer", x_labels=tuple(labels), ylabel="1 - R^2",
            series=tuple(
                Series(name=k, values=tuple(map(float, r.he_normalised)),
                       low=tuple(map(float, r.he_normalised_low)),
                       high=tuple(map(float, r.he_normalised_high)))
                for k, r in results.items()
            ),
        ),
        Table(
            columns=(
                Column(key="kind", header="kind", fmt="", align="left"),
                Column(key="site", header="site", fmt="", align="left"),
                Column(key="he", header="HE [C]", fmt=".4g"),
                Column(key="ci", header="95% CI", fmt=""),
                Column(key="norm", header="1 - R^2 (ours)", fmt=".4g"),
                *fam_cols,
            ),
            rows=tuple(rows),
        ),
    ]
