"""Common dataset representation shared by every testbed: :class:`Vocab`, :class:`TaskDataset`.

Alignment convention (all tasks)
--------------------------------
``tokens[i]`` is the exact, unpadded sequence fed to the model for example ``i``. The loss and
accuracy are computed on ``targets[i][j]`` against the logits at position
``target_positions[i][j]`` of that sequence::

    logits = model(tokens)                                     # [batch, pos, vocab]
    loss_i = mean_j CE(logits[i, target_positions[i][j]], targets[i][j])

* Autoregressive-answer tasks (modular addition, knowledge graph, relation facts): ``tokens`` is
  the query followed by the answer tokens except the last (teacher forcing), so the logit at the
  last query token predicts the first answer token. E.g. KG composition:
  ``tokens = [h, r1, r2, t]``, ``targets = [t, </a>]``, ``target_positions = [2, 3]``.
  :meth:`TaskDataset.prompt` returns the query alone (``[h, r1, r2]``).
* Position-aligned seq2seq (SCAN, An & Du 2026 [C]): the logit at input position ``t`` predicts
  output token ``t``; see :mod:`probekit.testbeds.scan`.

Padding (for batching) is always on the right with ``vocab.pad_id``; because the models are
causal, right padding never changes the logits at the scored positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from ..models.config import ModelConfig

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Vocab:
    """Bijection between token strings and ids. ``tokens[i]`` is the string of id ``i``."""

    tokens: tuple[str, ...]
    pad: str = "<pad>"
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for i, tok in enumerate(self.tokens):
            if not isinstance(tok, str) or not tok or any(c.isspace() for c in tok):
                raise ValueError(f"Vocab token #{i} {tok!r} must be a non-empty string without spaces")
            if tok in index:
                raise ValueError(f"Vocab token {tok!r} appears twice (ids {index[tok]} and {i})")
            index[tok] = i
        if self.pad not in index:
            raise ValueError(f"Vocab pad token {self.pad!r} is not among the tokens; add it")
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def pad_id(self) -> int:
        """Id of the padding token."""
        return self._index[self.pad]

    def id(self, token: str) -> int:
        """Id of one token string; KeyError lists a few valid tokens."""
        try:
            return self._index[token]
        except KeyError:
            raise KeyError(
                f"token {token!r} not in vocab of {len(self)} tokens (e.g. {list(self.tokens[:8])})"
            ) from None

    def encode(self, text: str | Sequence[str]) -> list[int]:
        """Whitespace-separated string (or list of token strings) -> ids."""
        parts = text.split() if isinstance(text, str) else list(text)
        return [self.id(t) for t in parts]

    def decode(self, ids: Sequence[int] | torch.Tensor, *, skip_pad: bool = False) -> str:
        """Ids -> space-joined token strings."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            if not 0 <= int(i) < len(self.tokens):
                raise ValueError(f"token id {i} out of range for vocab of size {len(self)}")
            if skip_pad and int(i) == self.pad_id:
                continue
            out.append(self.tokens[int(i)])
        return " ".join(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (tokens and pad), stored in checkpoints."""
        return {"tokens": list(self.tokens), "pad": self.pad}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocab:
        """Inverse of :meth:`to_dict`."""
        return cls(tokens=tuple(data["tokens"]), pad=data["pad"])


@dataclass(frozen=True, kw_only=True)
class TaskDataset:
    """One split of a task. Lists are parallel: entry ``i`` of every field is example ``i``.

    Attributes:
        name: split name ("train", "test_id", "test_ood", "ood_len_7", ...).
        tokens: model input ids per example, unpadded.
        targets: target ids per example (what the loss is on).
        target_positions: for each target, the position in ``tokens[i]`` whose logit predicts it.
        metadata: per-example columns (labels, concept values, entities, parses, ...); every
            column has one entry per example.
    """

    name: str
    tokens: list[list[int]]
    targets: list[list[int]]
    target_positions: list[list[int]]
    metadata: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if len(self.targets) != n or len(self.target_positions) != n:
            raise ValueError(
                f"TaskDataset {self.name!r}: tokens ({n}), targets ({len(self.targets)}) and "
                f"target_positions ({len(self.target_positions)}) must have one entry per example"
            )
        for key, col in self.metadata.items():
            if len(col) != n:
                raise ValueError(
                    f"TaskDataset {self.name!r}: metadata column {key!r} has {len(col)} entries, "
                    f"expected {n} (one per example)"
                )
        for i, (tok, tgt, pos) in enumerate(zip(self.tokens, self.targets, self.target_positions)):
            if len(tgt) != len(pos):
                raise ValueError(
                    f"TaskDataset {self.name!r} example {i}: {len(tgt)} targets but "
                    f"{len(pos)} target positions"
                )
            if pos and (min(pos) < 0 or max(pos) >= len(tok)):
                raise ValueError(
                    f"TaskDataset {self.name!r} example {i}: target positions {pos} outside "
                    f"a sequence of length {len(tok)}"
                )

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def max_len(self) -> int:
        """Length of the longest sequence (0 for an empty dataset)."""
        return max((len(t) for t in self.tokens), default=0)

    def prompt(self, i: int | np.integer) -> list[int]:
        """Tokens up to and including the first scored position (the query of example ``i``)."""
        return self.tokens[i][: self.target_positions[i][0] + 1]

    def subset(self, indices: Sequence[int], name: str | None = None) -> TaskDataset:
        """The examples at ``indices`` (in that order), metadata included."""
        idx = [int(i) for i in indices]
        return TaskDataset(
            name=name or self.name,
            tokens=[self.tokens[i] for i in idx],
            targets=[self.targets[i] for i in idx],
            target_positions=[self.target_positions[i] for i in idx],
            metadata={k: [v[i] for i in idx] for k, v in self.metadata.items()},
        )

    def to_tensors(self, pad_id: int, *, length: int | None = None) -> PaddedBatch:
        """Right-padded ``tokens`` and ``labels`` (``IGNORE_INDEX`` where nothing is scored)."""
        return pad_examples(self.tokens, self.targets, self.target_positions, pad_id, length=length)


@dataclass(frozen=True)
class PaddedBatch:
    """``tokens`` [batch, pos] (right-padded), ``labels`` [batch, pos] with IGNORE_INDEX where unscored."""

    tokens: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def index(self, idx: torch.Tensor) -> PaddedBatch:
        """The rows ``idx`` of tokens and labels."""
        return PaddedBatch(self.tokens[idx], self.labels[idx])


def pad_examples(
    tokens: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    pad_id: int,
    *,
    length: int | None = None,
) -> PaddedBatch:
    """Stack examples into right-padded tensors; ``labels[i, positions[i][j]] = targets[i][j]``."""
    n = len(tokens)
    width = max((len(t) for t in tokens), default=0) if length is None else length
    tok = torch.full((n, width), pad_id, dtype=torch.long)
    lab = torch.full((n, width), IGNORE_INDEX, dtype=torch.long)
    for i, (t, y, p) in enumerate(zip(tokens, targets, positions)):
        if len(t) > width:
            raise ValueError(f"example {i} has length {len(t)} > padded length {width}")
        tok[i, : len(t)] = torch.as_tensor(t, dtype=torch.long)
        if len(p):
            lab[i, torch.as_tensor(p, dtype=torch.long)] = torch.as_tensor(y, dtype=torch.long)
    return PaddedBatch(tok, lab)


@runtime_checkable
class Task(Protocol):
    """What the trainer and analyses need from a testbed."""

    name: str
    config: Any

    @property
    def vocab(self) -> Vocab:
        """The task's token vocabulary."""

    def splits(self) -> dict[str, TaskDataset]:
        """Named splits (``train``, ``test_id``, ``ood_*``...), built once and cached."""

    def model_config(self, **overrides: Any) -> ModelConfig:
        """The model config this task trains by default, fields replaced by ``overrides``."""
