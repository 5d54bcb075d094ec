"""Greedy answers and their correctness: labels for in-advance correctness probes.

"No Answer Needed" (arXiv 2509.10625): the label is whether the model's greedy (T=0) answer
matches the gold answer; "I don't know" answers count as incorrect. We match by normalised
prefix: the first line of the continuation, lower-cased with punctuation stripped, must start
with one of the gold aliases (``|``-separated), so " Paris." and "Paris, France" both match
"Paris" while "Lyon" does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import ConfigError
from ..models.protocol import HookedModel
from ..progress import track
from .batching import TokenBatch, iter_batches, model_device, pad_batch, pad_id_of
from .runner import kv_cache_filled, new_kv_cache, run_batch, supports_kv_mask

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


LastLogits = Callable[[TokenBatch, Any | None, Tensor | None], Float[Tensor, "batch vocab"]]
"""``forward(batch, kv_cache, kv_mask)``: one run of ``batch``, the logits at each row's last token."""


def plain_last_logits(model: HookedModel) -> LastLogits:
    """The unmodified model as a :data:`LastLogits` (:func:`~probekit.capture.runner.run_batch`)."""

    def forward(batch: TokenBatch, kv_cache: Any | None, kv_mask: Tensor | None) -> Tensor:
        logits = run_batch(model, batch, kv_cache=kv_cache, kv_mask=kv_mask)
        last = batch.offsets + batch.lengths - 1
        return logits[torch.arange(logits.shape[0], device=logits.device), last]

    return forward


def resolve_kv_cache(model: HookedModel, kv_cache: bool | None, *, inexact: str | None = None) -> bool:
    """Whether :func:`greedy_decode` runs cached: ``kv_cache`` resolved against ``model``.

    ``None`` (auto): whenever the model supports it (:func:`supports_kv_mask`) and the forward is
    exact under a cache (``inexact`` is ``None``; else it names what a cached forward would need,
    e.g. position-independent ops). ``True`` refuses, naming the reason, where it cannot be used.
    """
    able = supports_kv_mask(model)
    if kv_cache is None:
        return able and inexact is None
    if kv_cache and not able:
        raise ConfigError("kv_cache=True needs a Hugging Face model (past_key_values) whose bridge "
                          "derives positions from the mask (supports_kv_mask); this one does not "
                          "(e.g. TL-native): pass kv_cache=None or False")
    if kv_cache and inexact is not None:
        raise ConfigError(f"kv_cache=True needs {inexact}; pass kv_cache=None or False")
    return bool(kv_cache)


def greedy_decode(
    batch: TokenBatch, steps: int, forward: LastLogits, *, cached: bool, pad_id: int
) -> list[list[int]]:
    """Greedy (argmax) continuations of ``steps`` tokens for one batch of prompts.

    The one decoding loop of probekit (correctness labels, and relation-neuron deactivation
    through ``forward`` = a run under intervention ops). ``cached``: one forward over the
    right-padded prompts fills a Hugging Face KV cache, then each step runs only the new token of
    each row against the cache with the prompt pads masked (``kv_mask``; the bridge derives each
    row's true position from the mask, :func:`~probekit.capture.runner.supports_kv_mask`). By
    causality position ``t``'s keys/values depend only on tokens ``0..t``, so each step's logits
    are those of one forward over prompt + continuation (equal up to float rounding). Uncached,
    or when the run did not fill the cache (transformer-lens 4.3 with transformers >= 5.24,
    :func:`~probekit.capture.runner.kv_cache_filled`), the growing sequences are re-run
    right-padded each step.
    """
    if cached:
        cache = new_kv_cache()
        logits = forward(batch, cache, None)
        mask = batch.attention_mask
        if kv_cache_filled(cache, mask.shape[1]):
            ones = torch.ones(mask.shape[0], 1, dtype=mask.dtype, device=mask.device)
            nxt = logits.argmax(-1)
            new = [nxt]
            for _ in range(steps - 1):  # one new token per row: length 1, no offset
                step = TokenBatch(nxt[:, None], ones, ones[:, 0], 0 * ones[:, 0], batch.example_ids)
                logits = forward(step, cache, mask)
                mask = torch.cat([mask, ones], 1)
                nxt = logits.argmax(-1)
                new.append(nxt)
            return torch.stack(new, 1).tolist()
    seqs = [batch.input_ids[i, o:o + n].tolist()
            for i, (o, n) in enumerate(zip(batch.offsets.tolist(), batch.lengths.tolist(), strict=True))]
    out: list[list[int]] = [[] for _ in seqs]
    device = batch.input_ids.device
    for _ in range(steps):
        grown = pad_batch(seqs, pad_id=pad_id, side="right", example_ids=batch.example_ids.tolist())
        for seq, cont, t in zip(seqs, out, forward(grown.to(device), None, None).argmax(-1).tolist(),
                                strict=True):
            seq.append(int(t))
            cont.append(int(t))
    return out


@torch.inference_mode()
def greedy_continuations(
    model: HookedModel,
    tokens: Sequence[Sequence[int]],
    *,
    max_new_tokens: int = 8,
    batch_size: int = 16,
    progress: bool = False,
    kv_cache: bool | None = None,
) -> list[list[int]]:
    """Greedy (argmax) continuation ids of each prompt, right-padded batches (:func:`greedy_decode`).

    ``kv_cache`` (``None``: where the model supports it, :func:`supports_kv_mask`) decodes from
    a KV cache; ``False`` re-runs the growing sequences.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    cached = resolve_kv_cache(model, kv_cache)
    pad = pad_id_of(model)
    forward = plain_last_logits(model)
    device = model_device(model)
    out: list[list[int]] = []
    batches = iter_batches(tokens, batch_size=batch_size, pad_id=pad, side="right")
    for batch in track(batches, desc="greedy answers", total=len(tokens), unit="example",
                       weight=lambda b: b.input_ids.shape[0], enabled=progress):
        out.extend(greedy_decode(batch.to(device), max_new_tokens, forward, cached=cached, pad_id=pad))
    return out


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
