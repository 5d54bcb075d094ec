import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

import probekit
from probekit.capture import Site
from probekit.errors import ConfigError, DataError
from probekit.neurons import (
    average_precision,
    jaccard_matrix,
    neuron_statistics,
    random_like,
    roc_auc,
    select_neurons,
    statistics_from_responses,
)


def _planted(n_per=40, n_units=60, seed=0):
    """Responses where units 3*r .. 3*r+2 fire for relation r (4 relations), the rest are noise."""
    g = torch.Generator().manual_seed(seed)
    rel = np.repeat(np.array(["a", "b", "c", "d"]), n_per)
    x = torch.randn(len(rel), n_units, generator=g, dtype=torch.float64)
    for r in range(4):
        x[rel == "abcd"[r], 3 * r : 3 * r + 3] += 3.0
    return x, list(rel)


def test_ranking_equals_sklearn_with_ties():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 4, (120, 25), generator=g).to(torch.float64)  # heavy ties
    x[:, :8] = torch.randn(120, 8, generator=g, dtype=torch.float64)
    y = torch.rand(120, generator=g) < 0.25
    ref_ap = [average_precision_score(y.numpy(), x[:, i].numpy()) for i in range(25)]
    ref_auc = [roc_auc_score(y.numpy(), x[:, i].numpy()) for i in range(25)]
    np.testing.assert_allclose(average_precision(x, y).numpy(), ref_ap, atol=1e-9)
    np.testing.assert_allclose(roc_auc(x, y).numpy(), ref_auc, atol=1e-9)


def test_statistics_equal_brute_force_and_recover_planted_units():
    x, rel = _planted()
    site = Site(0, "mlp_post")
    stats = statistics_from_responses({site: x}, rel)
    assert stats.relations == ("a", "b", "c", "d")
    for r, name in enumerate(stats.relations):
        y = np.array(rel) == name
        ref = [average_precision_score(y, x[:, i].numpy()) for i in range(x.shape[1])]
        np.testing.assert_allclose(stats.ap[site][:, r].numpy(), ref, atol=1e-6)
        np.testing.assert_allclose(
            stats.act_prob[site][:, r].numpy(), (x[y] > 0).double().mean(0).numpy()
        )
        chosen = select_neurons(stats, name, k=3)
        assert chosen.keys() == {(site, 3 * r + j) for j in range(3)}  # precision = recall = 1
        assert stats.ap[site][3 * r, r] > 0.9 > 0.4 > stats.chance_ap(name)
    # noise units sit near chance AP (0.25)
    assert abs(float(stats.ap[site][12:, 0].mean()) - 0.25) < 0.05


def test_selection_fraction_lowest_random_and_overlap():
    x, rel = _planted()
    sites = (Site(0, "mlp_pre"), Site(1, "mlp_pre"))
    stats = statistics_from_responses({sites[0]: x[:, :30], sites[1]: x[:, 30:]}, rel)
    top = select_neurons(stats, "a", fraction=0.05)  # 3 of 60 units, ranked across sites
    assert len(top) == 3 and top.counts() == {sites[0]: 3, sites[1]: 0}
    low = select_neurons(stats, "a", k=3, lowest=True)
    assert not (low.keys() & top.keys())
    rnd = random_like(top, {s: 30 for s in sites}, seed=0)
    assert rnd.counts() == top.counts() and rnd.keys() != top.keys()
    assert random_like(top, {s: 30 for s in sites}, seed=0).keys() == rnd.keys()
    sets = [select_neurons(stats, r, k=3) for r in "abcd"]
    np.testing.assert_allclose(jaccard_matrix(sets), np.eye(4))
    assert top.top(1).keys() == {(sites[0], top.ranked[0][1])}


def test_bad_input_is_named():
    x, rel = _planted()
    site = Site(0, "mlp_post")
    with pytest.raises(DataError, match="fewer than 2 prompts"):
        statistics_from_responses({site: x[:161]}, rel[:160] + ["e"])
    with pytest.raises(DataError, match="at least 2 relations"):
        statistics_from_responses({site: x}, ["a"] * len(rel))
    stats = statistics_from_responses({site: x}, rel)
    with pytest.raises(ConfigError, match="larger than the 60 candidate units"):
        select_neurons(stats, "a", k=61)
    with pytest.raises(ConfigError, match="unknown relation 'z'"):
        select_neurons(stats, "z", k=1)
    with pytest.raises(DataError, match="3 prompts but 2 relation ids"):
        neuron_statistics(None, [[1], [2], [3]], ["a", "b"], [site])


@pytest.fixture(scope="module")
def modadd():
    return probekit.load_checkpoint("probes/checkpoints/modadd-p53")


@pytest.mark.parametrize("response", ["mean", "last"])
def test_streaming_statistics_independent_of_batch_and_padding(modadd, tmp_path, response):
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 4, 48)
    prompts = [rng.integers(0, 53, n).tolist() for n in lengths]
    rel = [f"r{a % 3}" for a in (p[0] for p in prompts)]  # relation = first operand mod 3
    sites = [Site(0, "mlp_pre"), Site(0, "mlp_post")]
    ref = neuron_statistics(modadd, prompts, rel, sites, response=response, batch_size=48)
    other = neuron_statistics(
        modadd, prompts, rel, sites, response=response, batch_size=5, padding_side="left",
        store_dir=tmp_path / "s",
    )
    for s in sites:
        torch.testing.assert_close(ref.ap[s], other.ap[s], atol=1e-6, rtol=0)
        torch.testing.assert_close(ref.mean[s], other.mean[s], atol=1e-5, rtol=0)
    # brute force: one prompt at a time, sklearn AP per unit
    from probekit.capture import LastToken, SpanMean, collect_activations

    rows = []
    for p in prompts:
        rule = SpanMean([(0, len(p))]) if response == "mean" else LastToken()
        rows.append(collect_activations(modadd, [p], [sites[1]], positions=rule)[sites[1]][0])
    resp = torch.stack(rows).double()
    y = np.array(rel) == "r1"
    r = ref.relations.index("r1")
    want = [average_precision_score(y, resp[:, i].numpy()) for i in range(resp.shape[1])]
    np.testing.assert_allclose(ref.ap[sites[1]][:, r].numpy(), want, atol=1e-6)


def test_nth_is_one_ranked_unit():
    x, rel = _planted()
    sites = (Site(0, "mlp_pre"), Site(1, "mlp_pre"))
    stats = statistics_from_responses({sites[0]: x[:, :30], sites[1]: x[:, 30:]}, rel)
    top = select_neurons(stats, "b", k=3)
    for i in range(3):
        site, unit, _ = top.ranked[i]
        assert top.nth(i).keys() == {(site, unit)} and set(top.nth(i).units) == set(sites)
    with pytest.raises(ConfigError, match="outside 0..2"):
        top.nth(3)
