"""The cache of a real-model population: per model, keyed by a plug-in's code, ``--recompute``.

On the four tiny Hugging Face directories of ``test_real_models`` (issue 56 item 5): adding a
model to ``[population] models`` measures only that model; editing a plug-in kind's source
measures its marker again (its cached cells are keyed by the plug-in's code); ``--recompute
[MARKER]`` measures the named marker (or everything) again; an unknown name is refused.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import probekit.diagnosis.runner as runner
from probekit.cli import main
from probekit.diagnosis import diagnose
from probekit.diagnosis.population import population_dir
from probekit.diagnosis.runner import recompute_set
from probekit.diagnosis.spec import load_diagnosis
from probekit.errors import ConfigError
from probekit.executor import _WORKER_IMPORTS
from probekit.hypotheses.registry import MEASUREMENT_KINDS
from tests.diagnosis.test_real_models import _file, cache, population  # noqa: F401 (fixtures)

WNORM = '[[marker]]\nname = "wnorm"\nmeasure = "weight_norm"'
THREE = '["gpt-a", "gpt-b", "llama-a"]'
FOUR = '["gpt-a", "gpt-b", "llama-a", "llama-b"]'


def _default_dir(path: Path) -> Path:
    """The file without ``[population] out``: the population cached in the default folder."""
    path.write_text(path.read_text().replace(f'out = "{path.stem}-pop"\n', ""))
    return path


def _measured(monkeypatch) -> list[str]:
    """Every (model, marker) measured from now on, as ``model:marker``."""
    log: list[str] = []
    real = runner.measure_marker

    def measure(marker, ctx, *rest, **kw):
        log.append(f"{kw.get('model')}:{marker.name}")
        return real(marker, ctx, *rest, **kw)

    monkeypatch.setattr(runner, "measure_marker", measure)
    return log


def test_the_default_folder_of_a_model_population_leaves_the_model_list_out(population, cache):  # noqa: F811
    """Fast: three and four models share one cell store (cells are keyed per model)."""
    three = load_diagnosis(_default_dir(_file(population, "grow0", models=THREE, design="")))
    four = load_diagnosis(_default_dir(_file(population, "grow0", models=FOUR)))
    assert population_dir(three) == population_dir(four)
    assert population_dir(three).name.startswith("grow0-models-")
    assert three.population_key() != four.population_key()  # the report still tells them apart


def test_recompute_names_markers_and_families(population):  # noqa: F811
    markers = (WNORM + '\n\n[[marker]]\nname = "probe"\nmeasure = "probe_accuracy"\n'
               'layers = [0, 1]')
    spec = load_diagnosis(_file(population, "names", models=THREE, design="", markers=markers))
    assert recompute_set(spec, None) == (set(), False)
    assert recompute_set(spec, ["probe"]) == ({"probe@L0", "probe@L1"}, False)
    assert recompute_set(spec, ["wnorm", "probe@L1"]) == ({"wnorm", "probe@L1"}, False)
    assert recompute_set(spec, ["*"]) == ({"wnorm", "probe@L0", "probe@L1"}, True)
    with pytest.raises(ConfigError, match=r"^--recompute 'prob': no marker of .*names\.toml is "
                       r"named so; its markers are \['wnorm', 'probe'\] \(--recompute alone"):
        recompute_set(spec, ["prob"])


@pytest.mark.slow
def test_adding_a_model_measures_only_that_model(population, cache, monkeypatch):  # noqa: F811
    log = _measured(monkeypatch)
    three = _default_dir(_file(population, "grow", models=THREE, design="", markers=WNORM))
    assert diagnose(three).provenance["checkpoint_tasks"] == 3
    four = _default_dir(_file(population, "grow", models=FOUR, design="", markers=WNORM))
    log.clear()
    result = diagnose(four)
    assert result.provenance["checkpoint_tasks"] == 1 and log == ["llama-b:wnorm"]
    assert result.table["run"] == ["gpt-a", "gpt-b", "llama-a", "llama-b"]


@pytest.mark.slow
def test_recompute_measures_the_named_marker_again(population, cache, monkeypatch):  # noqa: F811
    markers = WNORM + '\n\n[[marker]]\nname = "probe"\nmeasure = "probe_accuracy"\nsite = "resid_post@1"'
    path = _file(population, "again", models=THREE, design="", markers=markers)
    first = diagnose(path)
    log = _measured(monkeypatch)
    assert diagnose(path).provenance["checkpoint_tasks"] == 0 and log == []
    again = diagnose(path, recompute=["wnorm"])
    assert log == ["gpt-a:wnorm", "gpt-b:wnorm", "llama-a:wnorm"]
    assert again.table["wnorm"] == pytest.approx(first.table["wnorm"], rel=1e-9)
    log.clear()
    diagnose(path, recompute=["*"])
    assert sorted(log) == sorted(f"{m}:{k}" for m in ("gpt-a", "gpt-b", "llama-a")
                                 for k in ("wnorm", "probe"))
    with pytest.raises(ConfigError, match=r"^--recompute 'wnrom': no marker of .*again\.toml is "
                       r"named so; its markers are \['wnorm', 'probe'\]"):
        diagnose(path, recompute=["wnrom"])


def test_recompute_flag_of_the_cli(population, cache, capsys):  # noqa: F811
    path = _file(population, "againcli", models='["gpt-a"]', design="", markers=WNORM)
    assert main(["diagnose", str(path), "--quiet", "--recompute", "nope"]) == 2
    assert "--recompute 'nope': no marker" in capsys.readouterr().err
    assert main(["diagnose", str(path), "--quiet", "--executor", "inprocess",
                 "--recompute"]) == 0
    out = capsys.readouterr().out.splitlines()  # one model: said plainly, no verdict
    assert out[:2] == [f"{path}: 1 model entry, outcome 'logprob_ood'",
                       "  no population-level verdict: 1 model entry (the statistics need at "
                       "least 3); markers.csv holds the markers and outcomes"]


PLUGIN = '''
from dataclasses import dataclass
import numpy as np
from probekit.hypotheses import Measurement, register_measurement

VALUE = {value}

@dataclass(frozen=True, kw_only=True)
class S:
    pass

@register_measurement("cached_plugin_kind", spec=S)
def kind(spec, ctx):
    return Measurement(metric="v", values=np.array([VALUE - 1.0, VALUE, VALUE + 1.0]))
'''


def test_an_edited_plugin_is_measured_again(population, cache, monkeypatch):  # noqa: F811
    """The cells of a plug-in marker are keyed by the plug-in's source: an edit invalidates them."""
    module = "mod_cached_plugin_kind"
    folder = cache / "plug"
    folder.mkdir()
    (folder / f"{module}.py").write_text(PLUGIN.format(value=1.0))
    markers = '[[marker]]\nname = "plug"\nmeasure = "cached_plugin_kind"'
    path = _file(population, "plugcache", models='["gpt-a", "llama-a"]', design="", markers=markers)
    path.write_text(f'[plugins]\nmodules = ["{folder / module}.py"]\n\n' + path.read_text())
    saved_imports, saved_path = dict(_WORKER_IMPORTS), list(sys.path)
    try:
        for value, tasks in ((1.0, 2), (1.0, 0), (25.0, 2)):
            (folder / f"{module}.py").write_text(PLUGIN.format(value=value))
            with MEASUREMENT_KINDS.temporary():  # a fresh process: the edited module imported
                sys.modules.pop(module, None)
                result = diagnose(path)
            assert result.provenance["checkpoint_tasks"] == tasks
            assert result.table["plug"] == [value] * 2
    finally:
        sys.modules.pop(module, None)
        sys.path[:] = saved_path
        _WORKER_IMPORTS.clear()
        _WORKER_IMPORTS.update(saved_imports)
