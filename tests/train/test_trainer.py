import dataclasses
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from probekit.models import load_checkpoint
from probekit.testbeds import Vocab, get_task
from probekit.train import History, TrainConfig, list_checkpoints, train


def _weights(run_dir):
    step, d = list_checkpoints(run_dir)[-1]
    return step, load_file(str(d / "model.safetensors"))


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_short_run_improves_accuracy_and_writes_outputs(tmp_path, tiny_task, tiny_model_config):
    cfg = TrainConfig(steps=150, lr=3e-3, weight_decay=0.0, n_evals=5, n_checkpoints=2)
    h = train(tiny_task, tiny_model_config, cfg, tmp_path, progress=False)
    first, last = h.records[0], h.records[-1]
    assert first["step"] == 0 and last["step"] == 150
    assert first["train/acc"] < 0.3
    assert last["train/acc"] > 0.9  # 85 training pairs are memorised in 150 full-batch steps
    assert last["train/loss"] < 0.5 * first["train/loss"]
    for f in ("history.json", "history.csv", "curves.png", "run.json"):
        assert (tmp_path / f).is_file()
    assert History.read(tmp_path).records == h.records
    assert (tmp_path / "history.csv").read_text().splitlines()[0].startswith("step,")
    assert [s for s, _ in list_checkpoints(tmp_path)][0] == 0


def test_checkpoint_round_trip(tmp_path, tiny_task, tiny_model_config):
    cfg = TrainConfig(steps=5, n_evals=2, n_checkpoints=2)
    h = train(tiny_task, tiny_model_config, cfg, tmp_path, progress=False, plot=False)
    step, d = list_checkpoints(tmp_path)[-1]
    model = load_checkpoint(d)
    meta = json.loads((d / "config.json").read_text())["extra"]
    assert step == 5 and meta["step"] == 5 and meta["task"] == "modular_addition"
    assert Vocab.from_dict(meta["vocab"]) == tiny_task.vocab
    assert meta["task_config"]["p"] == 11 and meta["metrics"]["step"] == 5
    toks = torch.tensor(tiny_task.splits()["test_id"].tokens)
    with torch.no_grad():
        acc = (model(toks)[:, -1].argmax(-1) == torch.tensor(tiny_task.splits()["test_id"].metadata["answer"]))
    assert acc.float().mean().item() == pytest.approx(h.records[-1]["test_id/acc"])
    assert (d / "optimizer.safetensors").is_file() and (d / "optimizer.json").is_file()


def test_deterministic_and_resume_equals_uninterrupted(tmp_path, tiny_task, tiny_model_config):
    cfg = TrainConfig(steps=8, batch_size=16, warmup_steps=3, grad_clip=1.0, n_evals=3,
                      checkpoint_steps=(4,))
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    train(tiny_task, tiny_model_config, cfg, a, progress=False, plot=False)
    train(tiny_task, tiny_model_config, cfg, b, progress=False, plot=False)
    step_a, wa = _weights(a)
    step_b, wb = _weights(b)
    assert step_a == step_b == 8 and _same(wa, wb)
    # interrupted after the step-4 checkpoint: drop everything later and rerun
    shutil.copytree(a, c)
    for step, d in list_checkpoints(c):
        if step > 4:
            shutil.rmtree(d)
    h = train(tiny_task, tiny_model_config, cfg, c, progress=False, plot=False)
    step_c, wc = _weights(c)
    assert step_c == 8 and _same(wa, wc)
    oa = load_file(str(list_checkpoints(a)[-1][1] / "optimizer.safetensors"))
    oc = load_file(str(list_checkpoints(c)[-1][1] / "optimizer.safetensors"))
    assert _same(oa, oc)
    assert h.steps == History.read(a).steps


def test_eval_at_start_off_skips_only_the_step0_record(tmp_path, tiny_task, tiny_model_config):
    cfg = TrainConfig(steps=6, batch_size=16, n_evals=2, checkpoint_steps=(3,))
    on = train(tiny_task, tiny_model_config, cfg, tmp_path / "on", progress=False, plot=False)
    off_cfg = dataclasses.replace(cfg, eval_at_start=False)
    off = train(tiny_task, tiny_model_config, off_cfg, tmp_path / "off", progress=False, plot=False)
    assert on.steps[0] == 0 and 0 not in off.steps and off.steps[-1] == 6
    assert _same(_weights(tmp_path / "on")[1], _weights(tmp_path / "off")[1])
    last_on = {k: v for k, v in on.records[-1].items() if k != "elapsed_s"}
    last_off = {k: v for k, v in off.records[-1].items() if k != "elapsed_s"}
    assert last_on == last_off
    assert [s for s, _ in list_checkpoints(tmp_path / "off")] == [0, 3, 6]


