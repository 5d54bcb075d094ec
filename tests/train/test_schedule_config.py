import numpy as np
import pytest

from probekit.train import TrainConfig, eval_schedule, log_spaced_steps, lr_at
from probekit.train.schedule import batch_position, checkpoint_schedule, epoch_permutation


def test_log_spaced_steps():
    s = log_spaced_steps(1000, 10)
    assert s[0] == 0 and s[-1] == 1000 and s == sorted(set(s))
    gaps = np.diff(s[1:])
    assert gaps[-1] > gaps[0]


def test_eval_and_checkpoint_schedules():
    cfg = TrainConfig(steps=100, n_evals=5, eval_every=25, n_checkpoints=3)
    ev = eval_schedule(cfg)
    assert {0, 25, 50, 75, 100} <= set(ev) and 1 in ev
    assert checkpoint_schedule(cfg)[0] == 0 and checkpoint_schedule(cfg)[-1] == 100
    assert eval_schedule(TrainConfig(steps=10, eval_steps=(3,))) == [0, 3, 10]
    assert eval_schedule(TrainConfig(steps=10, eval_steps=(3,), eval_at_start=False)) == [3, 10]
    assert 0 not in eval_schedule(TrainConfig(steps=100, n_evals=5, eval_at_start=False))


def test_warmup_lr():
    cfg = TrainConfig(lr=1e-3, warmup_steps=10)
    assert lr_at(1, cfg) == pytest.approx(1e-4)
    assert lr_at(10, cfg) == lr_at(500, cfg) == 1e-3


def test_minibatches_cover_each_epoch_once():
    n, bs = 23, 5
    seen = []
    for step in range(1, 6):
        epoch, sl = batch_position(step, n, bs)
        assert epoch == 0
        seen += epoch_permutation(n, 0, epoch)[sl].tolist()
    assert sorted(seen) == list(range(n))
    assert batch_position(6, n, bs)[0] == 1


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"steps": 0}, "steps"),
        ({"lr": -1.0}, "lr"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"batch_size": 0}, "batch_size"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"grad_clip": 0.0}, "grad_clip"),
        ({"eval_steps": (5, 200), "steps": 100}, "eval_steps"),
        ({"n_evals": 0}, "n_evals"),
    ],
)
def test_bad_train_config_names_field(kw, field):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**kw)


def test_from_dict_rejects_unknown():
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_dict({"learning_rate": 1.0})
    assert TrainConfig.from_dict(TrainConfig(betas=(0.8, 0.9)).to_dict()).betas == (0.8, 0.9)
