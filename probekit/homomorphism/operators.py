"""Composition operators ``f([a; b]) ~ target``: (pair, 2d) -> (pair, d) estimators.

An & Du (2026, arXiv 2601.18858) fit three operator families to pairs of part states ``(a, b)``
and their composite ``c`` [C]: affine ``c ~ [a; b] W + w0``, "bilinear" (affine on
``[a; b; a*b]``) and an MLP ``2d -> 512 (GELU) -> d``. All three are scikit-learn-style estimators
here. ``X`` is ``(pair, 2d)`` or, batched over layers, ``(layer, pair, 2d)``; ``Y`` is
``(pair, d)`` or ``(layer, pair, d)``. Layers are independent problems solved in one pass: by
default [C]'s procedure (``solver="adam"``: one Adam run whose element-wise updates on a
``(layer, ...)`` parameter stack equal separate runs per layer), or, for the linear families,
``solver="closed_form_ridge"``: exact (ridge) least squares. The closed form gives HE = 0 by
construction for [C]'s target ``(a + b) / 2``, which is linear in ``[a; b]``; [C]'s number is the
residual of its short Adam fit (it scales with the square of the state size).
"""

from __future__ import annotations

import math
import typing

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Float
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.metrics import r2_score
from torch import Tensor

from ..errors import ConfigError, DataError, NonFiniteError
from ..progress import track
from ..shapes import shape_checked
from ..util.threads import small_work_threads
from .config import Family, Solver

SOLVERS: tuple[str, ...] = typing.get_args(Solver)
FAMILIES: tuple[Family, ...] = typing.get_args(Family)


def _as_stack(x: object, name: str) -> tuple[Tensor, bool]:
    """``x`` as a float64 ``(layer, pair, f)`` tensor, and whether it came without a layer axis."""
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, Tensor) else x)
    if t.ndim not in (2, 3):
        raise DataError(
            f"{name} has shape {tuple(t.shape)}; expected (pair, features) or "
            "(layer, pair, features)"
        )
    t = t.detach().to(torch.float64)
    if not torch.isfinite(t).all():
        raise NonFiniteError(f"{name} contains NaN/inf; drop or repair those pairs first")
    return (t[None], True) if t.ndim == 2 else (t, False)


def _check_xy(X: Tensor, Y: Tensor) -> None:
    if X.shape[:2] != Y.shape[:2]:
        raise DataError(
            f"X has (layer, pair) = {tuple(X.shape[:2])} but Y has {tuple(Y.shape[:2])}; give one "
            "target row per input pair and the same layers"
        )
    if X.shape[-1] % 2:
        raise DataError(f"X has {X.shape[-1]} features; expected [a; b] with 2d features")
    if X.shape[1] < 2:
        raise DataError(f"need at least 2 pairs to fit an operator, got {X.shape[1]}")


def bilinear_features(X: Float[Tensor, "*batch pair twod"]) -> Float[Tensor, "*batch pair threed"]:
    """``[a; b] -> [a; b; a*b]`` (An & Du 2026 [C] ``BilinearConcatOp``)."""
    d = X.shape[-1] // 2
    return torch.cat([X, X[..., :d] * X[..., d:]], dim=-1)


@shape_checked
def ridge_fit(
    X: Float[Tensor, "layer pair p"], Y: Float[Tensor, "layer pair d"], alpha: float
) -> tuple[Float[Tensor, "layer p d"], Float[Tensor, "layer d"]]:
    """Closed-form ridge with an unpenalised intercept, batched over layers.

    ``W = (Xc^T Xc + alpha I)^-1 Xc^T Yc`` on centred data, ``w0 = ybar - xbar W``; equal to
    ``sklearn.linear_model.Ridge(alpha, fit_intercept=True)`` per layer (Hoerl & Kennard 1970).
    """
    if X.ndim != 3 or Y.ndim != 3 or X.shape[:2] != Y.shape[:2]:
        raise DataError(f"X {tuple(X.shape)} and Y {tuple(Y.shape)} must be (layer, pair, p) and "
                        "(layer, pair, d) with the same layers and pairs; pass one target row per input row")
    if not alpha >= 0:
        raise ConfigError(f"alpha={alpha!r}: the ridge penalty must be >= 0 (1e-3 is usual)")
    xm, ym = X.mean(1, keepdim=True), Y.mean(1, keepdim=True)
    Xc, Yc = X - xm, Y - ym
    n, p = X.shape[1], X.shape[2]
    if n <= p:  # dual form: (Xc^T Xc + aI)^-1 Xc^T = Xc^T (Xc Xc^T + aI)^-1, n x n system
        gram = Xc @ Xc.transpose(1, 2) + alpha * torch.eye(n, dtype=X.dtype, device=X.device)
        W = Xc.transpose(1, 2) @ torch.linalg.solve(gram, Yc)
    else:
        gram = Xc.transpose(1, 2) @ Xc + alpha * torch.eye(p, dtype=X.dtype, device=X.device)
        W = torch.linalg.solve(gram, Xc.transpose(1, 2) @ Yc)
    return W, (ym - xm @ W)[:, 0]


