"""What every measurement kind reads from its keys and the suite context, in one place.

A kind is ``spec -> one method-package call -> Measurement``; the steps before the call that
several kinds share (a ``site`` key to activation rows of a split, a ``label`` key defaulting
to ``[data] label``, a ``checkpoint`` key resolved against the file, a bootstrap drawn with ``[stats]``, the keys and the per-cell effect of the
patching kinds) live here, so a kind states only what is its own. ``ctx`` is the suite's
:class:`~probekit.suites.context.AnalysisContext` or any :class:`probekit.context.Context`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..context import Context
from ..errors import ConfigError, DataError, NotApplicableError
from .measurement import Measurement

__all__ = [
    "PatchingEffectSpec", "answer_ids", "bootstrap", "check_layer", "checkpoint_dir", "checkpoint_model", "example_types",
    "exact", "label_name", "labels", "pair_positions", "patch_cell_effect", "site_rows", "two_hop_rows",
]


def label_name(ctx: Context, label: str | None) -> str:
    """The claim's ``label`` key, else the file's ``[data] label``."""
    return label or ctx.suite.data.label


def labels(ctx: Context, label: str | None) -> np.ndarray:
    """Every example's value of the label column (:func:`label_name`), as an array."""
    return np.asarray(ctx.examples.column(label_name(ctx, label)))


def site_rows(ctx: Context, site: str, split: str | None = None) -> tuple[Any, Any]:
    """``(Site, float64 CPU activations)`` of a ``site`` key: all rows, or those of ``split``."""
    from ..sites import Site

    parsed = Site.parse(site)
    X = ctx.activations([parsed])[parsed].double().cpu()
    return parsed, X if split is None else X[ctx.examples.split(split)]


def bootstrap(ctx: Context, n: int) -> np.ndarray:
    """``([stats] n_bootstrap, n)`` resampled unit indices, seeded by ``[stats] seed``."""
    from ..stats.bootstrap import bootstrap_indices

    return bootstrap_indices(n, ctx.stats.n_bootstrap, ctx.stats.seed)


def exact(ctx: Context, value: float) -> dict[str, Any]:
    """``Measurement`` keywords of an exact statistic (no sampling unit): a degenerate CI."""
    return {"estimate": value, "resamples": np.full(ctx.stats.n_bootstrap, value), "n": 1}


def checkpoint_dir(ctx: Context, checkpoint: str | None) -> Path:
    """A ``checkpoint`` key's directory (relative to the file), else the ``[model]`` one's."""
    if checkpoint is not None:
        return Path(ctx.suite.resolve(checkpoint))
    path = getattr(ctx.model, "probekit_checkpoint", None)
    if path is None:
        raise NotApplicableError("this measure needs a modular-addition checkpoint; the model is "
                                 "not a probekit checkpoint: give checkpoint = \"DIR\" or a "
                                 "[model] checkpoint / train spec")
    return Path(path)


def checkpoint_model(ctx: Context, checkpoint: str | None) -> tuple[Any, Path]:
    """``(model, directory)`` of a ``checkpoint`` key (default: the ``[model]`` one)."""
    from ..models import load_checkpoint

    path = checkpoint_dir(ctx, checkpoint)
    return (ctx.model if checkpoint is None else load_checkpoint(path)), path


def example_types(ctx: Context, types: str) -> list[Any]:
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


@dataclass(frozen=True, kw_only=True)
class PatchingEffectSpec:
    """Keys of a ``patching_effect`` / ``attribution_patching`` claim (clean/corrupt row pairs).

    ``layer``, ``site_kind``: the patched site (``resid_pre@layer`` by default); ``window``: patch
    blocks ``layer .. layer + window - 1`` together (e.g. ``layer = 8``, ``window = 8``: blocks
    8-15; clipped at the last block); ``position``:
    ``"last"``, a token index, or ``"column:NAME"`` (per-pair index from the clean row, e.g. the
    subject's last token); ``answer_column``: each row's answer (a token id, or text of one
    token): the clean row's answer against the corrupted row's answer is the logit difference;
    ``answer_tokens``: ``"single"`` refuses a multi-token answer, ``"first"`` scores it by its
    first token (recorded in the claim's details); ``control_position``: the cell patched for
    ``greater_than_control``.
    """

    layer: int
    window: int = 1
    site_kind: str = "resid_pre"
    position: int | str = "last"
    control_position: int | str = 0
    answer_column: str = "answer"
    pair_column: str = "pair_id"
    role_column: str = "role"
    batch_size: int = 64
    answer_tokens: str = "single"