def test_resume_from_step_zero_checkpoint(tmp_path, tiny_task, tiny_model_config):
    # a run killed after its step-0 checkpoint (history holds step 0) resumes without a repeat
    cfg = TrainConfig(steps=6, batch_size=16, n_evals=2, checkpoint_steps=(6,))
    a, c = tmp_path / "a", tmp_path / "c"
    h_a = train(tiny_task, tiny_model_config, cfg, a, progress=False, plot=False)
    shutil.copytree(a, c)
    for step, d in list_checkpoints(c):
        if step > 0:
            shutil.rmtree(d)
    h_c = train(tiny_task, tiny_model_config, cfg, c, progress=False, plot=False)
    assert _same(_weights(a)[1], _weights(c)[1])
    assert h_c.steps == h_a.steps


def test_resume_rejects_changed_config(tmp_path, tiny_task, tiny_model_config):
    train(tiny_task, tiny_model_config, TrainConfig(steps=2, n_evals=1), tmp_path, progress=False, plot=False)
    with pytest.raises(ValueError, match="lr"):
        train(tiny_task, tiny_model_config, TrainConfig(steps=4, lr=5e-3), tmp_path, progress=False)


def test_train_validates_model_config(tmp_path, tiny_task, tiny_model_config):
    other = get_task("modular_addition", p=7)
    with pytest.raises(ValueError, match="d_vocab"):
        train(other, tiny_model_config, TrainConfig(steps=1), tmp_path, progress=False)


def test_stop_metric(tmp_path, tiny_task, tiny_model_config):
    cfg = TrainConfig(steps=50, eval_every=1, stop_metric="train/loss", stop_threshold=0.0)
    h = train(tiny_task, tiny_model_config, cfg, tmp_path, progress=False, plot=False)
    assert h.records[-1]["step"] == 0
    with pytest.raises(ValueError, match="stop_metric"):
        train(tiny_task, tiny_model_config, TrainConfig(steps=2, stop_metric="nope"), tmp_path / "x",
              progress=False)


def test_dropout_and_sinusoidal_positions(tmp_path, tiny_task, tiny_model_config):
    """[C]'s model features: frozen sinusoidal W_pos (out of the optimiser, unchanged by
    training, same after loading) and training-only dropout (seeded per step: deterministic
    and exactly resumable; evaluation never drops)."""
    from probekit.models.native import sinusoidal_positions

    mcfg = dataclasses.replace(tiny_model_config, positional_embedding_type="sinusoidal")
    cfg = TrainConfig(steps=6, batch_size=16, lr=3e-3, weight_decay=0.0, n_evals=2,
                      checkpoint_steps=(3,), dropout=0.1)
    a, b, c, plain = (tmp_path / k for k in ("a", "b", "c", "plain"))
    h = train(tiny_task, mcfg, cfg, a, progress=False, plot=False)
    step, wa = _weights(a)
    pe = sinusoidal_positions(mcfg.n_ctx, mcfg.d_model)
    assert step == 6 and torch.equal(wa["pos_embed.weight"], pe)
    _, w0 = list_checkpoints(a)[0][0], load_file(str(list_checkpoints(a)[0][1] / "model.safetensors"))
    assert not torch.equal(w0["embed.weight"], wa["embed.weight"])  # the rest did train
    names = json.loads((list_checkpoints(a)[-1][1] / "optimizer.json").read_text())
    assert "pos" not in json.dumps(names) and "embed" in json.dumps(names)
    model = load_checkpoint(list_checkpoints(a)[-1][1])
    assert not model.W_pos.requires_grad and torch.equal(model.W_pos.detach(), pe)
    # evaluation runs the plain model: the history's final numbers equal a reload's
    toks = torch.tensor(tiny_task.splits()["test_id"].tokens)
    with torch.no_grad():
        acc = (model(toks)[:, -1].argmax(-1) == torch.tensor(
            tiny_task.splits()["test_id"].metadata["answer"])).float().mean().item()
    assert acc == pytest.approx(h.records[-1]["test_id/acc"])
    # deterministic, resumable, and dropout does change the training
    train(tiny_task, mcfg, cfg, b, progress=False, plot=False)
    assert _same(wa, _weights(b)[1])
    shutil.copytree(a, c)
    for s, d in list_checkpoints(c):
        if s > 3:
            shutil.rmtree(d)
    train(tiny_task, mcfg, cfg, c, progress=False, plot=False)
    assert _same(wa, _weights(c)[1])
    train(tiny_task, mcfg, dataclasses.replace(cfg, dropout=0.0), plain, progress=False, plot=False)
    assert not torch.equal(wa["embed.weight"], _weights(plain)[1]["embed.weight"])
    with pytest.raises(ValueError, match="dropout"):
        train(tiny_task, mcfg, dataclasses.replace(cfg, dropout=0.2, steps=8), c, progress=False)
