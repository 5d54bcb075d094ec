"""Fine-tune a pretrained LM on prompt/answer rows: LoRA or full, saved as Hugging Face directories.

The model is a named offline LM (``smollm2-135m``: the float32 Hugging Face directory probekit
converts from the GGUF once, :func:`probekit.models.real.ensure_converted`) or a local Hugging
Face directory, trained with AdamW on the rows of a JSONL file (``{"prompt", "answer",
"split"}``) whose ``split`` is the training split. With ``answer_only`` the loss is the mean
next-token cross-entropy over the answer tokens only,

    L = - (1 / |A|) * sum_{t in A} log p(x_t | x_<t),   A = the answer tokens of the batch,

the prompt tokens being context (masked with ``-100``). Prompt and answer are tokenized
separately and concatenated, so the answer's first token is the one a greedy decoder must emit
after the prompt. The LM head is applied at the scored positions only (the same loss).

**Fast path** (``trainable_blocks = k``, :mod:`probekit.train.top_blocks`): only the top ``k``
blocks train, on each row's input of block ``L - k`` computed once into a verified, resumable
cache shared by every run on the same model, rows and ``k`` (:mod:`probekit.train.block_inputs`),
with the rows of a batch packed instead of padded. ``dtype = "bfloat16"`` runs the step under
``torch.autocast``.

**LoRA** (Hu et al. 2021): each targeted weight ``W`` (``d_out x d_in``) of the trainable blocks
is replaced by ``W + (alpha / r) B A`` with ``A`` (``r x d_in``, random) and ``B``
(``d_out x r``, zero) trained and ``W`` frozen; at save time the adapters are merged,
``W <- W + (alpha / r) B A`` (``merge_and_unload``), so every checkpoint is a plain model of the
base architecture that any Hugging Face or probekit loader reads, and its weights differ from the
base model's in the targeted modules of the trainable blocks only. Adapters come from
``peft`` (the optional extra ``probekit[finetune]``): it is the maintained standard
implementation of LoRA, developed by Hugging Face alongside ``transformers`` (whose models it
wraps by module name, with ``layers_to_transform`` for a subset of blocks), so probekit does
not carry its own adapter code. **Full** fine-tuning trains the targeted weights of the
trainable blocks directly (no peft needed).

Output (``out_dir``)::

    finetune-run.json                  # the config and its hash (this directory's identity)
    checkpoints/step_0000040/          # save_pretrained weights + tokenizer, and
        finetune.json                  # config, base model, step, training history so far

Every checkpoint is written to a temporary sibling directory and renamed into place, so a
checkpoint directory is complete or absent. A finished run (its final checkpoint recorded with
the same config hash) returns its history without training; an interrupted one is discarded and
restarts from step 0 (the runs are short; no optimiser state is kept), and a directory holding a
run of another config is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError, ModelLoadError
from ..progress import progress_bar
from ..textfile import read_text
from ..util.io import atomic_write_json, fsync_dir, sha256_bytes
from .finetune_config import LATER_FIELDS, FinetuneConfig
from .finetune_data import batch_rows as _batch
from .finetune_data import encode_rows, read_rows
from .history import History
from .top_blocks import block_of as _block_of

__all__ = [
    "FINETUNE_META",
    "RUN_META",
    "base_model_dir",
    "config_key",
    "encode_rows",
    "finetune",
    "list_finetune_checkpoints",
    "read_finetune_meta",
    "read_rows",
    "step_loss",
]

FINETUNE_META = "finetune.json"
RUN_META = "finetune-run.json"
FORMAT = "probekit-finetune/1"


def config_key(config: FinetuneConfig, extra: dict[str, Any] | None = None) -> str:
    """16 hex digits of sha256 over the config, the data file's content and ``extra``.

    The data enters by its sha256, not its path (a moved population keeps its runs); ``extra``
    is e.g. the testbed config that generated the data. Fields added later
    (:data:`~probekit.train.finetune_config.LATER_FIELDS`) enter only when not at their default.
    """
    from ..util.io import sha256_file

    data = sha256_file(config.data) if Path(config.data).is_file() else config.data
    fields = {k: v for k, v in config.to_dict().items()
              if k not in LATER_FIELDS or v != LATER_FIELDS[k]}  # older runs keep their keys
    payload = {"config": {**fields, "data": data}, "extra": extra or {}, "format": FORMAT}
    return sha256_bytes(json.dumps(payload, sort_keys=True).encode())[:16]


def _step_dir(out_dir: Path, step: int) -> Path:
    return out_dir / "checkpoints" / f"step_{step:07d}"  # the trainer's layout (trainer.step_dir)


def list_finetune_checkpoints(out_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete fine-tune checkpoints of a run as (step, directory), ascending."""
    root = Path(out_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        if d.name.startswith("step_") and d.name[5:].isdigit() and (d / FINETUNE_META).is_file():
            found.append((int(d.name[5:]), d))
    return sorted(found)


def read_finetune_meta(directory: str | Path) -> dict[str, Any]:
    """The ``finetune.json`` of a fine-tune checkpoint (config, base model, step, history).

    Raises:
        ModelLoadError: the file is missing or not a fine-tune record.
    """
    path = Path(directory) / FINETUNE_META
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"{path}: not a readable fine-tune record ({err}); the checkpoint "
                             "is incomplete: delete it and rerun the fine-tune") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelLoadError(f"{path}: format {meta.get('format') if isinstance(meta, dict) else None!r}"
                             f" is not {FORMAT!r}")
    return meta


