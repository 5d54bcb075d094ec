"""``weight_change_norm``: how far a fine-tune moved from its base model (Frobenius norm).

With ``W_t`` the fine-tune's tensor ``t`` and ``B_t`` the base model's (the same state-dict key
in both Hugging Face directories' safetensors), the marker is

    absolute:  D = sqrt( sum_t ||W_t - B_t||_F^2 )
    relative:  D / sqrt( sum_{t in C} ||B_t||_F^2 ),   C = { t : W_t != B_t }

A LoRA fine-tune merged into its targets changes only the targeted modules, so the sum over
every shared tensor is the sum over the targeted ones; the relative form divides by the base
norm of exactly the tensors that changed (0 when nothing changed). "Weight-change norms" are a
marker of knowledge storage in issue 45 (Allen-Zhu & Li 2023 fine-tune an LM on biographies).
The statistic is exact, so its CI is the point.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...context import Context
from ...errors import DataError, NotApplicableError
from ..keys import exact
from ..measurement import Measurement
from ..registry import register_measurement

__all__ = ["WeightChangeNormSpec", "weight_change", "weight_change_norm"]


@dataclass(frozen=True, kw_only=True)
class WeightChangeNormSpec:
    """Keys of a ``weight_change_norm`` marker.

    ``base``: the base model (a registered name such as ``"smollm2-135m"`` or a Hugging Face
    directory relative to the file); default: the one the fine-tune's ``finetune.json``
    records. ``relative``: divide by the base norm of the changed tensors.
    """

    base: str | None = None
    relative: bool = False


def _tensor_files(directory: Path) -> dict[str, Path]:
    """State-dict key -> the safetensors file holding it (single or sharded checkpoints)."""
    from safetensors import safe_open

    out: dict[str, Path] = {}
    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), "pt") as fh:
            for key in fh.keys():  # noqa: SIM118 - safe_open API
                out[key] = file
    return out


def weight_change(finetuned: str | Path, base: str | Path) -> tuple[float, float, int]:
    """``(sum_t ||W_t - B_t||_F^2, sum_{t changed} ||B_t||_F^2, number changed)`` in float64.

    Over the state-dict keys both directories' ``*.safetensors`` hold.

    Raises:
        DataError: no shared tensor, or a shared key with different shapes (naming it).
    """
    import torch
    from safetensors import safe_open

    ft, bs = _tensor_files(Path(finetuned)), _tensor_files(Path(base))
    shared = sorted(set(ft) & set(bs))
    if not shared:
        raise DataError(f"{finetuned} and {base} share no safetensors tensor key (found {len(ft)} "
                        f"and {len(bs)} keys); give the fine-tune's own base model as base = ...")
    delta = base_sq = 0.0
    changed = 0
    handles: dict[Path, Any] = {}  # one open safetensors file each (memory-mapped)
    for key in shared:
        for file in (ft[key], bs[key]):
            if file not in handles:
                handles[file] = safe_open(str(file), "pt")
        w, b = handles[ft[key]].get_tensor(key), handles[bs[key]].get_tensor(key)
        if w.shape != b.shape:
            raise DataError(f"tensor {key!r} has shape {tuple(w.shape)} in {finetuned} but "
                            f"{tuple(b.shape)} in {base}; give the fine-tune's own base model")
        if torch.equal(w, b):
            continue
        changed += 1
        w, b = w.double(), b.double()
        delta += float(((w - b) ** 2).sum())
        base_sq += float((b ** 2).sum())
    return delta, base_sq, changed


def _base_dir(spec: WeightChangeNormSpec, ctx: Context, model_dir: Path) -> Path:
    from ...models.named import REGISTRY
    from ...train.finetune import FINETUNE_META, base_model_dir, read_finetune_meta

    if spec.base is not None:
        name = spec.base if spec.base in REGISTRY else str(ctx.suite.resolve(spec.base))
        return base_model_dir(name)
    if not (model_dir / FINETUNE_META).is_file():
        raise NotApplicableError(f"{model_dir} records no base model (no {FINETUNE_META}: not a "
                                 "probekit fine-tune); give base = \"NAME or DIR\"")
    meta = read_finetune_meta(model_dir)
    recorded = Path(str(meta.get("base_dir", "")))
    return recorded if recorded.is_dir() else base_model_dir(str(meta["base_model"]))


@register_measurement("weight_change_norm", spec=WeightChangeNormSpec)
def weight_change_norm(spec: WeightChangeNormSpec, ctx: Context) -> Measurement:
    """Frobenius norm of the fine-tune's weight change from its base model: exact."""
    import math

    hf_dir = getattr(ctx.model, "probekit_hf_dir", None)
    if hf_dir is None:
        raise NotApplicableError("weight_change_norm compares a Hugging Face model directory with "
                                 "its base model; this model was not loaded from one")
    model_dir = Path(hf_dir)
    base = _base_dir(spec, ctx, model_dir)
    delta, base_sq, changed = weight_change(model_dir, base)
    value = math.sqrt(delta)
    if spec.relative:
        value = value / math.sqrt(base_sq) if base_sq > 0 else 0.0
    what = "||W - W_base||_F / ||W_base||_F over the changed tensors" if spec.relative \
        else "||W - W_base||_F"
    return Measurement(
        metric=what, **exact(ctx, value), unit="model",
        method=f"Frobenius norm of the change from the base model {base} over every shared "
               f"safetensors tensor ({changed} changed); exact, no resampling",
    )
