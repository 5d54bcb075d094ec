"""Training-dynamics markers over a checkpoint series.

* Layer rotation (Carbonnelle & De Vleeschouwer, arXiv 1806.01603; ispgroupucl/layer-rotation-tools):
  ``1 - cos(w_t, w_0)`` between the flattened weight matrix at step ``t`` and at initialisation,
  per weight tensor with >= 2 dims (biases and norm gains excluded). Larger final rotation in all
  layers went with better test accuracy there.
* Condition number ``s_max / s_min`` of each >= 2-D weight, reshaped to ``(shape[0], -1)`` as in
  KappaTune (Ludwig, arXiv 2506.16289), and of each layer's activation covariance
  ``l_max / l_min``. KappaTune uses weight condition numbers to pick tensors to fine-tune; reading
  either as a generalization/OOD marker is OUR EXTENSION, not a published result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from probekit.errors import DataError
from probekit.report.blocks import Block
from probekit.report.notebook import NotebookMixin

from ..shapes import shape_checked
from .dimension import covariance_spectrum

_SKIP = ("b_", "bias", "ln", "norm", ".w", "IGNORE", "mask")


def weight_matrices(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The >= 2-D float weights of a state dict (no biases, norm gains, buffers), float64."""
    out = {}
    for name, w in state.items():
        leaf = name.rsplit(".", 1)[-1]
        if w.ndim < 2 or not w.is_floating_point() or any(leaf.startswith(s) for s in _SKIP):
            continue
        out[name] = w.detach().to(torch.float64)
    return out


@dataclass(frozen=True, repr=False)
class DynamicsMarkers(NotebookMixin):
    """Markers per weight tensor over a checkpoint series.

    Attributes:
        steps: training step of each checkpoint.
        rotation: weight name -> ``(n_ckpt,)`` layer rotation ``1 - cos(w_t, w_0)``.
        condition: weight name -> ``(n_ckpt,)`` condition number ``s_max / s_min`` (our extension
            as a marker).
    """

    steps: tuple[int, ...]
    rotation: dict[str, Float[Tensor, " ckpt"]]
    condition: dict[str, Float[Tensor, " ckpt"]]

    def to_records(self) -> list[dict[str, Any]]:
        """One row per checkpoint and weight: its step, layer rotation and condition number."""
        return [{"step": int(step), "weight": k, "rotation": float(self.rotation[k][i]),
                 "condition": float(self.condition[k][i])}
                for i, step in enumerate(self.steps) for k in self.rotation]

    def _blocks(self) -> tuple[Block, ...]:
        from ..report.blocks import Column, LinePlot, Series, Table

        x = tuple(str(s) for s in self.steps)
        rotation = LinePlot(
            title="layer rotation 1 - cos(w_t, w_0)", x_labels=x, xlabel="step",
            ylabel="1 - cos(w_t, w_0)",
            series=tuple(Series(name=k, values=tuple(v.tolist())) for k, v in self.rotation.items()),
        )
        table = Table(columns=(Column(key="step", header="step", fmt="d"),
                               Column(key="weight", header="weight", fmt="", align="left"),
                               Column(key="rotation", header="layer rotation"),
                               Column(key="condition", header="condition number", fmt=".4g")),
                      rows=tuple(self.to_records()))
        return (rotation, table)

    def _summary(self) -> str:
        last = {k: float(v[-1]) for k, v in self.rotation.items()}
        top = max(last, key=last.get) if last else "-"
        return (f"{len(self.steps)} checkpoints (steps {self.steps[0]}..{self.steps[-1]}), "
                f"{len(self.rotation)} weights; most rotated {top} {last.get(top, 0.0):.3f}")


def layer_rotation(states: Sequence[Mapping[str, Tensor]]) -> dict[str, Float[Tensor, " ckpt"]]:
    """``1 - cos(w_t, w_0)`` per weight matrix; ``states[0]`` is the initial checkpoint."""
    if len(states) < 1:
        raise DataError("got no checkpoints; pass the initial state first, then later ones")
    ref = weight_matrices(states[0])
    out: dict[str, list[float]] = {k: [] for k in ref}
    for i, st in enumerate(states):
        cur = weight_matrices(st)
        for k, w0 in ref.items():
            if k not in cur or cur[k].shape != w0.shape:
                raise DataError(
                    f"checkpoint {i} lacks weight {k!r} of shape {tuple(w0.shape)}; all "
                    "checkpoints must come from the same architecture"
                )
            out[k].append(weight_rotation(w0, cur[k]))
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in out.items()}