def _uniform(shape: tuple[int, ...], fan_in: int, gen: torch.Generator) -> Tensor:
    """``nn.Linear``'s default init distribution ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``."""
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * bound


def adam_fit(
    X: Float[Tensor, "layer pair p"],
    Y: Float[Tensor, "layer pair d"],
    *,
    hidden: int | None,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    seed: int,
    dtype: torch.dtype = torch.float32,
) -> list[Tensor]:
    """[C]'s operator fit: Adam on the MSE, minibatches in order (no shuffling), per layer.

    ``hidden=None`` fits an affine map; else ``p -> hidden (GELU) -> d``. Parameters are stacked
    over layers (each layer from the same seeded init) and the loss is the sum of the per-layer
    MSEs, so each layer's Adam trajectory is the one it would have alone (Adam is element-wise).
    """
    L, n, p = X.shape
    d = Y.shape[2]
    gen = torch.Generator().manual_seed(seed)
    shapes = [(p, d), (d,)] if hidden is None else [(p, hidden), (hidden,), (hidden, d), (d,)]
    fans = [p, p] if hidden is None else [p, p, hidden, hidden]
    # every layer starts from the same seeded init, so a layer's fit equals its one-layer run
    init = [_uniform(s, f, gen).to(dtype) for s, f in zip(shapes, fans)]
    params = [w.expand(L, *w.shape).clone().requires_grad_() for w in init]
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    Xd, Yd = X.to(dtype), Y.to(dtype)
    # thousands of minibatch steps of small matmuls (largest: 2 L batch p width flops): on one
    # thread when that is small, else OpenMP's barriers spin against a busy core (util.threads)
    width = d if hidden is None else max(hidden, d)
    with small_work_threads(work=2 * L * min(batch_size, n) * max(p, width) * width):
        for _ in track(range(epochs), desc="operator fit (Adam)", unit="epoch"):
            for lo in range(0, n, batch_size):
                pred = mlp_forward(params, Xd[:, lo : lo + batch_size])
                loss = ((pred - Yd[:, lo : lo + batch_size]) ** 2).mean(dim=(1, 2)).sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return [q.detach() for q in params]


def mlp_forward(
    params: list[Tensor], X: Float[Tensor, "layer pair p"]
) -> Float[Tensor, "layer pair d"]:
    """Forward of a layer-stacked affine (2 tensors) or one-hidden-layer GELU MLP (4 tensors)."""
    h = X @ params[0] + params[1][:, None]
    if len(params) == 2:
        return h
    return F.gelu(h) @ params[2] + params[3][:, None]


class _Operator(RegressorMixin, BaseEstimator):
    """Shared fit/predict/score plumbing; subclasses define the features and the solver."""

    def _features(self, X: Tensor) -> Tensor:
        return X

    def _fit_stack(self, F_: Tensor, Y: Tensor) -> None:
        raise NotImplementedError

    def _predict_stack(self, F_: Tensor) -> Tensor:
        raise NotImplementedError

    def fit(self, X: object, Y: object) -> _Operator:
        """Fit on ``X = [a; b]`` ``(pair, 2d)`` or ``(layer, pair, 2d)`` and targets ``Y``."""
        Xs, flat = _as_stack(X, "X")
        Ys, _ = _as_stack(Y, "Y")
        _check_xy(Xs, Ys)
        self._fit_stack(self._features(Xs), Ys)
        self.n_features_in_ = int(Xs.shape[-1])
        self.batched_ = not flat
        if flat:  # sklearn shapes for one problem: coef_ (p, d), intercept_ (d,)
            for name in ("coef_", "intercept_"):
                if hasattr(self, name):
                    setattr(self, name, getattr(self, name)[0])
        return self

    def predict(self, X: object) -> np.ndarray:
        """Predicted composites, same leading shape as ``X``."""
        return self.predict_tensor(X).numpy()

    def predict_tensor(self, X: object) -> Tensor:
        """Like :meth:`predict` but a float64 tensor."""
        if not hasattr(self, "n_features_in_"):
            raise ConfigError(f"{type(self).__name__} is not fitted; call fit(X, Y) first")
        Xs, flat = _as_stack(X, "X")
        if Xs.shape[-1] != self.n_features_in_:
            raise DataError(
                f"X has {Xs.shape[-1]} features but the operator was fit on {self.n_features_in_}"
            )
        out = self._predict_stack(self._features(Xs)).to(torch.float64)
        return out[0] if flat else out

    def score(self, X: object, y: object, sample_weight: object = None) -> float:
        """``R^2`` as ``sklearn.metrics.r2_score`` (mean over outputs; over layers if batched)."""
        Ys, _ = _as_stack(y, "y")
        pred = self.predict_tensor(X)
        pred = pred[None] if pred.ndim == 2 else pred
        return float(np.mean([
            r2_score(Ys[i].numpy(), pred[i].numpy(), sample_weight=sample_weight)
            for i in range(Ys.shape[0])
        ]))


