"""The modifier-subspace substrate and teacher-forced token scoring of necessity (SCAN, An & Du 2026)."""

import numpy as np
import pytest
import torch

from probekit.hypotheses.necessity import (
    modifier_displacements,
    modifier_subspace_substrate,
    necessity,
    output_token_correct_sets,
)
from probekit.sites import Site
from probekit.testbeds.base import TaskDataset

D = 64
PRIMS, MODS = ("walk", "jump", "look", "turn"), ("twice", "thrice")
# Every primitive with ``twice``, two with ``thrice``: the modifiers' frequencies differ (4 and 2
# of the 12 tokens), so the mean state's best-read token is ``twice`` by a margin of 1/6, far
# above float rounding. With both modifiers equally frequent their logits would tie exactly and
# a rounding residue of about 1e-7, whose sign depends on the CPU's BLAS kernel, would decide
# the argmax.
CMDS = tuple((p, "twice") for p in PRIMS) + (("walk", "thrice"), ("jump", "thrice"))


def _copy_model(n_vocab: int):
    """One attention-only layer with zero output and no positions: ``resid_post@0 = e_token``.

    The embedding is one-hot (``e_t`` = unit vector ``t``) and the unembedding reads it back
    (``W_U = W_E^T``), so the model predicts its own input token at every position.
    """
    from probekit.models.config import ModelConfig
    from probekit.models.native import build_model

    cfg = ModelConfig(n_layers=1, d_model=D, n_heads=2, d_head=D // 2, d_vocab=n_vocab, n_ctx=4,
                      attn_only=True, normalization_type=None)
    model = build_model(cfg)
    eye = torch.eye(n_vocab, D)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("tok_embed"):
                p.copy_(eye.to(p.dtype))
            elif name.startswith("head"):
                p.copy_(eye.to(p.dtype) if p.shape == eye.shape else torch.zeros_like(p))
            elif name.startswith("pos") or ".o." in name:
                p.zero_()
    return model


def _planted():
    """The ``PRIM MOD`` commands of ``CMDS`` (6 two-token inputs) with SCAN's parse columns."""
    from probekit.testbeds import get_task

    vocab = get_task("scan").vocab
    cmds = list(CMDS)
    tokens = [vocab.encode(list(c)) for c in cmds]
    ds = TaskDataset(name="train", tokens=tokens, targets=[[] for _ in cmds],
                     target_positions=[[] for _ in cmds],
                     metadata={"prim_positions": [[0]] * len(cmds), "mod_positions": [[1]] * len(cmds),
                               "modifiers": [[m] for _, m in cmds]})
    return _copy_model(len(vocab)), ds, vocab


def test_the_substrate_is_the_span_of_the_modifier_displacements():
    model, ds, vocab = _planted()
    site = Site(0, "resid_post")
    disp, X, labels = modifier_displacements(model, ds, site)
    eye = np.eye(len(vocab), D)
    want = np.array([(eye[vocab.id(m)] - eye[vocab.id(p)]) / 2 for p, m in CMDS])
    np.testing.assert_allclose(disp, want, atol=1e-6)  # h(x m) - h(x) = (h_m - h_p) / 2
    assert labels == tuple(m for _, m in CMDS) and X.shape == (12, D)
    sub = modifier_subspace_substrate(site, disp, X, k=5)
    # the 6 displacements span the 5 directions e_m - e_p; the top 5 singular directions are that span
    span = np.linalg.svd(want, full_matrices=False)[2][:5]
    assert np.linalg.norm(sub.basis @ span.T) ** 2 == pytest.approx(5.0, abs=1e-9)
    assert sub.details["explained"] == pytest.approx(1.0, abs=1e-9) and sub.size == 5
    assert modifier_subspace_substrate(site, disp, X, k=1).details["explained"] < 1.0


def test_ablating_the_planted_modifier_subspace_drops_token_accuracy_to_chance_and_random_does_not():
    model, ds, _ = _planted()
    site = Site(0, "resid_post")
    disp, X, _ = modifier_displacements(model, ds, site)
    sub = modifier_subspace_substrate(site, disp, X, k=5)
    res = necessity(model, ds.tokens, [], sub, score="output_tokens", targets=ds.tokens, n_random=10)
    assert res.base.mean() == pytest.approx(1.0)  # the copy model is right at every position
    # Mean ablation sends every primitive and modifier state to the mean state m (its component
    # off the span equals theirs), m = (4 e_twice + 2 e_thrice + 2 e_walk + 2 e_jump + e_look +
    # e_turn) / 12, whose best-read token is ``twice`` (logit 1/3 against at most 1/6): right on
    # 4 of the 12 targets, the most frequent class (chance = 1/3). Counts of correct tokens are
    # integers, so the accuracies are exact ratios: compared exactly.
    correct = res.ablated * 12 / 6  # c_i = value * T / n
    np.testing.assert_array_equal(np.rint(correct), [1, 1, 1, 1, 0, 0])  # the ``twice`` inputs
    assert res.ablated.mean() == pytest.approx(1 / 3, rel=1e-9)
    assert res.drop.mean() == pytest.approx(2 / 3, rel=1e-9)
    assert res.random_accuracy is not None and res.random_accuracy > 0.9
    assert res.control.mean() < 0.1


