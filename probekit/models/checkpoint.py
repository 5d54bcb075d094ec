"""Checkpoints as ``model.safetensors`` + ``config.json``: no pickle anywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..util.io import atomic_path, atomic_write_json
from .config import ModelConfig
from .native import build_model
from .protocol import HookedModel

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = "probekit-checkpoint/1"


def save_checkpoint(
    model: HookedModel, config: ModelConfig, directory: str | Path, *, extra: dict[str, Any] | None = None
) -> Path:
    """Save weights and config to ``directory`` (created). ``extra`` (JSON) rides along, e.g. vocab."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    with atomic_path(directory / WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp), metadata={"format": FORMAT})
    meta = {"format": FORMAT, "model": config.to_dict(), "extra": extra or {}}
    atomic_write_json(directory / CONFIG_FILE, meta, indent=2, sort_keys=True)
    return directory


def read_checkpoint_meta(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: a probekit checkpoint directory holds {CONFIG_FILE} and "
            f"{WEIGHTS_FILE} (written by probekit.save_checkpoint)"
        )
    meta = json.loads(path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: format {meta.get('format')!r} is not {FORMAT!r}")
    return meta


def load_checkpoint(directory: str | Path, *, device: str | torch.device = "cpu") -> HookedModel:
    """Rebuild the model of a checkpoint written by :func:`save_checkpoint` (eval mode)."""
    directory = Path(directory)
    meta = read_checkpoint_meta(directory)
    config = ModelConfig.from_dict(meta["model"])
    model = build_model(config, device=device)
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise FileNotFoundError(f"{weights} missing from checkpoint {directory}")
    state = load_file(str(weights), device=str(device))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {directory} does not match its config: missing {list(missing)[:5]}, "
            f"unexpected {list(unexpected)[:5]}"
        )
    model.eval()
    model.probekit_config = config
    model.probekit_checkpoint = str(directory)
    return model
