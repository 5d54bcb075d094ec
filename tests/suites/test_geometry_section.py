"""[[geometry]] suite section on the tiny suite: runs, equals the API, renders, validates."""

import numpy as np
import pytest

from probekit.errors import ConfigError
from probekit.report import write_report
from probekit.suites import load_suite, run_suite
from tests.suites.conftest import SUITE

HEAD = SUITE.split("[[probe]]")[0]


def _suite(suite_dir, tmp_path, body):
    text = (HEAD + body).replace('"ckpt"', f'"{suite_dir / "ckpt"}"')
    text = text.replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    path = tmp_path / "g.toml"
    path.write_text(text)
    return path


def test_geometry_section_runs_and_matches_the_api(suite_dir, tmp_path):
    body = '[[geometry]]\nlabel = "last"\nmax_points = 8\nmin_points = 4\nn_t = 60\n'
    suite = load_suite(_suite(suite_dir, tmp_path, body))
    result = run_suite(suite, progress=False, cache_dir=tmp_path / "cache")
    (sec,) = [a for a in result.analyses if a.section == "geometry"]
    d = sec.data
    assert d["label"] == "last" and d["n_classes"] >= 3 and d["points_per_class"] <= 8
    assert len(d["sites"]) == len(d["capacity"]) >= 3
    for a, r, dim, u in zip(d["capacity"], d["radius"], d["dimension"], d["utility"]):
        assert np.isfinite(a) and a > 0
        assert u == pytest.approx(a * dim * r**2 / (1 + r**2))
    # the same numbers from the API on the same rows
    import torch

    from probekit.geometry import geometry_by_layer
    from probekit.suites.context import AnalysisContext

    ctx = AnalysisContext(suite, progress=False, cache_dir=tmp_path / "cache")
    acts = ctx.activations()
    idx = ctx.examples.split("train")
    y = np.asarray(ctx.examples.column("last"))[idx].astype(str)
    vals, counts = np.unique(y, return_counts=True)
    keep = np.isin(y, vals[counts >= 4])
    site = list(acts)[-1]
    cur = geometry_by_layer(acts[site][torch.from_numpy(idx[keep])].unsqueeze(0), y[keep],
                            max_points=8, n_t=60, seed=0)
    assert d["capacity"][-1] == pytest.approx(cur.capacity[0], rel=1e-9)
    assert d["nc1"][-1] == pytest.approx(cur.nc1[0], rel=1e-9)
    html = write_report(result, tmp_path / "rep")["html"].read_text()
    assert "utility (inferred)" in html and f"{d['capacity'][-1]:.4g}" in html


def test_geometry_section_refuses_too_few_classes(suite_dir, tmp_path):
    body = '[[geometry]]\nlabel = "last"\nmin_points = 1000\n'
    suite = load_suite(_suite(suite_dir, tmp_path, body))
    with pytest.raises(ConfigError, match="min_points"):
        run_suite(suite, progress=False, cache_dir=tmp_path / "cache")
