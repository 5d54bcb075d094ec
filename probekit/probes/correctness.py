"""In-advance correctness probe ("No Answer Needed", arXiv 2509.10625) with honest controls.

Input: residual stream after each block at the last prompt token (before any generated token),
raw (no standardisation). Labels: 1 = the model's greedy answer was correct. Per layer::

    w = mu_correct - mu_incorrect,   mu = (mu_correct + mu_incorrect) / 2,
    score(h) = (h - mu) . w / ||w||

Metric AUROC. Folds: stratified k-fold (default), explicit ``folds``, or -- with ``groups``
(e.g. the relation or dataset a question comes from) -- leave-one-group-out or grouped k-fold.
Every row gets an out-of-fold score, from which the result reports the fold AUROCs, the pooled
AUROC and, with groups, the *within-group* AUROC (pairs of the same group only), which a signal
that merely says which group a question belongs to cannot raise above 0.5.

Controls (issue 19 §3; the paper compares with black-box baselines and tests transfer):

* baselines on the same folds (:mod:`probekit.probes.correctness_baselines`): the group base
  rate, a TF-IDF + logistic-regression question-text model, the model's own answer confidence;
  the probe minus each baseline with a paired percentile-bootstrap CI (rows resampled jointly).
* layer selection: the probe compared with the baselines is the *nested* one (the layer chosen
  by inner CV on each outer training split, never by the test folds), and the best-of-layers
  statistic gets a max-statistic permutation p-value (labels shuffled -- within groups when
  groups are given, so the group base rates are kept -- all layers refit, the maximum taken).

OOD: for fold j, the direction fit on the ID training rows of fold j is scored on fold j of
every named OOD set. Capture of the activations is not done here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple

import numpy as np
import torch
from jaxtyping import Float
from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut, StratifiedKFold
from torch import Tensor

from ..errors import DataError, KeyedValueError
from ..progress import track
from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ..shapes import shape_checked
from ..stats.bootstrap import MIN_RESAMPLES, bootstrap_indices, percentile_interval
from ..stats.permutation import permutation_result
from ..stats.result import ConfidenceInterval, StatTestResult
from ..util.constraints import Between, OneOf, validate
from ..util.numeric import diff_of_means
from ._validation import as_float_tensor, check_indices, check_layer_acts, check_n_labels
from .correctness_baselines import group_base_rate_scores, question_text_scores
from .metrics import auroc, within_group_auroc

__all__ = ["BaselineComparison", "CorrectnessConfig", "CorrectnessProbeResult", "correctness_probe"]

Folds = list[tuple[np.ndarray, np.ndarray]]


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclass(frozen=True, kw_only=True)
class CorrectnessConfig:
    """Options of :func:`correctness_probe` (folds, permutations, bootstrap), checked once.

    Attributes:
        n_folds: stratified (or grouped) k-fold count (paper: 3 for the layer sweep, 5 for OOD).
        group_split: with groups, ``"logo"`` (leave one group out) or ``"kfold"``
            (``GroupKFold(n_folds)``).
        n_permutations: label shuffles for the max-statistic p-value (0: skip).
        n_bootstrap: resamples of the paired bootstrap of probe-minus-baseline differences.
        confidence_level: coverage of those bootstrap intervals.
        random_state: seed of the fold split, permutations and bootstrap.
    """

    n_folds: int = 3
    group_split: Annotated[str, OneOf(("logo", "kfold"), hint="'logo': leave one group out; "
                                      "'kfold': group k-fold")] = "logo"
    n_permutations: int = 0
    n_bootstrap: int = 1000
    confidence_level: Annotated[float, Between(0, 1, hint="e.g. 0.95")] = 0.95
    random_state: int | None = 0

    def __post_init__(self) -> None:
        """The declared rules, then the counts (ints, numpy's included) and their bounds."""
        validate(self)
        if not _is_int(self.n_folds) or self.n_folds < 2:
            raise KeyedValueError("n_folds", f"n_folds = {self.n_folds!r}: cross-validation needs an integer "
                              ">= 2 folds")
        if not _is_int(self.n_permutations) or self.n_permutations < 0:
            raise KeyedValueError("n_permutations", f"n_permutations = {self.n_permutations!r}: needs an integer >= 0 "
                              "(0 skips the max-statistic test)")
        from ..stats.permutation import check_n_permutations

        check_n_permutations(self.n_permutations, minimum=0)  # at most MAX_PERMUTATIONS
        if not _is_int(self.n_bootstrap) or self.n_bootstrap < MIN_RESAMPLES:
            raise KeyedValueError("n_bootstrap", f"n_bootstrap = {self.n_bootstrap!r}: percentile intervals need an "
                              f"integer >= {MIN_RESAMPLES} resamples")
        from ..stats.bootstrap import check_n_resamples

        check_n_resamples(self.n_bootstrap, name="n_bootstrap")  # at most MAX_RESAMPLES


@dataclass(frozen=True, kw_only=True)
class BaselineComparison:
    """A black-box baseline on the probe's folds, and the (nested-selection) probe minus it.

    Attributes:
        name: ``group_base_rate``, ``question_text`` or ``confidence``.
        pooled_auroc: AUROC of the baseline's out-of-fold scores over all rows.
        within_group_auroc: same over same-group pairs (NaN without groups).
        diff_pooled: probe minus baseline pooled AUROC, paired bootstrap CI.
        diff_within: probe minus baseline within-group AUROC, paired bootstrap CI (or None).
    """

    name: str
    pooled_auroc: float
    within_group_auroc: float
    diff_pooled: ConfidenceInterval
    diff_within: ConfidenceInterval | None = None


@dataclass(frozen=True, kw_only=True, repr=False)
class CorrectnessProbeResult(NotebookMixin):
    """Per-layer AUROC of the diff-of-means correctness direction, with controls.

    Attributes:
        layers: layer label of each row.
        fold_auroc: ``(layer, fold)`` held-out ID AUROC (NaN for a one-class test fold).
        auroc_mean, auroc_std: over folds (NaN-aware; std with ddof=1).
        ood_fold_auroc, ood_mean, ood_std: per OOD split, same shapes.
        best_layer: layer with the highest mean ID CV AUROC (first on ties); chosen on the test
            folds, so its AUROC is optimistic -- see ``max_stat_test`` and ``selected_*``.
        direction: ``(layer, d)`` unit direction fit on all ID examples.
        midpoint: ``(layer, d)`` ``mu`` fit on all ID examples.
        n_correct, n_incorrect: ID label counts.
        evaluation: how folds were made (``stratified 3-fold``, ``leave-one-group-out``, ...).
        pooled_auroc: ``(layer,)`` AUROC of the pooled out-of-fold scores.
        within_group_auroc: ``(layer,)`` pairs of the same group held out in the same fold
            only (None without groups).
        oof_scores: ``(layer, n)`` out-of-fold scores (NaN for rows in no test fold).
        selected_layers: layer chosen by inner CV in each outer fold (nested selection).
        selected_pooled_auroc, selected_within_group_auroc: of the nested-selection scores.
        selected_scores: ``(n,)`` out-of-fold scores of the nested-selection probe.
        baselines: name -> :class:`BaselineComparison`.
        max_stat_test: permutation test of ``max over layers`` of the selection metric
            (within-group AUROC with groups, else mean fold AUROC), or None.
        not_testable: why the data cannot test the probe (all answers correct or all wrong, a
            class with fewer members than folds, a fold training on one class); empty when it
            can. A not-testable result holds the label counts and NaN scores, never a test.
    """

    layers: tuple[int, ...]
    fold_auroc: np.ndarray
    auroc_mean: np.ndarray
    auroc_std: np.ndarray
    ood_fold_auroc: Mapping[str, np.ndarray] = field(default_factory=dict)
    ood_mean: Mapping[str, np.ndarray] = field(default_factory=dict)
    ood_std: Mapping[str, np.ndarray] = field(default_factory=dict)
    best_layer: int
    direction: np.ndarray = field(repr=False)
    midpoint: np.ndarray = field(repr=False)
    n_correct: int
    n_incorrect: int
    evaluation: str = "stratified k-fold"
    pooled_auroc: np.ndarray | None = None
    within_group_auroc: np.ndarray | None = None
    oof_scores: np.ndarray | None = field(default=None, repr=False)
    selected_layers: tuple[int, ...] = ()
    selected_pooled_auroc: float = float("nan")
    selected_within_group_auroc: float = float("nan")
    selected_scores: np.ndarray | None = field(default=None, repr=False)
    baselines: Mapping[str, BaselineComparison] = field(default_factory=dict)
    max_stat_test: StatTestResult | None = None
    not_testable: str = ""

    def to_records(self) -> list[dict[str, Any]]:
        """One row per layer: mean CV AUROC, its +-1.96 SE band, pooled / within-group / OOD AUROC.

        ``best`` marks the layer with the highest mean CV AUROC. A not-testable result has none.
        """
        from .blocks import correctness_rows

        if self.not_testable:
            return []
        out = []
        for row in correctness_rows(self, [str(x) for x in self.layers]):
            rec: dict[str, Any] = {"layer": row["layer"], "cv_auroc": row["cv_auroc"],
                                   "cv_auroc_low": row["cv_auroc_ci"][0],
                                   "cv_auroc_high": row["cv_auroc_ci"][1],
                                   "pooled_auroc": row["pooled"]}
            if "within_group" in row:
                rec["within_group_auroc"] = row["within_group"]
            for k in self.ood_mean:
                rec[f"ood/{k}"], rec[f"gap/{k}"] = row[f"ood/{k}"], row[f"gap/{k}"]
            rec["best"] = row["layer"] == self.best_layer
            out.append(rec)
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import correctness_blocks

        return tuple(correctness_blocks(self, [str(x) for x in self.layers]))

    def _summary(self) -> str:
        if self.not_testable:
            return (f"{len(self.layers)} layers, {self.n_correct} correct / {self.n_incorrect} "
                    f"incorrect; not testable: {self.not_testable}")
        i = list(self.layers).index(self.best_layer)
        p = "" if self.max_stat_test is None else f", best-of-layers p={self.max_stat_test.p_value:.3g}"
        return (f"{len(self.layers)} layers, {self.n_correct} correct / {self.n_incorrect} "
                f"incorrect; best layer {self.best_layer}: CV AUROC {self.auroc_mean[i]:.3f}{p}")

    def score(self, acts: Float[Tensor, "layer n d"]) -> np.ndarray:
        """Scores ``(h - mu) . w / ||w||`` of new activations with the all-ID direction."""
        a = check_layer_acts(as_float_tensor(acts)).to(torch.float64).cpu().numpy()
        return np.einsum("lnd,ld->ln", a - self.midpoint[:, None], self.direction)


def _fit(X: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
    """Unit direction and midpoint per layer from rows of X (layer, n, d) with labels pos."""
    w, mu = diff_of_means(X, pos)
    return w / w.norm(dim=-1, keepdim=True).clamp_min(1e-30), mu


def _scores(X: Tensor, w: Tensor, mu: Tensor) -> np.ndarray:
    return torch.einsum("lnd,ld->ln", X - mu.unsqueeze(1), w).double().cpu().numpy()


def _labels(correct: object, n: int, what: str) -> np.ndarray:
    c = correct.detach().cpu().numpy() if isinstance(correct, Tensor) else np.asarray(correct)
    check_n_labels(n, c, what=what)
    u = np.unique(c)
    if not set(u.tolist()) <= {0, 1}:
        raise DataError(f"{what} must be boolean / 0-1 (1 = correct), got values {u[:5]}")
    return c.astype(bool)


def _oof_batch(X: Tensor, Y: np.ndarray, folds: Folds) -> np.ndarray:
    """``(layer, labelling, n)`` out-of-fold diff-of-means scores for labellings ``Y`` (B, n)."""
    L, n, _ = X.shape
    out = np.full((L, Y.shape[0], n), np.nan)
    P = torch.as_tensor(Y, dtype=X.dtype, device=X.device)
    for tr, te in folds:
        tr_t = torch.as_tensor(tr, device=X.device)
        w, mu = diff_of_means(X[:, tr_t].unsqueeze(1), P[:, tr_t])  # (L, B, d)
        Xte = X[:, torch.as_tensor(te, device=X.device)]  # (L, m, d)
        s = torch.einsum("lmd,lbd->lbm", Xte, w) - (mu * w).sum(-1, keepdim=True)
        out[:, :, te] = s.double().cpu().numpy()
    return out


def _strata(groups: np.ndarray, folds: Folds) -> np.ndarray:
    """``(n,)`` id of (test fold, group) per row; -1 for rows in no test fold."""
    _, codes = np.unique(groups, return_inverse=True)
    out = np.full(len(groups), -1, dtype=np.int64)
    for j, (_, te) in enumerate(folds):
        out[te] = j * (codes.max() + 1) + codes[te]
    return out


def _metric(
    oof: np.ndarray, Y: np.ndarray, folds: Folds, strata: np.ndarray | None
) -> np.ndarray:
    """Selection metric per (layer, labelling): within-group AUROC, else mean fold AUROC."""
    if strata is not None:
        cov = np.concatenate([te for _, te in folds])
        return within_group_auroc(oof[..., cov], Y[:, cov], strata[cov])
    fa = np.stack([auroc(oof[..., te], Y[:, te]) for _, te in folds], -1)
    return np.nanmean(fa, -1)


def _split(
    y: np.ndarray,
    groups: np.ndarray | None,
    n_folds: int,
    group_split: str,
    random_state: int | None,
    rows: np.ndarray,
) -> Folds:
    """Folds over ``rows`` (indices into the full data), returned as full-data indices."""
    yr = y[rows]
    if groups is not None:
        gr = groups[rows]
        splitter = LeaveOneGroupOut() if group_split == "logo" else GroupKFold(n_folds)
        parts = splitter.split(np.zeros(len(rows)), yr, gr)
    else:
        skf = StratifiedKFold(n_folds, shuffle=random_state is not None, random_state=random_state)
        parts = skf.split(np.zeros(len(rows)), yr)
    return [(rows[a], rows[b]) for a, b in parts]


def _explicit_folds(folds: object, n: int) -> Folds:
    arr = None
    if not isinstance(folds, (list, tuple)):
        arr = np.asarray(folds.detach().cpu() if isinstance(folds, Tensor) else folds)
    if arr is not None and arr.ndim == 1 and arr.shape[0] == n:
        ids = np.unique(arr[arr >= 0]) if arr.dtype.kind in "iu" else np.unique(arr)
        out = []
        for f in ids:
            te = np.flatnonzero(arr == f)
            tr = np.flatnonzero((arr != f) & (arr >= 0 if arr.dtype.kind in "iu" else True))
            out.append((tr, te))
        return out
    out = [
        (check_indices(tr, n, name=f"folds[{i}] train"), check_indices(te, n, name=f"folds[{i}] test"))
        for i, (tr, te) in enumerate(folds)
    ]
    seen = np.concatenate([te for _, te in out])
    if len(np.unique(seen)) != len(seen):
        raise DataError(
            "explicit folds have overlapping test sets; each row may be held out at most once "
            "(pass disjoint test indices or one fold id per row)"
        )
    for i, (tr, te) in enumerate(out):
        if np.intersect1d(tr, te).size:
            raise DataError(f"folds[{i}] trains on rows it tests on; make train and test disjoint")
    return out


@shape_checked
def correctness_probe(
    acts: Float[Tensor, "layer n d"],
    correct: Sequence[bool] | np.ndarray | Tensor,
    *,
    layers: Sequence[int] | None = None,
    folds: Sequence[tuple[object, object]] | np.ndarray | None = None,
    groups: Sequence[object] | np.ndarray | None = None,
    ood: Mapping[str, tuple[Tensor, Sequence[bool] | np.ndarray]] | None = None,
    texts: Sequence[str] | None = None,
    confidence: Sequence[float] | np.ndarray | None = None,
    config: CorrectnessConfig | None = None,
) -> CorrectnessProbeResult:
    """Per-layer diff-of-means correctness probe with grouped evaluation, baselines and max-stat p.

    Args:
        acts: ``(layer, n, d)`` last-prompt-token activations of the ID questions.
        correct: ``(n,)`` 1 if the greedy answer was correct ("I don't know" counts as 0).
        layers: layer numbers of the rows (default ``0..layer-1``; e.g. every 2nd layer).
        folds: explicit folds: ``[(train_idx, test_idx), ...]`` or one fold id per row
            (negative ids: never held out); overrides ``n_folds``/``groups`` splitting.
        groups: ``(n,)`` group of each question (relation, dataset, ...): enables grouped
            splits, within-group AUROC, the group-base-rate baseline and within-group shuffles.
        ood: named OOD sets ``name -> (acts (layer, m, d), correct (m,))``.
        texts: ``(n,)`` prompt texts for the TF-IDF question-text baseline.
        confidence: ``(n,)`` the model's answer confidence (e.g. max next-token probability).
        config: the options (:class:`CorrectnessConfig`: ``n_folds``, ``group_split``,
            ``n_permutations``, ``n_bootstrap``, ``confidence_level``, ``random_state``); default
            ``CorrectnessConfig()``. It is the one way to pass them.

    Returns:
        CorrectnessProbeResult; when the labels cannot test the probe (every answer correct or
        every answer wrong, fewer correct or incorrect answers than folds, a fold that trains on
        one class) its ``not_testable`` says why and it holds no scores or test.
    """
    cfg = CorrectnessConfig() if config is None else config
    data = _prepare(acts, correct, layers, groups)
    plan = _plan_folds(data, folds, cfg)
    if isinstance(plan, CorrectnessProbeResult):  # the labels cannot test the probe
        return plan
    ood_sets = _ood_sets(ood, data.X, data.X.shape[0], len(plan.folds), cfg.random_state)
    scores = _fold_scores(data, plan, ood_sets)
    selection = _select_nested(data, plan, cfg)
    baselines = _baselines(data, plan, selection, texts, confidence, cfg)
    max_test = _max_test(data, plan, cfg)
    return _assemble(data, plan, scores, selection, baselines, max_test)


class _CorrectnessData(NamedTuple):
    """The checked inputs: activations, labels, row layer labels and the groups (or None)."""

    X: Tensor  # (L, n, d)
    y: np.ndarray  # (n,) bool
    layer_ids: tuple[int, ...]
    groups: np.ndarray | None


class _FoldPlan(NamedTuple):
    """The outer folds, how they were made, the rows they cover and the within-fold strata."""

    folds: Folds
    evaluation: str
    covered: np.ndarray  # the test rows of every fold, concatenated
    strata: np.ndarray | None  # (group, fold) of each row; None without groups


class _FoldScores(NamedTuple):
    """Out-of-fold scores of the per-layer probe and their AUROCs (ID and OOD)."""

    oof: np.ndarray  # (L, n)
    fold_auc: np.ndarray  # (L, F)
    pooled: np.ndarray  # (L,)
    within: np.ndarray | None  # (L,); None without groups
    ood_auc: dict[str, np.ndarray]  # name -> (L, F)


class _Selection(NamedTuple):
    """The nested-selection probe: inner-CV layer per outer fold, its scores and AUROCs."""

    layers: np.ndarray  # row index chosen in each outer fold
    scores: np.ndarray  # (n,)
    pooled: float
    within: float  # NaN without groups


def _prepare(
    acts: Tensor, correct: object, layers: Sequence[int] | None, groups: object
) -> _CorrectnessData:
    """Phase 1: check the activations, labels, layer labels and groups."""
    X = check_layer_acts(as_float_tensor(acts))
    L, n, _ = X.shape
    y = _labels(correct, n, "correctness labels")
    layer_ids = tuple(range(L)) if layers is None else tuple(int(v) for v in layers)
    if len(layer_ids) != L:
        raise DataError(f"got {len(layer_ids)} layer labels for {L} activation layers")
    g = None
    if groups is not None:
        g = np.asarray(groups.detach().cpu() if isinstance(groups, Tensor) else groups)
        check_n_labels(n, g, what="groups")
        if len(np.unique(g)) < 2:
            raise DataError(
                f"groups has a single value {np.unique(g)[0]!r}; grouped evaluation needs >= 2 "
                "groups (or pass groups=None)"
            )
    return _CorrectnessData(X, y, layer_ids, g)


def _plan_folds(
    data: _CorrectnessData, folds: object, cfg: CorrectnessConfig
) -> _FoldPlan | CorrectnessProbeResult:
    """Phase 2: the outer folds, or a not-testable result when the labels cannot test the probe."""
    X, y, layer_ids, g = data
    n_folds, group_split, random_state = cfg.n_folds, cfg.group_split, cfg.random_state
    n = X.shape[1]
    rows = np.arange(n)
    if folds is None and (y.all() or not y.any()):
        return _not_testable(
            f"all {n} answers are {'correct' if y.all() else 'wrong'}: correctness cannot be "
            "predicted without both outcomes; add questions the model gets "
            f"{'wrong' if y.all() else 'right'}", X, y, layer_ids)
    if folds is not None:
        fold_list = _explicit_folds(folds, n)
        evaluation = f"explicit folds ({len(fold_list)})"
    elif g is not None:
        fold_list = _split(y, g, n_folds, group_split, random_state, rows)
        evaluation = (
            "leave-one-group-out" if group_split == "logo" else f"group {n_folds}-fold"
        ) + f" ({len(np.unique(g))} groups)"
    else:
        if min(y.sum(), (~y).sum()) < n_folds:
            return _not_testable(
                f"{int(y.sum())} correct and {int((~y).sum())} wrong answers: {n_folds}-fold "
                f"CV needs at least {n_folds} of each; lower cv or add questions", X, y, layer_ids)
        fold_list = _split(y, None, n_folds, group_split, random_state, rows)
        evaluation = f"stratified {n_folds}-fold"
    for i, (tr, _) in enumerate(fold_list):
        if y[tr].all() or not y[tr].any():
            return _not_testable(
                f"fold {i} trains on rows of one class only ({int(y[tr].sum())} correct of "
                f"{len(tr)}): a diff-of-means direction needs both; use fewer or larger folds",
                X, y, layer_ids, evaluation)
    # Within-group pairs are taken within a fold too: rows of one group scored by different
    # folds' directions are offset by how that group's labels fell into the training splits
    # (a leave-out bias that pushes pooled within-group AUROC below 0.5 on group-only data).
    strata = None if g is None else _strata(g, fold_list)
    covered = np.concatenate([te for _, te in fold_list])
    return _FoldPlan(fold_list, evaluation, covered, strata)


def _fold_scores(
    data: _CorrectnessData, plan: _FoldPlan,
    ood_sets: Mapping[str, tuple[Tensor, np.ndarray, list[np.ndarray]]],
) -> _FoldScores:
    """Phase 3: out-of-fold scores, fold / pooled / within-group AUROC, OOD AUROC per fold."""
    X, y, _, g = data
    fold_list, cov, strata = plan.folds, plan.covered, plan.strata
    L, F = X.shape[0], len(fold_list)
    oof = _oof_batch(X, y[None].astype(np.float64), fold_list)[:, 0]  # (L, n)
    fold_auc = np.stack([auroc(oof[:, te], y[te]) for _, te in fold_list], 1)
    pooled = auroc(oof[:, cov], y[cov])
    within = within_group_auroc(oof[:, cov], y[cov], strata[cov]) if g is not None else None
    ood_auc = {k: np.zeros((L, F)) for k in ood_sets}
    if ood_sets:
        for j, (tr, _) in enumerate(fold_list):
            tr_t = torch.as_tensor(tr, device=X.device)
            w, mu = _fit(X[:, tr_t], torch.as_tensor(y[tr], device=X.device))
            for k, (Xo, yo, ofolds) in ood_sets.items():
                idx = torch.as_tensor(ofolds[j], device=X.device)
                ood_auc[k][:, j] = auroc(_scores(Xo[:, idx], w, mu), yo[ofolds[j]])
    return _FoldScores(oof, fold_auc, pooled, within, ood_auc)


def _select_nested(data: _CorrectnessData, plan: _FoldPlan, cfg: CorrectnessConfig) -> _Selection:
    """Phase 4: the nested-selection probe (layer by inner CV on each outer training split)."""
    X, y, _, g = data
    cov, strata = plan.covered, plan.strata
    sel_layers, sel_scores = _nested_selection(X, y, g, plan.folds, cfg.n_folds, cfg.group_split,
                                               cfg.random_state)
    sel_pooled = float(auroc(sel_scores[cov], y[cov]))
    sel_within = (
        float(within_group_auroc(sel_scores[cov], y[cov], strata[cov])) if g is not None else np.nan
    )
    return _Selection(sel_layers, sel_scores, sel_pooled, sel_within)


def _baselines(
    data: _CorrectnessData, plan: _FoldPlan, selection: _Selection,
    texts: Sequence[str] | None, confidence: object, cfg: CorrectnessConfig,
) -> dict[str, BaselineComparison]:
    """Phase 5: each black-box baseline on the same folds, compared with the nested probe."""
    _, y, _, g = data
    fold_list, cov, strata = plan.folds, plan.covered, plan.strata
    n = len(y)
    base_scores: dict[str, np.ndarray] = {}
    if g is not None:
        base_scores["group_base_rate"] = group_base_rate_scores(y, g, fold_list)
    if texts is not None:
        if len(texts) != n:
            raise DataError(f"got {len(texts)} texts for {n} activation rows; pass one per row")
        base_scores["question_text"] = question_text_scores(texts, y, fold_list)
    if confidence is not None:
        conf = np.asarray(confidence, dtype=np.float64)
        check_n_labels(n, conf, what="confidence values")
        if not np.isfinite(conf).all():
            raise DataError("confidence has NaN/inf values; pass a finite confidence per row")
        base_scores["confidence"] = conf
    sel = selection.scores
    return {
        name: _compare(name, sel[cov], s[cov], y[cov], None if g is None else strata[cov],
                       cfg.n_bootstrap, cfg.confidence_level, cfg.random_state)
        for name, s in base_scores.items()
    }  # fmt: skip


def _max_test(data: _CorrectnessData, plan: _FoldPlan, cfg: CorrectnessConfig) -> StatTestResult | None:
    """Phase 6: the max-over-layers permutation test (None with ``n_permutations = 0``)."""
    if cfg.n_permutations <= 0:
        return None
    X, y, _, g = data
    return _max_stat_test(X, y, g, plan.strata, plan.folds, cfg.n_permutations, cfg.random_state)


def _fold_sd(a: np.ndarray) -> np.ndarray:
    """NaN-aware standard deviation over folds (ddof=1; 0 where fewer than 2 finite values)."""
    ok = np.isfinite(a).sum(1) > 1
    out = np.zeros(a.shape[0])
    if ok.any():
        out[ok] = np.nanstd(a[ok], 1, ddof=1)
    return out


def _assemble(
    data: _CorrectnessData, plan: _FoldPlan, scores: _FoldScores, selection: _Selection,
    baselines: dict[str, BaselineComparison], max_test: StatTestResult | None,
) -> CorrectnessProbeResult:
    """Phase 7: the direction fit on all rows, the best layer and the result."""
    X, y, layer_ids, _ = data
    L = X.shape[0]
    fold_auc, ood_auc, within = scores.fold_auc, scores.ood_auc, scores.within
    w_all, mu_all = _fit(X, torch.as_tensor(y, device=X.device))
    mean = np.nanmean(fold_auc, 1) if np.isfinite(fold_auc).any() else np.full(L, np.nan)
    sel_metric = within if within is not None else mean
    best = int(np.nanargmax(sel_metric)) if np.isfinite(sel_metric).any() else 0
    return CorrectnessProbeResult(
        layers=layer_ids,
        fold_auroc=fold_auc,
        auroc_mean=mean,
        auroc_std=_fold_sd(fold_auc),
        ood_fold_auroc=ood_auc,
        ood_mean={k: v.mean(1) for k, v in ood_auc.items()},
        ood_std={k: _fold_sd(v) for k, v in ood_auc.items()},
        best_layer=layer_ids[best],
        direction=w_all.double().cpu().numpy(),
        midpoint=mu_all.double().cpu().numpy(),
        n_correct=int(y.sum()),
        n_incorrect=int((~y).sum()),
        evaluation=plan.evaluation,
        pooled_auroc=scores.pooled,
        within_group_auroc=within,
        oof_scores=scores.oof,
        selected_layers=tuple(layer_ids[i] for i in selection.layers),
        selected_pooled_auroc=selection.pooled,
        selected_within_group_auroc=selection.within,
        selected_scores=selection.scores,
        baselines=baselines,
        max_stat_test=max_test,
    )


def _not_testable(
    reason: str, X: Tensor, y: np.ndarray, layer_ids: tuple[int, ...],
    evaluation: str = "not run",
) -> CorrectnessProbeResult:
    """A result that says why the labels cannot test the probe (NaN scores, no test)."""
    L, _, d = X.shape
    nan = np.full(L, np.nan)
    return CorrectnessProbeResult(
        layers=layer_ids, fold_auroc=np.full((L, 0), np.nan), auroc_mean=nan, auroc_std=nan,
        best_layer=layer_ids[0], direction=np.full((L, d), np.nan),
        midpoint=np.full((L, d), np.nan), n_correct=int(y.sum()), n_incorrect=int((~y).sum()),
        evaluation=evaluation, not_testable=reason,
    )


def _ood_sets(
    ood: Mapping[str, tuple[Tensor, object]] | None, X: Tensor, L: int, F: int, random_state: int | None
) -> dict[str, tuple[Tensor, np.ndarray, list[np.ndarray]]]:
    out = {}
    for name, (a, c) in (ood or {}).items():
        Xo = check_layer_acts(as_float_tensor(a, name=f"ood[{name!r}]")).to(X.device)
        if Xo.shape[0] != L or Xo.shape[2] != X.shape[2]:
            raise DataError(
                f"OOD set {name!r} has shape {tuple(Xo.shape)} but ID activations are "
                f"(layer={L}, n, d={X.shape[2]}); capture the same layers and site"
            )
        yo = _labels(c, Xo.shape[1], f"labels of OOD set {name!r}")
        if Xo.shape[1] < F:
            raise DataError(f"OOD set {name!r} has {Xo.shape[1]} examples, fewer than {F} folds")
        shuffle = random_state is not None
        splitter = (
            StratifiedKFold(F, shuffle=shuffle, random_state=random_state)
            if min(yo.sum(), (~yo).sum()) >= F
            else KFold(F, shuffle=shuffle, random_state=random_state)
        )
        out[name] = (Xo, yo, [te for _, te in splitter.split(np.zeros(len(yo)), yo)])
    return out


def _nested_selection(
    X: Tensor,
    y: np.ndarray,
    g: np.ndarray | None,
    folds: Folds,
    n_folds: int,
    group_split: str,
    random_state: int | None,
) -> tuple[list[int], np.ndarray]:
    """Per outer fold: choose the layer by inner CV on its training rows, score its test rows."""
    scores = np.full(X.shape[1], np.nan)
    chosen = []
    for tr, te in folds:
        gi = g if g is not None and len(np.unique(g[tr])) >= 2 else None
        k = min(n_folds, int(min(y[tr].sum(), (~y[tr]).sum())))
        try:
            inner = _split(y, gi, max(k, 2), group_split, random_state, tr)
            inner = [(a, b) for a, b in inner if y[a].any() and not y[a].all()]
        except ValueError:
            inner = []
        if inner:
            oof = _oof_batch(X, y[None].astype(np.float64), inner)
            m = _metric(oof, y[None], inner, None if gi is None else _strata(gi, inner))[:, 0]
            ell = int(np.nanargmax(m)) if np.isfinite(m).any() else 0
        else:
            ell = 0
        chosen.append(ell)
        s = _oof_batch(X[ell : ell + 1], y[None].astype(np.float64), [(tr, te)])
        scores[te] = s[0, 0, te]
    return chosen, scores


def _compare(
    name: str,
    probe: np.ndarray,
    base: np.ndarray,
    y: np.ndarray,
    strata: np.ndarray | None,
    n_bootstrap: int,
    level: float,
    seed: int | None,
) -> BaselineComparison:
    """Baseline AUROCs and probe-minus-baseline paired percentile-bootstrap CIs (rows resampled)."""
    idx = bootstrap_indices(len(y), n_bootstrap, seed)  # (B, n), shared by both scores

    def ci(stat: Callable[..., np.ndarray], *arrays: np.ndarray) -> ConfidenceInterval:
        est = float(stat(*arrays))
        lo, hi = percentile_interval(stat(*[a[idx] for a in arrays]), level)
        return ConfidenceInterval(
            estimate=est, low=float(lo), high=float(hi), confidence_level=level,
            n_resamples=n_bootstrap, n=len(y),
        )  # fmt: skip

    def d_pooled(yy: np.ndarray, a: np.ndarray, b: np.ndarray) -> float | np.ndarray:
        return auroc(a, yy) - auroc(b, yy)

    def d_within(yy: np.ndarray, a: np.ndarray, b: np.ndarray, gg: np.ndarray) -> float | np.ndarray:
        return within_group_auroc(a, yy, gg) - within_group_auroc(b, yy, gg)

    return BaselineComparison(
        name=name,
        pooled_auroc=float(auroc(base, y)),
        within_group_auroc=float(within_group_auroc(base, y, strata))
        if strata is not None
        else np.nan,
        diff_pooled=ci(d_pooled, y, probe, base),
        diff_within=None if strata is None else ci(d_within, y, probe, base, strata),
    )


def _max_stat_test(
    X: Tensor,
    y: np.ndarray,
    g: np.ndarray | None,
    strata: np.ndarray | None,
    folds: Folds,
    n_permutations: int,
    random_state: int | None,
    batch: int = 100,
) -> StatTestResult:
    """Max over layers of the selection metric vs the same maximum under shuffled labels."""
    rng = np.random.default_rng(random_state)
    observed = float(np.nanmax(_metric(_oof_batch(X, y[None] * 1.0, folds), y[None], folds, strata)))
    null = np.empty(n_permutations)
    if g is not None:
        members = [np.flatnonzero(g == v) for v in np.unique(g)]
    for s in track(range(0, n_permutations, batch), desc="max-statistic permutation test", unit="refit",
                   total=n_permutations, weight=lambda s: min(batch, n_permutations - s)):
        B = min(batch, n_permutations - s)
        Y = np.empty((B, len(y)), dtype=bool)
        for b in range(B):
            if g is None:
                Y[b] = rng.permutation(y)
            else:  # shuffle within groups: keeps every group's base rate
                Y[b] = y
                for idx in members:
                    Y[b, idx] = rng.permutation(y[idx])
        m = _metric(_oof_batch(X, Y * 1.0, folds), Y, folds, strata)  # (L, B)
        null[s : s + B] = np.nanmax(m, 0)
    what = "within-group AUROC" if g is not None else "mean fold AUROC"
    how = "within groups" if g is not None else "globally"
    return permutation_result(
        observed, null, len(y),
        f"max-statistic permutation test (best of {X.shape[0]} layers, {what}; labels shuffled "
        f"{how}, {n_permutations} permutations, all layers refit)",
    )  # fmt: skip
