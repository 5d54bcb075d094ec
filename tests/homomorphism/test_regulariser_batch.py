"""The batch-pair HE regulariser (``train.he_source = "batch"``) and the pool mode left as it was."""

import numpy as np
import pytest
import torch

from probekit.capture import record_with_grad
from probekit.homomorphism.regulariser import HERegulariser
from probekit.homomorphism.regulariser_batch import (
    HEBatchLossTerm,
    all_pairs,
    batch_pairs,
    he_batch_loss_term,
)
from probekit.models import build_model
from probekit.train import loss_terms
from probekit.train.loss_term import ForwardLossTerm, StepBatch
from tests.homomorphism.regulariser_helpers import tiny_cfg, train_to_final


def _cfg(steps=12, **kw):
    return tiny_cfg(steps, **{"he_lambda": 0.5, "he_layers": (1, 2), "he_pairs": 32, **kw})




def _sums(model):
    return (sum(float(p.detach().double().sum()) for p in model.parameters()),
            sum(float(p.detach().double().abs().sum()) for p in model.parameters()))


def test_pool_source_is_the_regulariser_before_the_option(tiny, tmp_path):
    """he_source="pool" (the default) trains what the trainer trained before ``he_source`` and the
    forward-term seam existed: weights recorded at ceedc89 (sha256 of model + aux + optimiser
    tensors 2637dfb59978faa0 there and here on the recording machine; another CPU's float
    kernels move the sums ~1e-5, hence rel 1e-4)."""
    task, mcfg = tiny
    model, hist = train_to_final(tmp_path / "p", task, mcfg, _cfg(he_source="pool"))
    total, absolute = _sums(model)
    assert total == pytest.approx(140.23680658235025, rel=1e-4)
    assert absolute == pytest.approx(1831.3287940116943, rel=1e-4)
    assert hist.records[-1]["batch_loss"] == pytest.approx(1.1082829236984253, rel=1e-4)
    assert loss_terms(task, _cfg())[0].__qualname__.startswith("he_loss_term")


def test_batch_pairs_are_the_rows_pairs():
    from probekit.homomorphism.regulariser import PairPool

    pool = PairPool(example=np.array([0, 0, 2, 3, 3, 5]), prim_pos=np.array([1, 4, 1, 2, 6, 1]),
                    modifier=np.array([0, 1, 0, 1, 1, 0]), modifiers=("thrice", "twice"))
    rng = np.random.default_rng(0)
    idx, row = batch_pairs(pool, np.array([3, 0, 4]), n_train=6, max_pairs=10, rng=rng)
    assert idx.tolist() == [0, 1, 3, 4] and row.tolist() == [1, 1, 0, 0]
    idx, row = batch_pairs(pool, np.array([1, 4]), n_train=6, max_pairs=10, rng=rng)
    assert idx.tolist() == [] and row.tolist() == []
    idx, _ = batch_pairs(pool, np.arange(6), n_train=6, max_pairs=3, rng=np.random.default_rng(1))
    want = np.sort(np.random.default_rng(1).choice(np.arange(6), size=3, replace=False))
    assert idx.tolist() == want.tolist() and len(set(idx.tolist())) == 3


