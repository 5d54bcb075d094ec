"""#36: a correctness probe the labels cannot test says "not testable" with the reason."""

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.probes import CorrectnessConfig, correctness_probe


def acts(n=60, L=2, d=4, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).normal(size=(L, n, d)).astype(np.float32))


@pytest.mark.parametrize(("correct", "reason"), [
    (np.ones(60, bool), "all 60 answers are correct"),
    (np.zeros(60, bool), "all 60 answers are wrong"),
    (np.arange(60) < 2, "2 correct and 58 wrong answers: 3-fold CV needs at least 3 of each"),
])
def test_degenerate_labels_are_not_testable(correct, reason):
    res = correctness_probe(acts(), correct, config=CorrectnessConfig(n_permutations=20))
    assert reason in res.not_testable
    assert res.max_stat_test is None and not res.baselines  # never a test, never a verdict
    assert np.isnan(res.auroc_mean).all()
    assert res.n_correct == int(correct.sum()) and res.n_incorrect == 60 - int(correct.sum())
    assert "not testable" in res._summary() and res.to_records() == []
    (block,) = res._blocks()
    assert block.level == "warning" and reason in block.text


def test_fold_training_on_one_class_is_not_testable():
    correct = np.arange(60) < 30
    groups = np.where(correct, "a", "b")  # leave-one-group-out trains on one class
    res = correctness_probe(acts(), correct, groups=groups)
    assert "fold 0 trains on rows of one class only" in res.not_testable


def test_testable_labels_give_a_test_and_options_only_through_the_config():
    correct = np.arange(60) % 2 == 0
    a = correctness_probe(acts(), correct, config=CorrectnessConfig(n_permutations=20))
    assert a.not_testable == "" and a.max_stat_test is not None
    assert len(a.max_stat_test.null_distribution) == 20
    with pytest.raises(ConfigError, match=r"CorrectnessConfig.group_split must be one of \['logo', 'kfold'\] .*got 'loo'"):
        CorrectnessConfig(group_split="loo")
    with pytest.raises(ConfigError, match="n_folds = 1"):
        correctness_probe(acts(), correct, config=CorrectnessConfig(n_folds=1))
    # the keyword form of 0.1.0 is gone: one way to pass options, the frozen config
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_folds'"):
        correctness_probe(acts(), correct, n_folds=3)
