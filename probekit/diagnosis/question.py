"""The question a diagnosis asks of its table, resolved once for both paths.

``[diagnosis]`` names an outcome and may name covariates, ``groups`` and ``color_by``; what it
leaves unset is filled in from the population, and every column it names is checked, by
:func:`resolve_settings` — the one resolver, called by the runner (a population of checkpoints
or a grid: :func:`probekit.diagnosis.runner.check_question`) and by a table diagnosis
(``[population] table``: :func:`probekit.diagnosis.table_diagnosis.table_question`). The
rules, the same on both paths:

* ``covariates``: as given, else the varying design knobs and ``id_accuracy`` (when it is a
  column and not the outcome); each must be a column and not the outcome; every column of
  ``covariate_coding`` must be one of them;
* ``groups`` (the resampling and leave-one-group-out unit): as given (``""``: none, models are
  the unit), else the path's default (:class:`Columns` ``default_groups``: the ``seed`` design
  column of a population; for a table, ``seed`` or the one seed-named column,
  :mod:`.statistics.grouping`, as documented for ``--table``); it must be a column the path
  allows and have at least :data:`MIN_GROUPS` levels among the analysed models, since
  leave-one-group-out needs them (a table with fewer used to fail later, in the analysis, with
  the same reason);
* ``color_by``: as given, else the first varying knob; it must be an allowed column.

What differs is only what the path offers (:class:`Columns`): the columns it has, those that
may serve as groups or ``color_by`` (a population's design columns; any column of a table)
and its knobs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["MIN_GROUPS", "Columns", "Settings", "check_coded_covariates", "resolve_settings"]

#: the fewest groups leave-one-group-out can use (one held out, two to fit)
MIN_GROUPS = 3


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The resolved ``[diagnosis]`` question: outcome, covariates, groups, knobs."""

    outcome: str
    covariates: tuple[str, ...]
    groups: str | None
    color_by: str | None
    knobs: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Columns:
    """What a path offers the question.

    Attributes:
        names: every column (design, outcomes, markers), in the order shown in messages.
        design: the columns that may serve as ``groups`` and ``color_by``.
        knobs: ``groups -> `` the varying design knobs (the default covariates; the first colours
            the plots); a table's knobs leave its groups column out.
        levels: column -> its values over the analysed (final) models.
        source: how messages name the table (``"the table"``, the CSV file).
        default_groups: ``groups`` when ``[diagnosis]`` leaves it unset.
    """

    names: Sequence[str]
    design: Sequence[str]
    knobs: Callable[[str | None], tuple[str, ...]]
    levels: Callable[[str], Sequence[Any]]
    source: str
    default_groups: Callable[[], str | None]


def check_coded_covariates(d: Any, covariates: tuple[str, ...], where: str) -> None:
    """Every column of ``[diagnosis] covariate_coding`` must be a covariate (a typo otherwise).

    Raises:
        ConfigError: a coded column that is not among ``covariates`` (both named).
    """
    stray = [c for c in d.covariate_coding if c not in covariates]
    if stray:
        raise ConfigError(f"{where}: {stray[0]!r} is not a covariate; the covariates are "
                          f"{list(covariates)} (set them with [diagnosis] covariates = [...])")


def resolve_settings(d: Any, cols: Columns, at: Callable[[str], str]) -> Settings:
    """``[diagnosis]`` (``d``) with its defaults filled in from ``cols``, every named column checked.

    ``at(key)``: the ``FILE:LINE: [diagnosis] key`` of a key. Rules in the module docstring.

    Raises:
        ConfigError: a covariate, ``groups`` or ``color_by`` that is not a column (naming the
            columns), the outcome as its own covariate, a coded column that is no covariate,
            or fewer than :data:`MIN_GROUPS` groups.
    """
    names = set(cols.names)
    groups = cols.default_groups() if d.groups is None else (d.groups or None)
    if groups is not None and groups not in cols.design:
        raise ConfigError(f"{at('groups')} = {groups!r}: not a design column; the design "
                          f"columns are {list(cols.design)}")
    knobs = cols.knobs(groups)
    if d.covariates is not None:
        covariates = tuple(d.covariates)
    else:
        covariates = knobs + tuple(c for c in ("id_accuracy",) if c != d.outcome and c in names)
    for c in covariates:
        if c not in names:
            raise ConfigError(f"{at('covariates')}: covariate {c!r} is not a column of "
                              f"{cols.source}; columns are {list(cols.names)}")
        if c == d.outcome:
            raise ConfigError(f"{at('covariates')}: the outcome {c!r} cannot be a covariate of "
                              "itself")
    check_coded_covariates(d, covariates, at("covariate_coding"))
    if groups is not None:
        levels = {json.dumps(v) for v in cols.levels(groups)}
        if len(levels) < MIN_GROUPS:
            raise ConfigError(
                f"{at('groups')}: {len(levels)} group(s) of {groups!r} ({sorted(levels)}); "
                f"leave-one-group-out needs >= {MIN_GROUPS}: add seeds to the population or set "
                "groups = \"\" (models as the unit)")
    color_by = d.color_by if d.color_by is not None else (knobs[0] if knobs else None)
    if color_by is not None and color_by not in cols.design:
        raise ConfigError(f"{at('color_by')} = {color_by!r}: not a design column; the design "
                          f"columns are {list(cols.design)}")
    return Settings(outcome=d.outcome, covariates=covariates, groups=groups, color_by=color_by,
                    knobs=knobs)
