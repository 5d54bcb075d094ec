"""The analysis registry: any registered spec is validated and run, results render generically,
activations are captured once into the cache, sites are labelled by their own layer."""

import json
import re
import types
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pytest

from probekit.capture import Site
from probekit.errors import ConfigError
from probekit.models import load_checkpoint
from probekit.report import write_report
from probekit.report.blocks import Column, Heatmap, Table, Text
from probekit.stats import StatTestResult
from probekit.suites import (
    AnalysisResult,
    Hypothesis,
    SuiteError,
    get_analysis,
    load_suite,
    register_analysis,
    registered,
    run_suite,
)
from probekit.suites.data import Examples
from probekit.suites.registry import ANALYSES
from tests.suites.conftest import SUITE


@dataclass(frozen=True, kw_only=True)
class NormSpec:
    """Mean activation norm per site and split (a toy analysis for these tests)."""

    split: Literal["train", "test"] = "train"
    scale: float = 1.0


@register_analysis("toynorm", spec=NormSpec)
def run_norm(spec: NormSpec, ctx) -> AnalysisResult:
    acts = ctx.activations()
    idx = ctx.examples.split(spec.split)
    rows = [{"site": s.name, "norm": spec.scale * float(a[idx].norm(dim=1).mean())}
            for s, a in acts.items()]
    best = int(np.argmax([r["norm"] for r in rows]))
    test = StatTestResult(statistic=rows[best]["norm"], p_value=0.5, n=len(idx), method="toy")
    return AnalysisResult(
        section="toynorm", title="Activation norms", data={"rows": rows},
        hypotheses=(Hypothesis.from_test(test, name="norm is large", site=list(acts)[best],
                                         metric="norm", alpha=0.05, outcome="large"),),
        blocks=(Text(text="Mean L2 norm of the activation rows."),
                Table(columns=(Column(key="site", header="site", fmt="", align="left"),
                               Column(key="norm", header="mean norm", fmt=".4f")),
                      rows=tuple(rows)),
                Heatmap(title="norms", values=((1.0, 2.0), (3.0, None)), row_labels=("a", "b"),
                        col_labels=("x", "y"), colorbar="norm")),
        warnings=("toy warning",),
    )


HEAD = SUITE.split("[[probe]]")[0] + "[stats]\nn_permutations = 19\n"


def _suite(suite_dir, tmp_path, body, name="s.toml"):
    text = (HEAD + body).replace('"ckpt"', f'"{suite_dir / "ckpt"}"')
    text = text.replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    path = tmp_path / name
    path.write_text(text)
    return path


def test_registry_lists_probe_and_refuses_bad_registrations():
    assert registered()["probe"].spec.__name__ == "ProbeSpec"
    with pytest.raises(ConfigError, match=r"unknown analysis section 'nope'; registered analysis sections are \[.*'probe'"):
        get_analysis("nope")
    with pytest.raises(ConfigError, match="frozen=True, kw_only=True"):
        register_analysis("mutable", spec=dict)
    with pytest.raises(ConfigError, match="other than"):
        register_analysis("data", spec=NormSpec)

    def other(spec, ctx):  # same section, another function
        return None

    with pytest.raises(ConfigError, match=r"analysis section 'toynorm' is already registered by "
                       r"\S*test_registry\.run_norm; \S*test_registry\.test_\w+\.<locals>\.other cannot register"):
        register_analysis("toynorm", spec=NormSpec)(other)
    assert ANALYSES.get("toynorm").run is run_norm


def test_registered_spec_is_validated_from_its_fields(suite_dir, tmp_path):
    body = "[[toynorm]]\nsplit = \"test\"\n\n[[toynorm]]\nscale = 2\nsplt = \"train\"\n"
    with pytest.raises(SuiteError, match=r"s.toml:\d+: \[toynorm\] splt: unknown key \(did you mean 'split'\?\); valid keys are \['scale', 'split'\]") as info:
        load_suite(_suite(suite_dir, tmp_path, body))
    line = int(re.search(r"s.toml:(\d+):", str(info.value)).group(1))
    assert (tmp_path / "s.toml").read_text().splitlines()[line - 1].startswith("splt")
    with pytest.raises(SuiteError, match=r"\[toynorm\] split = 'val': must be one of \['train', 'test'\]"):
        load_suite(_suite(suite_dir, tmp_path, "[[toynorm]]\nsplit = \"val\"\n"))
    with pytest.raises(SuiteError, match=r"\[toynorm\] scale = 'x': expected a number"):
        load_suite(_suite(suite_dir, tmp_path, "[[toynorm]]\nscale = \"x\"\n"))
    with pytest.raises(SuiteError, match=r"no analysis section; add at least one of .*\[\[probe\]\].*\[\[toynorm\]\]"):
        load_suite(_suite(suite_dir, tmp_path, ""))


