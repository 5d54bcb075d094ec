"""Fine-tune step: the preset's all-block LoRA step vs the fast top-block path, in one run.

SmolLM2-135M on the biographies testbed (``n_people`` people, ``augmentation`` biographies each,
rows <= ``max_length`` tokens), batches of ``batch_size`` rows drawn like the trainer draws them;
every variant trains the same batches from the same base weights. CPU time per step
(``time.process_time``, the mean over the same ``steps`` batches after one warm-up step for every
variant; bfloat16 vs float32 also over all ``accuracy_steps - 1``; run it with
``OMP_NUM_THREADS=1``), each step as the trainer takes it (AdamW,
the preset's warm-up and gradient clip). Variants:

- ``preset``: ``smollm2_bio``'s step as it was (LoRA r=16 on the 7 linear layers of all 30 blocks,
  padded batch, the LM head at every position);
- ``preset_scored``: the same with the head at scored tokens only (the fine-tune's step now);
- ``fast_padded``: ``trainable_blocks = 2`` (LoRA r=16 on the top 2 blocks), block 28's input from
  the cache, head at scored tokens, rows padded;
- ``fast``: the same, rows packed (the fast path as trained);
- ``fast_bf16``: ``fast`` under bfloat16 autocast.

Also: the one-off CPU time of the block-input cache over every training row, and the accuracy
effect of bfloat16 on the fast path: the batch losses of ``fast`` and ``fast_bf16`` over
``accuracy_steps`` steps (same batches, each trained on its own losses) and the cosine between
their first gradients; and the first loss of each variant (same base weights: LoRA starts at
``B = 0``), which the fast path must reproduce.

    OMP_NUM_THREADS=1 nice python scripts/bench.py --sections finetune_step --ft-steps 3
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _batches(n_rows: int, batch_size: int, n: int) -> list[list[int]]:
    """``n`` batches of the trainer's seeded per-epoch permutation (seed 0)."""
    order = np.random.default_rng([0, 0]).permutation(n_rows).tolist()
    while len(order) < n * batch_size:
        order += order
    return [order[i * batch_size:(i + 1) * batch_size] for i in range(n)]


