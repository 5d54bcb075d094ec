"""The random-set null: batched scoring equals set-by-set scoring; p-values at the floor for
planted relation units and (conservatively) uniform where no unit is relation-specific."""

import numpy as np
import pytest

from probekit.errors import ConfigError
from probekit.neurons import (
    DeactivationConfig,
    FactSet,
    deactivation_ops,
    first_token_correct,
    first_token_correct_sets,
    neuron_statistics,
    random_like,
    relation_neuron_experiments,
    select_neurons,
)
from probekit.sites import Site

from .planted import D_MLP, RED, graded_null_model, planted_model

SITES = [Site(0, "mlp_post"), Site(1, "mlp_post")]


def _factset(facts):
    return FactSet(tuple(tuple(f[0]) for f in facts), tuple(f[1] for f in facts),
                   tuple(str(f[2]) for f in facts), tuple(f[2] for f in facts))


@pytest.fixture(scope="module")
def planted():
    model, facts = planted_model()
    fs = _factset(facts)
    stats = neuron_statistics(model, list(fs.tokens), list(fs.relations), SITES)
    return model, fs, stats


def test_batched_sets_equal_set_by_set(planted):
    model, fs, stats = planted
    widths = dict.fromkeys(SITES, D_MLP)
    own = [select_neurons(stats, r, k=RED) for r in stats.relations]
    sets = [*own, own[0].top(1), own[1].top(2), *(random_like(own[0], widths, seed=s)
                                                  for s in range(40))]
    op_sets = [deactivation_ops(s) for s in sets] + [[]]
    # 7 rows per forward: set groups straddle forwards, several sets share one forward
    batched = first_token_correct_sets(model, fs, op_sets, batch_size=7)
    one_by_one = np.stack([first_token_correct(model, fs, ops) for ops in op_sets])
    np.testing.assert_array_equal(batched, one_by_one)
    assert batched.shape == (len(op_sets), len(fs.tokens))
    # not a trivial agreement: each planted set kills exactly its relation, the empty set nothing
    rel = np.array(fs.relations)
    for r in range(3):
        np.testing.assert_array_equal(batched[r], rel != f"rel{r}")
    assert batched[-1].all() and batched[3].all() and not batched[4][rel == "rel1"].any()
    bad = [deactivation_ops(own[0])[0].__class__(site=SITES[0], features=(1,), rows=(0,))]
    with pytest.raises(ConfigError, match="already has rows"):
        first_token_correct_sets(model, fs, [bad])


def test_default_random_sets_reach_holm_and_planted_relations_sit_at_the_floor(planted):
    model, fs, stats = planted
    cfg = DeactivationConfig(k=RED, fraction=None, shares=(1.0,), n_single=1, n_spread=5,
                             generation=False)
    assert cfg.random_sets(3) == 59 and cfg.random_sets(7) == 139
    res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
    assert res.n_random == 59 and res.random_change.shape == (3, 5, 3)
    truth = [{r * RED + j for j in range(RED)} for r in range(3)]
    for r, t in enumerate(res.tests):
        # a random set removes r's facts iff it holds >= 2 of r's 4 planted units (half of them)
        hits = sum(
            len(truth[r] & set(random_like(res.sets[f"rel{r}"], dict.fromkeys(SITES, D_MLP),
                                           seed=j).units[SITES[0]].tolist())) >= 2
            for j in range(59)
        )
        np.testing.assert_array_equal(-res.random_own[r].numpy() == 1.0,
                                      [_kills(res, r, j, truth) for j in range(59)])
        assert t.statistic == 1.0
        assert t.p_value == (1 + hits) / 60
        assert hits <= 2
    # the first n_spread random sets are the same sets scored on every relation
    np.testing.assert_array_equal(res.random_own[:, :5].numpy(),
                                  np.stack([res.random_change[i, :, i].numpy() for i in range(3)]))
    d = res.to_dict()
    assert d["n_random"] == 59 and d["n_spread"] == 5 and len(d["random_own"][0]) == 59


def _kills(res, r, j, truth):
    units = random_like(res.sets[f"rel{r}"], dict.fromkeys(SITES, D_MLP), seed=j).units[SITES[0]]
    return len(truth[r] & set(units.tolist())) >= 2


