"""Greedy answers and their correctness: labels for in-advance correctness probes.

"No Answer Needed" (arXiv 2509.10625): the label is whether the model's greedy (T=0) answer
matches the gold answer; "I don't know" answers count as incorrect. We match by normalised
prefix: the first line of the continuation, lower-cased with punctuation stripped, must start
with one of the gold aliases (``|``-separated), so " Paris." and "Paris, France" both match
"Paris" while "Lyon" does not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from ..models.protocol import HookedModel
from ..progress import track
from .batching import iter_batches, model_device
from .runner import kv_cache_filled

_IDK = ("i don't know", "i do not know", "unknown", "not sure")


def normalise(text: str) -> str:
    """First line, lower-cased, punctuation replaced by spaces, whitespace collapsed."""
    text = text.strip().split("\n", 1)[0].lower()
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


def is_correct(answer: str, gold: str) -> bool:
    """True if the normalised ``answer`` starts with a normalised alias of ``gold``."""
    ans = normalise(answer)
    if not ans or any(ans.startswith(idk) for idk in _IDK):
        return False
    return any(
        ans == alias or ans.startswith(alias + " ")
        for alias in (normalise(g) for g in gold.split("|"))
        if alias
    )


@torch.inference_mode()
def greedy_continuations(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    *,
    max_new_tokens: int = 8,
    batch_size: int = 16,
    progress: bool = False,
) -> list[list[int]]:
    """Greedy (argmax) continuation ids of each prompt, batched with left padding + mask."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    tok = getattr(model, "tokenizer", None)
    pad = getattr(tok, "pad_token_id", None) if tok is not None else None
    device = model_device(model)
    out: list[list[int]] = []
    batches = iter_batches(tokens, batch_size=batch_size, pad_id=int(pad or 0), side="left")
    for batch in track(batches, desc="greedy answers", total=len(tokens), unit="example",
                       weight=lambda b: b.input_ids.shape[0], enabled=progress):
        batch = batch.to(device)
        out.extend(_greedy_batch(model, batch.input_ids, batch.attention_mask, max_new_tokens))
    return out


def _greedy_batch(model: Any, ids: torch.Tensor, mask: torch.Tensor, steps: int) -> list[list[int]]:
    """Greedy decoding of one left-padded batch.

    Uses the bridge's HF KV cache when the model supports it (``return_type="logits_and_cache"``)
    and the run really filled it, else re-runs the growing sequence. (transformer-lens 4.3 with
    transformers >= 5.24 returns an empty cache; decoding from it would continue from nothing.)
    """
    new: list[torch.Tensor] = []
    try:
        logits, past = model(ids, attention_mask=mask, return_type="logits_and_cache")
    except (TypeError, ValueError, NotImplementedError, AttributeError):
        past = None
        logits = model(ids, attention_mask=mask)
    if not kv_cache_filled(past, ids.shape[1]):
        past = None
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    new.append(nxt)
    for _ in range(steps - 1):
        mask = torch.cat([mask, torch.ones_like(nxt)], 1)
        if past is not None:
            logits, past = model(
                nxt, attention_mask=mask, past_key_values=past, return_type="logits_and_cache"
            )
        else:
            ids = torch.cat([ids, nxt], 1)
            logits = model(ids, attention_mask=mask)
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        new.append(nxt)
    return torch.cat(new, 1).tolist()


def answer_correctness(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    golds: Sequence[str],
    *,
    max_new_tokens: int = 8,
    batch_size: int = 16,
    progress: bool = False,
) -> tuple[list[str], list[bool]]:
    """Decode each greedy continuation and compare it with its gold answer."""
    if len(golds) != len(tokens):
        raise ValueError(f"got {len(tokens)} prompts but {len(golds)} gold answers")
    conts = greedy_continuations(
        model, tokens, max_new_tokens=max_new_tokens, batch_size=batch_size, progress=progress
    )
    texts = [model.tokenizer.decode(c) for c in conts]
    return texts, [is_correct(t, str(g)) for t, g in zip(texts, golds)]
