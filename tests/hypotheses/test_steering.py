"""Necessity by steering: the planted model whose answer is carried by one known direction ``u``.

``resid_post@0`` of the planted model is the token's embedding ``s_t u + noise`` (``s_t = +-1``,
noise orthogonal to ``u``) and the unembedding reads ``u`` alone (``A``: ``+u``, ``B``: ``-u``; a
tie reads as ``A``), so every prediction below is exact: a prompt of sign ``s`` answers ``A`` after
a step ``delta`` along ``u`` iff ``s + delta >= 0``.
"""

import numpy as np
import pytest
import torch

import probekit.interventions.run as run_module
from probekit.capture import count_hooks
from probekit.errors import ConfigError
from probekit.hypotheses.necessity import (
    Substrate,
    necessity,
    probe_direction_substrate,
    steer_probe_directions,
    steer_units,
)
from probekit.interventions import Read, direction_steering, run_with_interventions, unit_steering
from probekit.sites import Site
from tests.hypotheses.helpers import FakeContext, examples
from tests.hypotheses.test_necessity import N_INPUT, planted_model

SITE = Site(0, "resid_post")


def _known_u(u):
    return Substrate(description="u", size=1, ops=[], random_ops=lambda seed: [], details={}, basis=u[None, :])


def _predicted_correct(sign, delta):
    """Correct iff the answer's sign survives the step ``delta`` along ``u`` (a tie reads as A)."""
    coord = sign + delta
    return np.where(sign > 0, coord >= 0, coord < 0).astype(float)


@pytest.mark.parametrize(("strength", "toward", "flipped"), [
    (0.9, 1, None),   # a step of 0.9 sd does not cross 0: nothing changes
    (1.1, 1, -1),     # toward A (class 1): every B prompt answers A
    (3.0, 1, -1),
    (1.1, 0, 1),      # toward B (class 0): every A prompt answers B
    (-1.1, 1, 1),     # a negative strength steers away from the class
])
def test_steering_the_known_direction_moves_answers_to_the_predicted_class(strength, toward, flipped):
    model, tokens, answers, u, X, sign = planted_model()
    y = (sign > 0).astype(int)
    sub = steer_probe_directions(SITE, _known_u(u), X, y, strength=strength, toward=toward)
    assert sub.details["sigma"] == pytest.approx(1.0)  # the u-coordinates are +-1, balanced
    np.testing.assert_allclose(sub.basis[0], u if toward == 1 else -u, atol=1e-9)
    res = necessity(model, tokens, answers, sub, n_random=20, seed=0)
    assert res.base.mean() == 1.0
    want = np.zeros(N_INPUT) if flipped is None else (sign == flipped).astype(float)
    np.testing.assert_array_equal(res.drop, want)  # exactly the prompts of the other class flip
    assert res.ablated.mean() == (1.0 if flipped is None else 0.5)
    # control: the same step norm |strength| * sigma along Haar-random directions; only its
    # u-component moves the answer, so each seed's accuracy is predicted exactly
    steps = []
    for seed in range(20):
        (op,) = sub.random_ops(seed)
        vec = op.scale * op.vector.double().numpy()
        assert np.linalg.norm(vec) == pytest.approx(abs(strength) * sub.details["sigma"])
        steps.append(_predicted_correct(sign, float(vec @ u)))
    assert res.random_accuracy == pytest.approx(float(np.mean(steps)))
    assert res.random_accuracy >= 0.9


def test_steering_op_adds_alpha_sigma_u_through_the_hooks_and_leaves_nothing_behind(monkeypatch):
    model, tokens, answers, u, X, sign = planted_model()
    before = run_with_interventions(model, tokens, []).output
    sub = steer_probe_directions(SITE, _known_u(u), X, (sign > 0).astype(int), strength=2.5)
    names = []
    real = run_module._hooks

    def spy(*args, **kwargs):
        hooks = real(*args, **kwargs)  # the intervention layer's (site, hook) pairs
        names.extend(site.name for site, _ in hooks)
        return hooks

    monkeypatch.setattr(run_module, "_hooks", spy)
    out = run_with_interventions(model, tokens, [*sub.ops, Read(site=SITE)])
    assert set(names) == {SITE.name} and SITE.name == "blocks.0.hook_resid_post"
    np.testing.assert_allclose(out.reads[SITE][:, 0].double().numpy(), X + 2.5 * 1.0 * u, atol=1e-5)
    assert (out.output[:, 0, 0] > 0).all()  # every prompt now answers A
    monkeypatch.undo()
    assert count_hooks(model) == 0  # hooks removed
    after = run_with_interventions(model, tokens, []).output
    assert torch.equal(before, after)


