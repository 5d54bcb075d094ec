"""The suite's model: a named model, a checkpoint, or a testbed trained once into the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..util.cache import cache_dir
from ..util.device import resolve_device
from ..util.io import atomic_write_text, sha256_bytes
from .spec import Suite, TrainSpec

__all__ = ["load_suite_model", "suite_model_reference", "trained_checkpoint", "training_task"]


def trained_checkpoint(spec: TrainSpec, *, progress: bool = True) -> Path:
    """Train ``spec`` once into the user cache (keyed by the spec) and return the last checkpoint."""
    from ..train import presets
    from ..train.build import loss_terms
    from ..train.trainer import list_checkpoints, train

    key = sha256_bytes(json.dumps(vars(spec), sort_keys=True, default=str).encode())[:12]
    out = cache_dir("runs", f"{spec.preset}-{key}")
    preset = presets.get_preset(spec.preset)
    task = training_task(spec)
    mcfg = task.model_config()
    overrides = {**preset.model_overrides, **spec.model_options, "seed": spec.seed}
    mcfg = type(mcfg)(**{**mcfg.to_dict(), **overrides})
    tcfg = preset.train
    changes: dict[str, Any] = {"seed": spec.seed}
    if spec.steps is not None:
        changes["steps"] = spec.steps
    tcfg = type(tcfg).from_dict({**tcfg.to_dict(), **changes})
    done = out / "DONE"
    if not done.exists():
        train(task, mcfg, tcfg, out, progress=progress, loss_terms=loss_terms(task, tcfg))
        atomic_write_text(done, "ok\n")
    return list_checkpoints(out)[-1][1]


def _named_model(suite: Suite) -> str:
    """``[model] name``: a path relative to the suite file if one exists there, else the name."""
    target = suite.resolve(suite.model.name)
    return str(target) if target is not None and target.exists() else str(suite.model.name)


def suite_model_reference(suite: Suite, *, progress: bool = True) -> str | None:
    """The name or checkpoint path a worker loads the suite's model from with ``load_model``.

    ``None`` for a named model in compatibility mode (the name alone does not reproduce it):
    such a model runs in the driver only. A ``[model.train]`` spec is trained first (once).
    """
    spec = suite.model
    if spec.name is not None:
        return None if spec.compatibility_mode else _named_model(suite)
    if spec.checkpoint is not None:
        return str(suite.resolve(spec.checkpoint))
    return str(trained_checkpoint(spec.train, progress=progress))


def load_suite_model(suite: Suite, *, progress: bool = True) -> Any:
    """The suite's model on ``resolve_device(suite.device)``."""
    from ..models import load_checkpoint, load_model

    spec = suite.model
    device = resolve_device(suite.device)
    ref = suite_model_reference(suite, progress=progress)
    if spec.name is None:
        model = load_checkpoint(ref, device=device)
        if spec.checkpoint is None:  # trained from [model.train]: name it by its spec, not its cache path
            train = spec.train
            model.probekit_source = f"{train.preset} (seed {train.seed}), trained by probekit"
            model.probekit_provenance = (
                f"[model.train] preset {train.preset}, seed {train.seed}"
                + (f", {train.steps} steps" if train.steps is not None else "")
                + f", trained once into the cache: {getattr(model, 'probekit_provenance', ref)}"
            )
        return model
    if ref is None:  # compatibility mode
        return load_model(_named_model(suite), device=device, compatibility_mode=True)
    return load_model(ref, device=device)


def training_task(spec: TrainSpec) -> Any:
    """The testbed task a ``[model.train]`` spec trains on."""
    from ..testbeds import get_task
    from ..train import presets

    preset = presets.get_preset(spec.preset)
    return get_task(preset.task, **{**preset.task_overrides, **spec.task_options, "seed": spec.seed})
