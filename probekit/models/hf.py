"""Boot a ``TransformerBridge`` from a local Hugging Face model directory, offline.

No hub call is attempted: ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` default to ``1`` before
transformers is imported on this path (``setdefault``: a user who exported ``0`` keeps it).
``huggingface_hub`` reads these at import, so they only take effect if transformers was not
imported earlier in the process; a local directory with every file present needs no hub call
either way (measured: boot takes the same ~1.5 s with the variables unset).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError, ModelLoadError
from ..textfile import read_text
from .checkpoint import MissingModelFileError, check_safetensors_file
from .protocol import HookedModel

HF_CONFIG_FILE = "config.json"
PROBEKIT_CHECKPOINT_FORMAT = "probekit-checkpoint/1"  # mirrors checkpoint.FORMAT
# Any of these lets AutoTokenizer load offline; without one, transformers falls back to the slow
# tokenizer class of the architecture and fails with an unrelated "sentencepiece" message.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")


def set_offline_env() -> None:
    """Default the Hugging Face offline switches to on (keeps any value the user set)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _check_weights_are_safetensors(directory: Path) -> None:
    """Refuse a directory whose weights are pickles (``pytorch_model.bin``, ``*.pt``)."""
    safetensors = sorted(directory.glob("*.safetensors"))
    for path in safetensors:
        check_safetensors_file(path)
    if not safetensors:
        pickled = sorted(p.name for p in directory.iterdir() if p.suffix in (".bin", ".pt", ".pth"))
        what = f"only pickled weights {pickled}" if pickled else "no *.safetensors weights"
        raise ModelLoadError(
            f"{directory} has {what}; probekit loads only safetensors (pickles can run code): "
            "re-save with model.save_pretrained(directory, safe_serialization=True)"
        )


def check_hf_dir_files(directory: str | Path) -> None:
    """Refuse a Hugging Face directory without loadable weights or tokenizer files, up front.

    What :func:`load_hf_dir` needs besides ``config.json``, checked without loading anything
    (the safetensors headers only): ``*.safetensors`` weights (never pickles) and one of
    :data:`TOKENIZER_FILES`.

    Raises:
        ModelLoadError: no safetensors weights (or only pickled ones), a damaged header, or no
            tokenizer file; the message names the directory, what it holds and the fix.
    """
    directory = Path(directory)
    _check_weights_are_safetensors(directory)
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        present = sorted(p.name for p in directory.iterdir())[:10]
        raise MissingModelFileError(
            f"{directory} has no tokenizer (none of {list(TOKENIZER_FILES)}; it holds {present}); "
            "save one there with tokenizer.save_pretrained(directory)"
        )


def load_hf_dir(
    path: str | Path,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    prepend_bos: bool | None = None,
    compatibility_mode: bool = False,
    tokenizer: Any | None = None,
) -> HookedModel:
    """Return a ``TransformerBridge`` for the Hugging Face model saved in directory ``path``.

    Args:
        path: directory holding ``config.json`` and weights (``save_pretrained`` layout), and
            ideally the tokenizer files.
        device: torch device for the weights.
        dtype: parameter dtype (float32 for analysis; comparisons with HF use log-softmax).
        prepend_bos: ``cfg.default_prepend_bos``. ``None``: the model's own default
            (:func:`probekit.models.bos.own_prepend_bos`: a registered base model's value, else
            whether its saved tokenizer puts a BOS token before a text by itself), instead of
            the bridge's ``True`` for every model.
        compatibility_mode: call ``enable_compatibility_mode()`` (folds LayerNorm, centres the
            unembed; changes residual values and shifts logits by a constant; ~20 s on
            SmolLM2-135M). Recorded as ``model.probekit_compatibility_mode``.
        tokenizer: a ``PreTrainedTokenizerBase`` to use instead of the directory's own
            tokenizer files (required when the directory has none).

    The returned model is in eval mode and carries ``probekit_source`` (the resolved path),
    ``probekit_hf_dir`` and ``probekit_compatibility_mode``.
    """
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise MissingModelFileError(
            f"{str(path)!r} is not a directory; pass a local Hugging Face model directory "
            f"(written by save_pretrained, containing {HF_CONFIG_FILE} and weights)"
        )
    config_path = directory / HF_CONFIG_FILE
    if not config_path.is_file():
        present = sorted(p.name for p in directory.iterdir())[:10]
        raise MissingModelFileError(
            f"{config_path} not found: a Hugging Face model directory must contain "
            f"{HF_CONFIG_FILE} (plus model.safetensors or pytorch_model.bin); found {present}"
        )
    try:
        config = json.loads(read_text(config_path))
    except ValueError as err:
        raise ModelLoadError(f"{config_path} is not valid JSON ({err}); re-save the model") from err
    if isinstance(config, dict) and config.get("format") == PROBEKIT_CHECKPOINT_FORMAT:
        raise ConfigError(
            f"{directory} is a probekit checkpoint, not a Hugging Face directory; load it with "
            "probekit.models.load_checkpoint or probekit.models.load_model"
        )
    if not isinstance(config, dict) or "model_type" not in config:
        raise ConfigError(
            f"{config_path} has no 'model_type' key, so it is not a transformers config; "
            "write the directory with model.save_pretrained(...)"
        )

    if tokenizer is None and not any((directory / name).is_file() for name in TOKENIZER_FILES):
        raise MissingModelFileError(
            f"{directory} has no tokenizer (none of {list(TOKENIZER_FILES)}); save one there with "
            "tokenizer.save_pretrained(directory) or pass tokenizer=... to load_hf_dir"
        )

    _check_weights_are_safetensors(directory)
    set_offline_env()
    from transformer_lens.model_bridge import TransformerBridge

    model = TransformerBridge.boot_transformers(
        str(directory), device=device, dtype=dtype, tokenizer=tokenizer
    )
    if prepend_bos is None:  # the model's own (the bridge's tokenizer copy always adds BOS)
        from .bos import own_prepend_bos

        prepend_bos = own_prepend_bos(directory, tokenizer)
    model.cfg.default_prepend_bos = prepend_bos
    model.eval()
    if compatibility_mode:
        model.enable_compatibility_mode()
    model.probekit_source = str(directory)
    model.probekit_provenance = (
        f"Hugging Face directory {directory} (model_type {config.get('model_type')!r})"
    )
    model.probekit_hf_dir = str(directory)
    model.probekit_compatibility_mode = compatibility_mode
    return model
