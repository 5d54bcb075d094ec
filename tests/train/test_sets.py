"""One ``--set`` parser (probekit.train.sets.parse_sets) for testbed and fine-tune presets."""

from __future__ import annotations

import re

import pytest

from probekit.errors import ConfigError
from probekit.models.config import ModelConfig
from probekit.train.build import build_run, run_sections
from probekit.train.finetune_config import FinetuneConfig
from probekit.train.finetune_presets import build_finetune
from probekit.train.sets import parse_sets


def test_both_surfaces_parse_through_the_one_parser():
    sections = {"train": FinetuneConfig, "model": ModelConfig}
    got = parse_sets(["lr=1", "train.target_modules=[\"q_proj\"]", "model.n_layers=3", "rank=2"],
                     sections)
    assert got == {"train": {"lr": 1.0, "target_modules": ("q_proj",), "rank": 2},
                   "model": {"n_layers": 3}}
    assert isinstance(got["train"]["lr"], float)  # an int for a float field becomes a float
    # the same item, the same words from a testbed preset and from a fine-tune preset
    for call, what in ((lambda s: build_run("modular_addition", sets=s), "preset 'modular_addition'"),
                       (lambda s: build_finetune("smollm2_bio_smoke", sets=s), "this fine-tune preset")):
        with pytest.raises(ConfigError, match=re.escape(
                f"--set 'train.lrr=1': not a key of {what}: the train config has no field 'lrr' "
                "(did you mean 'lr'?); valid: [")):
            call(["train.lrr=1"])
        with pytest.raises(ConfigError, match=re.escape("--set 'lr' is not key=value (e.g. --set "
                                                        "train.lr=3e-3)")):
            call(["lr"])
        with pytest.raises(ConfigError, match=re.escape("--set train.lr=-1: ")
                           + r"\w+Config\.lr must be > 0, got -1\.0"):
            call(["train.lr=-1"])


def test_unknown_section_and_key_list_the_valid_keys():
    with pytest.raises(ConfigError, match=re.escape(
            "--set 'tesk.augmentation=3': not a key of this fine-tune preset: prefix 'tesk' must be "
            "one of ('train', 'task') (did you mean 'task'?); valid keys are train.<add_eos | ")
            + r".*, task\.<augmentation \| id_fraction \| n_people \| permute \| seed>$"):
        build_finetune("smollm2_bio_smoke", sets=["tesk.augmentation=3"])
    with pytest.raises(ConfigError, match=r"--set 'seed=1': field 'seed' belongs to configs "
                       r"\['task', 'model', 'train'\]; write it as <scope>\.seed=\.\.\."):
        parse_sets(["seed=1"], run_sections("scan"))
