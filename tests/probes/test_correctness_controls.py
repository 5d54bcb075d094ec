"""Issue 19 §3: grouped evaluation, same-fold baselines and the max-statistic p-value."""

import itertools

import numpy as np
import pytest
import torch
from sklearn.model_selection import StratifiedKFold

from probekit.errors import DataError
from probekit.probes import CorrectnessConfig, correctness_probe
from probekit.probes.metrics import within_group_auroc


def _grouped(kind, n_groups=6, per=80, L=4, d=16, seed=0):
    """Questions in groups with different base rates; ``kind`` says what the activations know.

    'group': activations encode only the group (a random offset per group), correctness depends
    only on the group's rate -- the relation-prior confound of issue 19.
    'planted': same, plus a direction that separates right from wrong answers *within* groups
    (strongest at layer 2).
    """
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_groups), per)
    rate = np.linspace(0.15, 0.85, n_groups)[rng.permutation(n_groups)]
    y = rng.random(len(g)) < rate[g]
    offsets = rng.normal(size=(n_groups, d)) * 1.5
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    acts = rng.normal(size=(L, len(g), d)) + offsets[g]
    if kind == "planted":
        for ell in range(L):
            acts[ell] += np.outer(y - rate[g], v) * (2.5 if ell == 2 else 0.4)
    texts = [f"Q: relation {k} about item {i}?" for i, k in enumerate(g)]
    return torch.from_numpy(acts), y, g, texts


def test_within_group_auroc_is_pairwise_concordance_by_brute_force():
    rng = np.random.default_rng(0)
    s, y, g = rng.normal(size=50), rng.random(50) < 0.4, rng.integers(0, 4, 50)
    s[:10] = 0.0  # ties
    num = den = 0.0
    for i, j in itertools.product(range(50), repeat=2):
        if g[i] == g[j] and y[i] and not y[j]:
            den += 1
            num += 1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0
    assert within_group_auroc(s, y, g) == pytest.approx(num / den, abs=1e-12)
    # A score that only encodes the group is at 0.5 exactly, whatever the base rates.
    assert within_group_auroc(g * 1.0 + 3, y, g) == pytest.approx(0.5)


def test_group_only_signal_vanishes_within_groups_and_never_beats_the_base_rate():
    acts, y, g, texts = _grouped("group")
    folds = np.empty(len(y), int)
    for j, (_, te) in enumerate(StratifiedKFold(5, shuffle=True, random_state=0).split(acts[0], y)):
        folds[te] = j
    res = correctness_probe(acts, y, folds=folds, groups=g, texts=texts, config=CorrectnessConfig(n_permutations=199))
    # Pooled over groups the probe looks predictive (it learns which group a question is from)...
    assert res.pooled_auroc.max() > 0.62
    # ... but within groups it is at chance, no better than the group base rate, and the
    # best-of-layers within-group statistic is not significant.
    assert np.all(np.abs(res.within_group_auroc - 0.5) < 0.08)
    base = res.baselines["group_base_rate"]
    assert base.pooled_auroc > 0.62 and base.within_group_auroc == pytest.approx(0.5)
    assert base.diff_pooled.low < 0.0 < base.diff_pooled.high + 0.02
    assert base.diff_within.contains(0.0)
    assert res.max_stat_test.p_value > 0.05
    # Leave-one-group-out: the group identity does not transfer to a new group.
    logo = correctness_probe(acts, y, groups=g)
    assert logo.evaluation.startswith("leave-one-group-out") and logo.fold_auroc.shape == (4, 6)
    assert np.all(np.abs(logo.within_group_auroc - 0.5) < 0.08)


def test_planted_within_group_signal_survives_grouping_and_baselines():
    acts, y, g, texts = _grouped("planted")
    conf = np.random.default_rng(1).random(len(y))  # an uninformative "model confidence"
    res = correctness_probe(
        acts, y, groups=g, texts=texts, confidence=conf, config=CorrectnessConfig(n_permutations=199), layers=[0, 1, 2, 3]
    )
    assert res.best_layer == 2 and res.within_group_auroc[2] > 0.8
    assert res.selected_layers == (2,) * 6 and res.selected_within_group_auroc > 0.8
    for name in ("group_base_rate", "question_text", "confidence"):
        cmp = res.baselines[name]
        assert cmp.diff_within.low > 0.15, name
        assert cmp.diff_pooled.low > 0.0, name
    assert res.max_stat_test.p_value == pytest.approx(1 / 200)


def _null_pvalues(n_datasets, grouped):
    ps = []
    for seed in range(n_datasets):
        rng = np.random.default_rng(1000 + seed)
        acts = torch.from_numpy(rng.normal(size=(5, 60, 6)))
        g = np.repeat(np.arange(4), 15) if grouped else None
        y = rng.random(60) < (0.3 + 0.15 * g if grouped else 0.5)
        if y.sum() < 3 or (~y).sum() < 3:
            continue
        res = correctness_probe(acts, y, groups=g, config=CorrectnessConfig(n_permutations=99, random_state=seed))
        ps.append(res.max_stat_test.p_value)
    return np.array(ps)


@pytest.mark.parametrize("grouped", [False, True], ids=["stratified", "leave-one-group-out"])
def test_max_statistic_pvalue_is_calibrated_on_null_data(grouped):
    p = _null_pvalues(120, grouped)
    # Rejection rate at 0.05 and 0.25 near nominal (120 datasets: binomial SD 0.02 / 0.04);
    # the best-test-layer single-test p (mean AUROC of the best layer vs 0.5) would reject far
    # more often with 5 layers to choose from.
    assert abs((p <= 0.05).mean() - 0.05) < 0.05
    assert abs((p <= 0.25).mean() - 0.25) < 0.1


@pytest.mark.slow
@pytest.mark.parametrize("grouped", [False, True], ids=["stratified", "leave-one-group-out"])
def test_max_statistic_pvalue_calibration_methods_contract(grouped):
    p = _null_pvalues(600, grouped)
    assert abs((p <= 0.05).mean() - 0.05) <= 0.02


def test_explicit_folds_and_errors():
    acts, y, g, _ = _grouped("planted", n_groups=4, per=30)
    pairs = [(np.flatnonzero(g != k), np.flatnonzero(g == k)) for k in range(4)]
    a = correctness_probe(acts, y, folds=pairs, groups=g)
    b = correctness_probe(acts, y, groups=g)  # leave-one-group-out = the same folds
    np.testing.assert_allclose(a.within_group_auroc, b.within_group_auroc)
    np.testing.assert_allclose(a.oof_scores, b.oof_scores)
    with pytest.raises(DataError, match="overlapping test sets"):
        correctness_probe(acts, y, folds=[pairs[0], pairs[0]])
    with pytest.raises(DataError, match="single value"):
        correctness_probe(acts, y, groups=np.zeros(len(y)))
    with pytest.raises(DataError, match="texts for 120 activation rows"):
        correctness_probe(acts, y, texts=["q"] * 5)
