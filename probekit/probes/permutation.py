"""Batched permutation test of a probe's held-out score (labels shuffled, probe refit).

p-value ``(1 + #{null >= observed}) / (1 + n_perm)`` (Phipson & Smyth 2010), via
:func:`probekit.stats.permutation_result`. Every permutation is an extra problem of one batched
solve, so 1000 refits cost about as much as a few dozen separate fits (probes.md).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from jaxtyping import Float

from ..errors import ConfigError, DataError
from ..progress import track
from ..stats.permutation import check_n_permutations, permutation_result
from ..stats.result import StatTestResult
from ..util.device import resolve_device
from ..util.numeric import diff_of_means, standardization, standardize
from ._validation import check_indices, check_n_labels
from .logistic import LogisticProbe, fit_logistic_batched
from .metrics import auroc
from .splits import check_class_splits

__all__ = ["probe_permutation_test"]


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

    Raises:
        DataError: a degenerate split (:func:`~probekit.probes.splits.check_class_splits`): one
            training class, a single test class, a test class absent from training or a class
            with one training example; the test could only "reject" spuriously there.
    """
    check_n_permutations(n_permutations)
    if probe not in ("logistic", "diffmeans"):
        raise ConfigError(f"probe must be 'logistic' or 'diffmeans', got {probe!r}")
    X = acts.detach().cpu().numpy() if isinstance(acts, torch.Tensor) else np.asarray(acts)
    X = X.astype(np.float64)
    lab = np.asarray(labels)
    check_n_labels(X.shape[0], lab)
    n = X.shape[0]
    tr = check_indices(train_idx, n, name="train")
    te = check_indices(test_idx, n, name="test")
    split = check_class_splits(lab, tr, te, name="labels")  # one train class: DataError
    if not split.testable:  # a permutation null would "reject" for a probe that learned nothing
        raise DataError(split.problems[0])
    classes, codes = np.unique(lab, return_inverse=True)
    rng = np.random.default_rng(random_state)
    perms = np.stack([codes] + [rng.permutation(codes) for _ in range(n_permutations)])
    scores = np.empty(n_permutations + 1)
    refits = dict(desc="permutation test", unit="refit", total=len(perms),
                  weight=lambda s: min(batch_size, len(perms) - s))

    if probe == "diffmeans":
        if len(classes) != 2:
            raise DataError(f"probe='diffmeans' needs 2 classes, got {len(classes)}; use "
                            "probe='logistic'")
        for s in track(range(0, len(perms), batch_size), **refits):
            yy = perms[s : s + batch_size]  # (B, n)
            w, mu = diff_of_means(X[tr], yy[:, tr] == 1)  # (B, d) each
            sc = np.einsum("nd,bd->bn", X[te], w) - (mu * w).sum(1, keepdims=True)
            scores[s : s + len(yy)] = auroc(sc, yy[:, te])
        method = "permutation test (diff-of-means AUROC)"
    elif probe == "logistic":
        if C is None:
            C = LogisticProbe(Cs=Cs, cv=cv).fit(X[tr], lab[tr]).C_
        m, sd = standardization(X[tr])
        dev = resolve_device(device) or torch.device("cpu")
        Xtr = torch.as_tensor(standardize(X[tr], m, sd), dtype=dtype, device=dev).unsqueeze(0)
        Xte = torch.as_tensor(standardize(X[te], m, sd), dtype=dtype, device=dev).unsqueeze(0)
        for s in track(range(0, len(perms), batch_size), **refits):
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
        raise ConfigError(f"probe must be 'logistic' or 'diffmeans', got {probe!r}")
    return permutation_result(scores[0], scores[1:], n, method, "greater")
