"""The crossing step as an outcome: right-censor the runs that never cross.

The column ``id_step_<c>`` (:func:`probekit.diagnosis.outcomes.crossing_step`) is empty for a
run whose held-out accuracy never reaches ``c``. As an outcome it is right-censored: such a run
gets the censoring value ``C`` (e.g. one evaluation past the end of training), larger than every
observed crossing. Ranks stay exact (every never-crossing run ties at the top, where it belongs),
so Spearman correlations and their permutation p-values are exact; partial r and delta R^2 treat
``C`` as an observed value and are approximate for those runs (cf. Tobit / survival models,
Klein & Moeschberger 2003, ch. 3, for a censoring-aware regression).

Each row also gets ``final_<column>``: its run's (censored) crossing step, as on its final row,
so that the early-warning analysis (:func:`probekit.diagnosis.early_warning`) can use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import DataError

__all__ = ["CensoredCrossing", "censor_crossing", "check_censor"]


def check_censor(censor: Any, observed: Sequence[float | None] = ()) -> float:
    """The one rule on a censoring step: a finite number > 0, above every observed crossing.

    A run that never crosses is placed after every run that does (its crossing happens, if at
    all, after training ended), so ``censor`` must exceed the largest observed crossing step;
    0 or a negative step would rank the never-crossing runs first. Called with the value alone
    where the crossings are not known yet (a file's ``[diagnosis] censor``, a grid not trained),
    and with ``observed`` wherever they are (``--check`` on existing runs, the run itself).

    Raises:
        DataError: ``censor = 0: a censoring step must be a finite number > 0 ...`` or
            ``censor = 500 is not above the largest observed crossing step 800 ...``.
    """
    if isinstance(censor, bool) or not isinstance(censor, (int, float)) or not (
            math.isfinite(censor) and censor > 0):
        number = isinstance(censor, (int, float)) and not isinstance(censor, bool)
        raise DataError(f"censor = {f'{censor:g}' if number else repr(censor)}: a censoring step "
                        "must be a finite number > 0 (a "
                        "training step after the last evaluation), or \"next_eval\"")
    seen = [float(v) for v in observed if v is not None]
    if seen and censor <= max(seen):
        raise DataError(f"censor = {censor:g} is not above the largest observed crossing step "
                        f"{max(seen):g}; give a step after the end of training (e.g. one "
                        "evaluation past the last)")
    return float(censor)


@dataclass(frozen=True, kw_only=True)
class CensoredCrossing:
    """A marker table whose crossing column is censored.

    Attributes:
        table: the input table (copied) with ``column`` filled and ``final_<column>`` added.
        column: the crossing column (``id_step_0.9``).
        censor: the value given to runs that never cross.
        n_censored: number of runs that never cross.
        n_runs: number of runs.
    """

    table: dict[str, list[Any]]
    column: str
    censor: float
    n_censored: int
    n_runs: int

    def warning(self) -> str:
        """The report's warning sentence (empty when no run is censored)."""
        if not self.n_censored:
            return ""
        return (f"{self.n_censored} of {self.n_runs} runs never cross ({self.column} empty): "
                f"censored at {self.censor:g}. Rank statistics (Spearman, its p-values) stay "
                "exact; partial r and delta R^2 treat the censored value as observed and are "
                "approximate.")


def censor_crossing(table: dict[str, list[Any]], column: str, censor: float, *,
                    run: str = "run", step: str = "step") -> CensoredCrossing:
    """Fill the empty cells of ``column`` with ``censor``; add ``final_<column>`` per run.

    Args:
        table: long-form marker table (``markers.csv`` columns) with ``column``, ``run`` and
            ``step``; a ``final`` column (1 on each run's final row) is used when present, else
            each run's last step is its final row.
        column: the crossing column; ``None`` / ``""`` cells are runs that never cross.
        censor: the value for those runs; must exceed every observed crossing step.
        run: the run column.
        step: the step column.

    Raises:
        DataError: a missing column, or ``censor`` not above every observed crossing step.
    """
    for c in (column, run, step):
        if c not in table:
            raise DataError(f"column {c!r} is not in the table; columns are {sorted(table)}")
    values = [None if v in (None, "") else float(v) for v in table[column]]
    if censor != math.inf:  # inf: no censoring requested (the runs all cross)
        check_censor(censor, values)
    runs = table[run]
    final = table.get("final")
    last: dict[Any, int] = {}
    for i, r in enumerate(runs):
        if final is not None:
            if int(final[i]):
                last[r] = i
        elif r not in last or float(table[step][i]) > float(table[step][last[r]]):
            last[r] = i
    missing = sorted({str(r) for r in runs} - {str(r) for r in last})
    if missing:
        raise DataError(f"run {missing[0]!r} has no final row (final = 1); every run needs one")
    filled = [censor if v is None else v for v in values]
    out = {k: list(v) for k, v in table.items()}
    out[column] = filled
    out[f"final_{column}"] = [filled[last[r]] for r in runs]
    return CensoredCrossing(table=out, column=column, censor=float(censor),
                            n_censored=sum(values[i] is None for i in last.values()),
                            n_runs=len(last))