def _variant(setup: Any, config: Any, batches: list[list[int]], loss_fn: Any) -> dict[str, Any]:
    """Train ``setup.model`` on ``batches`` as the trainer does; CPU s per step, losses, gradient.

    AdamW with the config's warm-up and gradient clip; the CPU time excludes the first step.
    """
    params = [p for p in setup.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    setup.model.train()
    losses, grads, cpu = [], None, []
    for i, take in enumerate(batches):
        c0 = time.process_time()
        warm = min(1.0, (i + 1) / config.warmup_steps) if config.warmup_steps else 1.0
        for group in opt.param_groups:
            group["lr"] = config.lr * warm
        loss = loss_fn(take)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grads is None:
            grads = torch.cat([p.grad.flatten() for p in params])
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
        if i:  # the first step is the warm-up
            cpu.append(time.process_time() - c0)
        losses.append(float(loss.detach()))
    return {"cpu_s": cpu, "losses": losses, "first_grad": grads}


def bench_finetune_step(steps: int = 3, batch_size: int = 16, max_length: int = 64,
                        n_people: int = 40, augmentation: int = 2, k: int = 2,
                        accuracy_steps: int = 30) -> dict[str, Any]:
    """The ``finetune_step`` section (see the module docstring)."""
    from probekit.testbeds.biographies import BiographiesConfig, write_biographies
    from probekit.train import finetune as ft
    from probekit.train.block_inputs import block_inputs
    from probekit.train.finetune_data import batch_rows
    from probekit.train.finetune_presets import finetune_preset
    from probekit.train.top_blocks import first_block, pack, packed_scored_loss

    work = Path(tempfile.mkdtemp(prefix="pk-bench-ft-"))
    data = write_biographies(BiographiesConfig(n_people=n_people, augmentation=augmentation),
                             work / "data")["data"]
    preset = dataclasses.replace(finetune_preset("smollm2_bio").train, device="cpu",
                                 data=str(data), max_length=max_length, batch_size=batch_size)
    fast_cfg = dataclasses.replace(preset, trainable_blocks=k)
    rows = ft.read_rows(data, preset.train_split)

    def setup(config: Any, name: str) -> Any:
        return ft._setup(config, rows, work / name, "bench", {}, work / "cache")

    base = setup(preset, "preset")
    lengths = [len(x) for x, _ in base.encoded]
    batches = _batches(len(rows), batch_size, max(steps + 1, accuracy_steps))
    first = first_block(int(base.model.config.num_hidden_layers), k)
    c0 = time.process_time()
    block_inputs(ft._load_base(ft.base_model_dir(preset.base_model), "cpu"),
                 [x for x, _ in base.encoded], first, work / "cache_timed")
    cache_cpu = time.process_time() - c0

    def full_logits(s: Any) -> Any:
        def loss(take: list[int]) -> Any:
            ids, labels, mask = batch_rows([s.encoded[i] for i in take], s.pad_id)
            logits = s.model(input_ids=ids, attention_mask=mask).logits[:, :-1]
            return torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1),
                ignore_index=-100)
        return loss

    def fast_padded(s: Any) -> Any:
        return lambda t: packed_scored_loss(s.model, [s.inputs[i] for i in t],
                                            [s.encoded[i][1] for i in t], s.first, padded=True)

    bf16 = dataclasses.replace(fast_cfg, dtype="bfloat16")
    short, long = batches[:steps + 1], batches
    plan = [("preset", preset, full_logits, short), ("preset_scored", preset, None, short),
            ("fast_padded", fast_cfg, fast_padded, short), ("fast", fast_cfg, None, long),
            ("fast_bf16", bf16, None, long)]
    del base
    out: dict[str, Any] = {}
    for name, config, make, todo in plan:  # one model in memory at a time
        s = setup(config, name)
        fn = make(s) if make is not None else (lambda t, c=config, s=s: ft.step_loss(c, s, t))
        out[name] = _variant(s, config, todo, fn)
        del s, fn
    for v in out.values():  # every ratio over the same timed batches (steps 2..steps + 1)
        v["cpu_s_per_step"] = float(np.mean(v["cpu_s"][:steps]))
    ref = out["preset"]["cpu_s_per_step"]
    a, b = out["fast"], out["fast_bf16"]
    tokens = [sum(lengths[i] for i in t) for t in short[1:]]
    padded = [len(t) * max(lengths[i] for i in t) for t in short[1:]]
    packed = [len(pack([lengths[i] for i in t])) * max(lengths[i] for i in t) for t in short[1:]]
    cos = float(torch.nn.functional.cosine_similarity(a["first_grad"], b["first_grad"], dim=0))
    result: dict[str, Any] = {
        "torch_threads": torch.get_num_threads(), "rows": len(rows),
        "row_tokens_mean": float(np.mean(lengths)), "row_tokens_p90": float(np.percentile(lengths, 90)),
        "batch_size": batch_size, "max_length": max_length, "timed_steps": steps,
        "accuracy_steps": accuracy_steps,
        "cache_cpu_s_all_rows": cache_cpu,
    }
    for name, v in out.items():
        result[f"{name}_cpu_s_per_step"] = v["cpu_s_per_step"]
        result[f"{name}_ratio_to_preset"] = v["cpu_s_per_step"] / ref
        result[f"{name}_losses"] = v["losses"]
    result["timed_tokens_per_step"] = float(np.mean(tokens))
    result["timed_padded_tokens_per_step"] = float(np.mean(padded))
    result["timed_packed_tokens_per_step"] = float(np.mean(packed))
    result["fast_vs_fast_padded"] = a["cpu_s_per_step"] / out["fast_padded"]["cpu_s_per_step"]
    result["bf16_vs_fast_all_accuracy_steps"] = float(np.mean(b["cpu_s"]) / np.mean(a["cpu_s"]))
    result["bf16_max_rel_loss_diff"] = max(abs(x - y) / abs(x) for x, y in zip(a["losses"],
                                                                               b["losses"]))
    result["bf16_last5_mean_loss"] = float(np.mean(b["losses"][-5:]))
    result["fast_last5_mean_loss"] = float(np.mean(a["losses"][-5:]))
    result["bf16_first_grad_cosine"] = cos
    result["preset_vs_preset_scored_first_loss_rel_diff"] = abs(
        out["preset"]["losses"][0] - out["preset_scored"]["losses"][0]) / out["preset"]["losses"][0]
    result["fast_vs_preset_first_loss_rel_diff"] = abs(
        a["losses"][0] - out["preset"]["losses"][0]) / out["preset"]["losses"][0]
    return result
