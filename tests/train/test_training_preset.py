"""One preset protocol: testbed and fine-tune presets are looked up in one registry and asked."""

import pytest

from probekit.errors import ConfigError
from probekit.train import population
from probekit.train.build import build_run
from probekit.train.finetune_presets import FinetunePreset, build_finetune, is_finetune_preset
from probekit.train.history import History
from probekit.train.presets import Preset
from probekit.train.training_preset import PRESETS, TrainingPreset


def test_every_preset_satisfies_the_protocol_and_says_whether_it_is_pretrained():
    for name, preset in PRESETS.items():
        assert isinstance(preset, TrainingPreset), name
        assert preset.pretrained == isinstance(preset, FinetunePreset) != isinstance(preset, Preset)
        assert is_finetune_preset(name) == preset.pretrained
    assert not is_finetune_preset(None) and not is_finetune_preset("no_such_preset")


def test_planned_steps_and_base_model_are_asked_of_the_preset():
    sets = ["task.p=7", "train.lr=1e-3"]
    assert population.planned_steps("modular_addition", steps=40, seed=1, sets=sets) == 40
    assert PRESETS["modular_addition"].planned_steps("modular_addition", sets=sets) == \
        build_run("modular_addition", sets=sets)[2].steps == 3000
    assert population.planned_steps("smollm2_bio_smoke", sets=["train.steps=9"]) == 9 == \
        build_finetune("smollm2_bio_smoke", sets=["train.steps=9"]).config.steps
    assert PRESETS["scan"].base_model("scan") is None
    assert PRESETS["smollm2_finetune"].base_model("smollm2_finetune",
                                                  ["train.base_model=gemma3-270m"]) == "gemma3-270m"
    with pytest.raises(ConfigError, match=r"^unknown preset 'modular_additon' \(did you mean "):
        population.planned_steps("modular_additon")


def test_train_run_dispatches_to_the_preset_with_the_callers_loss_terms(tmp_path, monkeypatch):
    seen, history = [], History()

    def fake(self, run, *, loss_terms=None):
        seen.append((type(self).__name__, run.preset, loss_terms))
        return history

    monkeypatch.setattr(FinetunePreset, "train_run", fake)
    monkeypatch.setattr(Preset, "train_run", fake)
    for name in ("smollm2_bio_smoke", "scan"):
        run = population.TrainRun(preset=name, out_dir=str(tmp_path / name))
        assert population.train_run(run) is history
    assert seen == [("FinetunePreset", "smollm2_bio_smoke", population.loss_terms),
                    ("Preset", "scan", population.loss_terms)]
