"""What a diagnosis hands to :func:`~probekit.diagnosis.statistics.analysis.marker_analysis` beyond the table.

Two sources, both resolved before the statistics run:

- the ``[diagnosis]`` keys of the analysis, declared once as the fields of
  :class:`~.statistics.options.AnalysisOptions`: those a file may leave unset
  (:data:`ANALYSIS_KEYS`: ``covariate_coding``, ``spline_df``, ``inference``,
  ``equivalence_margin``, ``max_permutations``) are passed only when set (``marker_analysis``
  keeps its own default, the same value), the others (:data:`BASE_KEYS`: ``n_permutations``,
  ``n_bootstrap``, ``alpha``, ``seed``) always;
- facts of the population the table alone does not show:

  * ``outcome_examples``: the number of evaluation examples behind the outcome of each model
    (the ``COLUMN__n`` column of :mod:`probekit.diagnosis.outcomes`; the smallest over the
    analysed models when they differ), which bounds how finely an accuracy can move;
  * ``exclude_rows``: marker -> rows where a marker comparing the model with a reference
    checkpoint compares the reference with itself (a similarity of exactly 1 by construction,
    not a measurement);
  * ``marker_flags``: marker -> flags; ``measured_on_outcome_examples`` when the marker reads
    the very split the outcome is evaluated on (a held-out probe accuracy on the OOD split
    whose accuracy is the outcome shares that split's sampling noise with the outcome).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from .outcomes import ID, TRAIN, examples_column
from .spec import DiagnosisSettings
from .statistics.options import option_keys

__all__ = [
    "ANALYSIS_KEYS",
    "BASE_KEYS",
    "MEASURED_ON_OUTCOME",
    "analysis_kwargs",
    "base_kwargs",
    "marker_flags",
    "marker_splits",
    "outcome_examples",
    "outcome_split",
    "supported_kwargs",
]


def _unset(field: dataclasses.Field) -> bool:
    return field.default is None or field.default_factory is dict  # type: ignore[comparison-overlap]


_OPTIONS = [f for f in dataclasses.fields(DiagnosisSettings) if f.name in option_keys()]
#: ``[diagnosis]`` keys passed to ``marker_analysis`` under the same name when set: the options
#: of :class:`~.statistics.options.AnalysisOptions` that a file may leave unset (derived, in
#: the file's key order)
ANALYSIS_KEYS = tuple(f.name for f in _OPTIONS if _unset(f))
#: the options every diagnosis passes (``[diagnosis]`` defaults = ``marker_analysis``'s)
BASE_KEYS = tuple(f.name for f in _OPTIONS if not _unset(f))
#: kwargs derived from the population (not from ``[diagnosis]`` keys)
DERIVED_KEYS = ("outcome_examples", "exclude_rows", "marker_flags")
MEASURED_ON_OUTCOME = "measured_on_outcome_examples"
#: marker spec fields that name a split of the suite's examples
_SPLIT_FIELDS = ("split", "train_split", "test_split", "select_split", "restricted_split")


def analysis_kwargs(settings: Any) -> dict[str, Any]:
    """The ``[diagnosis]`` analysis keys the file sets (``covariate_coding`` only when non-empty)."""
    out: dict[str, Any] = {}
    for key in ANALYSIS_KEYS:
        value = getattr(settings, key, None)
        if value is None or (key == "covariate_coding" and not value):
            continue
        out[key] = dict(value) if key == "covariate_coding" else value
    return out


def base_kwargs(settings: Any) -> dict[str, Any]:
    """The options every analysis of the diagnosis gets, from ``[diagnosis]``.

    :data:`BASE_KEYS`: permutations, bootstrap draws, alpha, seed.
    """
    return {key: getattr(settings, key) for key in BASE_KEYS}


def supported_kwargs(fn: Callable[..., Any], kwargs: Mapping[str, Any],
                     where: Callable[[str], str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """``kwargs`` that ``fn`` accepts, and the names of the derived ones it does not (dropped).

    A derived fact (:data:`DERIVED_KEYS`) the installed ``marker_analysis`` does not take yet is
    dropped and named; a ``[diagnosis]`` key the user set is refused instead (it would
    otherwise be silently ignored).

    Raises:
        ConfigError: a ``[diagnosis]`` key that ``fn`` does not take (``FILE:LINE`` via ``where``).
    """
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs), []
    passed, dropped = {}, []
    for key, value in kwargs.items():
        if key in params:
            passed[key] = value
        elif key in DERIVED_KEYS:
            dropped.append(key)
        else:
            at = where(key) if where is not None else f"[diagnosis] {key}"
            raise ConfigError(f"{at}: this version of marker_analysis does not take {key!r}; "
                              "remove the key or update probekit")
    return passed, dropped


def outcome_examples(table: Mapping[str, Sequence[Any]], outcome: str) -> int | None:
    """The fewest evaluation examples behind ``outcome`` over the table's rows (``None``: unknown).

    Unknown when the table has no ``OUTCOME__n`` column (a crossing-step outcome, a table
    written before the column existed) or a row lacks the count.
    """
    counts = table.get(examples_column(outcome))
    if counts is None or not len(counts) or any(c is None or c == "" for c in counts):
        return None
    return int(min(float(c) for c in counts))


def outcome_split(outcome: str) -> str | None:
    """The task split an outcome column is evaluated on (``None`` for a non-split outcome).

    ``train_accuracy`` -> ``train``, ``id_accuracy`` -> ``test_id``, ``ood:NAME`` -> ``NAME``
    (a grouped mean ``ood:PREFIX`` covers the splits ``PREFIX_<n>``, see :func:`_same_split`).
    """
    if outcome.startswith("train_"):
        return TRAIN
    if outcome in ("id_accuracy", "id_loss"):
        return ID
    if outcome.startswith("ood:"):
        return outcome[len("ood:"):]
    if outcome.startswith("ood_") and ":" in outcome:
        return outcome.split(":", 1)[1]
    return None


def marker_splits(spec: Any, data: Any) -> set[str]:
    """Task splits whose examples a marker reads, from its spec's split fields.

    The suite's example splits map to the ``[data]`` task's splits: ``"train"`` ->
    ``[data] train_split``, ``"test"`` -> ``[data] test_split``, ``"ood:NAME"`` / ``"NAME"`` ->
    ``NAME``, ``"all"`` (modular-addition kinds: every pair) -> both ID splits. Empty for
    markers without a split field and for JSONL data (``[data] file``: not the task's splits).
    """
    if getattr(data, "file", None) is not None and getattr(data, "task", None) is None:
        return set()
    out: set[str] = set()
    for name in _SPLIT_FIELDS:
        value = getattr(spec, name, None)
        if not isinstance(value, str):
            continue
        if value == "train":
            out.add(data.train_split)
        elif value == "test":
            out.add(data.test_split)
        elif value == "all":
            out |= {data.train_split, data.test_split}
        else:
            out.add(value[len("ood:"):] if value.startswith("ood:") else value)
    return out


def _same_split(marker_split: str, outcome_split: str) -> bool:
    return marker_split == outcome_split or re.fullmatch(
        rf"{re.escape(outcome_split)}_\d+", marker_split) is not None


def marker_flags(markers: Sequence[Any], outcome: str, data: Any) -> dict[str, tuple[str, ...]]:
    """Marker name -> flags (``measured_on_outcome_examples``) for the ``[[marker]]`` specs."""
    target = outcome_split(outcome)
    if target is None:
        return {}
    out = {}
    for m in markers:
        if any(_same_split(s, target) for s in marker_splits(m.spec, data)):
            out[m.name] = (MEASURED_ON_OUTCOME,)
    return out
