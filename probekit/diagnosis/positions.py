"""Markers read at a ``[capture] positions = "column:NAME"`` position some examples lack.

A position column can be undefined for some inputs: SCAN's ``second_prim_position`` (the second
clause's primitive, An & Du 2026) is null for a single-clause command, and a population trained
on 1..k clauses (coverage) holds such commands: all of them for k = 1, a few for k >= 2. The
markers that read activations at the capture position (a probe, the class manifolds, CKA) are
then measured on the examples that have the position (:func:`positioned_examples`; the rest have
no such token), and a marker whose splits keep no example is not applicable to that checkpoint
(:func:`missing_split`). Markers that read no capture position (HE, weight norm) keep every
example.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

__all__ = ["missing_split", "position_column", "positioned_examples", "reads_capture_positions"]

_SITE_KEYS = ("site", "sites", "site_a", "site_b")


def position_column(positions: str) -> str | None:
    """The column of a ``"column:NAME"`` capture position (``None`` for ``last`` / ``all``)."""
    return positions.split(":", 1)[1] if positions.startswith("column:") else None


def reads_capture_positions(spec: Any) -> bool:
    """True when a kind's spec names a capture site (``site = "resid_post@3"``, ``"embed"``).

    Such kinds read ``ctx.activations`` (one row per example at ``[capture] positions``); a
    site key holding a bare hook kind (the HE kind's ``site = "resid_post"``: its own states of
    every token) is not a capture site.
    """
    from ..errors import ConfigError
    from ..sites import Site

    names = {f.name for f in dataclasses.fields(spec)}
    for key in names & set(_SITE_KEYS):
        value = getattr(spec, key)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(v, str) or v == "all":
                continue
            try:
                Site.parse(re.sub(r"@-(\d)", r"@\1", v))  # a block counted from the last
            except ConfigError:
                continue
            return True
    return False


def positioned_examples(examples: Any, column: str) -> Any | None:
    """The examples whose ``column`` holds a position (splits re-indexed); ``None``: all have one.

    Args:
        examples: a :class:`~probekit.suites.data.Examples`.
        column: the position column.
    """
    values = examples.column(column)
    keep = np.array([v is not None for v in values])
    if keep.all():
        return None
    new_index = np.cumsum(keep) - 1
    idx = np.flatnonzero(keep)
    return dataclasses.replace(
        examples,
        tokens=[examples.tokens[i] for i in idx],
        columns={k: [v[i] for i in idx] for k, v in examples.columns.items()},
        splits={k: new_index[np.asarray(v, dtype=np.int64)[keep[np.asarray(v, dtype=np.int64)]]]
                for k, v in examples.splits.items()},
    )


def missing_split(spec: Any, examples: Any) -> str | None:
    """The first split a marker reads (its ``split`` key, else the train and test splits) left empty."""
    from ..errors import ProbekitError

    wanted = ([spec.split] if "split" in {f.name for f in dataclasses.fields(spec)}
              else ["train", "test"])
    for name in wanted:
        try:
            n = len(examples.split(name))
        except ProbekitError:
            continue  # an unknown split: the kind names it
        if n == 0:
            return name
    return None
