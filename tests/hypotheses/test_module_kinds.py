"""Kinds from the method modules (similarity, geometry, homomorphism, neurons) vs their references."""

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group

from probekit.hypotheses.verdict import judge_all
from probekit.sites import Site
from tests.hypotheses.helpers import FakeContext, FakeData, FakeSuite, claim, examples

CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


def _hand_linear_cka(x, y):
    x, y = x - x.mean(0), y - y.mean(0)
    return np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def test_similarity_kind_is_linear_cka_and_beats_its_shuffled_control():
    from probekit.hypotheses.kinds.representational_similarity import (
        RepresentationalSimilaritySpec,
        representational_similarity,
    )
    from probekit.suites.spec import StatsSpec

    rng = np.random.default_rng(0)
    n, d = 120, 8
    X = rng.normal(size=(n, d))
    rotated = 3.0 * X @ ortho_group.rvs(d, random_state=1)  # CKA is 1 under rotation + scale
    noise = rng.normal(size=(n, d))
    a, b, c = Site(0, "resid_post"), Site(1, "resid_post"), Site(2, "resid_post")
    ex = examples([[0]] * n, {"label": [0] * n}, {"train": np.arange(n), "test": np.arange(n)})
    ctx = FakeContext(examples=ex, acts={a: torch.tensor(X), b: torch.tensor(rotated),
                                         c: torch.tensor(noise)},
                      stats=StatsSpec(n_permutations=50))
    same = representational_similarity(RepresentationalSimilaritySpec(site_a="resid_post@0", site_b="resid_post@1"),
                                       ctx, control=True)
    assert same.estimate == pytest.approx(1.0, abs=1e-9)
    indep = representational_similarity(RepresentationalSimilaritySpec(site_a="resid_post@0", site_b="resid_post@2"),
                                        ctx, control=True)
    assert indep.estimate == pytest.approx(_hand_linear_cka(X, noise), rel=1e-9)
    ctl = claim("greater_than_control", (0.0,))
    verdicts = judge_all([(ctl, same), (ctl, indep)], n_permutations=1000)
    assert [v.verdict for v in verdicts] == ["PASS", "FAIL"]


def test_capacity_kind_equals_the_geometry_module_and_beats_shuffled_labels():
    from probekit.geometry import manifold_capacity, manifolds_from_labels
    from probekit.hypotheses.kinds.manifold_capacity import CapacitySpec
    from probekit.hypotheses.kinds.manifold_capacity import manifold_capacity as kind
    from probekit.suites.spec import StatsSpec

    rng = np.random.default_rng(2)
    centres = rng.normal(size=(3, 24)) * 4.0
    y = np.repeat(np.arange(3), 15)
    X = centres[y] + rng.normal(size=(45, 24))
    site = Site(0, "resid_post")
    ex = examples([[0]] * 45, {"label": y.tolist()}, {"train": np.arange(45)})
    ctx = FakeContext(examples=ex, acts={site: torch.tensor(X)}, stats=StatsSpec())
    spec = CapacitySpec(site="resid_post@0", n_t=10, n_shuffles=19)
    m = kind(spec, ctx, control=True)
    ref = manifold_capacity(manifolds_from_labels(torch.tensor(X), y, max_points=50, seed=0)[0],
                            n_t=10, seed=0)
    assert m.estimate == pytest.approx(ref.capacity, rel=1e-9) and m.n == 3
    assert m.estimate == pytest.approx(1 / np.mean(1 / ref.capacity_m.numpy()), rel=1e-9)
    assert m.null.shape == (19,) and m.null.max() < m.estimate  # shuffled classes: no structure
    assert judge_all([(claim("greater_than_control", (0.0,)), m)])[0].verdict == "PASS"


