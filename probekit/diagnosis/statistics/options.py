"""The options of the marker analysis, declared once: each one's default and rule.

:func:`~.analysis.marker_analysis` takes its defaults from :data:`DEFAULTS`; a diagnosis file's
``[diagnosis]`` section declares the same keys with the types and rules of this class
(:func:`option_type`: ``probekit.diagnosis.spec.DiagnosisSettings``); the keys a file hands to
the analysis are this class's fields (``probekit.diagnosis.options.ANALYSIS_KEYS``). So a
default or a bound lives here and nowhere else.

Bounds: permutations and bootstrap draws within :mod:`probekit.stats.limits` (a percentile
interval needs >= 1000 resamples, Efron & Tibshirani 1993, ch. 19); ``alpha`` and the
equivalence margin ``delta`` (Schuirmann 1987; Lakens 2017) in (0, 1); a natural cubic spline
needs ``spline_df >= 2`` (3 knots).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from probekit.stats.limits import MAX_PERMUTATIONS, MAX_RESAMPLES, MIN_RESAMPLES
from probekit.util.constraints import SEED, Between, Ge, Le, Validated

__all__ = ["DEFAULTS", "AnalysisOptions", "option_keys", "option_type"]

_MORE = "more only costs time"


@dataclass(frozen=True, kw_only=True)
class AnalysisOptions(Validated):
    """The tunable options of :func:`~.analysis.marker_analysis`.

    Its other arguments are the question (outcome, markers, covariates, groups) and facts of
    the population.

    Attributes:
        n_permutations: initial Freedman-Lane permutations per row set.
        n_bootstrap: wild cluster bootstrap draws (``inference = "cluster"``).
        alpha: level of the Holm-adjusted tests in the verdicts.
        seed: seeds the permutations and bootstrap weights.
        covariate_coding: covariate -> ``"factor" | "linear" | "spline"`` (unset: by what it
            is, :mod:`.coding`).
        spline_df: columns of each spline covariate.
        inference: ``"within_groups"`` (HC3, Freedman-Lane within groups) or ``"cluster"``
            (CR1 by group, wild cluster restricted bootstrap).
        equivalence_margin: ``delta``: an effect shown absent has its CI inside
            ``(-delta, delta)`` on the r scale.
        max_permutations: cap of the adaptive permutation doubling.
    """

    n_permutations: Annotated[int, Ge(1), Le(MAX_PERMUTATIONS, hint="p resolved to 1e-5; "
                                                                    + _MORE)] = 1000
    n_bootstrap: Annotated[int, Ge(MIN_RESAMPLES, hint="the wild cluster bootstrap and the "
                                                      "mediation's percentile intervals need it"),
                           Le(MAX_RESAMPLES, hint=_MORE)] = 1000
    alpha: Annotated[float, Between(0, 1)] = 0.05
    seed: Annotated[int, SEED] = 0
    covariate_coding: dict[str, str] = field(default_factory=dict)
    spline_df: Annotated[int, Ge(2, hint="a natural cubic spline needs 3 knots")] = 4
    inference: Literal["within_groups", "cluster"] = "within_groups"
    equivalence_margin: Annotated[float, Between(0, 1, hint="a partial correlation, e.g. 0.2")] = 0.2
    max_permutations: Annotated[int, Ge(1), Le(MAX_PERMUTATIONS, hint="p resolved to 1e-5; "
                                                                      + _MORE)] = 20000


#: the defaults of every option (``marker_analysis``'s signature reads them here)
DEFAULTS = AnalysisOptions()


def option_keys() -> tuple[str, ...]:
    """The option names, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(AnalysisOptions))


def option_type(key: str, *, optional: bool = False) -> Any:
    """The declared type of option ``key`` with its rules (``Annotated``), ``| None`` if optional.

    A surface that declares the option as a field of its own config (a ``[diagnosis]`` key)
    annotates it with this, so its rules are checked there too (and written nowhere else).
    """
    hint = typing.get_type_hints(AnalysisOptions, include_extras=True)[key]
    return hint | None if optional else hint
