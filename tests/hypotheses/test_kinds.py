"""probe_accuracy vs scikit-learn; patching_effect vs transformer_lens.patching on the same bridge."""

from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from transformer_lens import patching

import probekit
from probekit.circuits import logit_diff
from probekit.hypotheses.kinds.patching_effect import PatchingEffectSpec, patching_effect
from probekit.hypotheses.kinds.probe_accuracy import ProbeAccuracySpec, probe_accuracy
from probekit.sites import Site
from probekit.suites.spec import StatsSpec
from tests.hypotheses.helpers import FakeContext, examples

CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


def _planted(n=300, d=10, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    means = rng.normal(size=(3, d))
    X = means[y] * 0.8 + rng.normal(size=(n, d))
    return X, y


def test_probe_accuracy_equals_sklearn_logistic_regression():
    X, y = _planted()
    train, test = np.arange(200), np.arange(200, 300)
    site = Site(0, "resid_post")
    ex = examples([[0]] * 300, {"label": y.tolist()}, {"train": train, "test": test})
    ctx = FakeContext(examples=ex, acts={site: torch.tensor(X)},
                      stats=StatsSpec(n_permutations=20))
    m = probe_accuracy(ProbeAccuracySpec(site="resid_post@0", C=1.0), ctx, control=True)
    sc = StandardScaler().fit(X[train])
    ref = LogisticRegression(C=1.0, max_iter=1000).fit(sc.transform(X[train]), y[train])
    want = ref.score(sc.transform(X[test]), y[test])
    assert m.estimate == pytest.approx(want, abs=0.011)  # at most one test example differs
    assert m.n == 100 and m.estimate > 0.6
    assert m.null.shape == (20,) and abs(m.null.mean() - 1 / 3) < 0.1  # shuffled labels: chance


def test_probe_accuracy_on_noise_is_at_chance():
    X, _ = _planted(seed=1)
    y = np.random.default_rng(5).integers(0, 2, 300)
    site = Site(0, "resid_post")
    ctx = FakeContext(examples=examples([[0]] * 300, {"label": y.tolist()},
                                        {"train": np.arange(200), "test": np.arange(200, 300)}),
                      acts={site: torch.tensor(X)})
    m = probe_accuracy(ProbeAccuracySpec(site="resid_post@0"), ctx)
    assert abs(m.estimate - 0.5) < 0.15


@pytest.fixture(scope="module")
def modadd_pairs():
    model = probekit.load_checkpoint(CHECKPOINT)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 53, 12), rng.integers(0, 53, 12)
    a2 = (a + rng.integers(1, 53, 12)) % 53  # corrupt the first operand
    tokens, cols = [], {"pair_id": [], "role": [], "answer": []}
    for i in range(12):
        for role, x in (("clean", a[i]), ("corrupt", a2[i])):
            tokens.append([int(x), int(b[i]), 53])
            cols["pair_id"].append(i)
            cols["role"].append(role)
            cols["answer"].append(int((x + b[i]) % 53))
    ex = examples(tokens, cols, {"train": np.arange(24), "test": np.arange(24)})
    return model, ex, a, a2, b


@pytest.mark.parametrize("pos", [0, 1, 2])
def test_patching_effect_equals_transformer_lens(modadd_pairs, pos):
    model, ex, a, a2, b = modadd_pairs
    ctx = FakeContext(model=model, examples=ex)
    m = patching_effect(PatchingEffectSpec(layer=0, position=pos), ctx, control=True)
    clean = torch.tensor(np.stack([a, b, np.full(12, 53)], 1))
    corrupt = torch.tensor(np.stack([a2, b, np.full(12, 53)], 1))
    metric = partial(logit_diff, answer=torch.tensor((a + b) % 53), foil=torch.tensor((a2 + b) % 53))
    with torch.no_grad():
        _, cache = model.run_with_cache(clean)
        grid = patching.get_act_patch_resid_pre(
            model, corrupt, cache, lambda logits: metric(logits[:, -1], torch.arange(12)).mean())
        m_clean = metric(model(clean)[:, -1], torch.arange(12)).mean()
        m_corrupt = metric(model(corrupt)[:, -1], torch.arange(12)).mean()
    want = float((grid[0, pos] - m_corrupt) / (m_clean - m_corrupt))
    assert m.estimate == pytest.approx(want, abs=1e-4)
    assert float(np.mean(m.values)) == pytest.approx(want, abs=1e-4)  # per-pair values average to it
    if pos == 0:  # patching the corrupted operand restores the clean answer
        assert m.estimate == pytest.approx(1.0, abs=1e-4)
    if pos == 1:  # the operand both runs share: no effect
        assert abs(m.estimate) < 1e-4


