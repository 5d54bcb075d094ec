"""The heartbeat of a step without a count (GGUF conversion) and the fine-tune step bar (issue 56.5)."""

from __future__ import annotations

import dataclasses
import io
import re
import time

import pytest

from probekit.progress import heartbeat, progress_settings


def test_phases_and_a_rate_limited_beat():
    out = io.StringIO()
    with heartbeat("converting m", interval=0.05, stream=out) as phase:
        phase("reading")
        time.sleep(0.18)  # ~3 beats of "reading"
        phase("saving")
    lines = out.getvalue().splitlines()
    assert all(re.fullmatch(r"converting m: (reading|saving|done), \d+ s elapsed", x) for x in lines)
    reading = [x for x in lines if x.startswith("converting m: reading")]
    assert lines[0].startswith("converting m: reading") and 2 <= len(reading) <= 5
    assert lines[-2].startswith("converting m: saving") and lines[-1].startswith("converting m: done")


def test_quiet_prints_nothing_and_a_bad_interval_is_refused():
    out = io.StringIO()
    with progress_settings(enabled=False), heartbeat("x", interval=0.01, stream=out) as phase:
        phase("a")
        time.sleep(0.03)
    assert out.getvalue() == ""
    with pytest.raises(ValueError, match=r"heartbeat interval = 0: use seconds > 0"), heartbeat("x", interval=0):
        pass


def test_gguf_conversion_announces_its_phases(monkeypatch, tmp_path, capsys):
    """``_convert`` with the library calls stubbed: the phases reach stderr in order."""
    import transformers

    from probekit.models import real
    from probekit.models.named import REGISTRY

    class Fake:
        def __init__(self):
            self.config = type("C", (), {})()

        def save_pretrained(self, out):
            (out / "saved").write_text("x")

    source = real.GGUFSource(path=tmp_path / "m.gguf", sha256="abc")
    spec = dataclasses.replace(REGISTRY["smollm2-135m"], fetch=lambda scratch: source)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: Fake())
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: Fake())
    with progress_settings(enabled=True):
        assert real._convert(spec, tmp_path, tmp_path) == "abc"
    err = capsys.readouterr().err
    phases = re.findall(r"converting smollm2-135m from its GGUF \(once, cached after\): ([^,]+),", err)
    assert phases == ["reading the GGUF", "loading the tokenizer",
                      "dequantising the weights to float32 (the long part)",
                      "saving the Hugging Face directory", "done"]


def test_finetune_steps_show_progress(tmp_path, capsys, single_thread):
    """A fine-tune's steps are counted on stderr (a plain line per update here: no rate limit)."""
    from probekit.train import finetune as ft
    from probekit.train.finetune_config import FinetuneConfig
    from tests.train.finetune_helpers import data_file, tiny_llama

    base = tiny_llama(tmp_path / "base")
    cfg = FinetuneConfig(base_model=str(base), data=str(data_file(tmp_path / "d.jsonl")),
                         method="lora", rank=2, alpha=4.0, target_modules=("q_proj",),
                         trainable_layers=(-1,), steps=3, lr=1e-2, batch_size=2, max_length=8)
    with progress_settings(enabled=True, delay=0, log_interval=0):
        ft.finetune(cfg, tmp_path / "run")
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("fine-tune run:")]
    assert lines and re.match(r"fine-tune run: 3/3 steps \(100%\)", lines[-1])
