"""Report blocks of the geometry curves: the one place their plots and table are built.

``[[geometry]]`` (``suites/analyses/geometry.py``) calls :func:`geometry_blocks` with the
suite's sites (blank where a site is constant); ``GeometryCurves._blocks()`` calls it with its
own layers, so a notebook cell shows the same plots and table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..report.blocks import Block, Column, LinePlot, Series, Table, Text

__all__ = ["FACTORIZATION_MEASURES", "MEASURES", "factorization_blocks", "geometry_blocks"]

#: (key, table header, format) of every per-site measure, in table order.
MEASURES = (
    ("capacity", "capacity alpha", ".4g"),
    ("radius", "radius R", ".3g"),
    ("dimension", "dimension D", ".3g"),
    ("utility", "utility (inferred)", ".4g"),
    ("center_correlation", "centre corr.", ".3f"),
    ("participation_ratio", "PR (pooled)", ".3g"),
    ("participation_ratio_class_mean", "PR (class mean)", ".3g"),
    ("n_pcs_90", "#PCs 90%", ".0f"),
    ("numerical_rank", "rank", ".0f"),
    ("nc1", "NC1", ".4g"),
    ("fisher_ratio", "Fisher ratio", ".4g"),
)


def geometry_blocks(
    labels: Sequence[str],
    values: Mapping[str, Sequence[float | int | None]],
    *,
    n_classes: int,
    points_per_class: int,
    label: str | None = None,
    split: str | None = None,
) -> list[Block]:
    """Summary text, capacity / dimension / radius / utility / NC1 plots by site, the table.

    Args:
        labels: a label per site (x axis, table rows).
        values: measure key (:data:`MEASURES`) -> one value per site (``None`` = not measured).
        n_classes: class manifolds measured.
        points_per_class: points per manifold (max).
        label: the class label's name (named in the text).
        split: the data split (named in the text).
    """
    what = f"{n_classes} classes" + ("" if label is None else f" of {label!r}")
    where = f"{split!r} split, " if split is not None else ""
    names = {k: h for k, h, _ in MEASURES}

    def plot(keys: tuple[str, ...], title: str, ylabel: str) -> LinePlot:
        return LinePlot(title=title, x_labels=tuple(labels), ylabel=ylabel,
                        series=tuple(Series(name=names[k], values=tuple(
                            None if v is None else float(v) for v in values[k])) for k in keys))

    return [
        Text(text=(
            f"{what} ({where}up to {points_per_class} points each). "
            "Capacity, radius and dimension: mean-field manifold analysis (Chung, Lee & "
            "Sompolinsky 2018) as in the authors' code; utility alpha*D*R^2/(1+R^2) is inferred "
            "from Chou et al.'s released values and D, R stand in for GLUE's effective dimension "
            "and radius (GLUE is unreleased)."
        )),
        plot(("capacity",), "manifold capacity by site", "alpha"),
        plot(("dimension", "participation_ratio_class_mean"), "dimension by site", "dimension"),
        plot(("radius",), "manifold radius by site", "R"),
        plot(("utility",), "utility (inferred) by site", "Psi"),
        plot(("nc1",), "NC1 by site", "tr(S_W S_B^+)/C"),
        Table(
            columns=(Column(key="site", header="site", fmt="", align="left"),
                     *(Column(key=k, header=h, fmt=f) for k, h, f in MEASURES)),
            rows=tuple({"site": lab, **{k: values[k][i] for k, _, _ in MEASURES}}
                       for i, lab in enumerate(labels)),
        ),
    ]


#: (key, table header, format) of the factorization measures, in table order.
FACTORIZATION_MEASURES = (
    ("r2_train", "R2 fitted combos", ".4f"),
    ("r2_heldout", "R2 unseen combos", ".4f"),
    ("angle_min", "min angle (deg)", ".1f"),
    ("angle_mean", "mean angle (deg)", ".1f"),
    ("rank_a", "rank a (sv > rtol)", ".0f"),
    ("rank_b", "rank b (sv > rtol)", ".0f"),
    ("linear_r2", "LF R2 (Uselis)", ".4f"),
    ("linear_r2_whitened", "LF R2 whitened (Uselis)", ".4f"),
    ("k95_a", "k95 a (Uselis)", ".0f"),
    ("k95_b", "k95 b (Uselis)", ".0f"),
    ("same_concept_abs_cos", "|cos| same concept (Uselis)", ".3f"),
    ("cross_concept_abs_cos", "|cos| across concepts (Uselis)", ".3f"),
)
_USELIS = ("linear_r2", "linear_r2_whitened", "k95_a", "k95_b", "same_concept_abs_cos")


def factorization_blocks(
    labels: Sequence[str],
    values: Mapping[str, Sequence[float | int | None]],
    *,
    text: str,
) -> list[Block]:
    """Linearity, orthogonality, |cos| and rank plots by site, and the per-site table.

    Args:
        labels: a label per site.
        values: measure key (:data:`FACTORIZATION_MEASURES`) -> one value per site; keys
            absent here (e.g. Uselis et al.'s scores) are left out of the plots and the table.
        text: the summary paragraph (concepts, combinations, splits).
    """
    names = {k: h for k, h, _ in FACTORIZATION_MEASURES}

    def plot(keys: tuple[str, ...], title: str, ylabel: str, **kw: object) -> LinePlot | None:
        keys = tuple(k for k in keys if k in values)
        if not keys:
            return None
        return LinePlot(title=title, x_labels=tuple(labels), ylabel=ylabel, series=tuple(
            Series(name=names[k], values=tuple(None if v is None else float(v) for v in values[k]),
                   style="dashed" if k in _USELIS else "line")
            for k in keys), **kw)  # type: ignore[arg-type]

    plots = [
        plot(("r2_train", "r2_heldout", "linear_r2", "linear_r2_whitened"),
             "linearity: R2 of the additive concept model by site", "R2",
             hlines=((1.0, "exactly additive"),)),
        plot(("angle_min", "angle_mean"), "orthogonality: principal angles between the concept "
             "spans", "degrees", ylim=(0.0, 92.0), hlines=((90.0, "orthogonal"),)),
        plot(("cross_concept_abs_cos", "same_concept_abs_cos"),
             "mean |cos| between concept-value means", "|cos|", ylim=(0.0, 1.0)),
        plot(("rank_a", "rank_b", "k95_a", "k95_b"), "rank of each concept's factor by site",
             "dimensions"),
    ]
    measures = [m for m in FACTORIZATION_MEASURES if m[0] in values]
    table = Table(columns=(Column(key="site", header="site", fmt="", align="left"),
                           *(Column(key=k, header=h, fmt=f) for k, h, f in measures)),
                  rows=tuple({"site": lab, **{k: values[k][i] for k, _, _ in measures}}
                             for i, lab in enumerate(labels)))
    return [Text(text=text), *(p for p in plots if p is not None), table]
