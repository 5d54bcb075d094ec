"""One loaded model per process, for executor tasks that each need the same model.

A Ray worker runs many tasks of a fan-out (shard ranges of a capture, prompt batches of a
patching sweep); :func:`load_model_cached` loads the model on the first and returns the same
object afterwards, with its fingerprint (computed once). The driver calls it too, so with the
in-process executor the model is loaded once in all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .identity import model_fingerprint
from .protocol import HookedModel

__all__ = ["load_model_cached", "model_paths"]

_MODELS: dict[tuple[Any, ...], tuple[HookedModel, str]] = {}


def _path_signature(ref: str) -> tuple[tuple[str, int, int], ...]:
    """Name, size and mtime of the files of a model directory (empty for a registered name)."""
    path = Path(ref).expanduser()
    if not path.is_dir():
        return ()
    return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                        for p in path.iterdir() if p.is_file()))


def load_model_cached(ref: str, device: str = "cpu") -> tuple[HookedModel, str]:
    """``(load_model(ref, device=device), its fingerprint)``, kept for the next call in this process.

    One model is kept per process (the last one asked for); a checkpoint directory whose files
    changed (sizes or mtimes) is loaded again. Callers must not modify the model (hooks are
    attached only inside the capture/intervention scopes, which remove them).
    """
    from .loading import load_model

    key = (ref, device, _path_signature(ref))
    if key not in _MODELS:
        _MODELS.clear()
        model = load_model(ref, device=device)
        _MODELS[key] = (model, model_fingerprint(model))
    return _MODELS[key]


def model_paths(refs: list[str]) -> list[str]:
    """The refs that are paths (checkpoint or HF directories), absolute; registered names are dropped.

    What a worker must see on its filesystem to load these models (a registered name is
    converted into the worker's own probekit cache instead).
    """
    from .named import REGISTRY

    return [str(Path(r).expanduser().resolve()) for r in refs if r not in REGISTRY]
