import json

import pytest

from probekit.cli import main
from probekit.train import History
from probekit.train.build import build_run, parse_sets, run_sections
from probekit.train.trainer import step_dir


def _weights_inode(run, step):
    return (step_dir(run, step) / "model.safetensors").stat().st_ino


def test_cli_trains_and_resumes(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "modular_addition", "--out", str(run), "--steps", "3", "--seed", "2",
            "--set", "task.p=7", "--set", "d_model=16", "--set", "train.n_evals=2", "--no-progress"]
    five = [*args[:5], "5", *args[6:]]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["step"] == 3 and "test_id/acc" in out
    meta = json.loads((run / "run.json").read_text())
    assert meta["task_config"]["p"] == 7 and meta["model_config"]["d_model"] == 16
    assert meta["task_config"]["seed"] == meta["model_config"]["seed"] == meta["train_config"]["seed"] == 2
    first = History.read(run).records
    step0 = _weights_inode(run, 0)

    assert main(five) == 0  # resumes from step 3
    assert json.loads(capsys.readouterr().out)["step"] == 5
    # Resumed, not restarted: the step-0 checkpoint file and the history up to step 3 (timings
    # included) are untouched. A run with resume=False rewrites step 0 (checked below).
    assert _weights_inode(run, 0) == step0
    after = History.read(run).records
    assert after[: len(first)] == first and after[-1]["step"] == 5
    # (bit-identity of resumed and uninterrupted weights: tests/train/test_trainer.py)
    assert main([*five, "--no-resume"]) == 0  # starts over: the resume checks above would fail
    assert _weights_inode(run, 0) != step0


def test_unknown_task_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown preset 'kg_chain'.*; registered presets are .*'kg_composition'"):
        build_run("kg_chain")
    with pytest.raises(ValueError, match=r"preset 'smollm2_bio' fine-tunes a pretrained LM; this needs a "
                       r"testbed preset trained from scratch: one of \['bio_scratch'"):
        build_run("smollm2_bio")


@pytest.mark.parametrize(
    ("item", "match"),
    [("lr", "key=value"), ("task.prime=7", "no field 'prime'"), ("seed=1", "configs"),
     ("foo.p=3", "prefix"), ("nope=3", "no config")],
)
def test_bad_sets(item, match):
    with pytest.raises(ValueError, match=match):
        parse_sets([item], run_sections("modular_addition"))


def test_set_values_are_parsed():
    s = parse_sets(["train.betas=[0.9, 0.99]", "train.batch_size=null", "model.act_fn=gelu"],
                   run_sections("scan"))
    assert s["train"] == {"betas": (0.9, 0.99), "batch_size": None} and s["model"] == {"act_fn": "gelu"}


def test_every_preset_resolves():
    from probekit.train import PRESETS

    for name, preset in PRESETS.items():
        if preset.pretrained:
            continue  # fine-tune presets: tests/train/test_finetune.py
        if preset.task in ("kg_composition", "kg_comparison") and not name.endswith(("composition", "comparison")):
            continue  # GPU-scale presets generate large graphs
        task, mcfg, tcfg = build_run(name)
        assert mcfg.d_vocab == len(task.vocab) and tcfg.steps > 0


def _metrics(records):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in records]


def test_cli_population_with_seeds_equals_train_population(tmp_path, capsys):
    from probekit.train.population import TrainRun, train_population

    sets = ["task.p=7", "d_model=16", "train.n_evals=2"]
    args = ["train", "modular_addition", "--out", str(tmp_path / "pop"), "--steps", "3",
            "--seeds", "0", "3", "--no-progress", "--executor", "inprocess"]
    assert main([*args, *[x for s in sets for x in ("--set", s)]]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["out"] for line in lines] == [str(tmp_path / "pop" / f"seed{s}") for s in (0, 3)]
    want = train_population([TrainRun(preset="modular_addition", out_dir=str(tmp_path / f"r{s}"),
                                      seed=s, steps=3, sets=tuple(sets)) for s in (0, 3)])
    for s, history in zip((0, 3), want):
        assert _metrics(History.read(tmp_path / "pop" / f"seed{s}").records) == _metrics(history.records)
    assert _metrics(want[0].records) != _metrics(want[1].records)  # the seeds differ
    assert main([*args[:4], "--seed", "1", "--seeds", "2"]) == 2
    assert "give --seed (one run) or --seeds (a population), not both" in capsys.readouterr().err
    assert main([*args, "--ray-address", "auto"]) == 2
    assert "--ray-address 'auto' given with --executor 'inprocess'" in capsys.readouterr().err
