"""AdamW state as ``optimizer.safetensors`` (tensors) + ``optimizer.json`` (scalars): no pickle.

Tensor keys are ``<parameter name>/<state key>`` (``exp_avg``, ``exp_avg_sq``); the per-parameter
step counts (0-dim tensors in torch) and the param-group hyper-parameters go to the JSON file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..util.integrity import check_digest, read_sealed, seal
from ..util.io import atomic_path, atomic_write_json, sha256_file

OPTIM_TENSORS = "optimizer.safetensors"
OPTIM_JSON = "optimizer.json"


def save_optimizer(optimizer: torch.optim.Optimizer, names: list[str], directory: str | Path) -> None:
    """Save ``optimizer``'s state; ``names[i]`` names the i-th parameter of its (single) group."""
    directory = Path(directory)
    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, st in state["state"].items():
        name = names[idx]
        for key, value in st.items():
            if isinstance(value, torch.Tensor) and value.ndim > 0:
                tensors[f"{name}/{key}"] = value.detach().contiguous().cpu()
            else:
                v = value.item() if isinstance(value, torch.Tensor) else value
                scalars.setdefault(name, {})[key] = v
    groups = [{k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]]
    with atomic_path(directory / OPTIM_TENSORS) as tmp:
        save_file(tensors, str(tmp))
    meta = {"param_names": names, "scalars": scalars, "param_groups": groups,
            "tensors_sha256": sha256_file(directory / OPTIM_TENSORS)}
    atomic_write_json(directory / OPTIM_JSON, seal(meta), indent=1)


def load_optimizer(optimizer: torch.optim.Optimizer, names: list[str], directory: str | Path) -> None:
    """Restore the state written by :func:`save_optimizer` into a fresh ``optimizer``.

    Raises:
        CorruptFileError: ``optimizer.json`` or ``optimizer.safetensors`` fails its checksum.
    """
    directory = Path(directory)
    fix = (f"delete the checkpoint {directory} (a `probekit train` rerun resumes from the one "
           "before it)")
    meta = read_sealed(directory / OPTIM_JSON, what="optimizer state", fix=fix)
    check_digest(directory / OPTIM_TENSORS, meta.get("tensors_sha256"), what="optimizer state",
                 fix=fix)
    if meta["param_names"] != names:
        raise ValueError(
            f"optimizer state in {directory} is for parameters {meta['param_names'][:3]}..., "
            f"not {names[:3]}...: the model architecture changed since the checkpoint"
        )
    device = next(p.device for g in optimizer.param_groups for p in g["params"])
    tensors = load_file(str(directory / OPTIM_TENSORS), device=str(device))
    state: dict[int, dict[str, Any]] = {}
    for idx, name in enumerate(names):
        st: dict[str, Any] = {}
        for key, value in meta["scalars"].get(name, {}).items():
            # torch keeps AdamW's step as a float32 0-dim tensor (on CPU unless capturable)
            st[key] = torch.tensor(value, dtype=torch.float32) if key == "step" else value
        prefix = f"{name}/"
        for key, value in tensors.items():
            if key.startswith(prefix):
                st[key[len(prefix):]] = value
        if st:
            state[idx] = st
    current = optimizer.state_dict()
    groups = []
    for g_now, g_saved in zip(current["param_groups"], meta["param_groups"]):
        g = dict(g_saved)
        g["params"] = g_now["params"]
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
        groups.append(g)
    optimizer.load_state_dict({"state": state, "param_groups": groups})
