"""What a relation-neuron study reads: the fact file and the candidate units.

A fact file is JSONL with ``text`` (the prompt), ``relation``, ``object`` (gold, ``|``-separated
aliases) and ``split`` (``identify`` for ranking neurons, ``test`` for deactivation; subjects of
the two splits are disjoint). Units: for gated MLPs (Llama family) ``mlp_pre`` (gate) and
``mlp_pre_linear`` (up) of every layer, ranked together (the lineage code's units, neurons.md);
otherwise ``mlp_pre``. The study itself is :func:`probekit.neurons.relation_neuron_study`, run
by the ``[[neurons]]`` suite section (``scripts/neurons_study.py`` runs it on a fact file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import DataError
from ..inputs import is_missing, read_jsonl
from ..models.protocol import HookedModel
from ..sites import Site

REQUIRED = ("text", "relation", "object", "split")


def read_facts(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a fact file, each checked for the required keys (``FILE:LINE:COLUMN`` errors)."""
    rows = read_jsonl(path)
    for row in rows:
        missing = [k for k in REQUIRED if is_missing(row.data.get(k))]
        if missing:
            raise DataError(f"{row.at(missing[0])}: missing {missing} (absent, null or NaN); a fact "
                            f"needs {list(REQUIRED)}")
        for key in ("text", "relation", "object"):
            if not isinstance(row.data[key], str):
                raise DataError(f"{row.at(key)}: {key!r} holds {row.data[key]!r}; expected a string")
        if row.data["split"] not in ("identify", "test"):
            raise DataError(
                f"{row.at('split')}: split {row.data['split']!r}; use 'identify' or 'test'"
            )
    return [r.data for r in rows]


def candidate_sites(model: HookedModel) -> tuple[Site, ...]:
    """``mlp_pre`` (+ ``mlp_pre_linear`` where the MLP is gated) of every layer."""
    kinds = ["mlp_pre"]
    if "blocks.0.mlp.hook_pre_linear" in model.hook_dict:
        kinds.append("mlp_pre_linear")
    return tuple(Site(layer, kind) for layer in range(model.cfg.n_layers) for kind in kinds)
