import numpy as np
import pytest
import torch

from probekit.errors import ConfigError, DataError
from probekit.neurons import (
    DeactivationConfig,
    FactSet,
    deactivation_ops,
    first_token_correct,
    greedy_under,
    relation_neuron_experiments,
    select_neurons,
)

from .planted import PLANTED_SITES, RED, IdTokenizer, planted_study

SITES = list(PLANTED_SITES)


@pytest.fixture(scope="module")
def planted():
    return planted_study()


def test_selection_recovers_planted_relation_units(planted):
    _, _, stats = planted
    for r, name in enumerate(stats.relations):
        chosen = select_neurons(stats, name, k=RED)
        truth = {(SITES[0], r * RED + j) for j in range(RED)}
        assert chosen.keys() == truth  # precision 1, recall 1
        assert float(stats.ap[SITES[0]][r * RED, r]) == 1.0


def test_experiments_show_intra_not_inter_and_beat_random_sets(planted):
    model, fs, stats = planted
    cfg = DeactivationConfig(k=RED, fraction=None, n_random=39, shares=(0.25, 0.5, 1.0),
                             n_single=2, generation=False)
    res = relation_neuron_experiments(model, stats, fs, cfg)
    assert res.baseline_first.tolist() == [1.0, 1.0, 1.0]
    np.testing.assert_array_equal(res.change_first.numpy(), -np.eye(3))
    np.testing.assert_array_equal(res.change_first_correct.numpy(), -np.eye(3))
    # cumulativity: one of four redundant units (25%) removes nothing, half removes every fact
    np.testing.assert_array_equal(res.cumulative.numpy(), [[0, 1, 1]] * 3)
    np.testing.assert_array_equal(res.single.numpy(), np.zeros((3, 2)))
    # the lowest-AP units belong to other relations: r itself is untouched
    np.testing.assert_array_equal(np.diag(res.lowest_change.numpy()), np.zeros(3))
    for t in res.tests:
        assert t.statistic == 1.0 and t.p_value <= 0.05
    assert max(res.p_holm) <= 0.15
    assert res.interference == ()  # no relation gains
    np.testing.assert_allclose(res.jaccard, np.eye(3))
    d = res.to_dict()
    assert d["set_sizes"] == {"rel0": RED, "rel1": RED, "rel2": RED}
    assert d["baseline_generation"] == [None, None, None]


def test_greedy_under_ablation_equals_stepwise_reference(planted):
    model, fs, stats = planted
    ops = deactivation_ops(select_neurons(stats, "rel0", k=RED))
    got = greedy_under(model, fs.tokens[:5], ops, max_new_tokens=1)
    ok = first_token_correct(model, fs.subset(np.arange(len(fs.tokens)) < 5), ops)
    assert [g[0] for g in got] != list(fs.gold_first_token[:5])
    assert not ok.any()
    base = greedy_under(model, fs.tokens[:5], max_new_tokens=1)
    assert [b[0] for b in base] == list(fs.gold_first_token[:5])


def test_mean_ablation_and_bad_input(planted):
    model, fs, stats = planted
    s = select_neurons(stats, "rel1", k=RED)
    with pytest.raises(ConfigError, match="needs the mean response"):
        deactivation_ops(s, method="mean")
    means = {site: torch.zeros(stats.ap[site].shape[0]) for site in SITES}
    zero = first_token_correct(model, fs, deactivation_ops(s))
    mean0 = first_token_correct(model, fs, deactivation_ops(s, method="mean", means=means))
    np.testing.assert_array_equal(zero, mean0)  # mean 0 == zero ablation
    with pytest.raises(ConfigError, match="unknown deactivation method"):
        deactivation_ops(s, method="max")
    with pytest.raises(ConfigError, match=r"n_random must be >= 5 \(19 for p < 0.05\), got 2"):
        DeactivationConfig(n_random=2)
    with pytest.raises(DataError, match="no test facts for relation 'rel2'"):
        relation_neuron_experiments(
            model, stats, fs.subset(np.array(fs.relations) != "rel2"),
            DeactivationConfig(k=RED, fraction=None, n_random=5, generation=False),
        )
    with pytest.raises(DataError, match="relation_mask|entries for"):
        FactSet(((1, 2),), ("a", "b"), ("x",), (1,))


def test_to_dict_is_strict_json_when_the_random_null_is_degenerate(planted):
    import json

    model, fs, stats = planted
    # every random set leaves every relation untouched (silent units): sd of the null is 0
    cfg = DeactivationConfig(k=1, fraction=None, n_random=5, shares=(1.0,), n_single=1,
                             generation=False)
    res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert all(t["z_vs_random"] is None or np.isfinite(t["z_vs_random"]) for t in d["tests"])


def test_greedy_under_sets_equals_set_by_set(planted):
    from probekit.neurons import greedy_under_sets

    model, fs, stats = planted
    op_sets = [[], deactivation_ops(select_neurons(stats, "rel0", k=RED)),
               deactivation_ops(select_neurons(stats, "rel2", k=2))]
    # n_ctx = 2 (one-token prompts): one new token; batch 5 mixes sets within a forward
    idx = list(range(0, len(fs.tokens), max(1, len(fs.tokens) // 7)))[:7]
    prompts = [fs.tokens[i] for i in idx]
    got = greedy_under_sets(model, prompts, op_sets, max_new_tokens=1, batch_size=5)
    for g, ops in enumerate(op_sets):
        assert got[g] == greedy_under(model, prompts, ops, max_new_tokens=1)
    assert got[0] != got[1]  # rel0's units change some continuation



def test_generation_test_and_p_floors(planted, monkeypatch):
    from probekit.neurons import generation_correct_sets

    model, fs, stats = planted
    monkeypatch.setattr(model, "tokenizer", IdTokenizer(), raising=False)
    cfg = DeactivationConfig(k=RED, fraction=None, n_random=19, shares=(1.0,), n_single=1,
                             generation=True, max_new_tokens=1)
    res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
    # one greedy token = the first-token metric: the same drops, random nulls and p-values
    np.testing.assert_array_equal(res.baseline_generation.numpy(), res.baseline_first.numpy())
    np.testing.assert_allclose(res.random_own_generation.numpy(), res.random_own.numpy())
    assert [t.p_value for t in res.tests_generation] == [t.p_value for t in res.tests]
    assert res.p_holm_generation == res.p_holm
    assert res.p_floor == pytest.approx(1 / 20) and res.p_holm_floor == pytest.approx(3 / 20)
    assert all(t.p_value == res.p_floor for t in res.tests_generation)  # at its floor
    d = res.to_dict()
    assert d["generation"]["tests"][0]["p_floor"] == pytest.approx(0.05)
    assert d["tests"][0]["p_holm_floor"] == pytest.approx(0.15)
    ok = generation_correct_sets(model, fs, [[], deactivation_ops(res.sets["rel1"])],
                                 max_new_tokens=1)
    np.testing.assert_array_equal(ok[1], np.array(fs.relations) != "rel1")