def test_output_token_accuracy_equals_the_trainers_token_acc():
    from probekit.models import build_model
    from probekit.testbeds import get_task
    from probekit.train.trainer import evaluate

    task = get_task("scan", n_noise=3, max_samples=60, ood_lengths=(5,), n_ood_per_length=20)
    torch.manual_seed(0)
    model = build_model(task.model_config(n_layers=1, d_model=32, d_head=16, d_mlp=64, seed=3))
    for split in ("test_id", "ood_len_5"):
        ds = task.splits()[split]
        want = evaluate(model, ds.to_tensors(task.vocab.pad_id))["token_acc"]
        got = necessity(model, ds.tokens, [], modifier_subspace_substrate(
            Site(0, "resid_post"), np.eye(2, 32), np.zeros((3, 32)), k=1),
            score="output_tokens", targets=ds.targets, control=False, batch_size=7)
        assert got.base.mean() == pytest.approx(want, abs=1e-12)
        counts = output_token_correct_sets(model, ds.tokens, ds.targets, [[]])
        assert counts.sum() / sum(len(t) for t in ds.targets) == pytest.approx(want, abs=1e-12)
    assert 0.0 < want < 1.0


def test_output_tokens_needs_targets_and_a_known_score():
    from probekit.errors import ConfigError, DataError

    model, ds, _ = _planted()
    site = Site(0, "resid_post")
    disp, X, _ = modifier_displacements(model, ds, site)
    sub = modifier_subspace_substrate(site, disp, X, k=2)
    with pytest.raises(DataError, match="one output sequence per input"):
        necessity(model, ds.tokens, [], sub, score="output_tokens", control=False)
    with pytest.raises(ConfigError, match="score='tokens' unknown"):
        necessity(model, ds.tokens, [], sub, score="tokens", control=False)
    with pytest.raises(ConfigError, match="k=9 modifier directions"):
        modifier_subspace_substrate(site, disp, X, k=9)


def _kind_context(model, ds, vocab, **columns):
    from probekit.suites.spec import StatsSpec
    from tests.hypotheses.helpers import FakeContext, examples

    cols = {**ds.metadata, "output": [" ".join(vocab.decode(t).split()) for t in ds.tokens], **columns}
    ex = examples(ds.tokens, cols, {"train": np.arange(len(ds)), "test": np.arange(len(ds))})
    ex.vocab = vocab
    return FakeContext(model=model, examples=ex, stats=StatsSpec(seed=0))


def test_necessity_kind_with_the_modifier_subspace_and_output_tokens():
    from probekit.hypotheses.kinds.necessity import NecessitySpec
    from probekit.hypotheses.kinds.necessity import necessity as kind

    model, ds, vocab = _planted()
    ctx = _kind_context(model, ds, vocab)
    spec = NecessitySpec(substrate="modifier_subspace", site="resid_post@0", k=5, split="test",
                         score="output_tokens", n_random=5, also_split="train")
    m = kind(spec, ctx, control=True)
    assert (m.details["base_accuracy"], m.details["ablated_accuracy"]) == pytest.approx((1.0, 1 / 3))
    assert m.details["explained"] == pytest.approx(1.0) and m.details["n_pairs"] == 6
    assert m.values.mean() == pytest.approx(2 / 3) and m.details["train_drop"] == pytest.approx(2 / 3)
    assert "token accuracy 1.000 -> 0.333" in m.method
    # output given as token ids reads the same; excess subtracts the random directions' drop
    ids = kind(NecessitySpec(**{**spec.__dict__, "output_column": "ids", "excess": True}),
               _kind_context(model, ds, vocab, ids=[list(t) for t in ds.tokens]), control=False)
    np.testing.assert_allclose(ids.values, m.values - m.control, atol=1e-9)


def test_necessity_kind_names_missing_parse_columns_and_bad_outputs():
    from probekit.errors import ConfigError, DataError
    from probekit.hypotheses.kinds.necessity import NecessitySpec
    from probekit.hypotheses.kinds.necessity import necessity as kind
    from probekit.util.constraints import ConstraintError, check_value

    model, ds, vocab = _planted()
    ctx = _kind_context(model, ds, vocab)
    del ctx.examples.columns["mod_positions"]
    with pytest.raises(ConfigError, match=r"lack \['mod_positions'\].*prompt_only = false"):
        kind(NecessitySpec(substrate="modifier_subspace", site="resid_post@0", k=2, split="test"), ctx)
    ctx = _kind_context(model, ds, vocab, output=[None] * len(ds))
    with pytest.raises(DataError, match="output column 'output' row 0 holds None"):
        kind(NecessitySpec(substrate="modifier_subspace", site="resid_post@0", k=2, split="test",
                           score="output_tokens"), ctx)
    with pytest.raises(ConfigError, match="'steer' is not defined for substrate 'modifier_subspace'"):
        NecessitySpec(substrate="modifier_subspace", site="resid_post@0", method="steer")
    with pytest.raises(ConstraintError, match="NecessitySpec.score"):  # what a file's key meets
        check_value(NecessitySpec, "score", "tokens")
    with pytest.raises(ConstraintError, match="NecessitySpec.output_column"):
        check_value(NecessitySpec, "output_column", "")