def test_floor_with_the_default_sets_rejects_every_planted_relation_after_holm():
    # 256 units per layer: a random 4-set holds >= 2 of r's 4 units with probability 0.1%
    model, facts = planted_model(d_mlp=256)
    fs = _factset(facts)
    stats = neuron_statistics(model, list(fs.tokens), list(fs.relations), SITES)
    cfg = DeactivationConfig(k=RED, fraction=None, n_spread=1, shares=(1.0,), n_single=1,
                             generation=False)
    res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
    assert res.n_random == 59
    assert [t.p_value for t in res.tests] == [1 / 60] * 3  # the floor: no random set matches
    assert res.p_holm == (0.05, 0.05, 0.05)  # 3 / 60: Holm over 3 relations reaches alpha


@pytest.mark.slow
def test_null_pvalues_are_uniform_without_relation_specific_units():
    ps = []
    for seed in range(40):
        model, facts = graded_null_model(seed)
        fs = _factset(facts)
        stats = neuron_statistics(model, list(fs.tokens), list(fs.relations), [Site(0, "mlp_post")])
        cfg = DeactivationConfig(k=8, fraction=None, n_random=19, n_spread=1, shares=(1.0,),
                                 n_single=1, generation=False, batch_size=512, seed=seed)
        res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
        assert res.baseline_first.tolist() == [1.0, 1.0, 1.0]
        ps.extend(t.p_value for t in res.tests)
    ps = np.array(ps)
    # discrete and conservative (ties count against r): P(p <= a) <= a, mean a bit above 1/2
    assert np.mean(ps <= 0.05) <= 0.1
    assert 0.3 <= np.mean(ps <= 0.5) <= 0.65
    assert 0.45 <= ps.mean() <= 0.7
    assert np.mean(ps == 1.0) < 0.2  # the drops vary between sets: not a degenerate null


def test_post_ablation_reports_the_same_neurons_at_mlp_post():
    # ranked at mlp_pre (ReLU): zeroing pre unit i == zeroing post unit i, so both rows match
    model, facts = planted_model(d_mlp=256)
    fs = _factset(facts)
    pre = [Site(0, "mlp_pre"), Site(1, "mlp_pre")]
    stats = neuron_statistics(model, list(fs.tokens), list(fs.relations), pre)
    cfg = DeactivationConfig(k=RED, fraction=None, n_random=59, n_spread=1, shares=(1.0,),
                             n_single=1, generation=False, post=True)
    res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
    for r in range(3):
        post = res.sets[f"rel{r}"].at_mlp_post()
        assert post.keys() == {(SITES[0], r * RED + j) for j in range(RED)}
    np.testing.assert_array_equal(res.change_first.numpy(), -np.eye(3))
    np.testing.assert_array_equal(res.change_post.numpy(), -np.eye(3))
    assert [t.p_value for t in res.tests_post] == [1 / 60] * 3
    assert res.to_dict()["post"]["set_sizes"] == {f"rel{r}": RED for r in range(3)}
    with pytest.raises(ConfigError, match="post=True deactivates at mlp_post with zeros only"):
        DeactivationConfig(post=True, method="mean")


def test_at_mlp_post_merges_gate_and_up_units_of_one_layer():
    import torch

    from probekit.neurons import NeuronSet

    gate, up = Site(2, "mlp_pre"), Site(2, "mlp_pre_linear")
    s = NeuronSet(units={gate: torch.tensor([1, 2]), up: torch.tensor([2, 5])},
                  ranked=((up, 2, 0.9), (gate, 1, 0.8), (gate, 2, 0.7), (up, 5, 0.6)), label="x")
    post = s.at_mlp_post()
    site = Site(2, "mlp_post")
    assert post.units[site].tolist() == [1, 2, 5] and len(post) == 3
    assert [(u, sc) for _, u, sc in post.ranked] == [(2, 0.9), (1, 0.8), (5, 0.6)]
    with pytest.raises(ConfigError, match="MLP units only"):
        NeuronSet(units={Site(0, "resid_post"): torch.tensor([0])}, ranked=(), label="y").at_mlp_post()
