"""Prompt/answer JSONL rows for fine-tuning: reading, tokenizing with the prompt masked, batching.

A row is ``{"prompt": str, "answer": str, "split": str}`` (other keys ride along). The model
input is the prompt's tokens followed by the answer's, each tokenized on its own (no special
tokens), so the answer's first token is what a greedy decoder must emit after the prompt; labels
are the input tokens with the prompt masked (``IGNORE_INDEX``) when only the answer is trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..textfile import read_text

__all__ = ["IGNORE_INDEX", "batch_rows", "encode_rows", "read_rows"]

#: the label of a token that is not scored (``torch.nn.functional.cross_entropy``'s default)
IGNORE_INDEX = -100


def read_rows(path: str | Path, split: str) -> list[dict[str, Any]]:
    """The rows of JSONL ``path`` whose ``split`` is ``split`` (each checked).

    Raises:
        DataError: a line that is not a JSON object with string ``prompt``, ``answer`` and
            ``split`` (``FILE:LINE`` named), an empty answer, or no row of ``split``.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"fine-tune data {str(path)!r} is not a file; give a JSONL of "
                        '{"prompt": ..., "answer": ..., "split": ...} rows')
    rows, splits = [], set()
    for n, line in enumerate(read_text(p).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise DataError(f"{p}:{n}: not JSON ({err})") from None
        bad = [k for k in ("prompt", "answer", "split")
               if not isinstance(row, dict) or not isinstance(row.get(k), str)]
        if bad:
            raise DataError(f"{p}:{n}: key {bad[0]!r} must be a string; every row needs "
                            '"prompt", "answer" and "split" strings')
        if not row["answer"]:
            raise DataError(f"{p}:{n}: empty answer; every row needs an answer to train on")
        splits.add(row["split"])
        if row["split"] == split:
            rows.append(row)
    if not rows:
        raise DataError(f"{p}: no row has split {split!r} (splits: {sorted(splits)}); set "
                        "train_split to one of them")
    return rows


def encode_rows(
    tokenizer: Any, rows: list[dict[str, Any]], *, max_length: int, answer_only: bool,
    add_eos: bool,
) -> list[tuple[list[int], list[int]]]:
    """``(input ids, labels)`` per row: prompt + answer tokens, prompt masked when ``answer_only``.

    ``labels[t]`` is the token at ``t`` or ``-100`` (not scored); the model's logit at ``t - 1``
    predicts it. Rows longer than ``max_length`` are cut on the right.

    Raises:
        DataError: a row left with no scored token after truncation (raise ``max_length``).
    """
    out = []
    for i, row in enumerate(rows):
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"] if row["prompt"] else []
        answer = list(tokenizer(row["answer"], add_special_tokens=False)["input_ids"])
        if add_eos and tokenizer.eos_token_id is not None:
            answer.append(int(tokenizer.eos_token_id))
        ids = (list(prompt) + answer)[:max_length]
        labels = ([IGNORE_INDEX] * len(prompt) + answer if answer_only else list(prompt) + answer)
        labels = labels[:max_length]
        if not any(lab != IGNORE_INDEX for lab in labels[1:]):
            raise DataError(f"training row {i} ({row['prompt'][:40]!r}) has {len(prompt)} prompt "
                            f"tokens and max_length={max_length} leaves no answer token to "
                            "train on; raise max_length")
        out.append((ids, labels))
    return out


def batch_rows(encoded: list[tuple[list[int], list[int]]], pad_id: int) -> tuple[Any, Any, Any]:
    """Right-padded ``(input ids, labels, attention mask)`` tensors of the rows."""
    import torch

    width = max(len(ids) for ids, _ in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    labels = torch.full((len(encoded), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for i, (x, y) in enumerate(encoded):
        ids[i, : len(x)] = torch.as_tensor(x)
        labels[i, : len(y)] = torch.as_tensor(y)
        mask[i, : len(x)] = 1
    return ids, labels, mask
