"""The suite's model: [model.train] models are named by their spec, workers get a loadable reference."""

import probekit.suites.model as suite_model
from probekit.suites import load_suite
from probekit.suites.model import load_suite_model, suite_model_reference
from tests.suites.conftest import SUITE


def _train_suite(tmp_path, suite_dir):
    text = SUITE.replace('[model]\ncheckpoint = "ckpt"',
                         '[model.train]\npreset = "modular_addition_grokking"\nseed = 3')
    text = text.replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    path = tmp_path / "t.toml"
    path.write_text(text)
    return load_suite(path)


def test_trained_model_is_named_by_its_spec_not_its_cache_path(suite_dir, tmp_path, monkeypatch):
    cached = suite_dir / "ckpt"  # stands in for the checkpoint the preset would train once
    monkeypatch.setattr(suite_model, "trained_checkpoint", lambda spec, progress=True: cached)
    suite = _train_suite(tmp_path, suite_dir)
    assert suite_model_reference(suite, progress=False) == str(cached)
    model = load_suite_model(suite, progress=False)
    assert model.probekit_source == "modular_addition_grokking (seed 3), trained by probekit"
    assert model.probekit_provenance.startswith("[model.train] preset modular_addition_grokking, seed 3, ")
    assert str(cached) in model.probekit_provenance  # where it lives is still stated


def test_checkpoint_and_named_references(suite_dir, tmp_path):
    text = SUITE.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace(
        '"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    (tmp_path / "c.toml").write_text(text)
    assert suite_model_reference(load_suite(tmp_path / "c.toml")) == str(suite_dir / "ckpt")
    named = text.replace(f'checkpoint = "{suite_dir / "ckpt"}"', 'name = "smollm2-135m"')
    (tmp_path / "n.toml").write_text(named)
    assert suite_model_reference(load_suite(tmp_path / "n.toml")) == "smollm2-135m"
    (tmp_path / "m.toml").write_text(named.replace('name = "smollm2-135m"',
                                                   'name = "smollm2-135m"\ncompatibility_mode = true'))
    assert suite_model_reference(load_suite(tmp_path / "m.toml")) is None  # captures in the driver