@pytest.mark.parametrize("side", ["right", "left"])
def test_steering_ops_equal_a_hand_written_hook_on_a_tiny_model(side):
    """Both ops vs ``act + a * s * u / ||u||`` (and ``+ a * sigma_i`` on units) in a TL hook."""
    from probekit.models import build_model
    from tests.conftest import TINY_CONFIGS, random_sequences

    model = build_model(TINY_CONFIGS["ln_mha"])
    d = model.cfg.d_model
    toks = torch.randint(0, model.cfg.d_vocab, (3, 6), generator=torch.Generator().manual_seed(0))
    u = np.random.default_rng(0).normal(size=d)
    sigma = np.abs(np.random.default_rng(1).normal(size=d))
    site = Site(1, "resid_pre")
    step = torch.as_tensor(-1.7 * 0.6 * u / np.linalg.norm(u), dtype=torch.float32)
    on_units = torch.zeros(d)
    on_units[[2, 5]] = 2.0 * torch.as_tensor(sigma[[2, 5]], dtype=torch.float32)
    for op, add in [(direction_steering(site, u, strength=-1.7, sigma=0.6), step),
                    (unit_steering(site, [2, 5], sigma, strength=2.0), on_units)]:
        with model.hooks(fwd_hooks=[(site.name, lambda act, hook, add=add: act + add)]):
            want = model(toks)
        got = run_with_interventions(model, toks, [op], padding_side=side).output
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        seqs = random_sequences(4, model.cfg.d_vocab, seed=2)  # unequal lengths: padding invariance
        other = run_with_interventions(model, seqs, [op], padding_side="right").output
        mine = run_with_interventions(model, seqs, [op], padding_side=side).output
        for i, seq in enumerate(seqs):
            torch.testing.assert_close(mine[i, :len(seq)], other[i, :len(seq)], atol=1e-5, rtol=1e-5)
        assert count_hooks(model) == 0


def test_strength_zero_is_the_identity():
    model, tokens, answers, u, X, sign = planted_model()
    before = run_with_interventions(model, tokens, []).output
    sub = steer_probe_directions(SITE, _known_u(u), X, (sign > 0).astype(int), strength=0.0)
    assert torch.equal(run_with_interventions(model, tokens, sub.ops).output, before)
    units = steer_units(SITE, [0, 5], X, strength=0.0)
    assert torch.equal(run_with_interventions(model, tokens, units.ops).output, before)
    res = necessity(model, tokens, answers, sub, n_random=3)
    assert (res.drop == 0).all() and (res.control == 0).all()


def test_steering_units_adds_alpha_times_their_std():
    model, tokens, answers, u, X, sign = planted_model()
    sub = steer_units(SITE, [0, 7], X, strength=1.5)  # unit 0 is u: its std is 1
    out = run_with_interventions(model, tokens, [*sub.ops, Read(site=SITE)], logits="none")
    want = X.copy()
    want[:, [0, 7]] += 1.5 * X.std(0)[[0, 7]]
    np.testing.assert_allclose(out.reads[SITE][:, 0].double().numpy(), want, atol=1e-5)
    res = necessity(model, tokens, answers, sub, n_random=20, seed=0)
    np.testing.assert_array_equal(res.drop, (sign < 0).astype(float))  # B prompts answer A
    # random unit pairs move the answer only when they contain unit 0 (p = 2/64)
    hit = [0 in sub.random_ops(seed)[0].features for seed in range(20)]
    assert res.random_accuracy == pytest.approx(np.mean([0.5 if h else 1.0 for h in hit]))