def test_suite_without_probe_runs_any_mix_and_renders_generically(suite_dir, tmp_path):
    body = "[[toynorm]]\nscale = 2\n\n[[probe]]\nkind = \"diffmeans\"\n\n[[toynorm]]\n"
    suite = load_suite(_suite(suite_dir, tmp_path, body))
    assert [type(a).__name__ for a in suite.analyses] == ["NormSpec", "ProbeSpec", "NormSpec"]
    assert suite.to_dict()["toynorm"] == [{"split": "train", "scale": 2.0},
                                          {"split": "train", "scale": 1.0}]
    result = run_suite(suite, progress=False, cache_dir=tmp_path / "cache")
    first, probe, second = result.analyses
    assert first.section == second.section == "toynorm" and probe.section == "probe"
    np.testing.assert_allclose([r["norm"] for r in first.data["rows"]],
                               [2 * r["norm"] for r in second.data["rows"]])
    assert result.provenance["forward_passes"] == 1  # both analyses share one capture
    paths = write_report(result, tmp_path / "rep")
    html = paths["html"].read_text()
    for r in first.data["rows"]:  # the generic table renders the numbers
        assert f"{r['norm']:.4f}" in html
    assert "Warning: toy warning" in html and "Activation norms" in html
    assert html.count("data:image/png;base64,") == 2 + 2  # 2 heatmaps + diffmeans metric, p plots
    report = json.loads(paths["json"].read_text())
    assert [a["section"] for a in report["analyses"]] == ["toynorm", "probe", "toynorm"]
    assert report["hypotheses"][0]["site_label"] == "resid_post@1"  # largest norm: last block
    # report only renders: a saved report.json re-renders to the same page
    assert write_report(report, tmp_path / "again")["html"].read_text() == html

    only = load_suite(_suite(suite_dir, tmp_path, "[[toynorm]]\n", name="only.toml"))
    assert run_suite(only, progress=False, cache_dir=tmp_path / "cache").probes == []


class _ForwardCounter:
    def __init__(self, model):
        self.calls = 0
        model.register_forward_pre_hook(self)

    def __call__(self, module, args):
        self.calls += 1


def test_rerun_and_second_analysis_read_the_cached_store(suite_dir, tmp_path):
    path = _suite(suite_dir, tmp_path, "[[probe]]\nkind = \"diffmeans\"\n\n[[toynorm]]\n")
    suite = load_suite(path)
    model = load_checkpoint(suite_dir / "ckpt")
    counter = _ForwardCounter(model)
    first = run_suite(suite, progress=False, model=model, cache_dir=tmp_path / "cache")
    assert counter.calls > 0 and first.provenance["forward_passes"] == 1
    stores = list((tmp_path / "cache" / "activations").iterdir())
    assert len(stores) == 1  # one capture for both analyses

    model2 = load_checkpoint(suite_dir / "ckpt")
    counter2 = _ForwardCounter(model2)
    again = run_suite(suite, progress=False, model=model2, cache_dir=tmp_path / "cache")
    assert counter2.calls == 0 and again.provenance["forward_passes"] == 0
    assert _probe_data(again.to_dict()) == _probe_data(first.to_dict())
    assert again.hypotheses[1].statistic == first.hypotheses[1].statistic


def test_site_labels_use_each_sites_own_layer(suite_dir, tmp_path):
    text = HEAD.replace("include_embed = true", 'include_embed = true\nsites = ["resid_mid@1", "mlp_post@0"]')
    path = tmp_path / "sites.toml"
    path.write_text((text + "[[probe]]\nkind = \"logistic\"\nCs = 2\ncv = 3\n").replace(
        '"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"'))
    result = run_suite(load_suite(path), progress=False)
    rows = result.probes[0]["sweep"]["rows"]
    assert [(r["site"], r["layer"]) for r in rows] == [
        ("hook_embed", None), ("blocks.1.hook_resid_mid", 1), ("blocks.0.mlp.hook_post", 0)]
    html = write_report(result, tmp_path / "rep")["html"].read_text()
    assert "(layer 0)" not in html
    assert ">embed<" in html and ">resid_mid@1<" in html and ">mlp_post@0<" in html


