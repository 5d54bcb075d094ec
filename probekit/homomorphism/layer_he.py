"""Held-out homomorphism error of one composition at one block, with its bootstrap over pairs.

An & Du (2026): a composition (``modifier``: primitive + modifier; ``sequence``: ``then``) is
homomorphic at a block when an operator ``f`` maps the part states to the whole,
``h(whole) ~ f(h(a), h(b))``; HE is the held-out error of the fitted operators. Per scored pair
``p``: ``err_p`` (the family-mean squared error) and ``dev_p`` (squared deviation of the target
from its mean); ``HE_mse = mean_p err_p`` and ``HE_normalised = sum_p err_p / sum_p dev_p``
(``1 - R^2``). The bootstrap resamples scored pairs: the mean for ``mse``, the ratio of sums for
``normalised``. :func:`check_compositions` says when HE is undefined for a task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..context import Context
from ..errors import ConfigError, NotApplicableError
from .config import HEConfig

__all__ = ["LayerHE", "check_compositions", "layer_he"]


@dataclass(frozen=True, kw_only=True)
class LayerHE:
    """HE of one composition at one block.

    Attributes:
        pair_he: ``(scored,)`` per scored pair, the family-mean held-out squared error.
        he: mean of ``pair_he`` (HE as held-out MSE).
        he_normalised: ``sum err / sum dev`` (``1 - R^2``).
        normalised_resamples: ``(B,)`` ``he_normalised`` over resampled scored pairs.
        n_fit, n_scored, n_pairs: pairs the operators were fit on, scored on, in all.
    """

    pair_he: np.ndarray
    he: float
    he_normalised: float
    normalised_resamples: np.ndarray
    n_fit: int
    n_scored: int
    n_pairs: int


def check_compositions(examples: Any, split: str, composition: Literal["modifier", "sequence"]) -> None:
    """NotApplicableError when the data has no SCAN parse or none of the claimed compositions."""
    from .examples import PARSE_COLUMNS

    missing = [c for c in PARSE_COLUMNS if c not in examples.columns]
    if missing:
        raise NotApplicableError(
            f"homomorphism_error needs a SCAN-style task (parse columns {missing} missing; "
            f"have {sorted(examples.columns)}): HE is defined for compositional commands only"
        )
    idx = examples.split(split)
    if composition == "modifier":
        mods = examples.columns["mod_positions"]
        if not any(m is not None for i in idx for m in mods[i]):
            raise NotApplicableError(f"the {split!r} inputs have no modifiers (no modified "
                                     "clause), so modifier HE is undefined for this task")
    elif not any(len(examples.columns["part_spans"][i]) > 1 for i in idx):
        raise NotApplicableError(f"the {split!r} inputs are all single clauses, so sequence "
                                 "HE (consecutive parts) is undefined for this task")


def layer_he(
    ctx: Context, split: str, composition: Literal["modifier", "sequence"], layer: int,
    config: HEConfig, *, n_bootstrap: int, seed: int,
) -> LayerHE:
    """HE of ``composition`` at block ``layer`` on the ``split`` inputs (:func:`measure_he`).

    Checks first that the composition occurs (:func:`check_compositions`); ConfigError when
    ``layer`` is not a measured block; NotApplicableError when a group has too few pairs for
    one operator per group (``parts = "separate"`` on a tiny data set).
    """
    from ..stats.bootstrap import bootstrap_indices
    from .examples import measure_he
    from .measure import TooFewPairsError

    check_compositions(ctx.examples, split, composition)
    try:
        layers, results = measure_he(ctx, split, (composition,), config)
    except TooFewPairsError as err:  # the data's size, not the spec: undefined for this model
        raise NotApplicableError(f"{composition} HE ({config.parts} parts) on the {split!r} "
                                 f"inputs: {err}") from err
    if layer not in layers:
        raise ConfigError(f"layer {layer} not measured; blocks are {list(layers)}")
    res = results[composition]
    row = res.layers.index(layer)
    err, dev = res.pair_he[row], res.pair_sq_dev[row]
    boot = bootstrap_indices(err.size, n_bootstrap, seed)
    return LayerHE(pair_he=err, he=float(res.he[row]), he_normalised=float(res.he_normalised[row]),
                   normalised_resamples=err[boot].sum(1) / np.maximum(dev[boot].sum(1), 1e-300),
                   n_fit=res.n_fit, n_scored=res.n_scored, n_pairs=res.n_pairs)
