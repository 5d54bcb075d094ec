"""Permutation tests for probe scores (labels shuffled, probe refit).

p-value (Phipson & Smyth 2010; probes.md): ``p = (1 + #{null >= observed}) / (1 + n_perm)``,
which is exact-level (never below the true p) for any number of permutations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
from jaxtyping import Float

from .result import StatTestResult

__all__ = ["permutation_pvalue", "permutation_test", "probe_permutation_test"]

Alternative = Literal["greater", "less", "two-sided"]


def permutation_pvalue(
    observed: float, null: Float[np.ndarray, " n_perm"], alternative: Alternative = "greater"
) -> float:
    """``(1 + #{null at least as extreme}) / (1 + n_perm)``.

    ``"two-sided"`` measures extremeness as ``|s - mean(null)|``.
    """
    null = np.asarray(null, dtype=np.float64)
    if alternative == "greater":
        k = np.count_nonzero(null >= observed)
    elif alternative == "less":
        k = np.count_nonzero(null <= observed)
    elif alternative == "two-sided":
        c = null.mean()
        k = np.count_nonzero(np.abs(null - c) >= abs(observed - c))
    else:
        raise ValueError(
            f"alternative must be 'greater', 'less' or 'two-sided', got {alternative!r}"
        )
    return float((1 + k) / (1 + null.size))


def _result(observed: float, null: np.ndarray, n: int, method: str, alt: Alternative):
    sd = null.std(ddof=1) if null.size > 1 else np.nan
    return StatTestResult(
        statistic=float(observed),
        p_value=permutation_pvalue(observed, null, alt),
        n=n,
        method=method,
        alternative=alt,
        effect_size=float((observed - null.mean()) / sd) if sd and sd > 0 else np.nan,
        effect_size_name="z_vs_null",
        null_distribution=null,
    )


def _check_perm(n_permutations: int) -> None:
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")


def permutation_test(
    score_fn: Callable[[np.ndarray, np.ndarray], float],
    X: np.ndarray,
    y: np.ndarray,
    *,
    n_permutations: int = 1000,
    alternative: Alternative = "greater",
    random_state: int | np.random.Generator | None = 0,
) -> StatTestResult:
    """Generic permutation test of ``score_fn(X, y)`` against ``score_fn(X, permuted y)``.

    ``score_fn`` must do the whole pipeline (fit on a training part, score on a held-out part)
    so that every permutation refits the probe.
    """
    _check_perm(n_permutations)
    y = np.asarray(y)
    if len(X) != len(y):
        raise ValueError(f"got {len(X)} activations but {len(y)} labels")
    rng = np.random.default_rng(random_state)
    observed = float(score_fn(X, y))
    null = np.array([float(score_fn(X, rng.permutation(y))) for _ in range(n_permutations)])
    return _result(observed, null, len(y), "permutation test", alternative)


def probe_permutation_test(
    acts: Float[np.ndarray, "n d"] | torch.Tensor,
    labels: np.ndarray,
    *,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    probe: Literal["logistic", "diffmeans"] = "logistic",
    C: float | None = None,
    Cs: int = 10,
    cv: int = 5,
    n_permutations: int = 1000,
    batch_size: int = 250,
    random_state: int | None = 0,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device | None = None,
) -> StatTestResult:
    """Batched permutation test of a probe's test score (accuracy; AUROC for diffmeans).

    Every permutation shuffles all labels, refits on ``train_idx`` and scores on ``test_idx``;
    the permutations are extra problems of one batched solve (``fit_logistic_batched`` with a
    label row per problem), ``batch_size`` at a time. The logistic ``C`` is fixed across
    permutations: given, or chosen once by CV on the real training labels (training data only,
    so the test split stays untouched). ``device`` (``"auto"``, ``"cuda"``, ...) runs the refits
    there; the default is the CPU.
    """
    from ..probes._validation import check_indices, check_n_labels, resolve_device
    from ..probes.logistic import LogisticProbe, fit_logistic_batched
    from ..probes.metrics import auroc

    _check_perm(n_permutations)
    X = acts.detach().cpu().numpy() if isinstance(acts, torch.Tensor) else np.asarray(acts)
    X = X.astype(np.float64)
    lab = np.asarray(labels)
    check_n_labels(X.shape[0], lab)
    n = X.shape[0]
    tr = check_indices(train_idx, n, name="train")
    te = check_indices(test_idx, n, name="test")
    classes, codes = np.unique(lab, return_inverse=True)
    rng = np.random.default_rng(random_state)
    perms = np.stack([codes] + [rng.permutation(codes) for _ in range(n_permutations)])
    scores = np.empty(n_permutations + 1)

    if probe == "diffmeans":
        if len(classes) != 2:
            raise ValueError(f"probe='diffmeans' needs 2 classes, got {len(classes)}")
        for s in range(0, len(perms), batch_size):
            yy = perms[s : s + batch_size]  # (B, n)
            pos = yy[:, tr].astype(np.float64)
            mu1 = pos @ X[tr] / pos.sum(1, keepdims=True)
            mu0 = (1 - pos) @ X[tr] / (1 - pos).sum(1, keepdims=True)
            w, mu = mu1 - mu0, 0.5 * (mu1 + mu0)
            sc = np.einsum("nd,bd->bn", X[te], w) - (mu * w).sum(1, keepdims=True)
            scores[s : s + len(yy)] = auroc(sc, yy[:, te])
        method = "permutation test (diff-of-means AUROC)"
    elif probe == "logistic":
        if C is None:
            C = LogisticProbe(Cs=Cs, cv=cv).fit(X[tr], lab[tr]).C_
        m, sd = X[tr].mean(0), X[tr].std(0)
        sd[sd == 0] = 1.0
        dev = resolve_device(device) or torch.device("cpu")
        Xtr = torch.as_tensor((X[tr] - m) / sd, dtype=dtype, device=dev).unsqueeze(0)
        Xte = torch.as_tensor((X[te] - m) / sd, dtype=dtype, device=dev).unsqueeze(0)
        for s in range(0, len(perms), batch_size):
            yy = torch.as_tensor(perms[s : s + batch_size], device=dev)
            B = yy.shape[0]
            fit = fit_logistic_batched(
                Xtr,
                yy[:, tr],
                len(classes),
                train_mask=torch.ones(B, len(tr), dtype=torch.bool, device=dev),
                C=torch.full((B,), float(C), dtype=torch.float64, device=dev),
                target_index=torch.arange(B, device=dev),
            )
            pred = fit.predict_codes(Xte)[0]  # (n_te, B)
            scores[s : s + B] = (pred == yy[:, te].T).double().mean(0).cpu().numpy()
        method = f"permutation test (logistic accuracy, C={C:.3g})"
    else:
        raise ValueError(f"probe must be 'logistic' or 'diffmeans', got {probe!r}")
    return _result(scores[0], scores[1:], n, method, "greater")
