import math

import numpy as np
import pytest
import torch

from probekit.capture import LastToken, all_layers, capture_to_store
from probekit.errors import ConfigError, DataError
from probekit.similarity import SimilarityConfig as C
from probekit.similarity import (
    StreamedRep,
    cca_similarity,
    checkpoint_drift,
    cka,
    layer_similarity,
    procrustes_distance,
    seed_similarity,
    store_reps,
)
from probekit.store import ActivationStore
from tests.conftest import random_sequences
from tests.similarity._helpers import randn


def _layers(seed: int, n: int = 120, widths=(6, 9, 5, 8)):
    """A toy 'model': each layer a noisy random map of the previous one."""
    reps, h = [], randn(seed, n, widths[0])
    for k, d in enumerate(widths):
        h = torch.tanh(h @ randn(seed + 10 + k, h.shape[1], d)) + 0.3 * randn(seed + 20 + k, n, d)
        reps.append(h)
    return reps


def _pairwise(fn, A, B):
    return np.array([[fn(a, b) for b in B] for a in A])


MEASURES = [
    ({"measure": "cka"}, lambda a, b: cka(a, b)),
    ({"measure": "cka", "debiased": True}, lambda a, b: cka(a, b, debiased=True)),
    ({"measure": "cka", "kernel": "rbf"}, lambda a, b: cka(a, b, "rbf")),
    ({"measure": "cka", "kernel": "rbf", "debiased": True}, lambda a, b: cka(a, b, "rbf", True)),
    ({"measure": "procrustes"}, procrustes_distance),
    ({"measure": "svcca"}, lambda a, b: cca_similarity(a, b, "svcca")),
    ({"measure": "pwcca", "keep": 4}, lambda a, b: cca_similarity(a, b, "pwcca", keep=4)),
]


@pytest.mark.parametrize(("opts", "fn"), MEASURES, ids=[str(m[0]) for m in MEASURES])
def test_layer_matrix_equals_pairwise_calls(opts, fn):
    A, B = _layers(0), _layers(1)[:3]
    tol = 1e-7 if opts["measure"] == "procrustes" else 1e-9  # arccos(1 - eps) ~ sqrt(eps) near 0
    within = layer_similarity(A, config=C(chunk_size=50, **opts))  # chunked: 3 blocks per pass
    np.testing.assert_allclose(within.values, _pairwise(fn, A, A), atol=tol)
    between = layer_similarity(A, B, config=C(chunk_size=7, **opts))
    np.testing.assert_allclose(between.values, _pairwise(fn, A, B), atol=tol)
    assert between.values.shape == (4, 3) and between.n == 120


def test_float32_products_are_close():
    A = _layers(2)
    ref = layer_similarity(A).values
    np.testing.assert_allclose(layer_similarity(A, config=C(dtype=torch.float32)).values, ref, atol=1e-5)


def test_tables_have_one_row_per_cell():
    res = layer_similarity(_layers(0), labels_a=["e", "l0", "l1", "l2"])
    recs = res.to_records()
    assert len(recs) == 16 and recs[1] == {"layer_a": "e", "layer_b": "l0", "value": res.values[0, 1]}
    cols = res.to_columns()
    assert cols["layer_b"][:4] == ["e", "l0", "l1", "l2"] and len(cols["value"]) == 16
    assert res.measure == "linear CKA"


def test_checkpoint_drift_to_final_and_previous():
    cks = [_layers(0)[1] + s * randn(50 + k, 120, 9) for k, s in enumerate((3.0, 2.0, 1.0, 0.5, 0.0))]
    d = checkpoint_drift(cks, labels=[f"step{s}" for s in range(5)])
    assert d.to_final[-1] == pytest.approx(1.0) and math.isnan(d.to_previous[0])
    for t in range(5):
        assert d.to_final[t] == pytest.approx(cka(cks[t], cks[-1]), abs=1e-9)
    for t in range(1, 5):
        assert d.to_previous[t] == pytest.approx(cka(cks[t - 1], cks[t]), abs=1e-9)
    assert np.all(np.diff(d.to_final) > 0)  # less noise -> closer to the final checkpoint
    assert d.to_records()[2]["checkpoint"] == "step2" and len(d.to_columns()["to_final"]) == 5
    dist = checkpoint_drift(cks, config=C(measure="procrustes"))
    assert dist.to_final[-1] == pytest.approx(0.0, abs=1e-6)


