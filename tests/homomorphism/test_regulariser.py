import numpy as np
import pytest
import torch

from probekit.capture import Site, count_hooks, record_with_grad
from probekit.homomorphism import HEConfig, modifier_he
from probekit.homomorphism.regulariser import HERegulariser, he_regulariser_loss, mine_pair_pool
from probekit.models import load_checkpoint
from probekit.train import TrainConfig, list_checkpoints, loss_terms, train
from probekit.train import build as build_mod
from probekit.train.trainer import AUX_FILE
from tests.homomorphism.regulariser_helpers import tiny_cfg, train_to_final


def test_lambda_zero_is_the_plain_trainer(tiny, tmp_path, monkeypatch):
    task, mcfg = tiny

    def forbidden(*a, **k):
        raise AssertionError("regulariser built with he_lambda=0")

    monkeypatch.setattr("probekit.homomorphism.regulariser.he_loss_term", forbidden)
    assert build_mod.loss_terms(task, tiny_cfg(he_lambda=0.0)) == ()
    m0, h0 = train_to_final(tmp_path / "a", task, mcfg, tiny_cfg(he_lambda=0.0))
    m1, _ = train_to_final(tmp_path / "b", task, mcfg, tiny_cfg())
    for p, q in zip(m0.parameters(), m1.parameters()):
        assert torch.equal(p, q)
    # weights of the trainer before the HE term existed (main @ 677c4b5, this config, CPU). Equal
    # to 1e-9 on the machine that recorded them; another CPU's float kernels move them ~1e-5
    # (the exact check is the one above: he_lambda=0 and the plain trainer in this process)
    total = sum(float(p.detach().double().sum()) for p in m0.parameters())
    absolute = sum(float(p.detach().double().abs().sum()) for p in m0.parameters())
    assert total == pytest.approx(140.12168884662788, rel=1e-4)
    assert absolute == pytest.approx(1832.5049428641305, rel=1e-4)
    assert h0.records[-1]["batch_loss"] == pytest.approx(1.055456519126892, rel=1e-4)


def test_regularised_training_lowers_modifier_he(tiny, tmp_path):
    task, mcfg = tiny
    he = {}
    for lam in (0.0, 1.0):
        cfg = tiny_cfg(steps=40, he_lambda=lam, he_layers=(1, 2), he_pairs=32)
        model, _ = train_to_final(tmp_path / str(lam), task, mcfg, cfg)
        he[lam] = modifier_he(model, task, config=HEConfig(families=("affine", "mlp"),
                                                                 solver="closed_form_ridge")).headline
    assert he[1.0] < 0.85 * he[0.0]


def test_regularised_resume_equals_uninterrupted(tiny, tmp_path):
    task, mcfg = tiny
    kw = dict(he_lambda=0.5, he_layers=(2,), he_pairs=8, checkpoint_steps=(3,), eval_steps=(3,))
    straight, _ = train_to_final(tmp_path / "s", task, mcfg, tiny_cfg(steps=6, **kw))
    train_to_final(tmp_path / "r", task, mcfg, tiny_cfg(steps=3, **kw))
    resumed, _ = train_to_final(tmp_path / "r", task, mcfg, tiny_cfg(steps=6, **kw))
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)


def test_regulariser_loss_equals_brute_force(tiny):
    from probekit.models import build_model

    task, mcfg = tiny
    model = build_model(mcfg)
    ds = task.splits()["train"]
    pool = mine_pair_pool(ds, max_pool=50)
    assert len(pool) == 50 and pool.modifiers == ("thrice", "twice")
    reg = HERegulariser(mcfg.d_model, pool.modifiers, hidden=16, seed=0)
    loss = he_regulariser_loss(
        model, reg, ds.tokens, pool, blocks=(1, 2), n_pairs=20, rng=np.random.default_rng(5)
    )
    draw = np.random.default_rng(5).integers(0, len(pool), size=20)
    per_layer = []
    for layer in (0, 1):
        a, b = [], []
        for i in draw:
            _, cache = model.run_with_cache(torch.tensor([ds.tokens[pool.example[i]]]))
            h = cache[f"blocks.{layer}.hook_resid_post"][0]
            a.append(h[pool.prim_pos[i]])
            b.append(h[pool.prim_pos[i] + 1])
        a, b = torch.stack(a), torch.stack(b)
        mods = torch.as_tensor(pool.modifier[draw])
        per_mod = [
            ((reg.ops[m](torch.cat([a, b], -1)[mods == m]) - ((a + b) / 2)[mods == m]) ** 2).mean()
            for m in range(2) if (mods == m).any()
        ]
        per_layer.append(torch.stack(per_mod).mean())
    torch.testing.assert_close(loss, torch.stack(per_layer).mean(), atol=1e-6, rtol=1e-5)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_record_with_grad_keeps_graph_and_cleans_up(tiny):
    from probekit.models import build_model

    task, mcfg = tiny
    model = build_model(mcfg)
    toks = torch.tensor([task.splits()["train"].tokens[0]])
    site = Site(0, "resid_post")
    with record_with_grad(model, [site]) as acts:
        model(toks)
    _, cache = model.run_with_cache(toks)
    torch.testing.assert_close(acts[site].detach(), cache[site.name])
    acts[site].pow(2).mean().backward()
    assert sum(float(p.grad.abs().sum()) for p in model.parameters() if p.grad is not None) > 0
    assert count_hooks(model) == 0
    with pytest.raises(RuntimeError, match="boom"), record_with_grad(model, [site]):
        raise RuntimeError("boom")
    assert count_hooks(model) == 0
    with pytest.raises(Exception, match="blocks.7"), record_with_grad(model, [Site(7, "resid_post")]):
        pass