class AffineOperator(_Operator):
    """``c ~ [a; b] W + w0`` (An & Du 2026 [C] ``LinearOp``).

    Args:
        alpha: ridge penalty on ``W`` (``solver="closed_form_ridge"``).
        solver: ``"adam"`` (default, [C]: Adam lr 1e-3, weight decay 1e-6, batch 128, 50
            epochs, no shuffling) or ``"closed_form_ridge"`` (exact least squares with a small
            ridge penalty; 0 error by construction for [C]'s linear target ``(a + b) / 2``).
        epochs, batch_size, lr, weight_decay, random_state: the Adam schedule and init seed.
    """

    def __init__(
        self, *, alpha: float = 1e-3, solver: str = "adam", epochs: int = 50,
        batch_size: int = 128, lr: float = 1e-3, weight_decay: float = 1e-6,
        random_state: int = 0,
    ) -> None:
        self.alpha = alpha
        self.solver = solver
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.random_state = random_state

    def _fit_stack(self, F_: Tensor, Y: Tensor) -> None:
        if self.solver == "closed_form_ridge":
            if not self.alpha >= 0:
                raise ConfigError(f"alpha must be >= 0, got {self.alpha!r}")
            self.coef_, self.intercept_ = ridge_fit(F_, Y, float(self.alpha))
        elif self.solver == "adam":
            self.coef_, self.intercept_ = adam_fit(
                F_, Y, hidden=None, epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                weight_decay=self.weight_decay, seed=self.random_state,
            )
        else:
            raise ConfigError(f"solver={self.solver!r}; choose 'adam' ([C]) or "
                              "'closed_form_ridge' (exact least squares)")

    def _predict_stack(self, F_: Tensor) -> Tensor:
        W, b = self.coef_.to(F_.dtype), self.intercept_.to(F_.dtype)
        if not self.batched_:
            W, b = W[None], b[None]
        if W.shape[0] != F_.shape[0]:
            raise DataError(f"X has {F_.shape[0]} layers but the operator was fit on {W.shape[0]}")
        return F_ @ W + b[:, None]


class BilinearOperator(AffineOperator):
    """Affine map on ``[a; b; a*b]`` (An & Du 2026 [C] ``BilinearConcatOp``); same knobs."""

    def _features(self, X: Tensor) -> Tensor:
        return bilinear_features(X)


class MLPOperator(_Operator):
    """``c ~ W2 GELU(W1 [a; b] + b1) + b2`` (An & Du 2026 [C] ``MLPOp``, hidden ``max(4d, 128)``).

    Args:
        hidden: hidden width; None = ``max(4 d, 128)`` as [C] (512 for d = 128).
        epochs, batch_size, lr, weight_decay: [C]: 50 epochs, batch 128, Adam lr 1e-3, wd 1e-6,
            minibatches in pair order (no shuffling).
        random_state: seed of the ``nn.Linear``-style initialisation.
    """

    def __init__(
        self, *, hidden: int | None = None, epochs: int = 50, batch_size: int = 128,
        lr: float = 1e-3, weight_decay: float = 1e-6, random_state: int = 0,
    ) -> None:
        self.hidden = hidden
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.random_state = random_state

    def _fit_stack(self, F_: Tensor, Y: Tensor) -> None:
        d = Y.shape[-1]
        hidden = self.hidden if self.hidden is not None else max(4 * d, 128)
        self.params_ = adam_fit(
            F_, Y, hidden=hidden, epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
            weight_decay=self.weight_decay, seed=self.random_state,
        )

    def _predict_stack(self, F_: Tensor) -> Tensor:
        if self.params_[0].shape[0] != F_.shape[0]:
            raise DataError(
                f"X has {F_.shape[0]} layers but the operator was fit on {self.params_[0].shape[0]}"
            )
        with torch.no_grad():
            return mlp_forward(self.params_, F_.to(self.params_[0].dtype))


def make_operator(
    family: str, *, solver: Solver = "adam", alpha: float = 1e-3, seed: int = 0
) -> _Operator:
    """The estimator of one family name (``affine``, ``bilinear`` or ``mlp``)."""
    if not alpha >= 0:
        raise ConfigError(f"alpha={alpha!r}: the ridge penalty must be >= 0 (1e-3 is usual)")
    if family == "affine":
        return AffineOperator(alpha=alpha, solver=solver, random_state=seed)
    if family == "bilinear":
        return BilinearOperator(alpha=alpha, solver=solver, random_state=seed)
    if family == "mlp":
        return MLPOperator(random_state=seed)
    raise ConfigError(f"unknown operator family {family!r}; choose from {list(FAMILIES)}")
