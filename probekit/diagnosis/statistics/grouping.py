"""Which column holds a population's groups (seeds) when the caller says ``groups="auto"``.

Models trained from one seed share its random effects (initialisation, data order), so the
seed, not the model, is the unit every p-value and CI must respect (``docs/diagnosis.md``,
"Groups"). A table whose seed column is not literally named ``seed`` must not be analysed as if
every model were independent without anyone noticing: on simulated populations with a seed
effect shared by marker and outcome, that silent ungrouping calls a null marker
``adds_beyond_covariates`` in most populations. ``"auto"`` therefore resolves, in order:

1. a column named ``seed``;
2. the one column whose name reads like a seed column (:data:`SEED_NAME`: ``init``, ``run``,
   ``replicate``, ``rep``, ``trial``, ``init_seed``, ``random_seed``, ``seed_id``, ...) and
   whose values repeat (a column with one value per model is an identifier, not a group):
   it is used, and the resolution says so;
3. otherwise, a column that *looks* like a seed by its structure (:func:`looks_like_groups`:
   integer levels, 3 to ``n / 2`` of them, each on >= 2 models, crossed with the covariates'
   cells) is not guessed at: the analysis is refused with the one-line fix
   (``groups="<col>"`` or ``groups=None``), since a marker can be integer-valued too;
4. no such column: each model is its own unit.

A resolution to no groups (asked, or step 4) is stated in ``groups_source`` and each marker
record carries the flag :func:`ungrouped_flag`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from probekit.errors import ConfigError

from .table import MarkerTable

__all__ = ["SEED_NAME", "looks_like_groups", "resolve_groups", "ungrouped_flag"]

#: column names read as a seed column (case-insensitive; ``_``, ``-``, ``.`` or space between words)
SEED_NAME = re.compile(
    r"^(?:(?:random|rng|init|train|training|model|data)[ _.\-]?)?seeds?"
    r"(?:[ _.\-]?(?:id|idx|index|no|nr|num|number))?$"
    r"|^(?:init|initialisation|initialization|run|runs|rep|reps|replicate|replicates|replica"
    r"|repeat|repetition|trial|restart)(?:[ _.\-]?(?:id|idx|index|no|nr|num|number|seed))?$",
    re.IGNORECASE)

AUTO_NONE = "auto: no seed-like column, each model is its own unit"


def _repeats(t: MarkerTable, name: str) -> bool:
    """The column is complete and some level holds >= 2 rows (and there are >= 2 levels)."""
    if t.missing(name).any():
        return False
    levels = {v.item() if hasattr(v, "item") else v for v in t.columns[name]}
    return 2 <= len(levels) < t.n_rows


def looks_like_groups(t: MarkerTable, name: str, covariates: Sequence[str]) -> bool:
    """Integer levels (3 to ``n // 2``), each on >= 2 models, crossed with the covariate cells.

    Crossed: the column varies within some cell of the covariates with at most ``n / 2``
    values (the design's knobs; the models that share every knob value) and each of its levels
    meets >= 2 cells (a seed is repeated across the design, not nested in one of its levels).
    Without such covariates, only the levels count.
    """
    if t.kinds[name] != "numeric" or t.missing(name).any():
        return False
    x = np.array([float(v) for v in t.columns[name]])
    if not (np.all(np.isfinite(x)) and np.all(x == np.round(x))):
        return False
    levels, codes, counts = np.unique(x, return_inverse=True, return_counts=True)
    if not (3 <= levels.size <= t.n_rows // 2 and counts.min() >= 2):
        return False
    knobs = [c for c in covariates  # the design's knobs: measured covariates have no cells
             if len({str(v) for v in t.columns[c]}) <= t.n_rows // 2]
    if not knobs:
        return True
    cells = np.unique(np.array([[str(v) for v in t.columns[c]] for c in knobs]).T, axis=0,
                      return_inverse=True)[1].reshape(-1)
    varies_within = any(np.unique(codes[cells == c]).size > 1 for c in np.unique(cells))
    spans = all(np.unique(cells[codes == k]).size >= 2 for k in range(levels.size))
    return bool(varies_within and spans)


def resolve_groups(
    t: MarkerTable, groups: str | None, *, taken: Sequence[str] = (),
    covariates: Sequence[str] = (), setting: str = "groups", none: str = "None",
) -> tuple[str | None, str]:
    """``(column or None, how it was resolved)`` for ``groups`` (a name, None or ``"auto"``).

    ``taken``: columns with another role (outcome, covariates, named markers, bookkeeping
    columns), never taken as the groups. ``setting``: how the caller names the option in the
    refusal's fix and ``none`` the value that asks for no groups (``None`` in Python, ``""`` in
    a diagnosis file).

    Raises:
        ConfigError: an unknown column; under ``"auto"``, two seed-named columns, or a column
            that looks like a seed by structure only (the message names the fix).
    """
    if groups is None:
        return None, "none (asked): each model is its own unit"
    if groups != "auto":
        t.check_names([groups], "groups")
        return groups, "given"
    free = [c for c in t.names if c not in set(taken)]
    if "seed" in free:
        return "seed", "auto: the table's 'seed' column"
    named = [c for c in free if SEED_NAME.match(c.strip()) and _repeats(t, c)]
    if len(named) > 1:
        raise ConfigError(
            f"{setting}='auto' finds several seed-like columns ({', '.join(map(repr, named))}): "
            f"pass {setting}={named[0]!r} (or the right one), or {setting}={none} to treat every "
            "model as its own unit")
    if named:
        return named[0], (f"auto: column {named[0]!r} (named like a seed column; pass "
                          f"{setting}={none} to treat every model as its own unit)")
    shaped = [c for c in free if looks_like_groups(t, c, covariates)]
    if shaped:
        c = shaped[0]
        k = len({v.item() if hasattr(v, "item") else v for v in t.columns[c]})
        raise ConfigError(
            f"{setting}='auto' finds no 'seed' column, but {c!r} looks like one ({k} repeated "
            f"integer levels crossed with the design): pass {setting}={c!r} if it is the seed, "
            f"or {setting}={none} to treat every model as its own unit")
    return None, AUTO_NONE


def ungrouped_flag() -> str:
    """The flag of every record whose groups resolved to none (asked, or nothing found)."""
    return ("ungrouped(no groups: each model is its own unit; models that share a seed would "
            "count as independent)")