def test_necessity_kind_steers_fitted_probe_directions_as_predicted():
    from probekit.hypotheses.kinds.necessity import NecessitySpec
    from probekit.hypotheses.kinds.necessity import necessity as kind
    from probekit.suites.spec import StatsSpec

    model, tokens, answers, u, X, sign = planted_model()
    y = (sign > 0).astype(int)
    idx = np.arange(N_INPUT)
    ex = examples(tokens, {"label": list(y), "answer": answers}, {"train": idx, "test": idx})
    ctx = FakeContext(model=model, examples=ex, acts={SITE: torch.as_tensor(X)}, stats=StatsSpec(seed=0))
    for toward, strength in [(None, 3.0), (0, 3.0), (1, 0.5)]:
        spec = NecessitySpec(site="resid_post@0", method="steer", n_directions=3, strength=strength,
                             steer_toward=toward, n_random=5, also_split="train")
        m = kind(spec, ctx, control=True)
        # the prediction from the same substrate: the step's component along u moves the answers
        sub = steer_probe_directions(SITE, probe_direction_substrate(SITE, X, y, n_directions=3), X, y,
                                     strength=strength, toward=toward)
        delta = strength * sub.details["sigma"] * float(sub.basis[0] @ u)
        assert m.details["ablated_accuracy"] == pytest.approx(_predicted_correct(sign, delta).mean())
        assert m.details["steer_toward"] == (1 if toward is None else toward)
        assert m.details["train_drop"] == pytest.approx(m.values.mean())
        assert m.method.startswith("steering")
        if strength == 3.0:  # three INLP directions hold most of u: the other class's prompts flip
            assert m.details["ablated_accuracy"] == 0.5 and m.details["random_accuracy"] >= 0.9
    units = kind(NecessitySpec(substrate="units", site="resid_post@0", units=(0,), method="steer",
                               strength=-2.0, n_random=5), ctx, control=True)
    np.testing.assert_array_equal(units.values, (sign > 0).astype(float))  # A prompts answer B


@pytest.mark.parametrize(("kw", "match"), [
    ({"method": "steer", "strength": float("nan")}, r"strength must be a finite number, got nan"),
    ({"method": "steer", "strength": float("inf")}, r"strength must be a finite number, got inf"),
    ({"method": "steer", "substrate": "key_frequencies", "p": 53},
     r"method 'steer' is not defined for substrate 'key_frequencies'.*use method 'mean'"),
    ({"strength": 2.0}, r"strength = 2.0 is read by method \"steer\" only \(method is 'mean'\); remove it"),
    ({"method": "zero", "steer_toward": 1}, r"steer_toward = 1 is read by method \"steer\" only"),
])
def test_bad_steering_specs_are_refused_in_one_line(kw, match):
    from probekit.hypotheses.kinds.necessity import NecessitySpec

    # key_frequencies takes no site (its keys are declared per substrate)
    base = {} if kw.get("substrate") == "key_frequencies" else {"site": "resid_post@0"}
    with pytest.raises(ConfigError, match=match) as err:
        NecessitySpec(**base, **kw)
    assert "\n" not in str(err.value)


def test_bad_steering_inputs_name_the_value_and_the_fix():
    _, _, _, u, X, sign = planted_model()
    y = (sign > 0).astype(int)
    with pytest.raises(ConfigError, match=r"steering strength must be a finite number .* got nan"):
        direction_steering(SITE, u, strength=float("nan"))
    with pytest.raises(ConfigError, match=r"finite number"):
        unit_steering(SITE, [0], np.ones(64), strength=float("inf"))
    text = steer_probe_directions(SITE, _known_u(u), X, y, strength=1.0, toward="0")  # a class named as text
    np.testing.assert_allclose(text.basis[0], -u, atol=1e-9)
    assert text.details["steer_toward"] == 0
    with pytest.raises(ConfigError, match=r"steer_toward=7 is not a class of the label; use one of \[0, 1\]"):
        steer_probe_directions(SITE, _known_u(u), X, y, strength=1.0, toward=7)
    with pytest.raises(ConfigError, match=r"steering strength must be a finite number"):
        steer_probe_directions(SITE, _known_u(u), X, y, strength=float("nan"))
    with pytest.raises(ConfigError, match=r"distinct indices in 0..63"):
        steer_units(SITE, [64], X, strength=1.0)
