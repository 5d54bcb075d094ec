"""The trainer's forward-reading loss terms (``ForwardLossTerm``): sites recorded during the
cross-entropy forward, the step's rows handed over, the term's weight applied."""

import numpy as np
import torch

from probekit.models import load_checkpoint
from probekit.sites import Site
from probekit.train import TrainConfig, list_checkpoints, train
from probekit.train.loss_term import ForwardLossTerm, LossTerm, reads_forward
from probekit.train.schedule import batch_position, epoch_permutation


def _cfg(**kw):
    return TrainConfig(**{**dict(steps=5, batch_size=8, eval_steps=(5,), checkpoint_steps=(5,),
                                 lr=1e-3), **kw})


def _weights(tmp):
    return list(load_checkpoint(list_checkpoints(tmp)[-1][1]).parameters())


class _Spy:
    """Reads resid_post of block 0; its loss is ``scale * mean(h^2)`` (no parameters)."""

    name = "he_regulariser"  # the weight TrainConfig.he_lambda gives

    def __init__(self, model, device, scale=1.0):
        self.module, self.scale = torch.nn.Module(), scale
        self.sites = (Site(0, "resid_post"),)
        self.seen = []

    def loss_from_forward(self, acts, batch, step):
        h = acts[self.sites[0]]
        assert h.requires_grad and h.shape[:2] == batch.tokens.shape
        self.seen.append((step, batch.rows.copy(), batch.tokens.clone()))
        return self.scale * h.pow(2).mean()


def test_forward_term_gets_the_step_rows_and_zero_changes_nothing(tmp_path, tiny_task,
                                                                   tiny_model_config):
    spies = []

    def make(model, device, scale=0.0):
        spies.append(_Spy(model, device, scale))
        return spies[-1]

    assert isinstance(make(None, None), ForwardLossTerm) and reads_forward(spies.pop())
    assert not reads_forward(object()) and not isinstance(_Spy(None, None), LossTerm)
    cfg = _cfg(he_lambda=0.5)
    train(tiny_task, tiny_model_config, cfg, tmp_path / "spy", progress=False, plot=False,
          loss_terms=[make])
    train(tiny_task, tiny_model_config, _cfg(), tmp_path / "plain", progress=False, plot=False)
    # a zero-weighted scalar: the model trains exactly as without the term
    for p, q in zip(_weights(tmp_path / "spy"), _weights(tmp_path / "plain")):
        assert torch.equal(p, q)
    train_set = tiny_task.splits()["train"].to_tensors(tiny_task.vocab.pad_id)
    n = len(train_set)
    assert [s for s, _, _ in spies[0].seen] == [1, 2, 3, 4, 5]
    for step, rows, toks in spies[0].seen:
        epoch, sl = batch_position(step, n, 8)
        assert rows.tolist() == epoch_permutation(n, cfg.seed, epoch)[sl].tolist()
        assert torch.equal(toks, train_set.tokens[torch.from_numpy(rows)])


def test_forward_term_weight_moves_the_model(tmp_path, tiny_task, tiny_model_config):
    """w * mean(h^2) with w = he_lambda: a larger weight shrinks block 0's residual more."""
    norms = {}
    for lam in (0.01, 5.0):
        train(tiny_task, tiny_model_config, _cfg(he_lambda=lam, steps=30, eval_steps=(30,),
                                                 checkpoint_steps=(30,)),
              tmp_path / str(lam), progress=False, plot=False, loss_terms=[_Spy])
        model = load_checkpoint(list_checkpoints(tmp_path / str(lam))[-1][1])
        toks = tiny_task.splits()["train"].to_tensors(tiny_task.vocab.pad_id).tokens
        _, cache = model.run_with_cache(toks)
        norms[lam] = float(cache["blocks.0.hook_resid_post"].pow(2).mean())
    assert norms[5.0] < 0.8 * norms[0.01]
    assert np.isfinite(norms[0.01])
