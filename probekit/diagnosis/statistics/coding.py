"""How a covariate enters the regression: as a factor, linearly, or as a natural cubic spline.

A design knob such as a noise level with a handful of values drives marker and outcome in ways
that are rarely linear; entering it as one linear term leaves its nonlinear part in both
residuals, and that shared remainder reads as a partial association of the marker (Jiang et
al., "Fantastic Generalization Measures and Where to Find Them", ICLR 2020, on hyperparameters
that drive both a measure and the outcome). So a covariate is coded by what it is:

- ``"factor"``: one indicator column per level but the first in sorted order (absorbed by the
  intercept); the default for a text column and for a numeric column with at most
  :data:`FACTOR_MAX_LEVELS` distinct values each of which holds at least two rows (a design
  knob: each level holds several models, e.g. one per seed). A measured column with few
  distinct values, some of them held by one model only (ID accuracy on a small evaluation set:
  9 values over 30 models), is a quantity, not a design: it enters linearly, so as not to spend
  a degree of freedom per observed value;
- ``"spline"``: a natural cubic regression spline with ``spline_df`` columns, centred so that
  they are orthogonal to the intercept (knots at quantiles of the column, linear beyond the
  boundary knots; Wood 2017, "Generalized Additive Models", 2nd ed., sec. 5.3.1); the default
  for a numeric column with more distinct values (ID accuracy, train loss);
- ``"linear"``: the column as one term (the coding of earlier versions); the default for a
  measured numeric column with at most :data:`FACTOR_MAX_LEVELS` distinct values some of which
  occur once (train loss over six models: as a factor it would fit every model exactly).

The seed (or whichever column is the resampling ``groups``) is a label, not a quantity: as a
number it is refused, as a factor it is allowed (a fixed effect per seed), and the usual place
for it is the groups column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from jaxtyping import Float

from probekit.errors import ConfigError

__all__ = ["CODINGS", "FACTOR_MAX_LEVELS", "Coding", "check_label_coding", "check_spline_df",
           "resolve_coding", "spline_basis"]

Coding = Literal["factor", "linear", "spline"]
CODINGS: tuple[str, ...] = ("factor", "linear", "spline")
#: a numeric covariate with at most this many distinct values is a factor by default
FACTOR_MAX_LEVELS = 10


def check_spline_df(spline_df: Any) -> int:
    """``spline_df`` as an int >= 2 (a natural cubic spline needs 3 knots), else ConfigError."""
    if isinstance(spline_df, bool) or not isinstance(spline_df, (int, np.integer)) or spline_df < 2:
        raise ConfigError(f"spline_df = {spline_df!r}: the degrees of freedom of a natural cubic "
                          "spline must be an integer >= 2 (default 4)")
    return int(spline_df)


def check_label_coding(name: str, how: str, groups: str | None = None) -> None:
    """Refuse the seed (or the ``groups`` column) coded as a number, naming the fix.

    Raises:
        ConfigError: ``how`` is ``"linear"`` or ``"spline"`` for ``seed`` / ``groups``.
    """
    if how == "factor" or not (name == "seed" or (groups is not None and name == groups)):
        return
    what = "the seed" if name == "seed" else f"the groups column {name!r}"
    raise ConfigError(
        f"covariate {name!r} is {what}, a label without order: it cannot enter as a number "
        f"({how!r}); leave it as the groups column (the default: remove it from the "
        f"covariates) or code it as a factor (covariate_coding = {{ {name} = \"factor\" }})")


def resolve_coding(
    name: str, kind: str, n_levels: int, coding: Mapping[str, str] | None, *,
    groups: str | None = None, spline_df: int = 4, n_rows: int | None = None,
    min_level_count: int | None = None,
) -> Coding:
    """The coding of covariate ``name``: the caller's choice, checked, or the default by kind.

    Args:
        name: the covariate.
        kind: its column kind, ``"numeric"`` or ``"categorical"`` (text).
        n_levels: its number of distinct values.
        coding: column -> ``"factor" | "linear" | "spline"`` overrides.
        groups: the resampling groups column (refused as a number, like ``seed``).
        spline_df: columns of a spline term.
        n_rows: the number of rows (``None``: taken as more than ``n_levels``, levels repeat).
        min_level_count: the number of rows of the rarest value (``None``: taken as >= 2); a
            numeric column with a value held by one row only is a quantity, not a factor.

    Raises:
        ConfigError: an unknown coding; a text column as a number; a seed / groups column as a
            number (the fix named); a spline with too few distinct values.
    """
    chosen = (coding or {}).get(name)
    if chosen is not None and chosen not in CODINGS:
        raise ConfigError(f"covariate_coding of {name!r} = {chosen!r}: must be one of "
                          f"{list(CODINGS)}")
    label = name == "seed" or (groups is not None and name == groups)
    if chosen is None:
        # two levels: the indicator spans the same column as the number, so name it a factor
        repeats = (n_rows is None or n_levels < n_rows) and (
            n_levels <= 2 or min_level_count is None or min_level_count >= 2)
        if kind == "categorical" or label or (n_levels <= FACTOR_MAX_LEVELS and repeats):
            return "factor"
        return "spline" if n_levels > FACTOR_MAX_LEVELS and n_levels >= spline_df + 2 else "linear"
    if chosen != "factor":
        if kind == "categorical":
            raise ConfigError(f"covariate {name!r} holds text; it can only enter as a factor, not "
                              f"{chosen!r}: remove its covariate_coding or set it to \"factor\"")
        check_label_coding(name, chosen, groups)
    if chosen == "spline" and n_levels < spline_df + 2:
        raise ConfigError(
            f"covariate {name!r} has {n_levels} distinct values, too few for a natural cubic "
            f"spline with spline_df = {spline_df} (needs >= {spline_df + 2}); code it as a "
            "factor, linearly, or lower spline_df")
    return chosen


def spline_basis(x: Float[np.ndarray, " n"], df: int) -> Float[np.ndarray, "n df"]:
    """Centred natural cubic regression spline basis of ``x`` with ``df`` columns.

    patsy's ``cr(x, df=df, constraints="center")`` (mgcv's ``cr`` basis, Wood 2017 sec. 5.3.1):
    ``df + 1`` knots at quantiles of ``x`` (the extremes included), the cubic spline through
    them that is linear outside the boundary knots, reparametrised so every column sums to 0
    over the rows (it is then orthogonal to the intercept, which the caller adds).

    patsy rather than formulaic: it depends on numpy only (formulaic needs pandas, an optional
    extra of probekit) and its ``cr`` evaluates on a bare array without a formula.
    """
    import patsy

    return np.asarray(patsy.cr(np.asarray(x, dtype=np.float64), df=df, constraints="center"),
                      dtype=np.float64)
