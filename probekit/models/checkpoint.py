"""Checkpoints as ``model.safetensors`` + ``config.json``: no pickle anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..errors import ConfigError, CorruptFileError, ModelLoadError
from ..util.integrity import check_digest, read_sealed, seal
from ..util.io import atomic_path, atomic_write_json, sha256_file
from .config import ModelConfig
from .native import build_model
from .protocol import HookedModel

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = "probekit-checkpoint/1"


class CorruptCheckpointError(CorruptFileError, ModelLoadError):
    """A checkpoint file fails its checksum or is truncated (also a ``ModelLoadError``)."""


def _fix(directory: Path) -> str:
    return (f"delete the checkpoint {directory} and re-save it (save_checkpoint) or retrain it "
            "(a `probekit train` rerun resumes from its last intact checkpoint)")


class MissingModelFileError(ModelLoadError, FileNotFoundError):
    """A checkpoint file is missing (also a ``FileNotFoundError`` for older callers)."""


def save_checkpoint(
    model: HookedModel, config: ModelConfig, directory: str | Path, *, extra: dict[str, Any] | None = None
) -> Path:
    """Save weights and config to ``directory`` (created). ``extra`` (JSON) rides along, e.g. vocab.

    ``config.json`` records the sha256 of ``model.safetensors`` and of its own content
    (:mod:`probekit.util.integrity`); :func:`load_checkpoint` verifies both.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    with atomic_path(directory / WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp), metadata={"format": FORMAT})
    meta = {"format": FORMAT, "model": config.to_dict(), "extra": extra or {},
            "weights_sha256": sha256_file(directory / WEIGHTS_FILE)}
    atomic_write_json(directory / CONFIG_FILE, seal(meta), indent=2, sort_keys=True)
    return directory


_PICKLE_MAGIC = (b"PK\x03\x04", b"\x80")  # torch.save zip archive, raw pickle protocol >= 2
_CONFIG_DIMS = ("d_model", "d_mlp", "d_head", "n_heads", "n_key_value_heads", "d_vocab", "n_ctx")


def check_safetensors_file(path: Path) -> None:
    """Raise :class:`ModelLoadError` if ``path`` is a pickle (``torch.save``) file.

    probekit never unpickles weights (a pickle can run arbitrary code), so a ``.bin``/``.pt``
    file or pickle bytes saved under a ``.safetensors`` name are refused with one line.
    """
    with open(path, "rb") as fh:
        head = fh.read(9)
    # a safetensors file opens with its header's length (8 bytes, little-endian) and the JSON
    # header's "{"; that length's low byte can be 0x80, which alone looks like a pickle
    if head[8:9] == b"{":
        return
    if head.startswith(_PICKLE_MAGIC):
        raise ModelLoadError(
            f"{path} holds pickle (torch.save) bytes, not safetensors; probekit loads only "
            "safetensors weights (pickles can run code): re-save with "
            "safetensors.torch.save_file(state_dict, path) or model.save_pretrained(dir)"
        )


def _shape_mismatch(
    directory: Path, config: ModelConfig, state: dict[str, Any], expected: dict[str, Any]
) -> str | None:
    """One line naming the first weight whose shape differs from what ``config`` implies."""
    for key, tensor in state.items():
        if key not in expected or tuple(tensor.shape) == tuple(expected[key].shape):
            continue
        want, got = tuple(expected[key].shape), tuple(tensor.shape)
        fields = [
            f"{name}={getattr(config, name)}"
            for name in _CONFIG_DIMS
            if getattr(config, name, None) is not None
            and any(w != g and w == getattr(config, name) for w, g in zip(want, got))
        ]
        named = f" ({', '.join(fields)})" if fields else ""
        return (
            f"checkpoint {directory}: config.json{named} implies {key} of shape {want}, but "
            f"model.safetensors holds shape {got}; the config and the weights come from "
            "different models: fix config.json or re-save the checkpoint"
        )
    return None


def read_checkpoint_meta(directory: str | Path) -> dict[str, Any]:
    """The parsed ``config.json`` of checkpoint ``directory`` (format and checksum checked).

    No weights are read. The returned dict holds ``weights_sha256`` (absent in checkpoints of
    older probekit versions) but not the config's own ``sha256``.

    Raises:
        CorruptCheckpointError: config.json is truncated, not JSON or fails its checksum.
    """
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise MissingModelFileError(
            f"{path} not found: a probekit checkpoint directory holds {CONFIG_FILE} and "
            f"{WEIGHTS_FILE} (written by probekit.save_checkpoint)"
        )
    try:
        meta = read_sealed(path, what="checkpoint config", fix=_fix(Path(directory)))
    except CorruptFileError as err:
        raise CorruptCheckpointError(str(err)) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else None
        raise ConfigError(f"{path}: format {got!r} is not {FORMAT!r}")
    return meta


def load_checkpoint(directory: str | Path, *, device: str | torch.device = "cpu") -> HookedModel:
    """Rebuild the model of a checkpoint written by :func:`save_checkpoint` (eval mode)."""
    directory = Path(directory)
    meta = read_checkpoint_meta(directory)
    config = ModelConfig.from_dict(meta["model"])
    model = build_model(config, device=device)
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise MissingModelFileError(f"{weights} missing from checkpoint {directory}")
    check_safetensors_file(weights)
    try:
        check_digest(weights, meta.get("weights_sha256"), what="checkpoint weights",
                     fix=_fix(directory))
    except CorruptFileError as err:
        raise CorruptCheckpointError(str(err)) from None
    try:
        state = load_file(str(weights), device=str(device))
    except Exception as err:  # safetensors raises its own SafetensorError
        raise ModelLoadError(f"{weights} is not a readable safetensors file ({err})") from None
    problem = _shape_mismatch(directory, config, state, model.state_dict())
    if problem:
        raise ModelLoadError(problem)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ModelLoadError(
            f"checkpoint {directory} does not match its config: missing {list(missing)[:5]}, "
            f"unexpected {list(unexpected)[:5]}"
        )
    model.eval()
    model.probekit_config = config
    model.probekit_checkpoint = str(directory)
    extra = meta.get("extra") or {}
    trained = f", task {extra['task']}" if "task" in extra else ""
    step = f", step {extra['step']}" if "step" in extra else ""
    model.probekit_provenance = f"probekit checkpoint {directory}{trained}{step}"
    return model
