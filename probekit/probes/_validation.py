"""Input checks shared by the probes: shapes, label counts, index splits.

Every error names the bad value, what was expected and how to fix it (CONTRIBUTING.md, "Code style": errors).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from ..errors import DataError, NonFiniteError
from ..util.device import resolve_device as resolve_device  # re-exported for the probes

IndexLike = Sequence[int] | np.ndarray | Tensor


def as_float_tensor(x: object, *, name: str = "acts", dtype: torch.dtype | None = None) -> Tensor:
    """Convert array-likes to a floating tensor (keeps device; ints are cast to float32)."""
    t = x if isinstance(x, Tensor) else torch.as_tensor(np.asarray(x))
    if not t.is_floating_point():
        t = t.to(torch.float32)
    if dtype is not None:
        t = t.to(dtype)
    check_finite(t, name=name)
    return t


def _rows_text(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:5])
    return f"{len(rows)} row(s) ({shown}{', ...' if len(rows) > 5 else ''})"


def check_finite(
    x: Tensor | np.ndarray, *, name: str = "acts", layer_names: Sequence[object] | None = None
) -> None:
    """Raise :class:`NonFiniteError` naming the layer(s) and rows where ``x`` has NaN/inf.

    ``x`` is ``(n, d)`` or ``(layer, n, d)``; rows are indices along ``n``.
    """
    bad = ~torch.isfinite(x) if isinstance(x, Tensor) else ~np.isfinite(x)
    if not bool(bad.any()):
        return
    bad = bad.detach().cpu().numpy() if isinstance(bad, Tensor) else np.asarray(bad)
    if bad.ndim == 3:
        lay = np.flatnonzero(bad.any((1, 2)))
        names = [layer_names[i] if layer_names is not None else int(i) for i in lay]
        where = f"layer(s) {names[:5]}{' ...' if len(names) > 5 else ''}, "
        rows = np.flatnonzero(bad[lay[0]].any(1))
    else:
        where = ""
        rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(1))
    raise NonFiniteError(
        f"{name} contains NaN or inf values at {where}{_rows_text(rows)}; expected finite "
        "activations: drop or impute those rows (or fix the capture, e.g. padding side / dtype)"
    )


def check_labels(labels: object, *, name: str = "labels") -> np.ndarray:
    """1-D label array without None/NaN entries; raise :class:`DataError` naming the rows."""
    lab = labels.detach().cpu().numpy() if isinstance(labels, Tensor) else np.asarray(labels)
    if lab.ndim != 1:
        raise DataError(
            f"expected 1-D {name}, got shape {lab.shape}; pass one label per activation row"
        )
    if lab.dtype.kind == "f":
        missing = np.flatnonzero(~np.isfinite(lab))
    elif lab.dtype.kind == "O":
        missing = np.flatnonzero(
            [v is None or (isinstance(v, float) and not np.isfinite(v)) for v in lab]
        )
    else:
        missing = np.zeros(0, dtype=np.int64)
    if missing.size:
        raise (NonFiniteError if lab.dtype.kind == "f" else DataError)(
            f"{name} are missing (None/NaN/inf) at {_rows_text(missing)}; label every row or "
            "drop the unlabelled rows before probing"
        )
    return lab


def check_layer_acts(acts: Tensor, *, name: str = "acts") -> Tensor:
    """Accept ``(n, d)`` or ``(layer, n, d)``; return ``(layer, n, d)``."""
    if acts.ndim == 2:
        return acts.unsqueeze(0)
    if acts.ndim != 3:
        raise DataError(
            f"expected {name} of shape (layer, n, d) or (n, d), got shape {tuple(acts.shape)}; "
            "flatten positions first, e.g. einops.rearrange(a, 'layer b p d -> layer (b p) d')"
        )
    return acts


def check_n_labels(n_acts: int, labels: np.ndarray | Tensor, *, what: str = "labels") -> None:
    """Raise if the number of labels differs from the number of activations."""
    n_lab = int(labels.shape[0])
    if n_lab != n_acts:
        raise DataError(
            f"got {n_acts} activations but {n_lab} {what}; pass exactly one label per activation "
            "row (same order as the activations)"
        )


def check_indices(idx: IndexLike, n: int, *, name: str) -> np.ndarray:
    """Convert a split to a 1-D int64 index array and check its range."""
    if isinstance(idx, Tensor):
        idx = idx.detach().cpu().numpy()
    arr = np.asarray(idx)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise DataError(
                f"boolean mask {name} has shape {arr.shape} but there are {n} examples; "
                "pass a mask of length n or integer indices"
            )
        arr = np.flatnonzero(arr)
    if arr.size == 0:
        raise DataError(f"split {name!r} is empty; it needs at least one example index")
    if arr.dtype.kind not in "iu":
        shown = ", ".join(repr(v) for v in arr.reshape(-1)[:3].tolist())
        raise DataError(
            f"split {name!r} holds {arr.dtype} values ({shown}, ...), not integer indices; "
            "pass integer row indices (e.g. np.asarray(idx, dtype=np.int64)) or a boolean mask"
        )
    arr = arr.astype(np.int64).reshape(-1)
    if arr.min() < 0 or arr.max() >= n:
        raise DataError(
            f"split {name!r} has indices in [{arr.min()}, {arr.max()}] but there are only {n} "
            f"examples; indices must lie in [0, {n - 1}]"
        )
    values, counts = np.unique(arr, return_counts=True)
    if (counts > 1).any():
        dup = values[counts > 1]
        raise DataError(
            f"split {name!r} lists index {int(dup[0])} {int(counts[counts > 1][0])} times "
            f"({dup.size} duplicated index(es)); a repeated row would be counted twice: pass each "
            "row once (np.unique(idx))"
        )
    return arr


def check_disjoint(train: np.ndarray, test: np.ndarray, *, what: str = "probe") -> None:
    """Refuse a test split that shares rows with the training split (a leaked score).

    Raises:
        DataError: naming how many rows and the first shared index.
    """
    both = np.intersect1d(train, test)
    if both.size:
        raise DataError(
            f"train and test splits share {both.size} row(s) (first: index {int(both[0])}); the "
            f"{what} would be scored on rows it was fit on: pass disjoint train_idx and test_idx"
        )


def validate_finite(estimator: object, X: object, y: object = "no_validation", **kwargs: object):
    """``sklearn.utils.validation.validate_data`` with probekit's NaN/inf and missing-label errors.

    Returns what ``validate_data`` returns (``X`` or ``(X, y)``).
    """
    from sklearn.utils.validation import validate_data

    if not (isinstance(y, str) and y == "no_validation") and y is not None:
        ya = np.asarray(y)
        n_x = getattr(X, "shape", (None,))[0] if hasattr(X, "shape") else None
        if n_x is not None and ya.ndim >= 1 and ya.shape[0] != n_x:
            raise DataError(f"got {n_x} activation rows but {ya.shape[0]} labels; pass one label "
                            "per row of X, in the same order")
        if ya.ndim == 1:
            check_labels(ya, name="y")
        elif ya.dtype.kind == "f":
            check_finite(ya, name="y")
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] == 0:
        raise DataError(
            f"Found array with 0 feature(s) (shape={tuple(shape)}) while a minimum of 1 is "
            f"required by {type(estimator).__name__}: the activations have no feature column; "
            "pass (n, d) activations with d >= 1 (check the site or the feature slice)"
        )
    out = validate_data(estimator, X, y, ensure_all_finite=False, **kwargs)
    check_finite(out[0] if isinstance(out, tuple) else out, name="X")
    return out


def check_class_targets(y: np.ndarray, *, estimator: str) -> None:
    """Refuse labels that are not classes (continuous floats, multi-output), naming the fix.

    scikit-learn's ``type_of_target`` decides; the message keeps its "Unknown label type" words
    (sklearn's estimator checks match them) and adds the fix.

    Raises:
        DataError: (a ``ValueError``) ``y`` is a regression target or otherwise not class labels.
    """
    from sklearn.utils.multiclass import type_of_target

    kind = type_of_target(y, input_name="y")
    if kind not in ("binary", "multiclass"):
        example = ", ".join(repr(v) for v in np.asarray(y).ravel()[:3].tolist())
        raise DataError(
            f"{estimator}: Unknown label type: {kind} (labels {example}, ...): it is a classifier "
            "and needs discrete class labels; for a continuous target use RidgeProbe "
            "(`kind = \"ridge\"` in a suite), or bin the values into classes"
        )
