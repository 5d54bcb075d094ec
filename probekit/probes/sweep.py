"""Batched layer sweeps: one probe per (site, layer) fit in a single torch pass.

For every row (a ``(site, layer)`` pair) the sweep reports the metric on the training split,
on validation (mean over the CV folds of the training split; this is what picks the
hyper-parameter *and* the best layer), on the test split with a percentile-bootstrap CI, and on
each named OOD split together with the ID-OOD gap ``test - ood``. The best layer is chosen on
validation and reported on test (probes.md: "best layer chosen on validation, reported on test").

The probe family is a registered :class:`~probekit.probes.kind.ProbeKind` (``SweepConfig.probe``):

* ``probe="logistic"``: multinomial L2 logistic, standardised with training statistics,
  C by stratified k-fold CV; metric accuracy. All ``layer x fold x C`` problems are one
  batched L-BFGS (``cv_logistic_batched``); runs on CUDA when ``acts`` is on CUDA.
* ``probe="ridge"``: standardised closed-form ridge, alpha by k-fold CV R^2; metric R^2.
* ``probe="diffmeans"``: raw-activation difference of means, binary labels; metric AUROC.

A new kind is one module registering a ``ProbeKind`` (:mod:`probekit.probes.kind`); the sweep
names none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import DataError
from ..progress import track
from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ..shapes import shape_checked
from ..stats.bootstrap import MIN_RESAMPLES, bootstrap_indices, percentile_interval
from ..util.constraints import Between, Ge, Gt, check_value, validate
from ._validation import (
    IndexLike,
    as_float_tensor,
    check_indices,
    check_labels,
    check_layer_acts,
    check_n_labels,
    resolve_device,
)
from .kind import probe_kind

__all__ = ["SweepConfig", "SweepResult", "sweep_layers"]


@dataclass(frozen=True, kw_only=True, repr=False)
class SweepResult(NotebookMixin):
    """Per-row (site, layer) metrics of a layer sweep; arrays are indexed by row.

    Attributes:
        probe, metric: probe kind and its metric (``accuracy``/``r2``/``auroc``).
        sites, layers: row labels: site (hook) name and block layer. Rows of a ``(layer, n, d)``
            stack get their index in it; a 2-D site gets its own layer when the mapping key is a
            ``Site`` (``None`` for model-level sites and for plain string keys; never a fake 0).
        train, val, test: metric on the training split, CV validation, test split.
        test_ci_low, test_ci_high: percentile-bootstrap CI of the test metric.
        ood, ood_ci_low, ood_ci_high: per named OOD split.
        ood_gap: ``test - ood`` per OOD split.
        hyperparameter: selected C (logistic) / alpha (ridge) per row; NaN for diffmeans.
        converged: logistic: the final fit of the row reached ``max|grad|/n <= tol`` (closed-form
            probes: always True); unconverged fits also raise a ``ConvergenceWarning``.
        best_row: argmax of ``val`` (first on ties).
        test_predictions: ``(row, n_test)`` predicted labels (logistic), values (ridge) or
            scores (diffmeans).
        confidence_level, n_bootstrap: CI settings.
    """

    probe: str
    metric: str
    sites: tuple[str, ...]
    layers: tuple[int | None, ...]
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    test_ci_low: np.ndarray
    test_ci_high: np.ndarray
    ood: Mapping[str, np.ndarray] = field(default_factory=dict)
    ood_ci_low: Mapping[str, np.ndarray] = field(default_factory=dict)
    ood_ci_high: Mapping[str, np.ndarray] = field(default_factory=dict)
    ood_gap: Mapping[str, np.ndarray] = field(default_factory=dict)
    hyperparameter: np.ndarray
    best_row: int
    test_predictions: np.ndarray = field(repr=False)
    confidence_level: float = 0.95
    n_bootstrap: int = 1000
    converged: np.ndarray | None = None

    @property
    def best_layer(self) -> int | None:
        """Layer of the row with the best validation metric."""
        return self.layers[self.best_row]

    @property
    def best_site(self) -> str:
        """Site of the row with the best validation metric."""
        return self.sites[self.best_row]

    @property
    def best_test(self) -> float:
        """Test metric of the validation-selected row."""
        return float(self.test[self.best_row])

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no predictions)."""
        rows = []
        for i in range(len(self.layers)):
            row = {
                "site": self.sites[i],
                "layer": self.layers[i],
                "hyperparameter": float(self.hyperparameter[i]),
                "train": float(self.train[i]),
                "val": float(self.val[i]),
                "test": float(self.test[i]),
                "test_ci": [float(self.test_ci_low[i]), float(self.test_ci_high[i])],
            }
            for k, v in self.ood.items():
                row[f"ood/{k}"] = float(v[i])
                row[f"ood_ci/{k}"] = [float(self.ood_ci_low[k][i]), float(self.ood_ci_high[k][i])]
                row[f"gap/{k}"] = float(self.ood_gap[k][i])
            rows.append(row)
        return {
            "probe": self.probe,
            "metric": self.metric,
            "best": {"site": self.best_site, "layer": self.best_layer, "test": self.best_test},
            "confidence_level": self.confidence_level,
            "n_bootstrap": self.n_bootstrap,
            "rows": rows,
        }

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per row: site, layer, hyperparameter, train/val/test, test CI, OOD and gaps.

        ``selected`` marks the validation-selected row.
        """
        out = []
        for i in range(len(self.layers)):
            rec: dict[str, Any] = {
                "site": self.sites[i], "layer": self.layers[i],
                "hyperparameter": float(self.hyperparameter[i]), "train": float(self.train[i]),
                "val": float(self.val[i]), "test": float(self.test[i]),
                "test_ci_low": float(self.test_ci_low[i]),
                "test_ci_high": float(self.test_ci_high[i]),
            }
            for k, v in self.ood.items():
                rec[f"ood/{k}"] = float(v[i])
                rec[f"ood_ci_low/{k}"] = float(self.ood_ci_low[k][i])
                rec[f"ood_ci_high/{k}"] = float(self.ood_ci_high[k][i])
                rec[f"gap/{k}"] = float(self.ood_gap[k][i])
            rec["selected"] = i == self.best_row
            out.append(rec)
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import sweep_blocks

        return tuple(sweep_blocks(self))

    def _summary(self) -> str:
        from .blocks import row_label

        where = row_label(self.best_site, self.best_layer)
        return (
            f"{self.probe}, {len(self.layers)} rows; best {where}: "
            f"val {self.metric} {self.val[self.best_row]:.3f}, test {self.best_test:.3f} "
            f"[{self.test_ci_low[self.best_row]:.3f}, {self.test_ci_high[self.best_row]:.3f}]"
        )

    def table(self) -> str:
        """Markdown table: one line per row, the selected row marked with ``*``."""
        pct = int(round(100 * self.confidence_level))
        head = ["site", "layer", "hparam", "train", "val", f"test [{pct}% CI]"]
        for k in self.ood:
            head += [f"{k}", f"gap {k}"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i in range(len(self.layers)):
            mark = "*" if i == self.best_row else ""
            cells = [
                self.sites[i],
                f"{'-' if self.layers[i] is None else self.layers[i]}{mark}",
                f"{self.hyperparameter[i]:.3g}",
                f"{self.train[i]:.3f}",
                f"{self.val[i]:.3f}",
                f"{self.test[i]:.3f} [{self.test_ci_low[i]:.3f}, {self.test_ci_high[i]:.3f}]",
            ]
            for k in self.ood:
                cells += [f"{self.ood[k][i]:.3f}", f"{self.ood_gap[k][i]:+.3f}"]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)


def _flatten_sites(
    acts: Tensor | np.ndarray | Mapping[Any, Tensor | np.ndarray],
) -> list[tuple[str, int | None, Tensor]]:
    """List of ``(site name, layer, (n, d) tensor)``.

    Mapping keys are strings or ``Site``-like objects (``.name``, ``.layer``): a 2-D entry takes
    the key's layer (``None`` for a string key or a model-level site).
    """
    if isinstance(acts, Mapping):
        out: list[tuple[str, int | None, Tensor]] = []
        for site, a in acts.items():
            name = str(getattr(site, "name", site))
            t = as_float_tensor(a, name=f"acts[{name!r}]")
            if t.ndim == 2:
                layer = getattr(site, "layer", None)
                out.append((name, None if layer is None else int(layer), t))
            else:
                t = check_layer_acts(t, name=f"acts[{name!r}]")
                out.extend((name, ell, t[ell]) for ell in range(t.shape[0]))
        if not out:
            raise ValueError("acts mapping is empty; pass at least one site")
        return out
    t = check_layer_acts(as_float_tensor(acts))
    return [("acts", ell, t[ell]) for ell in range(t.shape[0])]


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """Options of :func:`sweep_layers` (probe kind, grids, CV, bootstrap, solver), checked once.

    Attributes:
        probe: a registered probe kind (:func:`~probekit.probes.kind.probe_kind`):
            ``"logistic"``, ``"ridge"``, ``"diffmeans"`` or one registered by the user.
        Cs: logistic inverse-regularisation grid (int = log-spaced grid size).
        alphas: ridge penalty grid (int = log-spaced grid size).
        cv: folds of the training split (stratified for classifiers, in data order).
        n_bootstrap: resamples of the percentile bootstrap over test/OOD examples.
        confidence_level: coverage of the bootstrap intervals.
        random_state: seed of the bootstrap resamples.
        dtype: compute dtype of the logistic GEMMs (ridge always uses float64).
        max_iter: logistic solver iteration cap.
        tol: logistic solver tolerance (as sklearn's, default equal to it).
        device: where to solve (``"cuda"``, ``"cpu"``, ``"auto"`` = CUDA when available);
            ``None`` solves each site on the device its activations are on.
    """

    probe: str = "logistic"
    Cs: int | Sequence[float] | np.ndarray = 10
    alphas: int | Sequence[float] | np.ndarray = 9
    cv: Annotated[int, Ge(2, hint="cross-validation folds")] = 5
    n_bootstrap: Annotated[int, Ge(MIN_RESAMPLES, hint="percentile intervals need >= 1000 resamples")] = 1000
    confidence_level: Annotated[float, Between(0, 1, hint="e.g. 0.95")] = 0.95
    random_state: int | None = 0
    dtype: torch.dtype = torch.float32
    max_iter: Annotated[int, Ge(1)] = 200
    tol: Annotated[float, Gt(0, hint="the solver tolerance, e.g. 1e-4")] = 1e-4
    device: str | torch.device | None = None

    def __post_init__(self) -> None:
        """The probe kind is registered, the counts are ints, then the declared rules."""
        probe_kind(self.probe)  # ConfigError listing the registered kinds
        for key in ("cv", "n_bootstrap", "max_iter"):  # ints only (2.5 folds, True resamples)
            check_value(type(self), key, getattr(self, key), types=True)
        validate(self)


@shape_checked
def sweep_layers(
    acts: Float[Tensor, "layer n d"] | Float[Tensor, "n d"] | Mapping[Any, Tensor],
    labels: Sequence | np.ndarray | Tensor,
    *,
    train_idx: IndexLike,
    test_idx: IndexLike,
    ood_idx: Mapping[str, IndexLike] | None = None,
    config: SweepConfig | None = None,
) -> SweepResult:
    """Fit one probe per (site, layer) in one batched pass and evaluate it on every split.

    The probe kind (``config.probe``) fits each group of rows (:meth:`ProbeKind.fit_batched`)
    and scores its predictions (:meth:`ProbeKind.score`); the best row is the argmax of the CV
    validation metric, reported on test with a percentile-bootstrap CI.

    Args:
        acts: ``(layer, n, d)`` or ``(n, d)`` activations, or a mapping site -> such tensors
            (keys: names or ``Site`` objects; rows with equal ``d`` are batched together). Rows are examples of every split.
        labels: ``(n,)`` class labels (logistic, diffmeans: binary) or targets (ridge).
        train_idx: example indices (or a boolean mask) of the ID training split.
        test_idx: example indices (or a boolean mask) of the ID test split.
        ood_idx: named OOD splits, scored with the probe fit on ``train_idx``.
        config: the options (:class:`SweepConfig`: ``probe``, ``Cs``, ``cv`` ...); default
            ``SweepConfig()``. It is the one way to pass them.

    Returns:
        SweepResult.
    """
    cfg = SweepConfig() if config is None else config
    kind = probe_kind(cfg.probe)
    rows = _flatten_sites(acts)
    dev = resolve_device(cfg.device)
    if dev is not None:
        rows = [(site, ell, t.to(dev)) for site, ell, t in rows]
    n = rows[0][2].shape[0]
    for site, ell, t in rows:
        if t.shape[0] != n:
            raise ValueError(
                f"site {site!r} layer {ell} has {t.shape[0]} examples but the first site has {n}; "
                "all sites must cover the same examples"
            )
    lab = check_labels(labels)
    check_n_labels(n, lab)
    tr = check_indices(train_idx, n, name="train")
    te = check_indices(test_idx, n, name="test")
    oods = {k: check_indices(v, n, name=k) for k, v in (ood_idx or {}).items()}
    overlap = np.intersect1d(tr, te)
    if overlap.size:
        raise DataError(
            f"train and test splits share {overlap.size} examples (e.g. index {overlap[0]}); "
            "the test split must be disjoint from training"
        )
    splits = {"test": te, **{f"ood:{k}": v for k, v in oods.items()}}
    lab = kind.prepare_labels(lab, tr)

    # Group rows with equal feature size so each group is one batched solve.
    groups: dict[tuple[int, torch.device], list[int]] = {}
    for i, (_, _, t) in enumerate(rows):
        groups.setdefault((t.shape[1], t.device), []).append(i)

    R = len(rows)
    train_m = np.zeros(R)
    val_m = np.zeros(R)
    hyper = np.full(R, np.nan)
    conv = np.ones(R, dtype=bool)
    split_out: dict[str, np.ndarray] = {}
    for ids in track(groups.values(), desc="probe sweep", unit="cell", total=R, weight=len):
        X = torch.stack([rows[i][2] for i in ids])  # (G, n, d)
        fit = kind.fit_batched(X, lab, tr, splits, cfg)
        train_m[ids], val_m[ids], hyper[ids] = fit.train, fit.val, fit.hyperparameter
        if fit.converged is not None:
            conv[ids] = fit.converged
        for k, v in fit.predictions.items():
            if k not in split_out:
                split_out[k] = np.zeros((R, len(splits[k])), dtype=v.dtype)
            split_out[k][ids] = v

    # Metrics with bootstrap CIs on each evaluation split.
    metric: dict[str, np.ndarray] = {}
    lo: dict[str, np.ndarray] = {}
    hi: dict[str, np.ndarray] = {}
    for k, idx in splits.items():
        y_k = lab[idx]
        pred = split_out[k]
        metric[k] = kind.score(pred, y_k)
        boot = bootstrap_indices(len(idx), cfg.n_bootstrap, cfg.random_state)
        samples = kind.score(pred[:, boot], y_k[boot])  # (R, B)
        lo[k], hi[k] = percentile_interval(samples, cfg.confidence_level)

    best = int(np.nanargmax(val_m))
    ood = {k: metric[f"ood:{k}"] for k in oods}
    return SweepResult(
        probe=kind.name,
        metric=kind.metric,
        sites=tuple(r[0] for r in rows),
        layers=tuple(r[1] for r in rows),
        train=train_m,
        val=val_m,
        test=metric["test"],
        test_ci_low=lo["test"],
        test_ci_high=hi["test"],
        ood=ood,
        ood_ci_low={k: lo[f"ood:{k}"] for k in oods},
        ood_ci_high={k: hi[f"ood:{k}"] for k in oods},
        ood_gap={k: metric["test"] - ood[k] for k in oods},
        hyperparameter=hyper,
        best_row=best,
        test_predictions=split_out["test"],
        converged=conv,
        confidence_level=cfg.confidence_level,
        n_bootstrap=cfg.n_bootstrap,
    )
