"""A model's own ``prepend_bos`` default: what it was trained with, not one value for all.

Whether a text gets a BOS token in front changes what a model predicts (Gemma is trained with
``<bos>`` and loses most exact matches without it; SmolLM2's ``<|im_start|>`` as BOS drops
P(" Paris") on a fact prompt from 0.70 to 0.30). The TransformerBridge puts one in front for
every model, so probekit decides per model, in this order:

1. a registered model (:data:`probekit.models.named.REGISTRY`): its registered value;
2. a directory derived from one (a converted cache entry's ``probekit-cache.json`` ``model``, a
   fine-tune's ``finetune.json`` ``base_model``): the base model's default;
3. any other Hugging Face directory: its tokenizer as saved (:func:`tokenizer_adds_bos`:
   whether the tokenizer puts its BOS token before a text by itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["DERIVED_FROM", "own_prepend_bos", "tokenizer_adds_bos"]

#: files naming the registered (or directory) model a directory derives from, and their key
#: (``probekit.models.real.MANIFEST_FILE``; ``probekit.train.finetune.FINETUNE_META``)
DERIVED_FROM = (("probekit-cache.json", "model"), ("finetune.json", "base_model"))


def tokenizer_adds_bos(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` puts its BOS token before a text by itself.

    A tokenizer without a BOS token, or one that cannot encode, says ``False``.
    """
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    try:
        ids = list(tokenizer("a")["input_ids"])
    except Exception:  # a tokenizer that cannot encode a plain text has no BOS habit to follow
        return False
    return bool(ids) and ids[0] == bos


def _derived_from(directory: Path) -> str | None:
    for name, key in DERIVED_FROM:
        try:
            value = json.loads((directory / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, str) and value:
            return value
    return None


def own_prepend_bos(source: str | Path, tokenizer: Any = None, _depth: int = 0) -> bool:
    """The ``prepend_bos`` default of a registered name or a model directory (module docstring).

    Args:
        source: a registered name or a Hugging Face directory.
        tokenizer: the directory's tokenizer when it has none of its own (else loaded from it).
    """
    from .named import REGISTRY

    key = str(source)
    if key in REGISTRY:
        return REGISTRY[key].prepend_bos
    directory = Path(key).expanduser()
    base = _derived_from(directory) if _depth < 8 else None
    if base is not None and (base in REGISTRY or Path(base).is_dir()):
        return own_prepend_bos(base, tokenizer, _depth + 1)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(directory))
    return tokenizer_adds_bos(tokenizer)