# ---------------------------------------------------------------------------- model


def base_model_dir(base_model: str) -> Path:
    """The Hugging Face directory of ``base_model`` (a registered name is converted once).

    Raises:
        ConfigError: neither a registered name nor a directory with a transformers config.
    """
    from ..models.named import REGISTRY, registered_names

    if base_model in REGISTRY:
        from ..models.real import ensure_converted

        return ensure_converted(base_model)
    path = Path(base_model).expanduser()
    try:
        config = json.loads(read_text(path / "config.json"))  # the user's HF dir: any encoding
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ConfigError(f"FinetuneConfig.base_model = {base_model!r} is neither a registered "
                          f"model {registered_names()} nor a Hugging Face model directory "
                          "(config.json with 'model_type', weights, tokenizer)")
    return path


#: base models loaded in this process (path -> pristine model): a population's runs in one
#: worker share one load and deep-copy it (~0.5 s instead of ~6 s for SmolLM2-135M)
_BASE_CACHE: dict[str, Any] = {}


def _load_base(base: Path, device: str) -> Any:
    """A fresh copy of the float32 causal LM in ``base`` on ``device``."""
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    key = str(base.resolve())
    if key not in _BASE_CACHE:
        _BASE_CACHE.clear()  # one base model at a time
        _BASE_CACHE[key] = AutoModelForCausalLM.from_pretrained(key, dtype=torch.float32)
    return copy.deepcopy(_BASE_CACHE[key]).to(device)


def _block_indices(config: FinetuneConfig, n_layers: int) -> list[int] | None:
    from .top_blocks import first_block

    layers = config.trainable_layers
    if config.trainable_blocks is not None:
        return list(range(first_block(n_layers, config.trainable_blocks), n_layers))
    if layers is None:
        return None
    bad = [b for b in layers if not -n_layers <= b < n_layers]
    if bad:
        raise ConfigError(f"FinetuneConfig.trainable_layers = {list(layers)}: block {bad[0]} does "
                          f"not exist; the model has {n_layers} blocks (0..{n_layers - 1}, or "
                          "-1 for the last)")
    return sorted({b % n_layers for b in layers})


def _targeted(model: Any, config: FinetuneConfig, blocks: list[int] | None) -> list[str]:
    """Names of the linear modules the config trains (suffix in ``target_modules``, block kept)."""
    import torch

    names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
             and n.rsplit(".", 1)[-1] in config.target_modules
             and _block_of(n) is not None and (blocks is None or _block_of(n) in blocks)]
    if not names:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules()
                         if isinstance(m, torch.nn.Linear) and _block_of(n) is not None})
        raise ConfigError(f"FinetuneConfig.target_modules = {list(config.target_modules)}: no "
                          f"such linear layer in the model's blocks; its block linear layers are "
                          f"{linear}")
    return names


