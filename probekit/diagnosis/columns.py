"""The marker table's column names, built in full before anything runs: no name twice.

``markers.csv`` holds, side by side, the table's own columns (``checkpoint``, ``run``, ``step``,
``final``), the design columns, the outcome columns with their example counts (``COLUMN__n``,
:func:`probekit.diagnosis.outcomes.examples_column`) and the markers. The names come from
different places (grid keys, a design CSV, split names of an evaluation file, ``[[marker]]``
names), so two of them can coincide: an evaluation split named ``capitals__n`` gives the column
``first_token_capitals__n``, which is also the example count of the split ``capitals``; a design
column named ``id_accuracy`` is also the held-out accuracy. A dict keyed by column name keeps one
of the two without a word. :func:`check_generated` (one producer's names) and
:func:`check_table_columns` (all of them) refuse such a set with the names, their origins and the
fix; the diagnosis calls them when the file is checked and again when the run starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..errors import ConfigError

__all__ = ["COUNT_SUFFIX", "check_generated", "check_table_columns"]

#: the suffix of an example-count column (``COLUMN__n``), reserved for those columns
COUNT_SUFFIX = "__n"


def check_generated(columns: Sequence[tuple[str, str, bool]], where: str) -> list[str]:
    """One producer's columns: each name once, the count suffix only on count columns.

    Args:
        columns: ``(name, origin, is_count)`` per generated column, e.g. ``("first_token_a",
            "score 'first_token' on split 'a'", False)``.
        where: the ``FILE:LINE`` (or key) that generates them.

    Returns:
        the names, in order.

    Raises:
        ConfigError: ``... the column 'first_token_capitals__n' is generated twice: by score
            'first_token' on split 'capitals__n' and as the example count of ...; rename ...``.
    """
    seen: dict[str, str] = {}
    for name, origin, is_count in columns:
        if not is_count and name.endswith(COUNT_SUFFIX):
            raise ConfigError(f"{where}: {origin} gives the column {name!r}, which ends in "
                              f"{COUNT_SUFFIX!r}, the suffix reserved for example counts; rename "
                              "it (e.g. the split) without that ending")
        if name in seen:
            raise ConfigError(f"{where}: the column {name!r} is generated twice: by {seen[name]} "
                              f"and by {origin}; rename one (e.g. the split)")
        seen[name] = origin
    return [name for name, _, _ in columns]


def check_table_columns(groups: Mapping[str, Iterable[str]], where: Mapping[str, str]) -> None:
    """All the table's columns by origin (``{"design": [...], "outcome": [...], ...}``): no overlap.

    A design or marker column may not take an outcome's name (it would replace the measured
    outcome, or be replaced by it) nor end in the count suffix. ``where[group]``: where that
    group's names are written (``FILE:LINE: [population] design``); the error is placed at the
    later of the two groups (the one to rename).

    Raises:
        ConfigError: ``FILE:LINE: [population] design: the design column 'id_accuracy' is also an
            outcome column ...; rename the design column``.
    """
    owner: dict[str, str] = {}
    for group, names in groups.items():
        for name in dict.fromkeys(names):
            if group not in ("outcome", "table") and name.endswith(COUNT_SUFFIX):
                raise ConfigError(f"{where.get(group, group)}: the {group} column {name!r} ends in "
                                  f"{COUNT_SUFFIX!r}, the suffix reserved for example counts; "
                                  f"rename the {group} column")
            if name in owner:
                raise ConfigError(f"{where.get(group, group)}: the {group} column {name!r} is also "
                                  f"{'an' if owner[name][0] in 'aeiou' else 'a'} {owner[name]} "
                                  f"column of the marker table; rename the {group} column")
            owner[name] = group