def test_homomorphism_kind_equals_the_he_result():
    from probekit.homomorphism import (
        PARSE_COLUMNS,
        HEConfig,
        capture_states,
        modifier_he,
        modifier_pairs,
    )
    from probekit.hypotheses.kinds.homomorphism_error import (
        HomomorphismErrorSpec,
        homomorphism_error,
    )
    from probekit.models import build_model
    from probekit.testbeds import get_task

    task = get_task("scan", n_noise=1, max_samples=60, ood_lengths=(5, 6), n_ood_per_length=20,
                    n_ood_combo=20, seed=0)
    model = build_model(task.model_config(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64,
                                          seed=1))
    ds = task.splits()["train"]
    ex = examples(ds.tokens, {c: ds.metadata[c] for c in PARSE_COLUMNS},
                  {"train": np.arange(len(ds.tokens))})
    ex.vocab = task.vocab
    ctx = FakeContext(model=model, examples=ex, suite=FakeSuite(data=FakeData(prompt_only=False)))
    fams = ("affine",)
    mse = homomorphism_error(HomomorphismErrorSpec(layer=1, statistic="mse", families=fams), ctx)
    norm = homomorphism_error(HomomorphismErrorSpec(layer=1, families=fams), ctx)
    states = capture_states(model, ds.tokens, pad_id=task.vocab.pad_id)
    ref = modifier_he(states=states, pairs=modifier_pairs(ds), config=HEConfig(families=fams))
    assert mse.estimate == pytest.approx(ref.he[1], rel=1e-9) and mse.n == ref.n_scored
    assert norm.estimate == pytest.approx(ref.he_normalised[1], rel=1e-9)
    lo, hi = np.percentile(norm.resamples, [2.5, 97.5])
    assert lo <= norm.estimate <= hi
    # parts = "separate" ([O]): the same numbers as modifier_he on the model
    sep = homomorphism_error(HomomorphismErrorSpec(layer=1, families=fams, parts="separate",
                                                   solver="closed_form_ridge"), ctx)
    cfg = HEConfig(families=fams, parts="separate", solver="closed_form_ridge")
    ref = modifier_he(model, ds, config=cfg, pad_id=task.vocab.pad_id)
    assert sep.estimate == pytest.approx(ref.he_normalised[1], rel=1e-9)
    assert sep.details["parts"] == "separate" and "separate passes" in sep.method


def _parity_relations(seed):
    """60 modadd prompts (a, b, =) whose "relation" is the answer's parity; 40 train, 20 test."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 53, 60), rng.integers(0, 53, 60)
    tokens = [[int(x), int(y), 53] for x, y in zip(a, b)]
    answer = ((a + b) % 53).tolist()
    rel = [f"r{c % 2}" for c in answer]
    ex = examples(tokens, {"answer": answer, "label": rel},
                  {"train": np.arange(40), "test": np.arange(40, 60)})
    return tokens, answer, rel, ex


def test_neuron_deactivation_of_every_mlp_unit_equals_a_zeroing_hook():
    import probekit
    from probekit.hypotheses.kinds.neuron_deactivation import (
        NeuronDeactivationSpec,
        neuron_deactivation,
    )

    model = probekit.load_checkpoint(CHECKPOINT)
    tokens, answer, rel, ex = _parity_relations(seed=3)
    spec = NeuronDeactivationSpec(relation="r0", sites=("mlp_post@0",), k=512, n_random=5)
    m = neuron_deactivation(spec, FakeContext(model=model, examples=ex), control=True)
    test = [i for i in range(40, 60) if rel[i] == "r0"]
    toks = torch.tensor([tokens[i] for i in test])
    want = torch.tensor([answer[i] for i in test])
    with torch.no_grad():
        base = (model(toks)[:, -1].argmax(-1) == want).double()
        zeroed = model.run_with_hooks(toks, fwd_hooks=[("blocks.0.mlp.hook_post",
                                                        lambda x, hook: torch.zeros_like(x))])
        ablated = (zeroed[:, -1].argmax(-1) == want).double()
    np.testing.assert_array_equal(m.values, (base - ablated).numpy())
    assert m.estimate > 0.5  # the MLP computes the answer
    np.testing.assert_array_equal(m.control, m.values)  # a random set of all 512 units is the set


def test_neuron_deactivation_control_equals_random_sets_scored_one_by_one():
    import probekit
    from probekit.hypotheses.kinds.neuron_deactivation import (
        NeuronDeactivationSpec,
        neuron_deactivation,
    )
    from probekit.neurons import (
        FactSet,
        deactivation_ops,
        first_token_correct,
        neuron_statistics,
        random_like,
        select_neurons,
    )
    from probekit.sites import Site

    model = probekit.load_checkpoint(CHECKPOINT)
    tokens, answer, rel, ex = _parity_relations(seed=4)
    spec = NeuronDeactivationSpec(relation="r0", sites=("mlp_post@0",), k=200, n_random=5,
                                  batch_size=7)
    m = neuron_deactivation(spec, FakeContext(model=model, examples=ex), control=True)
    # the reference: each random set in its own passes (random_like with the kind's seeds)
    site = Site.parse("mlp_post@0")
    stats = neuron_statistics(model, tokens[:40], rel[:40], [site])
    units = select_neurons(stats, "r0", k=200)
    test = [i for i in range(40, 60) if rel[i] == "r0"]
    facts = FactSet(tuple(tuple(tokens[i]) for i in test), tuple(rel[i] for i in test),
                    tuple(str(answer[i]) for i in test), tuple(answer[i] for i in test))
    base = first_token_correct(model, facts, deactivation_ops(None, method="zero")).astype(float)
    drops = [base - first_token_correct(model, facts, deactivation_ops(
        random_like(units, {site: 512}, seed=j), method="zero")).astype(float) for j in range(5)]
    np.testing.assert_allclose(m.control, np.mean(drops, axis=0), atol=1e-9)
    assert np.abs(m.control).sum() > 1  # the random sets do change answers: the comparison is not vacuous