def pair_positions(
    rule: int | str, lengths: Sequence[int], columns: dict[str, Any], clean_idx: np.ndarray
) -> list[int]:
    """Per pair, the token index a ``position`` key names: an index, ``"last"`` or ``"column:NAME"``."""
    if isinstance(rule, int):
        out = [rule if rule >= 0 else n + rule for n in lengths]
    elif rule == "last":
        out = [n - 1 for n in lengths]
    elif rule.startswith("column:"):
        name = rule.split(":", 1)[1]
        if name not in columns:
            raise ConfigError(f"position column {name!r} not found; columns: {sorted(columns)}")
        out = [int(columns[name][i]) for i in clean_idx]
    else:
        raise ConfigError(f"position {rule!r}: use 'last', a token index or 'column:NAME'")
    bad = [(i, p) for i, (p, n) in enumerate(zip(out, lengths)) if not 0 <= p < n]
    if bad:
        raise ConfigError(f"position {rule!r} is outside pair {bad[0][0]} (index {bad[0][1]})")
    return out


def patch_cell_effect(
    spec: PatchingEffectSpec, ctx: Context, res: Any, clean: Sequence[Sequence[int]],
    clean_idx: np.ndarray, *, control: bool, how: str,
) -> Measurement:
    """The normalised effect of ``spec``'s cell in a one-layer patching grid ``res``.

    :func:`probekit.circuits.patch_effect.normalised_effect` of the metric at ``spec.position``
    (ratio of sums over pairs, bootstrapped over pairs); the control cell's per-pair values
    (``spec.control_position``) paired.
    """
    from ..circuits.patch_effect import normalised_effect

    lengths = [len(t) for t in clean]
    rows = np.arange(len(clean))
    grid = res.per_pair[:, 0].double().numpy()  # (pair, pos)
    base, source = res.base.double().numpy(), res.source.double().numpy()
    pos = pair_positions(spec.position, lengths, ctx.examples.columns, clean_idx)
    ctl = (grid[rows, pair_positions(spec.control_position, lengths, ctx.examples.columns,
                                     clean_idx)] if control else None)
    eff = normalised_effect(grid[rows, pos], base, source, control=ctl,
                            n_bootstrap=ctx.stats.n_bootstrap, seed=ctx.stats.seed)
    return Measurement(
        metric="normalised logit difference", values=eff.values, estimate=eff.estimate,
        resamples=eff.resamples, control=eff.control, n=len(rows), unit="prompt pairs",
        method=f"{how} of {spec.site_kind}@{res.labels['layer'][0]} at position "
        f"{spec.position!r} (clean logit diff {source.mean():.3f}, corrupt {base.mean():.3f})",
        details={"answer_tokens": spec.answer_tokens,
                 "clean_logit_diff": source.tolist(), "corrupt_logit_diff": base.tolist(),
                 "patched_logit_diff": grid[rows, pos].tolist(), "positions": pos},
    )


def check_layer(model: Any, layer: int, top_k: int, *, kind: str) -> None:
    """ConfigError unless ``layer`` is a block of ``model`` and ``top_k >= 1`` (lens kinds)."""
    n_layers = int(model.cfg.n_layers)
    if not 0 <= layer < n_layers or top_k < 1:
        raise ConfigError(f"{kind}: layer {layer} must be in 0..{n_layers - 1} "
                          f"and top_k {top_k} >= 1")


def two_hop_rows(ctx: Context, split: str, bridges: Sequence[Any], *, column: str,
                 at_least: int = 2) -> np.ndarray:
    """The ``split`` rows that are two-hop queries (a ``column`` bridge); ConfigError if too few."""
    rows = np.array([i for i in ctx.examples.split(split) if bridges[i] is not None], dtype=np.int64)
    if rows.size < at_least:
        raise ConfigError(f"split {split!r} has {rows.size} two-hop queries (rows with "
                          f"{column!r}); a claim needs >= {at_least}")
    return rows


def answer_ids(ctx: Context, column: str, rows: Sequence[int] | np.ndarray) -> list[int]:
    """The gold next-token id of each row: an integer column as is, text by its first token.

    Text goes through :func:`probekit.capture.answers.answer_token` (``answer_tokens =
    "first"``): the task vocabulary, else the tokenizer without a BOS; give the leading space a
    word needs after the prompt (``" Paris"``).
    """
    from ..capture.answers import answer_token

    values = ctx.examples.column(column)
    out = []
    for i in rows:
        v = values[int(i)]
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            out.append(int(v))
        elif isinstance(v, str) and v:
            out.append(answer_token(ctx.model, v, ctx.examples.vocab, answer_tokens="first",
                                    where=f"answer column {column!r} row {int(i)}"))
        else:
            raise DataError(f"answer column {column!r} row {int(i)} holds {v!r}; expected a token id "
                            "(int) or non-empty answer text")
    return out
