"""``[[similarity]]``: heatmap, between-model and checkpoint-drift numbers equal direct CKA on
independently captured activations; bad checkpoint patterns are named; the report renders."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from probekit.capture import LastToken, Site, collect_activations
from probekit.models import build_model, load_checkpoint, save_checkpoint
from probekit.report import write_report
from probekit.similarity import cka
from probekit.suites import SuiteError, load_suite, run_suite
from probekit.suites.context import AnalysisContext
from tests.conftest import TINY_CONFIGS
from tests.suites.conftest import SUITE

HEAD = SUITE.split("[[probe]]")[0]


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """Three 'checkpoints' of the tiny config (different seeds), with steps and accuracies."""
    root = tmp_path_factory.mktemp("series")
    cfg = TINY_CONFIGS["ln_mha"]
    for k, step in enumerate((0, 10, 20)):
        c = dataclasses.replace(cfg, seed=100 + k)
        save_checkpoint(build_model(c), c, root / f"step_{step:07d}",
                        extra={"step": step, "metrics": {"test/acc": 0.1 * k, "train/acc": 0.5}})
    return root


def _suite(suite_dir, tmp_path, body):
    text = (HEAD + body).replace('"ckpt"', f'"{suite_dir / "ckpt"}"')
    text = text.replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    path = tmp_path / "sim.toml"
    path.write_text(text)
    return load_suite(path)


def _acts(checkpoint, tokens, sites):
    model = load_checkpoint(checkpoint)
    out = collect_activations(model, tokens, sites, positions=LastToken(), padding_side="left",
                              progress=False)
    return [out[s].double() for s in sites]


def test_similarity_section_matches_direct_cka(suite_dir, series, tmp_path):
    body = (f'[[similarity]]\nsplit = "test"\ncompare_checkpoint = "{series / "step_0000010"}"\n'
            f'checkpoints = ["{series}/step_*"]\ndrift_sites = ["resid_post@1"]\n')
    suite = _suite(suite_dir, tmp_path, body)
    result = run_suite(suite, progress=False, cache_dir=tmp_path / "cache")
    (res,) = result.analyses
    assert res.section == "similarity"
    ex = AnalysisContext(suite, progress=False, cache_dir=tmp_path / "cache").examples
    idx = ex.split("test")
    tokens = [ex.tokens[i] for i in idx]
    sites = [Site(None, "embed"), Site(0, "resid_post"), Site(1, "resid_post")]
    mine = _acts(suite_dir / "ckpt", tokens, sites)
    ref = np.array([[cka(a, b) for b in mine] for a in mine])
    np.testing.assert_allclose(res.data["matrix"], ref, atol=1e-6)
    assert res.data["n"] == len(idx) and res.data["sites"] == [s.name for s in sites]
    other = _acts(series / "step_0000010", tokens, sites)
    np.testing.assert_allclose(res.data["compare"]["matrix"],
                               [[cka(a, b) for b in other] for a in mine], atol=1e-6)
    last = [_acts(series / f"step_{s:07d}", tokens, sites[2:])[0] for s in (0, 10, 20)]
    drift = res.data["drift"]
    assert drift["steps"] == [0, 10, 20]
    curve = drift["sites"]["blocks.1.hook_resid_post"]
    np.testing.assert_allclose(curve["to_final"], [cka(x, last[-1]) for x in last], atol=1e-6)
    np.testing.assert_allclose(curve["to_previous"][1:], [cka(last[0], last[1]), cka(last[1], last[2])],
                               atol=1e-6)
    assert drift["metrics"][2]["test/acc"] == pytest.approx(0.2)

    paths = write_report(result, tmp_path / "rep")
    html = paths["html"].read_text()
    assert "site x site linear CKA" in html and "drift per checkpoint" in html
    assert html.count("data:image/png;base64,") == 3  # two heatmaps and the drift curve
    assert json.loads(paths["json"].read_text())["analyses"][0]["data"]["drift"]["sites"]


def test_bad_checkpoint_patterns_are_named(suite_dir, series, tmp_path):
    suite = _suite(suite_dir, tmp_path, f'[[similarity]]\ncheckpoints = ["{series}/nope_*"]\n')
    with pytest.raises(SuiteError, match=r"checkpoints entry .*nope_\*.* matches no checkpoint"):
        run_suite(suite, progress=False, cache_dir=tmp_path / "cache")
    with pytest.raises(SuiteError, match="measure"):
        _suite(suite_dir, tmp_path, '[[similarity]]\nmeasure = "cosine"\n')


SHIPPED = Path(__file__).resolve().parents[2] / "probes" / "modadd_similarity.toml"


def test_shipped_similarity_suite_validates_and_finds_its_series():
    from probekit.suites.analyses.similarity import LayerSimilaritySpec, _resolve_checkpoints

    suite = load_suite(SHIPPED)
    (spec,) = suite.analyses
    assert isinstance(spec, LayerSimilaritySpec) and spec.split == "test"
    found = _resolve_checkpoints(suite, spec.checkpoints)
    assert [Path(p).name for p in found] == [f"step_{s:07d}" for s in (0, 50, 100, 200, 1000)]


@pytest.mark.slow
def test_shipped_similarity_suite_shows_drift_towards_the_final_checkpoint(tmp_path):
    result = run_suite(load_suite(SHIPPED), progress=False, cache_dir=tmp_path / "cache")
    data = result.analyses[0].data
    for curve in data["drift"]["sites"].values():
        assert np.all(np.diff(curve["to_final"]) > 0) and curve["to_final"][-1] == pytest.approx(1.0)
    assert min(np.diag(data["compare"]["matrix"])) > 0.9  # a second run of the same recipe
