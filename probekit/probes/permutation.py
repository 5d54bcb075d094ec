"""Batched permutation test of a probe's held-out score (labels shuffled, probe refit).

p-value ``(1 + #{null >= observed}) / (1 + n_perm)`` (Phipson & Smyth 2010), via
:func:`probekit.stats.permutation_result`. Every permutation is an extra problem of one batched
solve, so 1000 refits cost about as much as a few dozen separate fits (probes.md).
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Float

from ..errors import ConfigError, DataError
from ..shapes import shape_checked
from ..stats.permutation import check_n_permutations, check_seed, permutation_result
from ..stats.result import StatTestResult
from ._validation import check_disjoint, check_indices, check_n_labels
from .kind import probe_kind, registered_probe_kinds
from .splits import check_class_splits

__all__ = ["probe_permutation_test"]


@shape_checked
def probe_permutation_test(
    acts: Float[np.ndarray, "n d"] | torch.Tensor,
    labels: np.ndarray,
    *,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    probe: str = "logistic",
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

    ``probe`` is a registered kind with ``supports_permutation`` (built in: ``logistic``,
    ``diffmeans``); its :meth:`~probekit.probes.kind.ProbeKind.permutation_scores` refits it.
    Every permutation shuffles all labels, refits on ``train_idx`` and scores on ``test_idx``;
    the permutations are extra problems of one batched solve (``fit_logistic_batched`` with a
    label row per problem), ``batch_size`` at a time. The logistic ``C`` is fixed across
    permutations: given, or chosen once by CV on the real training labels (training data only,
    so the test split stays untouched). ``device`` (``"auto"``, ``"cuda"``, ...) runs the refits
    there; the default is the CPU.

    Raises:
        ConfigError: ``n_permutations`` not a whole number >= 1, ``random_state`` negative.
        DataError: duplicated, non-integer or overlapping ``train_idx`` / ``test_idx``; no
            features; a degenerate split (:func:`~probekit.probes.splits.check_class_splits`): one
            training class, a single test class, a test class absent from training or a class
            with one training example; the test could only "reject" spuriously there.
    """
    check_n_permutations(n_permutations)
    check_seed(random_state, name="random_state", allow_none=True)
    kind = probe_kind(probe)
    if not kind.supports_permutation:
        with_test = [k for k in registered_probe_kinds() if probe_kind(k).supports_permutation]
        raise ConfigError(f"probe must be one of {with_test} (kinds with a permutation test), "
                          f"got {probe!r}")
    X = acts.detach().cpu().numpy() if isinstance(acts, torch.Tensor) else np.asarray(acts)
    X = X.astype(np.float64)
    lab = np.asarray(labels)
    check_n_labels(X.shape[0], lab)
    n = X.shape[0]
    tr = check_indices(train_idx, n, name="train")
    te = check_indices(test_idx, n, name="test")
    check_disjoint(tr, te, what="permutation test's probe")
    if X.ndim != 2 or X.shape[1] == 0:
        raise DataError(f"acts must be (n, d) with d >= 1 features, got shape {X.shape}; pass "
                        "one activation row per example")
    split = check_class_splits(lab, tr, te, name="labels")  # one train class: DataError
    if not split.testable:  # a permutation null would "reject" for a probe that learned nothing
        raise DataError(split.problems[0])
    _, codes = np.unique(lab, return_inverse=True)
    rng = np.random.default_rng(random_state)
    perms = np.stack([codes] + [rng.permutation(codes) for _ in range(n_permutations)])
    scores, method = kind.permutation_scores(
        X, lab, perms, tr, te, hyperparameter=C, Cs=Cs, cv=cv, batch_size=batch_size,
        dtype=dtype, device=device,
    )
    return permutation_result(scores[0], scores[1:], n, method, "greater")
