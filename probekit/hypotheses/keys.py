"""What every measurement kind reads from its keys and the suite context, in one place.

A kind is ``spec -> one method-package call -> Measurement``; the steps before the call that
several kinds share (a ``site`` key to activation rows of a split, a ``label`` key defaulting
to ``[data] label``, a ``checkpoint`` key resolved against the file, the KG-composition columns
and entity tokens, a bootstrap drawn with ``[stats]``) live here, so a kind states only what is
its own. ``ctx`` is the suite's :class:`~probekit.suites.context.AnalysisContext` (or a stand-in
with the same attributes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, NotApplicableError

__all__ = [
    "bootstrap", "checkpoint_dir", "checkpoint_model", "entity_token_lookup", "example_types",
    "exact", "kg_column", "label_name", "labels", "ratio_of_sums", "site_rows",
]


def label_name(ctx: Any, label: str | None) -> str:
    """The claim's ``label`` key, else the file's ``[data] label``."""
    return label or ctx.suite.data.label


def labels(ctx: Any, label: str | None) -> np.ndarray:
    """Every example's value of the label column (:func:`label_name`), as an array."""
    return np.asarray(ctx.examples.column(label_name(ctx, label)))


def site_rows(ctx: Any, site: str, split: str | None = None) -> tuple[Any, Any]:
    """``(Site, float64 CPU activations)`` of a ``site`` key: all rows, or those of ``split``."""
    from ..sites import Site

    parsed = Site.parse(site)
    X = ctx.activations([parsed])[parsed].double().cpu()
    return parsed, X if split is None else X[ctx.examples.split(split)]


def bootstrap(ctx: Any, n: int) -> np.ndarray:
    """``([stats] n_bootstrap, n)`` resampled unit indices, seeded by ``[stats] seed``."""
    from ..stats.bootstrap import bootstrap_indices

    return bootstrap_indices(n, ctx.stats.n_bootstrap, ctx.stats.seed)


def ratio_of_sums(num: np.ndarray, den: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """Bootstrap replicates ``sum num[b] / sum den[b]`` of a ratio of sums over units."""
    return num[boot].sum(1) / den[boot].sum(1)


def exact(ctx: Any, value: float) -> dict[str, Any]:
    """``Measurement`` keywords of an exact statistic (no sampling unit): a degenerate CI."""
    return {"estimate": value, "resamples": np.full(ctx.stats.n_bootstrap, value), "n": 1}


def checkpoint_dir(ctx: Any, checkpoint: str | None) -> Path:
    """A ``checkpoint`` key's directory (relative to the file), else the ``[model]`` one's."""
    if checkpoint is not None:
        return Path(ctx.suite.resolve(checkpoint))
    path = getattr(ctx.model, "probekit_checkpoint", None)
    if path is None:
        raise NotApplicableError("this measure needs a modular-addition checkpoint; the model is "
                                 "not a probekit checkpoint: give checkpoint = \"DIR\" or a "
                                 "[model] checkpoint / train spec")
    return Path(path)


def checkpoint_model(ctx: Any, checkpoint: str | None) -> tuple[Any, Path]:
    """``(model, directory)`` of a ``checkpoint`` key (default: the ``[model]`` one)."""
    from ..models import load_checkpoint

    path = checkpoint_dir(ctx, checkpoint)
    return (ctx.model if checkpoint is None else load_checkpoint(path)), path


def kg_column(ex: Any, name: str, *, kind: str) -> list[Any]:
    """The KG-composition column ``name`` (e.g. ``bridge``); NotApplicableError on other tasks."""
    if name not in ex.columns:
        raise NotApplicableError(
            f"{kind} needs two-hop knowledge-graph queries (the kg_composition testbed's "
            f"{name!r} column); this data has columns {sorted(ex.columns)}"
        )
    return ex.columns[name]


def entity_token_lookup(ex: Any, template: str, *, kind: str) -> Callable[[Any], int]:
    """``entity -> token id`` of ``template.format(entity)`` in the task vocabulary of ``ex``.

    Shared by the KG kinds (``kind``: the measure's name, for messages). Raises
    :class:`~probekit.errors.ConfigError` at once when the data has no vocabulary (a JSONL file),
    and on lookup when a formatted name is not a token of the vocabulary.
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


def example_types(ctx: Any, types: str) -> list[Any]:
    """One hashable type per example: the input, the token at the probed position, or a column.

    ``types``: ``"input"`` (the token sequence), ``"position"`` (the token at ``[capture]
    positions``, ``"last"`` or ``"column:NAME"``) or ``"column:NAME"`` (a metadata column).
    """
    ex = ctx.examples
    if types == "input":
        return [tuple(t) for t in ex.tokens]
    if types.startswith("column:"):
        return list(ex.column(types.split(":", 1)[1]))
    if types != "position":
        raise ConfigError(f"types = {types!r}; expected \"input\", \"position\" or \"column:NAME\"")
    pos = ctx.suite.capture.positions
    if pos == "last":
        return [t[-1] for t in ex.tokens]
    if pos.startswith("column:"):
        col = ex.column(pos.split(":", 1)[1])
        return [t[int(p)] for t, p in zip(ex.tokens, col)]
    raise ConfigError(f"types = \"position\" needs [capture] positions \"last\" or \"column:NAME\", "
                      f"not {pos!r}")
