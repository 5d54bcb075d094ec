"""Similarity measures as registered strategies: values unchanged, a toy measure plugs in, names listed."""

import json
import typing
from pathlib import Path

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.similarity import (
    SimilarityConfig,
    SimilarityMeasure,
    checkpoint_drift,
    layer_similarity,
    rdm,
    register_similarity_measure,
    registered_similarity_measures,
    rsa,
    seed_similarity,
    similarity_measure,
)
from probekit.similarity.measure import SIMILARITY_MEASURES
from tests.similarity._helpers import randn
from tests.similarity.test_layers import _layers

BEFORE = json.loads((Path(__file__).parent / "data" / "layer_values_before_refactor.json").read_text())


def _inputs():
    A, B = _layers(0), _layers(1)[:3]
    cks = [A[1] + s * randn(50 + k, 120, 9) for k, s in enumerate((3.0, 2.0, 1.0, 0.0))]
    models = [_layers(s, widths=(6, 6, 6)) for s in range(3)]
    return A, B, cks, models


@pytest.mark.parametrize("case", sorted(BEFORE["cases"]))
def test_every_measure_gives_the_values_of_the_string_dispatch_it_replaced(case):
    """Numbers recorded from the pre-strategy ``layers.py`` (measure picked by string) on fixed inputs."""
    opts, want = BEFORE["cases"][case], BEFORE["values"][case]
    A, B, cks, models = _inputs()
    within = layer_similarity(A, config=SimilarityConfig(chunk_size=50, **opts))
    between = layer_similarity(A, B, config=SimilarityConfig(chunk_size=7, **opts))
    drift = checkpoint_drift(cks, config=SimilarityConfig(**opts))
    pop = seed_similarity(models, config=SimilarityConfig(**opts))
    # arccos(1 - eps) ~ sqrt(2 eps): a Procrustes self-distance moves by ~1e-8 with the SVD's rounding
    tol = 1e-7 if opts["measure"] == "procrustes" else 1e-12
    for got, key in [(within.values, "within"), (between.values, "between"), (drift.to_final, "to_final"),
                     (drift.to_previous[1:], "to_previous"), (pop.values, "seeds")]:
        np.testing.assert_allclose(got, np.array(want[key]), rtol=0, atol=tol, err_msg=f"{case} {key}")
    assert within.measure == want["label"] and [within.n, between.n, drift.n, pop.n] == want["n"]


@pytest.fixture
def toy_measures():
    """Two toy measures registered for one test: a symmetric and an asymmetric one."""

    class MeanAbsCorrelation(SimilarityMeasure):
        """Mean |Pearson r| between the first columns (a toy): symmetric, in [0, 1]."""

        name = "toy_first_column"

        def label(self, config):
            return "toy first-column |r|"

        def pair_values(self, reps, labels, pairs, config):
            X = [torch.as_tensor(r)[:, 0].double() for r in reps]
            out = {(i, j): abs(float(torch.corrcoef(torch.stack([X[i], X[j]]))[0, 1])) for i, j in pairs}
            return out, X[0].shape[0]

    class WidthRatio(SimilarityMeasure):
        """``d_i / d_j``: asymmetric, so a within-model matrix needs both orders."""

        name = "toy_width_ratio"
        symmetric = False

        def label(self, config):
            return "width ratio"

        def pair_values(self, reps, labels, pairs, config):
            return {(i, j): reps[i].shape[1] / reps[j].shape[1] for i, j in pairs}, reps[0].shape[0]

    with SIMILARITY_MEASURES.temporary():
        register_similarity_measure(MeanAbsCorrelation)
        register_similarity_measure(WidthRatio)
        yield MeanAbsCorrelation, WidthRatio