def weight_rotation(w0: Tensor, w: Tensor) -> float:
    """Cosine distance ``1 - <w0, w> / (|w0| |w|)`` of two flattened weight tensors.

    Carbonnelle & De Vleeschouwer (arXiv 1806.01603): the layer rotation of a weight ``w`` away
    from its initial value ``w0``; 0 when ``w`` is a positive multiple of ``w0``, 1 when
    orthogonal, 2 when opposite. Raises :class:`~probekit.errors.DataError` on a shape mismatch
    or a zero tensor (the angle is undefined).
    """
    if w0.shape != w.shape:
        raise DataError(f"weights of shapes {tuple(w0.shape)} and {tuple(w.shape)}; layer rotation "
                        "compares one weight at two training steps (same shape)")
    a, b = w0.reshape(-1).to(torch.float64), w.reshape(-1).to(torch.float64)
    norm = a.norm() * b.norm()
    if norm == 0:
        raise DataError("a zero weight tensor has no direction; layer rotation is undefined")
    return float(1.0 - (a @ b) / norm)


@shape_checked
def matrix_condition_number(w: Float[Tensor, "m n"]) -> float:
    """``s_max / s_min`` over the ``min(m, n)`` singular values of a matrix (inf if singular).

    The 2-norm condition number; invariant to scale and transpose. A rectangular matrix counts
    only its ``min(m, n)`` singular values, so a ``(d, 4d)`` MLP weight is well conditioned when
    its ``d`` rows are far from linearly dependent.
    """
    if w.ndim != 2 or min(w.shape) < 1:
        raise DataError(f"expected a matrix (m, n), got shape {tuple(w.shape)}; reshape it first, "
                        "e.g. w.reshape(w.shape[0], -1)")
    s = torch.linalg.svdvals(w.to(torch.float64))
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


def weight_condition_numbers(state: Mapping[str, Tensor]) -> dict[str, float]:
    """``s_max / s_min`` of every >= 2-D weight reshaped to ``(shape[0], -1)`` (inf if singular)."""
    out = {}
    for k, w in weight_matrices(state).items():
        out[k] = matrix_condition_number(w.reshape(w.shape[0], -1))
    return out


@shape_checked
def activation_condition_number(
    acts: Float[Tensor, "*lay n d"],
) -> Float[Tensor, " layer"]:
    """``l_max / l_min`` of each layer's activation covariance (our extension; inf if singular).

    Uses the ``min(n, d)`` eigenvalues of the smaller Gram matrix, so with ``n <= d`` the
    covariance is always singular in ``R^d``: this is the conditioning of the occupied span.
    """
    ev = covariance_spectrum(acts)
    return ev[:, 0] / ev[:, -1]


def checkpoint_dynamics(
    checkpoints: Sequence[str | Path] | Sequence[Mapping[str, Tensor]],
    steps: Sequence[int] | None = None,
) -> DynamicsMarkers:
    """Layer rotation and weight condition numbers over a series (first = initial weights).

    Args:
        checkpoints: probekit checkpoint directories (``model.safetensors``) or state dicts.
        steps: step of each checkpoint (default 0, 1, 2, ...).

    Returns:
        DynamicsMarkers.
    """
    from safetensors.torch import load_file

    states = [load_file(str(Path(c) / "model.safetensors")) if isinstance(c, str | Path) else c
              for c in checkpoints]
    conds = [weight_condition_numbers(s) for s in states]
    condition = {k: torch.tensor([c[k] for c in conds], dtype=torch.float64) for k in conds[0]}
    st = tuple(range(len(states))) if steps is None else tuple(int(s) for s in steps)
    return DynamicsMarkers(steps=st, rotation=layer_rotation(states), condition=condition)


def plot_dynamics(markers: DynamicsMarkers, path: str | Path) -> Path:
    """Two panels (layer rotation, log condition number) vs step, one line per weight; PNG."""
    from matplotlib.figure import Figure  # no pyplot: no backend switch, no global figure

    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2)
    for k, v in markers.rotation.items():
        axes[0].plot(markers.steps, v.numpy(), label=k)
    for k, v in markers.condition.items():
        axes[1].plot(markers.steps, v.numpy(), label=k)
    axes[0].set(xlabel="step", ylabel="1 - cos(w_t, w_0)", title="layer rotation")
    axes[1].set(xlabel="step", ylabel="s_max / s_min", yscale="log",
                title="weight condition number (our extension)")
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