def test_bad_he_config(tiny, tmp_path):
    task, mcfg = tiny
    with pytest.raises(ValueError, match="he_layers=\\(5,\\) names blocks past the model's 2"):
        cfg = tiny_cfg(he_lambda=0.2, he_layers=(5,))
        train(task, mcfg, cfg, tmp_path, progress=False, loss_terms=loss_terms(task, cfg))
    with pytest.raises(ValueError, match="he_lambda must be >= 0"):
        TrainConfig(he_lambda=-1.0)
    with pytest.raises(ValueError, match="1-indexed"):
        TrainConfig(he_layers=(0, 2))


def test_cli_sets_reach_the_regulariser():
    from probekit.train import build_run

    _, _, cfg = build_run("scan", sets=["train.he_lambda=0.2", "train.he_layers=[1,3]"])
    assert cfg.he_lambda == 0.2 and cfg.he_layers == (1, 3)
    _, mcfg, paper = build_run("scan_he_paper")
    assert paper.he_lambda == 0.2 and paper.he_layers == (2, 4) and mcfg.n_layers == 4
    # [C]'s model as far as TL-native blocks go: fixed sinusoidal positions, dropout 0.1
    assert mcfg.positional_embedding_type == "sinusoidal" and paper.dropout == 0.1
    assert (paper.lr, paper.betas, paper.batch_size, paper.he_pairs) == (1e-4, (0.9, 0.98), 64, 256)


def test_trainer_needs_exactly_the_weighted_terms(tiny, tmp_path):
    """The trainer names no term: a weighted term its caller does not supply is an error."""
    task, mcfg = tiny
    cfg = tiny_cfg(steps=2, he_lambda=0.2, he_layers=(1, 2))
    with pytest.raises(ValueError, match=r"weights the loss terms \['he_regulariser'\] but "
                       r"loss_terms= supplies \[\]; pass loss_terms=probekit.train.build"):
        train(task, mcfg, cfg, tmp_path / "a", progress=False, plot=False)
    with pytest.raises(ValueError, match=r"weights the loss terms \[\] but loss_terms= supplies "
                       r"\['he_regulariser'\]"):
        train(task, mcfg, tiny_cfg(steps=2), tmp_path / "b", progress=False, plot=False,
              loss_terms=loss_terms(task, cfg))


def test_trainer_adds_a_supplied_term_with_its_config_weight(tiny, tmp_path):
    """A toy term (no HE code) under the config's weight: L = CE + w * 0 leaves the model as the
    plain trainer leaves it, and its parameters are checkpointed under the term's name."""
    from safetensors.torch import load_file

    task, mcfg = tiny

    class Zero:
        name = "he_regulariser"

        def __init__(self, model, device):
            self.module = torch.nn.Linear(2, 1)

        def loss(self, model, step):
            return 0.0 * self.module.weight.sum()

    plain, _ = train_to_final(tmp_path / "plain", task, mcfg, tiny_cfg(steps=4))
    hist = train(task, mcfg, tiny_cfg(steps=4, he_lambda=0.7), tmp_path / "toy", progress=False,
                 plot=False, loss_terms=[Zero])
    toy = load_checkpoint(list_checkpoints(tmp_path / "toy")[-1][1])
    for p, q in zip(plain.parameters(), toy.parameters()):
        assert torch.equal(p, q)
    aux = load_file(str(list_checkpoints(tmp_path / "toy")[-1][1] / AUX_FILE))
    assert sorted(aux) == ["he_regulariser.bias", "he_regulariser.weight"]
    assert hist.records[-1]["step"] == 4