def test_logit_lens_rank_at_the_last_block_is_the_models_accuracy():
    from probekit.hypotheses.kinds.logit_lens_rank import LogitLensRankSpec, logit_lens_rank

    model = probekit.load_checkpoint(CHECKPOINT)
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 53, 40), rng.integers(0, 53, 40)
    tokens = [[int(x), int(y), 53] for x, y in zip(a, b)]
    wrong = rng.random(40) < 0.3  # plant some wrong answers
    answers = [int((x + y + w) % 53) for x, y, w in zip(a, b, wrong)]
    ex = examples(tokens, {"label": answers}, {"train": np.arange(40), "test": np.arange(40)})
    m = logit_lens_rank(LogitLensRankSpec(layer=0), FakeContext(model=model, examples=ex))
    with torch.no_grad():
        top = model(torch.tensor(tokens))[:, -1].argmax(-1).numpy()
    np.testing.assert_array_equal(m.values, (top == np.array(answers)).astype(float))
    assert m.estimate < 0.8  # the planted wrong answers are not top-1


def test_patching_effect_window_equals_hand_set_replace_ops():
    """``window = 2``: blocks 0-1 patched together at the position = a brute-force run with two Replaces."""
    from probekit.interventions import Read, Replace, run_with_interventions
    from probekit.models import build_model
    from tests.conftest import TINY_CONFIGS

    model = build_model(TINY_CONFIGS["gqa_rotary_rms"])
    g = torch.Generator().manual_seed(1)
    clean = torch.randint(0, 13, (6, 5), generator=g)
    corrupt = clean.clone()
    corrupt[:, 2] = (clean[:, 2] + 5) % 13
    answer, foil = torch.randint(0, 13, (6,), generator=g), torch.randint(0, 13, (6,), generator=g)
    tokens, cols = [], {"pair_id": [], "role": [], "answer": []}
    for i in range(6):
        for role, row, ans in (("clean", clean[i], answer[i]), ("corrupt", corrupt[i], foil[i])):
            tokens.append(row.tolist())
            cols["pair_id"].append(i)
            cols["role"].append(role)
            cols["answer"].append(int(ans))
    ctx = FakeContext(model=model, examples=examples(tokens, cols, {"train": np.arange(12), "test": np.arange(12)}))
    m = patching_effect(PatchingEffectSpec(layer=0, window=2, position=2, site_kind="mlp_out"), ctx)
    metric = partial(logit_diff, answer=answer, foil=foil)
    sites = [Site(0, "mlp_out"), Site(1, "mlp_out")]
    src = run_with_interventions(model, clean, [Read(site=s) for s in sites], logits="last")
    mask = torch.zeros(6, 5, dtype=torch.bool)
    mask[:, 2] = True
    patched = run_with_interventions(model, corrupt, [Replace(site=s, values=src[s], positions=mask) for s in sites],
                                     logits="last")
    base = run_with_interventions(model, corrupt, [], logits="last")
    pairs = torch.arange(6)
    m_p, m_c, m_r = (metric(x.output, pairs).double() for x in (patched, src, base))
    want = float((m_p - m_r).sum() / (m_c - m_r).sum())
    assert m.estimate == pytest.approx(want, abs=1e-5)
    assert "mlp_out@0-1" in m.method
    one = patching_effect(PatchingEffectSpec(layer=0, position=2, site_kind="mlp_out"), ctx)
    assert abs(one.estimate - m.estimate) > 1e-3  # block 1 adds to block 0's effect


@pytest.mark.parametrize("pos", [0, 1])
def test_attribution_patching_kind_equals_a_hand_written_gradient(modadd_pairs, pos):
    from probekit.hypotheses.kinds.attribution_patching import attribution_patching

    model, ex, a, a2, b = modadd_pairs
    m = attribution_patching(PatchingEffectSpec(layer=0, position=pos),
                             FakeContext(model=model, examples=ex), control=True)
    clean = torch.tensor(np.stack([a, b, np.full(12, 53)], 1))
    corrupt = torch.tensor(np.stack([a2, b, np.full(12, 53)], 1))
    ans, foil, rows = torch.tensor((a + b) % 53), torch.tensor((a2 + b) % 53), torch.arange(12)
    name = "blocks.0.hook_resid_pre"
    with torch.no_grad():
        _, cache = model.run_with_cache(clean, names_filter=[name])
        ld_clean = model(clean)[rows, -1, ans] - model(clean)[rows, -1, foil]
    seen = {}

    def keep(x, hook):
        x.retain_grad()
        seen["x"] = x
        return x

    logits = model.run_with_hooks(corrupt, fwd_hooks=[(name, keep)])
    ld_corrupt = logits[rows, -1, ans] - logits[rows, -1, foil]
    ld_corrupt.sum().backward()
    attr = ((cache[name] - seen["x"].detach()) * seen["x"].grad).sum(-1)[:, pos]
    want = float(attr.sum() / (ld_clean - ld_corrupt.detach()).sum())
    assert m.estimate == pytest.approx(want, abs=1e-4)
    assert m.control is not None and m.n == 12
    if pos == 1:  # the operand both runs share: zero activation difference, zero attribution
        assert abs(m.estimate) < 1e-6
