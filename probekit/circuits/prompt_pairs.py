"""A suite's clean / corrupt prompt pairs and their logit-difference metric.

The suite entry point of the patching methods, shared by the ``patching_effect``,
``attribution_patching`` and ``circuit_faithfulness`` measurement kinds: rows paired by a pair
column, ``role`` = ``"clean"`` / ``"corrupt"``, each row's answer a token (:mod:`.answers`); the
metric is ``logit(clean answer) - logit(corrupt answer)`` at the last token (Wang et al. 2022).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from torch import Tensor

from ..context import Context

__all__ = ["patch_pairs"]


def patch_pairs(
    spec: Any, ctx: Context
) -> tuple[list[Sequence[int]], list[Sequence[int]], Callable[..., Tensor], np.ndarray]:
    """``(clean, corrupt, metric, clean_idx)`` of the context's prompt pairs (logit difference).

    ``spec``: any spec with ``pair_column``, ``role_column`` and ``answer_column`` keys (and,
    optionally, ``answer_tokens``: ``"single"`` or ``"first"``); ``clean_idx``: the clean rows'
    example indices.

    Raises:
        ConfigError: ``answer_tokens`` is neither ``"single"`` nor ``"first"``.
    """
    from functools import partial

    import torch

    from ..capture.answers import answer_ids
    from ..errors import ConfigError
    from .metrics import logit_diff

    ex = ctx.examples
    clean_idx, corrupt_idx = ex.pairs(pair_column=spec.pair_column, role_column=spec.role_column)
    clean = [ex.tokens[i] for i in clean_idx]
    corrupt = [ex.tokens[i] for i in corrupt_idx]
    answers = ex.column(spec.answer_column)
    model = ctx.model
    mode = getattr(spec, "answer_tokens", "single")
    if mode not in ("single", "first"):
        raise ConfigError(f"answer_tokens = {mode!r}: use 'single' (refuse multi-token answers) "
                          "or 'first' (score their first token)")
    order = [*clean_idx.tolist(), *corrupt_idx.tolist()]
    ids, _ = answer_ids(
        model, [answers[i] for i in order],
        [f"{spec.answer_column} of row {i} ({'clean' if k < len(clean_idx) else 'corrupt'})"
         for k, i in enumerate(order)], ex.vocab, answer_tokens=mode,
    )
    answer = torch.tensor(ids[:len(clean_idx)])
    foil = torch.tensor(ids[len(clean_idx):])
    return clean, corrupt, partial(logit_diff, answer=answer, foil=foil), clean_idx
