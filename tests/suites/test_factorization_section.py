"""[[factorization]] suite section end to end on a tiny model: runs, equals the API, renders."""

import json

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.models import build_model, save_checkpoint
from probekit.report import write_report
from probekit.suites import load_suite, run_suite
from tests.conftest import TINY_CONFIGS

SUITE = """
[suite]
name = "tiny-factorization"
description = "two operands on a tiny random model"

[model]
checkpoint = "{root}/ckpt"

[data]
file = "{root}/data.jsonl"
label = "a"
train_split = "train"
test_split = "test"

[capture]
include_embed = true
batch_size = 16

"""


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fac")
    cfg = TINY_CONFIGS["ln_mha"]
    save_checkpoint(build_model(cfg), cfg, root / "ckpt")
    rows = []
    for a in range(5):
        for b in range(5):  # tokens [a, 5 + b]; combinations with (a + b) % 3 == 0 held out
            split = "test" if (a + b) % 3 == 0 else "train"
            rows += [{"tokens": [a, 5 + b], "a": a, "b": b, "split": split}] * 2
    (root / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return root


def _suite(root, tmp_path, body):
    path = tmp_path / "f.toml"
    path.write_text(SUITE.format(root=root) + body)
    return load_suite(path)


def test_factorization_section_runs_and_matches_the_api(root, tmp_path):
    suite = _suite(root, tmp_path, '[[factorization]]\nconcept_a = "a"\nconcept_b = "b"\n')
    result = run_suite(suite, progress=False, cache_dir=tmp_path / "cache")
    (sec,) = [r for r in result.analyses if r.section == "factorization"]
    d = sec.data
    assert d["n_values"] == [5, 5] and d["n_heldout_combinations"] == 8
    assert d["n_fitted_combinations"] == 17
    # planted: the embedding at the last token is W_E[5 + b] + W_pos[1], a function of b only,
    # so the additive model is exact on fitted and unseen combinations and u_a vanishes
    assert d["r2_train"][0] == pytest.approx(1.0, abs=1e-9)
    assert d["r2_heldout"][0] == pytest.approx(1.0, abs=1e-9)
    # (the paper's summed marginal means are exact only on a full grid: 8 combinations are held
    # out here, so its R2 is below 1 even for this site)
    assert 0.5 < d["linear_r2"][0] < 1.0
    assert d["rank_a"][0] == 0 and d["rank_b"][0] == 4 and d["angle_min"][0] is None
    # after attention a and b mix through a softmax: not additive
    assert d["r2_heldout"][-1] < 0.999
    # the same numbers from the API on the same rows
    from probekit.geometry import concept_factorization, concept_means_scores
    from probekit.suites.context import AnalysisContext

    ctx = AnalysisContext(suite, progress=False, cache_dir=tmp_path / "cache")
    acts = ctx.activations()
    tr, te = ctx.examples.split("train"), ctx.examples.split("test")
    rows = np.concatenate([tr, te])
    a = np.asarray(ctx.examples.column("a"))[rows]
    b = np.asarray(ctx.examples.column("b"))[rows]
    site = list(acts)[-1]
    x = acts[site][torch.from_numpy(rows)].to(torch.float64)
    fac = concept_factorization(x, a, b, train=np.arange(rows.size) < tr.size)
    ref = concept_means_scores(x[: tr.size], [a[: tr.size], b[: tr.size]])
    assert d["r2_heldout"][-1] == pytest.approx(float(fac.r2_heldout[0]), rel=1e-9)
    assert d["angle_min"][-1] == pytest.approx(float(fac.principal_angles[0].min()), rel=1e-9)
    assert d["cross_concept_abs_cos"][-1] == pytest.approx(float(ref.cross_concept_abs_cos[0]))
    html = write_report(result, tmp_path / "rep")["html"].read_text()
    assert "Concept factorization" in html and "principal angles" in html
    assert f"{d['r2_heldout'][-1]:.4f}" in html


def test_factorization_section_refuses_same_concept_twice(root, tmp_path):
    suite = _suite(root, tmp_path, '[[factorization]]\nconcept_a = "a"\nconcept_b = "a"\n')
    with pytest.raises(ConfigError, match="two different columns"):
        run_suite(suite, progress=False, cache_dir=tmp_path / "cache")
