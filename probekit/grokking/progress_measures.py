"""Progress measures for grokking modular addition (Nanda et al. 2023, arXiv 2301.05217, §5.1).

The logits of a modular-addition model on all ``p^2`` pairs form a grid ``L[a, b, c]`` (input
residues ``a``, ``b``; output residue ``c``; the ``=`` class dropped as in the authors' notebook
``test_logits``). Over the flattened input plane ``(a, b)`` (``a``-major), frequency ``k`` owns
the two orthonormal *sum directions* ``u_k = (sqrt 2 / p) cos(w_k (a + b))`` and
``v_k = (sqrt 2 / p) sin(w_k (a + b))``, ``w_k = 2 pi k / p`` (the notebook's
``get_component_cos_xpy`` / ``get_component_sin_xpy``: ``(cos_a cos_b -+ sin_a sin_b) / sqrt 2``
in the 2-D Fourier basis). ``P_S`` is the projection onto the sum directions of the key
frequencies ``S``, applied along the input plane (to every output column / neuron).

Restricted and excluded loss come in two readings, chosen by ``path``:

* ``path="neuron"`` (default; the paper's definition): only the **neuron path** is restricted.
  With ``N[a, b, :]`` the MLP activations (``hook_post``, ReLU output) at the ``=`` token and
  ``W_L = W_out W_U`` (``d_mlp x p``, residue outputs), the authors' ``get_restricted_loss``
  (``progress-measures-paper`` notebook, "Look During Training") builds
  ``approx = mean_ab N + P_S N``, maps it through ``W_L`` and adds the "bias term"
  ``mean_ab L - mean_ab (approx W_L)``. Since every sum direction has zero mean over the inputs,
  this is exactly::

      restricted = mean_ab L + (P_S N) W_L

  (everything the model adds outside the neuron path, i.e. the direct and attention paths,
  ``b_out`` and ``b_U``, survives only through its mean over inputs). Their ``get_excluded_loss``
  removes the key components from the neuron activations and keeps the rest of the residual
  stream: ``(N - P_S N) W_out + resid_mid`` then ``W_U``. We compute it as::

      excluded = L - (P_S N) W_L

  which equals theirs plus the input-constant ``b_out W_U + b_U`` (their expression drops these
  biases: the original model had no unembedding bias; we keep them so that ``S = {}`` gives the
  full logits).
* ``path="logits"``: the projection acts on the full logits, so the direct / attention paths'
  key components are kept (restricted) or removed (excluded) as well::

      restricted = mean_ab L + P_S L,   excluded = L - P_S L

  This is probekit's earlier reading. On a 1-layer model the two differ by
  ``P_S`` of the non-neuron logits; on the shipped p=53 checkpoints by about 0.06 nats.

The restricted loss is averaged over ``restricted_split`` pairs (default all ``p^2``; the
notebook's training-time curve uses the held-out pairs, ``"test"``), the excluded loss over the
training pairs (as the notebook). Other measures:

* **Gini** (Hurley & Rickard 2009) of the ``p`` L2 norms of the Fourier components (constant, each
  cos and sin separately) of ``W_E`` (token embedding of the residues) and of the neuron-logit
  map ``W_L = W_out W_U`` (§3; outputs = residues);
* **total sum of squared weights** ``sum_theta theta^2`` over every trained parameter (notebook
  ``sum_sq_weights``);
* **parameter norm per logit margin** (a per-checkpoint reading of Varma et al. 2023's circuit
  efficiency, ``circuits.md``: "parameter norm needed for a given logit margin"):
  ``||theta||_2 / mean_train (L[a, b, (a+b) mod p] - max_{c != (a+b) mod p} L[a, b, c])``;
  lower = more efficient. Varma et al.'s critical dataset size and ungrokking are not computed.

:func:`progress_measures` evaluates a checkpoint series (one executor task per checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np
from jaxtyping import Bool, Float, Int
from scipy.special import logsumexp

from ..errors import ConfigError, DataError, NonFiniteError
from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ..shapes import shape_checked
from .fourier import fourier_basis

__all__ = [
    "PATHS",
    "CheckpointProgress",
    "NeuronPath",
    "ProgressPoint",
    "ProgressSeries",
    "checkpoint_progress",
    "crossing_step",
    "excluded_logits",
    "fourier_component_norms",
    "gini",
    "logit_margin",
    "ablated_logits",
    "measure_grid",
    "modular_pair_loss",
    "modular_logit_grid",
    "neuron_excluded_logits",
    "neuron_path",
    "neuron_restricted_logits",
    "progress_measures",
    "restricted_logits",
    "sum_direction_power",
    "sum_directions",
    "sum_squared_weights",
]

LossPath = Literal["neuron", "logits"]
PATHS: tuple[str, ...] = ("neuron", "logits")


def _check_grid(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    if x.ndim != 3 or not x.shape[0] == x.shape[1] == x.shape[2]:
        raise DataError(
            f"logits have shape {x.shape}; expected a (p, p, p) grid L[a, b, c] over all input "
            "pairs and the p residue outputs (see modular_logit_grid)"
        )
    if not np.isfinite(x).all():
        raise NonFiniteError("logits hold NaN or inf; progress measures need finite logits")
    return x


def _check_keys(keys: Sequence[int] | np.ndarray, p: int) -> list[int]:
    out = [int(k) for k in keys]
    bad = [k for k in out if not 1 <= k <= (p - 1) // 2]
    if bad or len(set(out)) != len(out):
        raise ConfigError(
            f"key frequencies {out}: need distinct integers in 1..{(p - 1) // 2} for p={p}"
        )
    return out


def sum_directions(p: int, keys: Sequence[int] | np.ndarray) -> Float[np.ndarray, "dir pair"]:
    """Orthonormal ``cos(w_k (a + b))``, ``sin(w_k (a + b))`` over the flattened ``(a, b)`` grid.

    Rows ``2i``, ``2i + 1`` belong to ``keys[i]``; columns are pairs ``a * p + b``.
    """
    fourier_basis(p)  # validates p (odd, >= 3)
    keys = _check_keys(keys, p)
    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    rows = []
    for k in keys:
        w = 2 * np.pi * k * (a + b).ravel() / p
        rows += [np.sqrt(2.0) / p * np.cos(w), np.sqrt(2.0) / p * np.sin(w)]
    return np.stack(rows) if rows else np.zeros((0, p * p))


def _project(x: np.ndarray, keys: Sequence[int] | np.ndarray) -> np.ndarray:
    p = x.shape[0]
    d = sum_directions(p, keys)
    flat = x.reshape(p * p, -1)
    return (d.T @ (d @ flat)).reshape(x.shape)


@shape_checked
def restricted_logits(
    logits: Float[np.ndarray, "p p p"], keys: Sequence[int] | np.ndarray
) -> Float[np.ndarray, "p p p"]:
    """``mean_{ab} L + P_S L``: the full logits' constant and key sum directions (``path="logits"``).

    The paper's restricted logits project the neuron path only: :func:`neuron_restricted_logits`.
    """
    x = _check_grid(logits)
    return x.mean(axis=(0, 1), keepdims=True) + _project(x, keys)


@shape_checked
def excluded_logits(
    logits: Float[np.ndarray, "p p p"], keys: Sequence[int] | np.ndarray
) -> Float[np.ndarray, "p p p"]:
    """``L - P_S L``: the full logits' key sum directions removed (``path="logits"``).

    The paper's excluded logits remove them from the neuron path only:
    :func:`neuron_excluded_logits`.
    """
    x = _check_grid(logits)
    return x - _project(x, keys)


@dataclass(frozen=True, kw_only=True)
class NeuronPath:
    """The neuron path of a 1-layer modular-addition model on all ``p^2`` pairs.

    Attributes:
        acts: ``(p, p, d_mlp)`` MLP activations (``blocks.0.mlp.hook_post``) at the ``=`` token.
        w_logit: ``(d_mlp, p)`` neuron-logit map ``W_L = W_out W_U`` (residue outputs only).
    """

    acts: Float[np.ndarray, "p p mlp"]
    w_logit: Float[np.ndarray, "mlp p"]

    def __post_init__(self) -> None:
        p = self.acts.shape[0]
        if (self.acts.ndim != 3 or self.acts.shape[1] != p or self.w_logit.ndim != 2
                or self.w_logit.shape != (self.acts.shape[2], p)):
            raise DataError(
                f"NeuronPath: acts {self.acts.shape} and w_logit {self.w_logit.shape}; expected "
                "acts (p, p, d_mlp) and w_logit (d_mlp, p)"
            )
        if not (np.isfinite(self.acts).all() and np.isfinite(self.w_logit).all()):
            raise NonFiniteError("NeuronPath holds NaN or inf; the model diverged?")


def _check_neurons(x: np.ndarray, neurons: NeuronPath) -> None:
    if neurons.acts.shape[0] != x.shape[0]:
        raise DataError(f"neuron path over p={neurons.acts.shape[0]} but logits over "
                        f"p={x.shape[0]}; compute both from the same model and modulus")


@shape_checked
def neuron_restricted_logits(
    logits: Float[np.ndarray, "p p p"], neurons: NeuronPath, keys: Sequence[int] | np.ndarray
) -> Float[np.ndarray, "p p p"]:
    """``mean_{ab} L + (P_S N) W_L``: Nanda et al.'s restricted logits (``path="neuron"``).

    Equal to the authors' ``get_restricted_loss`` logits (``approx W_L`` plus their bias term
    ``mean L - mean(approx W_L)``, ``approx = mean N + P_S N``); see the module docstring.
    """
    x = _check_grid(logits)
    _check_neurons(x, neurons)
    return x.mean(axis=(0, 1), keepdims=True) + _project(neurons.acts, keys) @ neurons.w_logit


@shape_checked
def neuron_excluded_logits(
    logits: Float[np.ndarray, "p p p"], neurons: NeuronPath, keys: Sequence[int] | np.ndarray
) -> Float[np.ndarray, "p p p"]:
    """``L - (P_S N) W_L``: the key components removed from the neuron path only (``"neuron"``).

    The authors' ``get_excluded_loss`` logits plus the input-constant ``b_out W_U + b_U``.
    """
    x = _check_grid(logits)
    _check_neurons(x, neurons)
    return x - _project(neurons.acts, keys) @ neurons.w_logit


def neuron_path(model: Any, p: int, *, batch_size: int = 4096) -> NeuronPath:
    """MLP activations at ``=`` of ``"a b ="`` for all pairs, and ``W_L = W_out W_U[:, :p]``.

    Needs Nanda et al.'s architecture: one block whose MLP output reaches the unembedding
    linearly (no LayerNorm); else a :class:`ConfigError` pointing to ``path="logits"``.
    """
    import torch

    from ..capture import LastToken
    from ..interventions import Read, run_with_interventions
    from ..sites import Site

    cfg = model.cfg
    if int(cfg.n_layers) != 1 or getattr(cfg, "normalization_type", None) is not None or getattr(
            cfg, "attn_only", False):
        raise ConfigError(
            f"path='neuron' needs a 1-layer model with an MLP and no LayerNorm (Nanda et al.'s), "
            f"got n_layers={cfg.n_layers}, normalization_type="
            f"{getattr(cfg, 'normalization_type', None)!r}; use path='logits' (full-logit projection)"
        )
    site = Site(0, "mlp_post")
    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    tokens = np.stack([a.ravel(), b.ravel(), np.full(p * p, p)], axis=1).tolist()
    chunks = []
    with torch.no_grad():
        for lo in range(0, len(tokens), batch_size):
            out = run_with_interventions(model, tokens[lo: lo + batch_size],
                                         [Read(site=site, positions=LastToken())], logits="none")
            chunks.append(out[site].double().cpu().numpy())
    acts = np.concatenate(chunks).reshape(p, p, -1)
    w_logit = (model.W_out[0].detach().double() @ model.W_U[:, :p].detach().double()).cpu().numpy()
    return NeuronPath(acts=acts, w_logit=w_logit)


def ablated_logits(
    logits: Float[np.ndarray, "p p p"], keys: Sequence[int] | np.ndarray, *,
    which: Literal["restricted", "excluded"], path: LossPath = "neuron",
    neurons: NeuronPath | None = None,
) -> Float[np.ndarray, "p p p"]:
    """Restricted or excluded logits along ``path`` (``neurons`` needed for ``"neuron"``)."""
    if path not in PATHS:
        raise ConfigError(f"path={path!r}; choose 'neuron' (Nanda et al.) or 'logits'")
    if which not in ("restricted", "excluded"):
        raise ConfigError(f"which={which!r}; choose 'restricted' or 'excluded'")
    if path == "logits":
        return (restricted_logits if which == "restricted" else excluded_logits)(logits, keys)
    if neurons is None:
        raise ConfigError("path='neuron' needs the neuron path: neurons=neuron_path(model, p)")
    fn = neuron_restricted_logits if which == "restricted" else neuron_excluded_logits
    return fn(logits, neurons, keys)


def sum_direction_power(logits: Float[np.ndarray, "p p p"]) -> Float[np.ndarray, " freq"]:
    """``||P_k L||^2`` per frequency ``k = 0..(p-1)/2`` (``k = 0``: the constant over inputs).

    The key frequencies of a checkpoint are the largest entries (``np.argsort``); the powers sum
    to ``||L||^2`` minus the power outside every sum direction.
    """
    x = _check_grid(logits)
    p = x.shape[0]
    flat = x.reshape(p * p, p)
    out = [float((flat.mean(0) ** 2).sum() * p * p)]
    for k in range(1, (p - 1) // 2 + 1):
        out.append(float(((sum_directions(p, [k]) @ flat) ** 2).sum()))
    return np.asarray(out)


def modular_pair_loss(logits: Float[np.ndarray, "p p p"]) -> Float[np.ndarray, "p p"]:
    """Cross-entropy ``-log softmax(L[a, b])[(a + b) mod p]`` of every pair (float64)."""
    x = _check_grid(logits)
    p = x.shape[0]
    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    correct = np.take_along_axis(x, ((a + b) % p)[..., None], axis=-1)[..., 0]
    return logsumexp(x, axis=-1) - correct


def logit_margin(logits: Float[np.ndarray, "p p p"]) -> Float[np.ndarray, "p p"]:
    """``L[a, b, (a+b) mod p] - max_{c != (a+b) mod p} L[a, b, c]`` per pair (> 0 iff correct)."""
    x = _check_grid(logits)
    p = x.shape[0]
    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    label = ((a + b) % p)[..., None]
    correct = np.take_along_axis(x, label, axis=-1)[..., 0]
    others = x.copy()
    np.put_along_axis(others, label, -np.inf, axis=-1)
    return correct - others.max(-1)


def fourier_component_norms(w: Float[np.ndarray, "p d"]) -> Float[np.ndarray, " p"]:
    """L2 norm (over ``d``) of each of the ``p`` real Fourier components of ``w`` along residues.

    Order: the constant, then ``cos(w_k a)``, ``sin(w_k a)`` for ``k = 1..(p-1)/2``
    (:func:`probekit.grokking.fourier.fourier_basis`); ``sum norms^2 = ||w||_F^2`` (Parseval).
    """
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2:
        raise DataError(f"w has shape {w.shape}; expected (p, d) (one row per residue)")
    if not np.isfinite(w).all():
        raise NonFiniteError("w holds NaN or inf; Fourier norms need finite weights")
    return np.linalg.norm(fourier_basis(w.shape[0]) @ w, axis=1)


@shape_checked
def gini(x: Float[np.ndarray, " n"]) -> float:
    """Gini coefficient (Hurley & Rickard 2009) of non-negative ``x``.

    ``G = 2 sum_i i x_(i) / (n sum_i x_i) - (n + 1) / n`` with ``x_(1) <= ... <= x_(n)``:
    0 for a constant vector, ``1 - 1/n`` for a one-hot one; 0 for an all-zero vector.
    """
    v = np.sort(np.asarray(x, dtype=np.float64).ravel())
    if v.size == 0:
        raise DataError("gini of an empty vector is undefined; give >= 1 value")
    if not np.isfinite(v).all() or v[0] < 0:
        raise DataError("gini needs finite non-negative values (e.g. norms)")
    total = v.sum()
    if total == 0:
        return 0.0
    n = v.size
    return float(2.0 * (np.arange(1, n + 1) * v).sum() / (n * total) - (n + 1) / n)


def sum_squared_weights(params: Iterable[Any]) -> float:
    """``sum_theta theta^2`` over the given parameter tensors / arrays (float64 accumulation)."""
    total = 0.0
    for t in params:
        arr = t.detach().double().cpu().numpy() if hasattr(t, "detach") else np.asarray(t, float)
        total += float((arr.astype(np.float64) ** 2).sum())
    return total


def crossing_step(
    steps: Int[np.ndarray, " n"] | Sequence[int], values: Float[np.ndarray, " n"] | Sequence[float],
    threshold: float,
) -> float:
    """First step at which ``values`` falls to ``threshold`` or below, linear between checkpoints.

    Between the last checkpoint above the threshold and the next one, the step is interpolated
    linearly in the value. ``inf`` if the curve never gets there; ``steps[0]`` if it starts there.
    """
    s = np.asarray(steps, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if s.shape != v.shape or s.ndim != 1 or s.size == 0:
        raise DataError(f"steps {s.shape} and values {v.shape} must be equal-length 1-D arrays")
    below = np.flatnonzero(v <= threshold)
    if below.size == 0:
        return float("inf")
    i = int(below[0])
    if i == 0:
        return float(s[0])
    frac = (v[i - 1] - threshold) / (v[i - 1] - v[i])
    return float(s[i - 1] + frac * (s[i] - s[i - 1]))


def modular_logit_grid(model: Any, p: int, *, batch_size: int = 4096) -> Float[np.ndarray, "p p p"]:
    """Logits ``L[a, b, c]`` at the ``=`` token of ``"a b ="`` for all pairs (``=`` is token ``p``)."""
    import torch

    from ..interventions import run_with_interventions

    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    tokens = np.stack([a.ravel(), b.ravel(), np.full(p * p, p)], axis=1).tolist()
    chunks = []
    with torch.no_grad():
        for lo in range(0, len(tokens), batch_size):
            out = run_with_interventions(model, tokens[lo: lo + batch_size], [], logits="last")
            chunks.append(out.output[:, :p].double().cpu().numpy())
    return np.concatenate(chunks).reshape(p, p, p)


@dataclass(frozen=True, kw_only=True)
class ProgressPoint:
    """Progress measures of one checkpoint (losses are mean cross-entropy in nats).

    Attributes:
        step: training step of the checkpoint.
        train_loss, test_loss: loss of the full logits on the train / held-out pairs.
        restricted_loss: loss of the restricted logits (along ``path``) on ``restricted_split``
            pairs.
        excluded_loss: loss of the excluded logits (along ``path``) on the train pairs.
        train_acc, test_acc: argmax accuracy of the full logits.
        gini_embed, gini_neuron_logit: Gini of the Fourier-component norms of ``W_E`` and
            ``W_L = W_out W_U``.
        sum_sq_weights: total sum of squared weights.
        train_margin: mean logit margin on the train pairs.
        norm_per_margin: ``sqrt(sum_sq_weights) / train_margin`` (``inf`` if the margin <= 0).
        key_power_share: share of the non-constant sum-direction power of the logits held by
            the key frequencies (:func:`sum_direction_power`).
        pair_loss, restricted_pair_loss, excluded_pair_loss: per-pair losses ``(p, p)`` (for a
            bootstrap over pairs).
    """

    step: int
    train_loss: float
    test_loss: float
    restricted_loss: float
    excluded_loss: float
    train_acc: float
    test_acc: float
    gini_embed: float
    gini_neuron_logit: float
    sum_sq_weights: float
    train_margin: float
    norm_per_margin: float
    key_power_share: float
    pair_loss: np.ndarray = field(repr=False)
    restricted_pair_loss: np.ndarray = field(repr=False)
    excluded_pair_loss: np.ndarray = field(repr=False)


@dataclass(frozen=True, kw_only=True)
class CheckpointProgress:
    """One executor task: a checkpoint directory, its step, and what to measure it with."""

    path: str
    step: int
    keys: tuple[int, ...]
    train_mask: np.ndarray
    restricted_split: str = "all"
    loss_path: str = "neuron"


def _split_mask(name: str, train_mask: np.ndarray) -> np.ndarray:
    masks = {"all": np.ones_like(train_mask), "train": train_mask, "test": ~train_mask}
    if name not in masks:
        raise ConfigError(f"restricted_split {name!r}: use one of {sorted(masks)}")
    return masks[name]


def measure_grid(
    logits: Float[np.ndarray, "p p p"], model: Any, *, step: int, keys: Sequence[int],
    train_mask: Bool[np.ndarray, "p p"], restricted_split: str = "all", path: LossPath = "neuron",
    neurons: NeuronPath | None = None,
) -> ProgressPoint:
    """Every progress measure of one checkpoint from its logit grid and weights.

    ``path`` picks the restricted / excluded reading (module docstring); with ``"neuron"`` the
    neuron path is read from ``model`` unless ``neurons`` is given.
    """
    p = logits.shape[0]
    train_mask = np.asarray(train_mask, dtype=bool)
    if train_mask.shape != (p, p) or not train_mask.any() or train_mask.all():
        raise DataError(f"train_mask must be a (p, p) = ({p}, {p}) boolean grid with train and "
                        f"held-out pairs, got shape {train_mask.shape}")
    test_mask = ~train_mask
    loss = modular_pair_loss(logits)
    if path == "neuron" and neurons is None:
        neurons = neuron_path(model, p)
    r_loss = modular_pair_loss(ablated_logits(logits, keys, which="restricted", path=path,
                                              neurons=neurons))
    e_loss = modular_pair_loss(ablated_logits(logits, keys, which="excluded", path=path,
                                              neurons=neurons))
    margin = logit_margin(logits)
    power = sum_direction_power(logits)
    w_e = model.W_E.detach().double().cpu().numpy()[:p]
    w_l = (model.W_out[0].detach().double() @ model.W_U[:, :p].detach().double()).cpu().numpy()
    sq = sum_squared_weights(model.parameters())
    train_margin = float(margin[train_mask].mean())
    return ProgressPoint(
        step=int(step), train_loss=float(loss[train_mask].mean()),
        test_loss=float(loss[test_mask].mean()),
        restricted_loss=float(r_loss[_split_mask(restricted_split, train_mask)].mean()),
        excluded_loss=float(e_loss[train_mask].mean()),
        train_acc=float((margin[train_mask] > 0).mean()), test_acc=float((margin[test_mask] > 0).mean()),
        gini_embed=gini(fourier_component_norms(w_e)),
        gini_neuron_logit=gini(fourier_component_norms(w_l.T)),
        sum_sq_weights=sq, train_margin=train_margin,
        norm_per_margin=float(np.sqrt(sq) / train_margin) if train_margin > 0 else float("inf"),
        key_power_share=float(power[list(keys)].sum() / power[1:].sum()),
        pair_loss=loss, restricted_pair_loss=r_loss, excluded_pair_loss=e_loss,
    )


def checkpoint_progress(task: CheckpointProgress) -> ProgressPoint:
    """Load one checkpoint and measure it (module-level: an executor task)."""
    from ..models import load_checkpoint

    model = load_checkpoint(task.path)
    logits = modular_logit_grid(model, task.train_mask.shape[0])
    return measure_grid(logits, model, step=task.step, keys=task.keys, train_mask=task.train_mask,
                        restricted_split=task.restricted_split, path=task.loss_path)


@dataclass(frozen=True, kw_only=True, repr=False)
class ProgressSeries(NotebookMixin):
    """Progress measures over a checkpoint series, in step order.

    Attributes:
        p: the modulus.
        keys: the key frequencies (fixed over the series, as in Nanda et al.'s curves).
        points: one :class:`ProgressPoint` per checkpoint, ascending step.
        train_mask: ``(p, p)`` train pairs.
        restricted_split: the pairs the restricted loss is averaged over.
        path: ``"neuron"`` (Nanda et al.) or ``"logits"``: what the restricted / excluded
            logits project (module docstring).
    """

    p: int
    keys: tuple[int, ...]
    points: tuple[ProgressPoint, ...]
    train_mask: np.ndarray = field(repr=False)
    restricted_split: str = "all"
    path: str = "neuron"

    @property
    def steps(self) -> np.ndarray:
        """Checkpoint steps ``(n,)``."""
        return np.asarray([pt.step for pt in self.points])

    def curve(self, name: str) -> np.ndarray:
        """One measure over the series, e.g. ``curve("restricted_loss")`` ``(n,)``."""
        return np.asarray([getattr(pt, name) for pt in self.points], dtype=np.float64)

    def to_records(self) -> list[dict[str, Any]]:
        """One row per checkpoint: its step and every scalar progress measure."""
        names = [f.name for f in fields(ProgressPoint) if not f.name.endswith("pair_loss")]
        return [{n: (int(getattr(pt, n)) if n == "step" else float(getattr(pt, n)))
                 for n in names} for pt in self.points]

    def _blocks(self) -> tuple[Block, ...]:
        from ..report.blocks import Column, Table
        from .blocks import PROGRESS_COLUMNS, progress_plots

        table = Table(columns=(Column(key="step", header="step", fmt="d"),
                               *(Column(key=k, header=h, fmt=f) for k, h, f in PROGRESS_COLUMNS)),
                      rows=tuple(self.to_records()))
        return (*progress_plots(self), table)

    def _summary(self) -> str:
        first, last = self.points[0], self.points[-1]
        return (f"p={self.p}, keys {list(self.keys)}, {len(self.points)} checkpoints "
                f"(steps {first.step}..{last.step}); held-out loss {first.test_loss:.3g} -> "
                f"{last.test_loss:.3g}, restricted {first.restricted_loss:.3g} -> "
                f"{last.restricted_loss:.3g}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready curves (no per-pair arrays)."""
        names = ("train_loss", "test_loss", "restricted_loss", "excluded_loss", "train_acc",
                 "test_acc", "gini_embed", "gini_neuron_logit", "sum_sq_weights", "train_margin",
                 "norm_per_margin", "key_power_share")
        return {"p": self.p, "keys": list(self.keys), "path": self.path,
                "restricted_split": self.restricted_split, "steps": self.steps.tolist(),
                **{n: self.curve(n).tolist() for n in names}}


@shape_checked
def progress_measures(
    checkpoints: Sequence[tuple[int, str | Path]], *, train_mask: Bool[np.ndarray, "p p"],
    keys: Sequence[int] | None = None, n_keys: int = 5, restricted_split: str = "all",
    path: LossPath = "neuron", executor: Any = None,
) -> ProgressSeries:
    """Nanda et al.'s progress measures over ``(step, checkpoint_dir)`` pairs (any order).

    ``keys=None`` takes the ``n_keys`` frequencies with the most sum-direction power in the
    last checkpoint's logits (:func:`sum_direction_power`; one extra load of that checkpoint),
    held fixed over the series. ``path``: ``"neuron"`` (default, Nanda et al.'s restricted /
    excluded loss on the neuron path) or ``"logits"`` (full-logit projection).
    Checkpoints are measured one executor task each (:mod:`probekit.executor`).
    """
    from ..executor import get_executor
    from ..models import load_checkpoint

    if not checkpoints:
        raise DataError("progress_measures needs >= 1 checkpoint")
    if path not in PATHS:
        raise ConfigError(f"path={path!r}; choose 'neuron' (Nanda et al.) or 'logits'")
    ordered = sorted((int(s), str(d)) for s, d in checkpoints)
    train_mask = np.asarray(train_mask, dtype=bool)
    p = train_mask.shape[0]
    if keys is None:
        if not 1 <= n_keys <= (p - 1) // 2:
            raise ConfigError(f"n_keys={n_keys}: choose 1..{(p - 1) // 2} for p={p}")
        power = sum_direction_power(modular_logit_grid(load_checkpoint(ordered[-1][1]), p))
        keys = (np.argsort(-power[1:], kind="stable") + 1)[:n_keys]
    keys = tuple(_check_keys(keys, p))
    tasks = [CheckpointProgress(path=d, step=s, keys=keys, train_mask=train_mask,
                                restricted_split=restricted_split, loss_path=path)
             for s, d in ordered]
    points = get_executor(executor).map(checkpoint_progress, tasks, desc="checkpoints")
    return ProgressSeries(p=p, keys=keys, points=tuple(points), train_mask=train_mask,
                          restricted_split=restricted_split, path=path)