def test_seed_population_mean_and_spread():
    models = [_layers(s, widths=(6, 6, 6)) for s in range(4)]
    pop = seed_similarity(models, config=C(debiased=True))
    assert pop.pairs == ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
    ref = np.stack([_pairwise(lambda a, b: cka(a, b, debiased=True), models[a], models[b]) for a, b in pop.pairs])
    np.testing.assert_allclose(pop.values, ref, atol=1e-9)
    np.testing.assert_allclose(pop.mean, ref.mean(0), atol=1e-9)
    np.testing.assert_allclose(pop.std, ref.std(0, ddof=1), atol=1e-9)
    rec = pop.to_records()[0]
    assert rec["n_pairs"] == 6 and rec["min"] <= rec["mean"] <= rec["max"]


def test_streams_from_an_activation_store(small_model, tmp_path):
    tokens = random_sequences(90, small_model.cfg.d_vocab, seed=3)
    sites = all_layers(small_model, "resid_post")
    capture_to_store(small_model, tokens, tmp_path / "s", sites, positions=LastToken(),
                     batch_size=16, examples_per_shard=32, progress=False)
    store = ActivationStore(tmp_path / "s")
    assert len(store.manifest.shards) == 3
    streamed = layer_similarity(store_reps(store), config=C(debiased=True))
    in_memory = layer_similarity([store.load(s) for s in store.sites], config=C(debiased=True))
    np.testing.assert_allclose(streamed.values, in_memory.values, atol=1e-9)
    assert streamed.labels_a == tuple(store.sites) and streamed.n == 90
    # a second "model" whose shards are cut differently is re-chunked to align rows
    other = StreamedRep(chunks=lambda: store.load(store.sites[0]).split(7), label="x")
    between = layer_similarity(store_reps(store), [other], config=C(debiased=True))
    np.testing.assert_allclose(between.values[:, 0], in_memory.values[:, 0], atol=1e-9)


def test_bad_inputs_are_named():
    A = _layers(0)
    with pytest.raises(DataError, match="different row counts"):
        layer_similarity(A, [randn(0, 100, 4)])
    with pytest.raises(ConfigError, match="max_gram_n"):
        layer_similarity(A, config=C(kernel="rbf", max_gram_n=100))
    with pytest.raises(ConfigError, match=r"unknown similarity measure 'cosine'; registered similarity "
                       r"measures are \[.*'cka', .*'procrustes', 'pwcca', 'rsa', 'svcca'"):
        C(measure="cosine")
    bad = A[1].clone()
    bad[5, 2] = float("nan")
    with pytest.raises(DataError, match="NaN/inf"):
        layer_similarity([A[0], bad])
    with pytest.raises(DataError, match="representation 'dead' is constant over all 120 stimuli"):
        layer_similarity([A[0], torch.ones(120, 3, dtype=torch.float64)], labels_a=["x", "dead"])
    with pytest.raises(DataError, match="at least 2 checkpoints"):
        checkpoint_drift(A[:1])


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_minibatch_layer_matrix_equals_pairwise_minibatch_cka(kernel):
    from probekit.similarity import MinibatchCKA

    A = _layers(4, n=130)
    res = layer_similarity(A, config=C(batch_size=40, kernel=kernel, chunk_size=17))  # re-batched 17 -> 40
    assert res.measure == f"minibatch {kernel} CKA (batch 40)" and res.n == 130
    for i in range(4):
        for j in range(4):
            acc = MinibatchCKA(kernel=kernel)
            for s in (0, 40, 80, 120):  # the last batch has 10 rows
                acc.update(A[i][s : s + 40], A[j][s : s + 40])
            assert res.values[i, j] == pytest.approx(acc.value(), abs=1e-9)
    one = layer_similarity(A, config=C(batch_size=1000, kernel=kernel))  # one batch = debiased CKA
    np.testing.assert_allclose(one.values, _pairwise(lambda a, b: cka(a, b, kernel, True), A, A), atol=1e-9)
    with pytest.raises(ConfigError, match="needs measure='cka'"):
        C(measure="procrustes", batch_size=40)


@pytest.mark.parametrize("space", ["gram", "feature"])
def test_gram_and_feature_space_layer_matrices_agree_when_d_exceeds_n(space):
    A = _layers(6, n=25, widths=(40, 60, 30))  # n < d: "auto" picks the n x n Gram route
    for opts, fn in [({"measure": "cka"}, cka), ({"measure": "cka", "debiased": True},
                     lambda a, b: cka(a, b, debiased=True)), ({"measure": "procrustes"}, procrustes_distance)]:
        got = layer_similarity(A, config=C(space=space, **opts)).values
        np.testing.assert_allclose(got, _pairwise(fn, A, A), atol=1e-7)
        np.testing.assert_allclose(layer_similarity(A, config=C(**opts)).values, got, atol=1e-7)