def test_batch_loss_equals_brute_force(tiny):
    """L_HE on a constructed batch = [C]'s formula recomputed pair by pair from each example run
    alone (mean over blocks of the mean over modifiers present of the MSE)."""
    task, mcfg = tiny
    model = build_model(mcfg)
    ds = task.splits()["train"]
    term = he_batch_loss_term(ds, blocks=(1, 2), n_pairs=1000, hidden=16, seed=0)(
        model, torch.device("cpu"))
    assert isinstance(term, ForwardLossTerm) and term.module.modifiers == ("thrice", "twice")
    rows = np.array([7, 3, 11, 0, 25, 18])
    batch = ds.subset(rows.tolist()).to_tensors(task.vocab.pad_id)
    with record_with_grad(model, term.sites) as acts:
        model(batch.tokens)
    loss = term.loss_from_forward(acts, StepBatch(batch.tokens, batch.labels, rows), step=1)
    pairs = all_pairs(ds)
    mine = [i for i in range(len(pairs)) if pairs.example[i] in set(rows.tolist())]
    assert len(mine) >= 4 and len({int(pairs.modifier[i]) for i in mine}) == 2
    per_block = []
    for layer in (0, 1):
        a, b, mods = [], [], []
        for i in mine:
            _, cache = model.run_with_cache(torch.tensor([ds.tokens[pairs.example[i]]]))
            h = cache[f"blocks.{layer}.hook_resid_post"][0]
            a.append(h[pairs.prim_pos[i]])
            b.append(h[pairs.prim_pos[i] + 1])
            mods.append(int(pairs.modifier[i]))
        a, b, mods = torch.stack(a), torch.stack(b), torch.tensor(mods)
        per_mod = [((term.module.ops[m](torch.cat([a, b], -1)[mods == m]) - ((a + b) / 2)[mods == m])
                    ** 2).mean() for m in (0, 1)]
        per_block.append(torch.stack(per_mod).mean())
    torch.testing.assert_close(loss, torch.stack(per_block).mean(), atol=1e-6, rtol=1e-5)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    none = np.array([i for i in range(len(ds)) if i not in set(pairs.example.tolist())][:3])
    assert term.loss_from_forward(acts, StepBatch(batch.tokens, batch.labels, none), 1) == 0


def test_batch_term_needs_blocks_of_the_model(tiny):
    task, mcfg = tiny
    make = he_batch_loss_term(task.splits()["train"], blocks=(3,), n_pairs=8, hidden=8, seed=0)
    with pytest.raises(ValueError, match=r"he_layers=\(3,\) names blocks past the model's 2"):
        make(build_model(mcfg), torch.device("cpu"))


def test_batch_source_trains_and_resumes_exactly(tiny, tmp_path):
    task, mcfg = tiny
    kw = dict(he_source="batch", he_layers=(2,), he_pairs=8, checkpoint_steps=(3,),
              eval_steps=(3,))
    assert isinstance(loss_terms(task, _cfg(**kw))[0](build_model(mcfg), torch.device("cpu")),
                      HEBatchLossTerm)
    straight, _ = train_to_final(tmp_path / "s", task, mcfg, _cfg(steps=6, **kw))
    train_to_final(tmp_path / "r", task, mcfg, _cfg(steps=3, **kw))
    resumed, _ = train_to_final(tmp_path / "r", task, mcfg, _cfg(steps=6, **kw))
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
    plain, _ = train_to_final(tmp_path / "plain", task, mcfg, _cfg(steps=6, he_lambda=0.0))
    assert not all(torch.equal(p, q) for p, q in zip(straight.parameters(), plain.parameters()))
    with pytest.raises(ValueError, match=r"TrainConfig.he_source='pool' differs from the "
                       r"checkpointed run \('batch'\)"):
        train_to_final(tmp_path / "r", task, mcfg, _cfg(steps=9, **{**kw, "he_source": "pool"}))


def test_batch_regulariser_shares_the_pool_regulariser_mlps(tiny):
    """Same per-modifier MLPs at the same seed as [C]'s term (the modifiers of the whole split)."""
    task, mcfg = tiny
    ds = task.splits()["train"]
    term = he_batch_loss_term(ds, blocks=(1,), n_pairs=8, hidden=16, seed=3)(
        build_model(mcfg), torch.device("cpu"))
    ref = HERegulariser(mcfg.d_model, ("thrice", "twice"), hidden=16, seed=3)
    for p, q in zip(term.module.parameters(), ref.parameters()):
        assert torch.equal(p, q)


def test_batch_regularised_training_lowers_modifier_he(tiny, tmp_path):
    """The HE weight still moves modifier HE with the batch's own pairs (as [C]'s pool term does
    in tests/homomorphism/test_regulariser.py, same model and schedule)."""
    from probekit.homomorphism import HEConfig, modifier_he

    task, mcfg = tiny
    he = {}
    for lam in (0.0, 1.0):
        cfg = _cfg(steps=40, he_lambda=lam, he_source="batch")
        model, _ = train_to_final(tmp_path / str(lam), task, mcfg, cfg)
        he[lam] = modifier_he(model, task, config=HEConfig(families=("affine", "mlp"),
                                                           solver="closed_form_ridge")).headline
    assert he[1.0] < 0.85 * he[0.0]