def test_a_toy_measure_runs_through_the_layer_functions(toy_measures):
    toy, ratio = toy_measures
    assert {"toy_first_column", "toy_width_ratio"} <= set(registered_similarity_measures())
    A, B = _layers(0), _layers(1)[:3]
    res = layer_similarity(A, B, config=SimilarityConfig(measure="toy_first_column"))
    want = [[abs(np.corrcoef(a[:, 0].numpy(), b[:, 0].numpy())[0, 1]) for b in B] for a in A]
    np.testing.assert_allclose(res.values, want, atol=1e-9)
    assert res.measure == "toy first-column |r|" and res.values.shape == (4, 3)
    within = layer_similarity(A, config=SimilarityConfig(measure="toy_width_ratio"))
    widths = np.array([a.shape[1] for a in A], dtype=float)
    np.testing.assert_allclose(within.values, widths[:, None] / widths[None, :])  # both triangles
    drift = checkpoint_drift(A[:2] + [A[1]], config=SimilarityConfig(measure="toy_first_column"))
    assert drift.to_final[-1] == pytest.approx(1.0) and drift.to_final[1] == pytest.approx(1.0)
    # a second class under a registered name is refused, naming both classes
    other = type("Impostor", (toy,), {})
    with pytest.raises(ConfigError, match=r"similarity measure 'toy_first_column' is already registered by "
                       r"\S*toy_measures\.<locals>\.MeanAbsCorrelation; \S*Impostor cannot register"):
        register_similarity_measure(other)
    # a toy's own option check runs when the config is built
    with pytest.raises(ConfigError, match="batch_size=8 .*needs measure='cka'"):
        SimilarityConfig(measure="toy_width_ratio", batch_size=8)
    assert "toy_first_column" in registered_similarity_measures()


def test_toy_measures_end_with_their_test():
    assert not {"toy_first_column", "toy_width_ratio"} & set(registered_similarity_measures())


def test_unknown_measure_lists_the_registered_ones_and_suggests_a_close_one():
    with pytest.raises(ConfigError, match=r"unknown similarity measure 'pwca' \(did you mean 'pwcca'\?\); "
                       r"registered similarity measures are \['cka', 'procrustes', 'pwcca', 'rsa', 'svcca'\]"):
        SimilarityConfig(measure="pwca")
    with pytest.raises(ConfigError, match="unknown similarity measure 'kcca'"):
        similarity_measure("kcca")


def test_measure_properties_and_option_checks():
    assert similarity_measure("procrustes").distance and not similarity_measure("cka").distance
    assert not similarity_measure("pwcca").symmetric and similarity_measure("svcca").symmetric
    with pytest.raises(ConfigError, match=r"SimilarityConfig.kernel must be one of \[.linear., .rbf.\], got .cosine."):
        SimilarityConfig(kernel="cosine")
    with pytest.raises(ConfigError, match=r"SimilarityConfig.chunk_size must be >= 1 \(rows per block\), got 0"):
        SimilarityConfig(chunk_size=0)
    with pytest.raises(ConfigError, match=r"SimilarityConfig.batch_size must be >= 4 .*got 2"):
        SimilarityConfig(batch_size=2)
    with pytest.raises(ConfigError, match="rdm_metric='manhattan' is not supported"):
        SimilarityConfig(measure="rsa", rdm_metric="manhattan")


@pytest.mark.parametrize(("metric", "method"), [("correlation", "spearman"), ("euclidean", "kendall_tau_a")])
def test_rsa_layer_matrix_equals_pairwise_rsa_of_rdms(metric, method):
    A, B = _layers(2, n=40), _layers(3, n=40)[:2]
    config = SimilarityConfig(measure="rsa", rdm_metric=metric, rsa_method=method)
    res = layer_similarity(A, B, config=config)
    want = [[rsa(rdm(a, metric), rdm(b, metric), method) for b in B] for a in A]
    np.testing.assert_allclose(res.values, want, atol=1e-9)
    within = layer_similarity(A, config=config)
    assert np.allclose(np.diag(within.values), 1.0) and np.allclose(within.values, within.values.T)
    assert res.measure == f"RSA ({method}, {metric} RDMs)"
    with pytest.raises(ConfigError, match="max_gram_n=30"):
        layer_similarity(A, config=SimilarityConfig(measure="rsa", max_gram_n=30))


def test_the_suite_section_offers_every_builtin_measure():
    """``[[similarity]] measure`` spells the choices (suite validation imports no torch): keep them in step."""
    from probekit.suites.analyses.similarity import LayerSimilaritySpec

    hints = typing.get_type_hints(LayerSimilaritySpec)
    builtin = {n for n in registered_similarity_measures()
               if type(similarity_measure(n)).__module__.startswith("probekit.")}
    assert set(typing.get_args(hints["measure"])) == builtin