def _prepare(model: Any, config: FinetuneConfig) -> tuple[Any, list[str]]:
    """The model with its trainable parameters set (LoRA adapters added), and the targets."""
    blocks = _block_indices(config, int(model.config.num_hidden_layers))
    targets = _targeted(model, config, blocks)
    model.requires_grad_(False)
    if config.method == "full":
        modules = dict(model.named_modules())
        for name in targets:
            modules[name].requires_grad_(True)
        return model, targets
    try:
        from peft import LoraConfig, get_peft_model
    except ModuleNotFoundError as err:
        raise ModelLoadError("method 'lora' needs the package peft; install probekit's extra: "
                             "pip install 'probekit[finetune]' (or method = \"full\")") from err
    lora = LoraConfig(r=config.rank, lora_alpha=config.alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets, bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, lora), targets


# ---------------------------------------------------------------------------- run


def _check_dir(out: Path, key: str) -> History | None:
    """The cached history of a finished run of ``key``; else clear an interrupted one (or refuse)."""
    run_meta = out / RUN_META
    if run_meta.is_file():
        recorded = json.loads(run_meta.read_text()).get("config_key")
        if recorded != key:
            raise ConfigError(f"{out} holds a fine-tune of another config ({recorded}, this one "
                              f"is {key}); give this run its own directory or delete {out}")
        done = list_finetune_checkpoints(out)
        if done and read_finetune_meta(done[-1][1]).get("final"):
            return History(records=list(read_finetune_meta(done[-1][1])["history"]))
        shutil.rmtree(out / "checkpoints", ignore_errors=True)  # interrupted: restart cleanly
    elif (out / "checkpoints").exists():
        raise ConfigError(f"{out}/checkpoints exists but {RUN_META} does not: not a fine-tune "
                          "run directory; choose an empty directory")
    return None


def _save(model: Any, tokenizer: Any, out: Path, step: int, meta: dict[str, Any], *,
          lora: bool, last: bool) -> Path:
    """Write checkpoint ``step`` (merged weights, tokenizer, ``finetune.json``) atomically."""
    import copy

    final = _step_dir(out, step)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    # LoRA: the last save merges in place, an intermediate one merges a copy
    plain = (model if last else copy.deepcopy(model)).merge_and_unload() if lora else model
    plain.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    atomic_write_json(tmp / FINETUNE_META, {**meta, "step": step, "final": last}, indent=1,
                      sort_keys=True)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    fsync_dir(final.parent)
    return final


@dataclass(frozen=True, kw_only=True)
class _Setup:
    """What the training loop needs: the model (adapters added), tokenizer, encoded rows, meta."""

    model: Any
    tokenizer: Any
    encoded: list[tuple[list[int], list[int]]]
    pad_id: int
    meta: dict[str, Any]
    inputs: list[Any] | None = None  # the fast path: each row's cached input of block `first`
    first: int = 0


def _cached_inputs(model: Any, config: FinetuneConfig, ids: list[list[int]],
                   root: str | Path | None) -> tuple[list[Any], int, Path]:
    """The rows' cached inputs of block ``L - k`` (computed once per model, rows and ``k``)."""
    from ..util.cache import cache_dir
    from .block_inputs import block_inputs
    from .top_blocks import check_supported, first_block

    check_supported(model)
    first = first_block(int(model.config.num_hidden_layers), int(config.trainable_blocks or 0))
    where = Path(root) if root is not None else cache_dir("block-inputs")
    return block_inputs(model, ids, first, where, model_id=config.base_model), first, where


def _setup(config: FinetuneConfig, rows: list[dict[str, Any]], out: Path, key: str,
           extra: dict[str, Any], input_cache: str | Path | None = None) -> _Setup:
    """Load the base model and tokenizer, encode the rows, add adapters, record the run.

    With ``trainable_blocks`` the rows' inputs of block ``L - k`` are taken from (or first
    written to) the block-input cache, on the base model before adapters are added.
    """
    import torch

    from ..models.hf import set_offline_env

    base = base_model_dir(config.base_model)
    set_offline_env()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    encoded = encode_rows(tokenizer, rows, max_length=config.max_length,
                          answer_only=config.answer_only, add_eos=config.add_eos)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    model = _load_base(base, config.device)
    inputs, first, fast = None, 0, {}
    if config.trainable_blocks is not None:
        inputs, first, where = _cached_inputs(model, config, [x for x, _ in encoded], input_cache)
        fast = {"first_cached_block": first, "block_input_cache": str(where)}
    torch.manual_seed(config.seed)
    model, targets = _prepare(model, config)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / RUN_META, {"format": FORMAT, "config_key": key,
                                       "config": config.to_dict(), "extra": extra})
    meta = {"format": FORMAT, "config_key": key, "config": config.to_dict(), "extra": extra,
            "base_model": config.base_model, "base_dir": str(base), "targets": targets,
            "n_train_rows": len(rows), **fast}
    return _Setup(model=model, tokenizer=tokenizer, encoded=encoded, pad_id=int(pad_id), meta=meta,
                  inputs=inputs, first=first)


