"""The [[homomorphism]] suite section: validated, run on a tiny SCAN model, numbers = the API."""

from pathlib import Path

import numpy as np
import pytest

from probekit.errors import ConfigError
from probekit.homomorphism import HEConfig, modifier_he
from probekit.models import build_model, save_checkpoint
from probekit.report import write_report
from probekit.suites import load_suite, run_suite
from probekit.testbeds import get_task

ROOT = Path(__file__).resolve().parents[2]
TASK = dict(n_noise=1, max_samples=80, n_ood_per_length=10, n_ood_combo=10)

SUITE = """
[suite]
name = "tiny-he"
description = "HE of an untrained tiny SCAN model"

[model]
checkpoint = "ckpt"

[data]
task = "scan"
task_options = {{ n_noise = 1, max_samples = 80, n_ood_per_length = 10, n_ood_combo = 10 }}
label = "n_clauses"
train_split = "train"
test_split = "test_id"
prompt_only = {prompt_only}

[[homomorphism]]
families = ["affine", "bilinear"]
"""


@pytest.fixture(scope="module")
def tiny_suite_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("he_suite")
    task = get_task("scan", **TASK)
    cfg = task.model_config(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, seed=0)
    save_checkpoint(build_model(cfg), cfg, d / "ckpt")
    return d, task


def test_shipped_suite_validates():
    suite = load_suite(ROOT / "probes" / "scan_homomorphism.toml")
    assert [type(s).__name__ for s in suite.analyses] == ["HomomorphismSpec"] * 2
    assert [s.parts for s in suite.analyses] == ["same_pass", "separate"]
    assert suite.analyses[0].solver == "adam"


def test_suite_section_equals_the_api(tiny_suite_dir):
    from probekit.models import load_checkpoint

    d, task = tiny_suite_dir
    (d / "suite.toml").write_text(SUITE.format(prompt_only="false"))
    result = run_suite(load_suite(d / "suite.toml"), progress=False)
    section = next(a for a in result.analyses if a.section == "homomorphism")
    model = load_checkpoint(d / "ckpt")
    ref = modifier_he(model, task, config=HEConfig(families=("affine", "bilinear")))
    np.testing.assert_allclose(section.data["modifier"]["he"], ref.he, rtol=1e-8)
    assert section.data["sequence"]["n_pairs"] > 0
    html = write_report(result, d / "rep")["html"].read_text()
    assert "Homomorphism error" in html and "1 - R^2 (ours)" in html
    # parts = "separate" ([O]) equals the API too
    (d / "sep.toml").write_text(SUITE.format(prompt_only="false")
                                + 'parts = "separate"\nsolver = "closed_form_ridge"\n')
    result = run_suite(load_suite(d / "sep.toml"), progress=False)
    section = next(a for a in result.analyses if a.section == "homomorphism")
    cfg = HEConfig(families=("affine", "bilinear"), parts="separate", solver="closed_form_ridge")
    ref = modifier_he(model, task, config=cfg)
    np.testing.assert_allclose(section.data["modifier"]["he_normalised"], ref.he_normalised,
                               rtol=1e-8)
    assert "separate passes" in section.title
    (d / "bad.toml").write_text(SUITE.format(prompt_only="true"))
    with pytest.raises(ConfigError, match="prompt_only = false"):
        run_suite(load_suite(d / "bad.toml"), progress=False)
