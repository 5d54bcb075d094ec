"""Entities of a knowledge-graph task as tokens, and its two-hop columns (Wang et al. 2024).

Shared by the KG measurement kinds (``bridge_entity_rank``, ``bridge_entity_probe``): entity
indices of the ``kg_composition`` testbed's columns (``bridge``, ``t`` ...) become token ids of
the task vocabulary through a format string such as ``"<e{}>"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, NotApplicableError

__all__ = ["entity_token_lookup", "kg_column"]


def entity_token_lookup(ex: Any, template: str, *, kind: str) -> Callable[[Any], int]:
    """``entity -> token id`` of ``template.format(entity)`` in the task vocabulary of ``ex``.

    ``ex``: the examples (their ``vocab``); ``kind``: the caller's name, for messages.

    Raises:
        ConfigError: at once when the data has no vocabulary (a JSONL file), and on lookup when
            a formatted name is not a token of the vocabulary.
    """
    if ex.vocab is None:
        raise ConfigError(f"{kind} needs testbed data with a vocabulary ([data] task "
                          "or a checkpoint that records its task), not a JSONL file")

    def token(e: Any) -> int:
        try:
            return int(ex.vocab.id(template.format(e)))
        except KeyError:
            raise ConfigError(f"{kind}: entity_token {template!r} gives "
                              f"{template.format(e)!r}, not a token of the task vocabulary "
                              f"(e.g. {list(ex.vocab.tokens[:4])})") from None

    return token


def kg_column(ex: Any, name: str, *, kind: str) -> list[Any]:
    """The KG-composition column ``name`` (e.g. ``bridge``) of the examples ``ex``.

    Raises:
        NotApplicableError: the data has no such column (not two-hop KG queries).
    """
    if name not in ex.columns:
        raise NotApplicableError(
            f"{kind} needs two-hop knowledge-graph queries (the kg_composition testbed's "
            f"{name!r} column); this data has columns {sorted(ex.columns)}"
        )
    return ex.columns[name]