def test_correctness_rows_carry_site_layers_and_strict_json(suite_dir, tmp_path):
    text = HEAD.replace("include_embed = true", "include_embed = false")
    text = text.replace('label = "planted"', 'label = "planted"\nmax_new_tokens = 2')
    path = tmp_path / "c.toml"
    path.write_text((text + "[[correctness]]\ncv = 3\n").replace(
        '"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"'))
    result = run_suite(load_suite(path), progress=False)
    (entry,) = [a.data for a in result.analyses if a.section == "correctness"]
    rows = entry["sweep"]["rows"]
    assert [r["layer"] for r in rows] == [0, 1]
    assert result.hypotheses[0].site == Site(int(np.argmax([r["cv_auroc"] for r in rows])), "resid_post")
    for r in rows:  # mean +- 1.96 SE of an AUROC, clipped to [0, 1]
        assert 0.0 <= r["cv_auroc_ci"][0] <= r["cv_auroc"] <= r["cv_auroc_ci"][1] <= 1.0
    raw = write_report(result, tmp_path / "rep")["json"].read_text()
    (corr,) = [a["data"] for a in json.loads(raw)["analyses"] if a["section"] == "correctness"]
    assert "NaN" not in raw and corr["sweep"]["best"]["cv_auroc"] is not None


def _probe_data(report: dict) -> list[dict]:
    """The ``[[probe]]`` analyses' data of a report.json-shaped dict."""
    return [a["data"] for a in report["analyses"] if a["section"] == "probe"]


def test_examples_pairs():
    ex = Examples(tokens=[[1]] * 5, splits={"train": np.arange(5)}, columns={
        "pair_id": [7, 7, None, 3, 3], "role": ["corrupt", "clean", None, "clean", "corrupt"]})
    clean, corrupt = ex.pairs()
    assert clean.tolist() == [1, 3] and corrupt.tolist() == [0, 4]
    ex.columns["role"][4] = "clean"
    with pytest.raises(SuiteError, match="rows 3 and 4 are both 'clean' of pair 3"):
        ex.pairs()
    with pytest.raises(SuiteError, match="no split 'val'; splits are \\['train'\\]"):
        ex.split("val")


def test_report_provenance_counts_answers_and_floor_warning(suite_dir, tmp_path):
    from probekit.util.io import sha256_file

    text = HEAD.replace("n_permutations = 19", 'n_permutations = 9\npermutation_sites = "best"')
    text = text.replace('label = "planted"', 'label = "planted"\nanswer_column = "last"\nmax_new_tokens = 1')
    path = tmp_path / "p.toml"
    path.write_text((text + "[[probe]]\nkind = \"logistic\"\nCs = 2\ncv = 3\n").replace(
        '"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"'))
    model = load_checkpoint(suite_dir / "ckpt")
    model.tokenizer = types.SimpleNamespace(decode=lambda ids: " ".join(map(str, ids)), pad_token_id=0)
    result = run_suite(load_suite(path), progress=False, model=model)
    data = result.data
    assert data["source"]["sha256"] == sha256_file(suite_dir / "data.jsonl")
    assert "probekit checkpoint" in result.model["source"]
    for split, counts in data["class_counts"].items():
        assert sum(counts.values()) == data["splits"][split]
    answers = data["greedy_answers"]
    assert len(answers) == data["n_examples"]
    for split, acc in data["answer_accuracy"].items():
        mine = [a["correct"] for a in answers if a["split"] == split]
        assert acc == pytest.approx(np.mean(mine))
    (warning,) = [w for w in result.analyses[0].warnings if "smallest possible p-value" in w]
    assert "0.1 > alpha=0.05" in warning and "n_permutations >= 20" in warning
    html = write_report(result, tmp_path / "rep")["html"].read_text()
    h = result.hypotheses[0]
    assert f"{h.statistic:.3f} ({h.metric})" in html and f"{h.p_value:.3g}" in html
    assert data["source"]["sha256"][:16] in html and "accuracy of the model's greedy answers" in html


def test_validating_a_suite_imports_no_torch():
    """Every analysis module is imported by load_suite: their heavy imports must be deferred."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys; from probekit.suites import load_suite, registered; "
            f"load_suite({str(root / 'probes' / 'modadd_grokked.toml')!r}); "
            "print(sorted(registered())); "
            "print(sorted(m for m in ('torch', 'sklearn', 'scipy', 'matplotlib') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env).stdout.splitlines()
    assert "'probe'" in out[0] and out[1] == "[]"
