"""``probekit diagnose --check`` refuses an incomplete model directory up front (issue 56.5).

A local Hugging Face directory holding only ``config.json`` used to pass ``--check`` and fail
after the other models were measured; its weights and tokenizer files are now checked when the
file is loaded (``--check`` and the run alike), one line naming the entry and the fix.
"""

from __future__ import annotations

import shutil

import pytest

from probekit.cli import main
from tests.diagnosis.test_real_models import _file, population  # noqa: F401 (fixture)


@pytest.mark.parametrize(("keep", "problem"), [
    (("config.json",), "has no *.safetensors weights; probekit loads only safetensors"),
    (("config.json", "model.safetensors"), "has no tokenizer (none of ['tokenizer.json', "),
])
def test_check_refuses_a_directory_without_weights_or_tokenizer(population, keep, problem, capsys):  # noqa: F811
    name = f"partial-{len(keep)}"
    part = population / name
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir()
    for f in keep:
        shutil.copy(population / "gpt-a" / f, part / f)
    path = _file(population, f"check{len(keep)}", models=f'["gpt-a", "{name}"]', design="")
    assert main(["diagnose", str(path), "--check"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"probekit diagnose: error: {path}:")
    assert f"[population] models: model entry '{name}': {part} {problem}" in line
