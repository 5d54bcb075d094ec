"""Level-mean R^2: An & Du's unit (the HE study), reported beside the per-model numbers.

An & Du fit OOD accuracy on homomorphism error over the *means* of each noise level (16 points,
polynomial fits, R^2 0.73 in the paper). Averaging over seeds removes the within-level spread,
so a level-mean R^2 is much higher than the per-model one whenever a knob drives both (probekit's
rerun: 0.93 over level means, 0.58 over models, partial r given noise 0.07). This module gives
the level-mean R^2 and, for the same polynomial degree, the per-model R^2, so the two units are
always side by side (``docs/diagnosis.md``: a level-mean number is reported only beside the
per-model numbers, labelled with its unit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probekit.errors import ConfigError, DataError
from probekit.report.blocks import Block, Column, Table
from probekit.report.notebook import NotebookMixin

from .table import as_marker_table

__all__ = ["LevelMeanR2", "level_mean_r2", "levels_table"]

UNIT = "level means (An & Du's unit)"


def _r2(x: np.ndarray, y: np.ndarray, degree: int) -> float:
    coef = np.polyfit(x, y, degree)
    resid = y - np.polyval(coef, x)
    return 1.0 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum())


@dataclass(frozen=True, kw_only=True, repr=False)
class LevelMeanR2(NotebookMixin):
    """Polynomial R^2 of the outcome on the marker over level means and over models.

    Attributes:
        marker, outcome, knob: the columns; unit: ``"level means (An & Du's unit)"``.
        levels: the knob's levels (sorted); n_per_level: models averaged at each.
        marker_means, outcome_means: the means at each level.
        degrees: polynomial degrees; r2_levels: R^2 over the level means per degree (NaN when
            degree + 1 >= the number of levels: the fit interpolates the means, R^2 = 1 by
            construction; ``reasons`` says so);
            r2_models: R^2 of the same degree over the individual models.
        n, n_missing: models used and rows dropped for a missing marker cell.
    """

    marker: str
    outcome: str
    knob: str
    unit: str
    levels: tuple[Any, ...]
    n_per_level: tuple[int, ...]
    marker_means: tuple[float, ...]
    outcome_means: tuple[float, ...]
    degrees: tuple[int, ...]
    r2_levels: tuple[float, ...]
    r2_models: tuple[float, ...]
    reasons: tuple[str, ...]
    n: int
    n_missing: int

    def to_records(self) -> list[dict[str, Any]]:
        """One row per degree: R^2 over level means and over models, side by side."""
        return [{"marker": self.marker, "knob": self.knob, "degree": d, "n_levels": len(self.levels),
                 "r2_level_means": rl, "r2_models": rm, "n_models": self.n, "reason": why}
                for d, rl, rm, why in zip(self.degrees, self.r2_levels, self.r2_models,
                                          self.reasons, strict=True)]

    def _blocks(self) -> tuple[Block, ...]:
        return (levels_table([self]),)

    def _summary(self) -> str:
        r2 = ", ".join(f"deg {d}: {rl:.3g} vs {rm:.3g}" for d, rl, rm in
                       zip(self.degrees, self.r2_levels, self.r2_models, strict=True))
        return (f"{self.marker} -> {self.outcome} over {len(self.levels)} levels of {self.knob}, "
                f"{self.n} models; R^2 level means vs models: {r2}")


def levels_table(levels: Sequence[LevelMeanR2]) -> Table:
    """The report's level-mean table: one row per (result, degree), labelled with its unit.

    A degree the knob's levels cannot fit (``degree >= levels``: two levels fit a line only)
    has no row; the table is a collapsed detail of the report (the ranking is the result).
    """
    rows = tuple(
        {"marker": r["marker"], "knob": r["knob"], "degree": r["degree"],
         "n_levels": r["n_levels"], "r2_levels": r["r2_level_means"],
         "r2_models": r["r2_models"], "n": r["n_models"], "reason": r["reason"]}
        for lv in levels for r in lv.to_records()
        if not (isinstance(r["n_levels"], int) and r["degree"] >= r["n_levels"])
    )
    return Table(
        title=UNIT, collapsed=True,
        columns=(Column(key="marker", header="marker", fmt="", align="left"),
                 Column(key="knob", header="knob", fmt="", align="left"),
                 Column(key="degree", header="poly degree", fmt="d"),
                 Column(key="n_levels", header="levels", fmt="d"),
                 Column(key="r2_levels", header="R^2 over level means"),
                 Column(key="r2_models", header="R^2 over models"),
                 Column(key="n", header="models", fmt="d"),
                 Column(key="reason", header="note", fmt="", align="left")),
        rows=rows,
        caption="An & Du's unit: outcome and marker averaged over seeds at each level of the knob, "
        "polynomial fit of the means. Shown beside the per-model R^2 of the same fit; averaging "
        "removes the within-level spread, so level means overstate what a marker says about one "
        "model. The ranking above (per model, given the covariates) is the primary result. "
        "Degrees >= the number of levels are not fitted (no row).",
    )



def level_mean_r2(
    table: Mapping[str, Sequence[Any]] | Any,
    outcome: str,
    marker: str,
    knob: str,
    degrees: Sequence[int] = (1, 2, 3),
) -> LevelMeanR2:
    """An & Du's level-mean R^2: mean ``y`` and ``m`` per level of ``knob``, polynomial fits.

    For degree ``d``: ``numpy.polyfit(mean_m, mean_y, d)`` over the levels, ``R^2 = 1 -
    SS_res / SS_tot`` of the level means; ``r2_models`` is the same fit over the models.
    Rows with a missing marker cell are dropped first.

    Raises:
        ConfigError: unknown columns, a degree < 1.
        DataError: fewer than 2 levels with a marker value, a constant mean outcome or marker.
    """
    degrees = tuple(int(d) for d in degrees)
    if not degrees or min(degrees) < 1:
        raise ConfigError(f"degrees must be >= 1, got {degrees}")
    t = as_marker_table(table)
    y = t.numeric(outcome, "outcome")
    m = t.numeric(marker, "marker", allow_missing=True)
    code, levels = t.codes(knob, "knob")
    keep = ~np.isnan(m)
    y, m, code = y[keep], m[keep], code[keep]
    used = np.unique(code)
    if used.size < 2:
        raise DataError(f"knob {knob!r} has {used.size} level(s) with a {marker} value; level "
                        "means need >= 2 levels")
    my = np.array([y[code == c].mean() for c in used])
    mm = np.array([m[code == c].mean() for c in used])
    if np.ptp(my) == 0 or np.ptp(mm) == 0:
        raise DataError(f"the level means of {outcome if np.ptp(my) == 0 else marker!r} are "
                        f"constant over the levels of {knob!r}; R^2 is undefined")
    r2l, r2m, why = [], [], []
    for d in degrees:
        if d + 1 >= used.size:  # d + 1 coefficients through d + 1 means: R^2 = 1 by construction
            r2l.append(math.nan)
            why.append(f"degree {d} on {used.size} levels would interpolate the means")
        else:
            r2l.append(_r2(mm, my, d))
            why.append("")
        r2m.append(_r2(m, y, d) if d < np.unique(m).size else math.nan)
    return LevelMeanR2(
        marker=marker, outcome=outcome, knob=knob, unit=UNIT,
        levels=tuple(levels[c] for c in used),
        n_per_level=tuple(int((code == c).sum()) for c in used),
        marker_means=tuple(mm.tolist()), outcome_means=tuple(my.tolist()), degrees=degrees,
        r2_levels=tuple(r2l), r2_models=tuple(r2m), reasons=tuple(why), n=int(keep.sum()),
        n_missing=int((~keep).sum()),
    )
