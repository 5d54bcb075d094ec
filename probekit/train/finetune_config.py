"""The configuration of a fine-tune of a pretrained LM (:mod:`probekit.train.finetune`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from ..errors import ConfigError
from ..util.config import check_keys
from ..util.constraints import Between, Each, Finite, Ge, Gt, NonEmpty, Validated

__all__ = ["LATER_FIELDS", "FinetuneConfig", "LLAMA_LINEAR"]

#: the linear layers of a Llama-style decoder block (SmolLM2, Llama, Mistral, Qwen2)
LLAMA_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

#: fields added after runs were first recorded, with their defaults: a run's identity
#: (:func:`probekit.train.finetune.config_key`) holds them only when set, so that the runs made
#: before them keep their keys (and their cached checkpoints)
LATER_FIELDS: dict[str, Any] = {"trainable_blocks": None, "dtype": "float32"}


@dataclass(frozen=True, kw_only=True)
class FinetuneConfig(Validated):
    """One fine-tune: base model, data, method and optimisation.

    Attributes:
        base_model: a registered model name (``"smollm2-135m"``, :func:`probekit.models.list_models`)
            or a local Hugging Face model directory (``save_pretrained`` layout + tokenizer).
        data: a JSONL file of ``{"prompt", "answer", "split"}`` rows; the rows of
            ``train_split`` are trained (``""`` when a preset generates the data from a testbed).
        train_split: the ``split`` value of the training rows.
        method: ``"lora"`` (low-rank adapters, Hu et al. 2021, merged into the weights when
            saved) or ``"full"`` (every weight of ``trainable_layers`` trained).
        rank, alpha, lora_dropout: LoRA rank r, scale ``alpha / r`` and adapter dropout.
        target_modules: module names (suffixes) that get adapters (``"lora"``) or are trained
            (``"full"``); default: every linear layer of a Llama block.
        trainable_layers: 0-indexed decoder blocks whose ``target_modules`` are trained;
            ``None``: every block. Negative indices count from the last block (``-1``).
        trainable_blocks: ``k``: train the top ``k`` blocks only, on the fast path
            (:mod:`probekit.train.top_blocks`): the residual stream entering block ``L - k`` is
            computed once per training row and cached (:mod:`probekit.train.block_inputs`),
            rows are packed without padding. Exclusive with ``trainable_layers``.
        dtype: ``"bfloat16"`` runs the forward and backward under ``torch.autocast``
            (bfloat16 matmuls, float32 weights, optimiser and loss); ``"float32"`` does not.
        steps: optimiser steps.
        lr, weight_decay, warmup_steps, grad_clip: AdamW with linear warm-up
            ``lr * min(1, (step + 1) / warmup_steps)``, then constant; gradient L2 clip.
        batch_size: rows per step; batches walk a per-epoch permutation drawn from
            ``numpy.random.default_rng([seed, epoch])``.
        max_length: tokens per row at most (prompt + answer, truncated on the right).
        answer_only: the loss is on the answer tokens only (prompt tokens masked); a row with an
            empty prompt is trained on all of its tokens either way.
        add_eos: append the tokenizer's end-of-sequence token to every answer.
        seed: adapter initialisation and batch order.
        checkpoint_steps: intermediate steps also saved (the final step always is).
        device: torch device string.
    """

    base_model: Annotated[str, NonEmpty()] = "smollm2-135m"
    data: str = ""
    train_split: Annotated[str, NonEmpty()] = "train"
    method: Literal["lora", "full"] = "lora"
    rank: Annotated[int, Ge(1)] = 8
    alpha: Annotated[float, Gt(0), Finite()] = 16.0
    lora_dropout: Annotated[float, Between(0, 1, closed="left")] = 0.0
    target_modules: Annotated[tuple[str, ...], NonEmpty()] = LLAMA_LINEAR
    trainable_layers: tuple[int, ...] | None = None
    trainable_blocks: Annotated[int, Ge(1)] | None = None
    dtype: Literal["float32", "bfloat16"] = "float32"
    steps: Annotated[int, Ge(1)] = 100
    lr: Annotated[float, Gt(0), Finite()] = 1e-3
    weight_decay: Annotated[float, Ge(0), Finite()] = 0.0
    warmup_steps: Annotated[int, Ge(0)] = 0
    grad_clip: Annotated[float, Gt(0), Finite()] | None = 1.0
    batch_size: Annotated[int, Ge(1)] = 8
    max_length: Annotated[int, Ge(2)] = 128
    answer_only: bool = True
    add_eos: bool = True
    seed: Annotated[int, Ge(0)] = 0
    checkpoint_steps: Annotated[tuple[int, ...], Each(Ge(1))] | None = None
    device: Annotated[str, NonEmpty()] = "cpu"

    def __post_init__(self) -> None:
        """Declared rules, then the ones across fields."""
        super().__post_init__()
        if self.trainable_layers is not None and not self.trainable_layers:
            raise ConfigError("FinetuneConfig.trainable_layers must name at least one block, got "
                              "[]; give block indices (e.g. [-2, -1]) or None for every block")
        if self.trainable_blocks is not None and self.trainable_layers is not None:
            raise ConfigError(f"FinetuneConfig.trainable_blocks = {self.trainable_blocks} and "
                              f"trainable_layers = {list(self.trainable_layers)} both choose the "
                              "trained blocks; set one of them (trainable_blocks = k: the top k "
                              "blocks on the cached fast path; over a preset's trainable_layers "
                              "add trainable_layers=null)")
        if self.checkpoint_steps is not None and any(s > self.steps for s in self.checkpoint_steps):
            raise ConfigError(f"FinetuneConfig.checkpoint_steps must be <= steps={self.steps}, "
                              f"got {list(self.checkpoint_steps)}; drop the later steps or raise "
                              "steps")

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (:meth:`from_dict` inverts it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FinetuneConfig:
        """Rebuild from :meth:`to_dict` output (lists become tuples); unknown keys raise."""
        check_keys(data, (f.name for f in dataclasses.fields(cls)), what="FinetuneConfig")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