def step_loss(config: FinetuneConfig, s: _Setup, take: list[int]) -> Any:
    """The answer-only loss of rows ``take``: cached top blocks, packed, or the full forward.

    Both apply the LM head at the scored positions only; ``dtype = "bfloat16"`` runs the
    forward under ``torch.autocast`` (the loss is reduced in float32).
    """
    import torch

    from .top_blocks import full_scored_loss, packed_scored_loss

    device = torch.device(config.device).type
    with torch.autocast(device, dtype=torch.bfloat16, enabled=config.dtype == "bfloat16"):
        if s.inputs is not None:
            return packed_scored_loss(s.model, [s.inputs[i] for i in take],
                                      [s.encoded[i][1] for i in take], s.first)
        ids, labels, mask = (t.to(config.device)
                             for t in _batch([s.encoded[i] for i in take], s.pad_id))
        return full_scored_loss(s.model, ids, labels, mask)


def _train_loop(config: FinetuneConfig, s: _Setup, out: Path) -> History:
    """AdamW over seeded per-epoch permutations; saves at ``checkpoint_steps`` and the end."""
    import numpy as np
    import torch

    params = [p for p in s.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    history, saves = History(), set(config.checkpoint_steps or ()) | {config.steps}
    order: list[int] = []
    epoch, start = 0, time.perf_counter()
    s.model.train()
    # stderr: a bar on a terminal, a plain line every 10 s in a log (rate-limited)
    bar = progress_bar(desc=f"fine-tune {out.name}", total=config.steps, unit="step")
    for step in range(1, config.steps + 1):
        while len(order) < config.batch_size:
            order += np.random.default_rng([config.seed, epoch]).permutation(len(s.encoded)).tolist()
            epoch += 1
        take, order = order[: config.batch_size], order[config.batch_size:]
        lr = config.lr * min(1.0, step / config.warmup_steps) if config.warmup_steps else config.lr
        for group in opt.param_groups:
            group["lr"] = lr
        loss = step_loss(config, s, take)
        if not torch.isfinite(loss):
            raise DataError(f"fine-tune loss is {loss.item()} at step {step}; lower lr "
                            f"(= {config.lr:g}) or check the data")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
        history.append({"step": step, "elapsed_s": round(time.perf_counter() - start, 3),
                        "lr": lr, "batch_loss": float(loss.item())})
        bar.update(1)
        if step in saves:
            s.model.eval()
            _save(s.model, s.tokenizer, out, step, {**s.meta, "history": history.records},
                  lora=config.method == "lora", last=step == config.steps)
            s.model.train()
    bar.close()
    return history


def finetune(
    config: FinetuneConfig, out_dir: str | Path, *, extra: dict[str, Any] | None = None,
    input_cache: str | Path | None = None,
) -> History:
    """Fine-tune ``config.base_model`` on ``config.data`` into ``out_dir``; returns the history.

    Args:
        config: the fine-tune.
        out_dir: the run directory (see the module docstring for its layout).
        extra: JSON recorded with the run and part of its identity (e.g. the testbed config
            that generated the data).
        input_cache: the folder of the block-input cache of ``trainable_blocks`` (default
            ``cache_dir("block-inputs")``, shared by every run of the user); not part of the
            run's identity.

    Returns:
        One record per step: ``step``, ``elapsed_s``, ``lr``, ``batch_loss`` (mean answer-token
        cross-entropy of the step's batch, before the update). A finished run returns its
        recorded history and trains nothing.
    """
    from ..util.device import resolve_device

    out = Path(out_dir)
    rows = read_rows(config.data, config.train_split)
    key = config_key(config, extra)
    cached = _check_dir(out, key)
    if cached is not None:
        return cached
    resolve_device(config.device)  # one line (e.g. no CUDA here) before the model loads
    return _train_loop(config, _setup(config, rows, out, key, extra or {}, input_cache), out)
