"""The diagnosis marker kinds on constructed cases with exact values, and against their modules."""

import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError, DataError, NonFiniteError, NotApplicableError
from probekit.sites import Site
from tests.hypotheses.helpers import FakeContext, FakeSuite, examples

ROOT = Path(__file__).resolve().parents[2]
SERIES = ROOT / "probes" / "checkpoints" / "modadd-p53-series"
SITE = Site(0, "resid_post")


def _ctx(X, labels=None, *, train=None, test=None, tokens=None, **kw):
    """Activations ``X`` at resid_post@0; [capture] positions = "last"."""
    n = len(X)
    train = np.arange(n) if train is None else train
    test = np.arange(n) if test is None else test
    ex = examples(tokens if tokens is not None else [[i] for i in range(n)],
                  {"label": list(labels) if labels is not None else [0] * n},
                  {"train": train, "test": test})
    suite = FakeSuite()
    suite.capture = SimpleNamespace(positions="last")
    return FakeContext(examples=ex, acts={SITE: torch.tensor(X, dtype=torch.float64)}, suite=suite,
                       **kw)


def _axes(scales, d):
    """Points +-s_i e_i: mean 0, covariance diag(2 s_i^2) / (n - 1) exactly."""
    rows = []
    for i, s in enumerate(scales):
        e = np.zeros(d)
        e[i] = s
        rows += [e, -e]
    return np.array(rows)


# -- participation_ratio ------------------------------------------------------------------------
def test_participation_ratio_isotropic_is_d_and_rank_one_is_one():
    from probekit.geometry import participation_ratio as ref
    from probekit.hypotheses.kinds.participation_ratio import (
        ParticipationRatioSpec,
        participation_ratio,
    )

    spec = ParticipationRatioSpec(site="resid_post@0")
    iso = participation_ratio(spec, _ctx(_axes([2.0] * 6, 6) + 3.0))
    assert iso.estimate == pytest.approx(6.0, rel=1e-9) and iso.n == 12
    with pytest.raises(DataError, match="no spread"):  # 4 rows: some resamples repeat one row
        participation_ratio(spec, _ctx(_axes([1.0, 2.0], 4)))
    line = np.outer(np.arange(10.0), np.array([1.0, -2.0, 0.5]))
    assert participation_ratio(spec, _ctx(line)).estimate == pytest.approx(1.0, rel=1e-9)
    # unequal axes: (sum l)^2 / sum l^2 with l ~ s^2
    two = participation_ratio(spec, _ctx(np.tile(_axes([1.0, 2.0], 4), (5, 1))))
    assert two.estimate == pytest.approx(25 / 17, rel=1e-9)
    X = np.random.default_rng(0).normal(size=(80, 12)) * np.linspace(0.2, 2.0, 12)
    m = participation_ratio(spec, _ctx(X))
    assert m.estimate == pytest.approx(float(ref(torch.tensor(X))[0]), rel=1e-9)
    assert m.resamples.shape == (1000,) and np.percentile(m.resamples, 2.5) < m.estimate < np.percentile(
        m.resamples, 97.5)


def test_participation_ratio_per_class_is_the_class_mean():
    from probekit.hypotheses.kinds.participation_ratio import (
        ParticipationRatioSpec,
        participation_ratio,
    )

    iso = _axes([1.0] * 4, 4)  # PR 4
    line = np.outer(np.arange(6.0), np.array([1.0, 1.0, 0.0, 0.0]))  # PR 1
    X = np.vstack([iso, line + 5.0])
    y = [0] * len(iso) + [1] * len(line)
    m = participation_ratio(ParticipationRatioSpec(site="resid_post@0", per_class=True), _ctx(X, y))
    np.testing.assert_allclose(m.values, [4.0, 1.0], rtol=1e-9)
    assert m.estimate == pytest.approx(2.5) and m.unit == "classes"


# -- manifold_radius / manifold_dimension -------------------------------------------------------
def _clouds(noise, seed=0, p=4, m=10, n=24):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(p, n))
    y = np.repeat(np.arange(p), m)
    return centres[y] + noise * rng.normal(size=(p * m, n)), y


def test_manifold_radius_and_dimension_are_the_mft_result():
    from probekit.geometry import manifold_capacity, manifolds_from_labels
    from probekit.hypotheses.kinds.manifold_geometry import (
        ManifoldGeometrySpec,
        manifold_dimension,
        manifold_radius,
    )

    X, y = _clouds(0.3)
    spec = ManifoldGeometrySpec(site="resid_post@0", n_t=10)
    r = manifold_radius(spec, _ctx(X, y))
    d = manifold_dimension(spec, _ctx(X, y))
    ref = manifold_capacity(manifolds_from_labels(torch.tensor(X), y, max_points=50, seed=0)[0],
                            n_t=10, seed=0)
    np.testing.assert_allclose(r.values, ref.radius_m.numpy(), rtol=1e-9)
    np.testing.assert_allclose(d.values, ref.dimension_m.numpy(), rtol=1e-9)
    assert r.estimate == pytest.approx(ref.radius) and d.estimate == pytest.approx(ref.dimension)
    assert r.n == 4 and r.details["capacity"] == pytest.approx(ref.capacity)
    # tighter clouds: smaller radius (planted), same labels
    tight = manifold_radius(spec, _ctx(*_clouds(0.03)))
    assert tight.estimate < 0.2 * r.estimate


def test_manifold_kinds_need_two_classes():
    from probekit.hypotheses.kinds.manifold_geometry import ManifoldGeometrySpec, manifold_radius

    X, _ = _clouds(0.3)
    with pytest.raises(NotApplicableError, match="1 class"):
        manifold_radius(ManifoldGeometrySpec(site="resid_post@0"), _ctx(X, [0] * len(X)))


# -- layer_rotation -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def series_models():
    from probekit.models import load_checkpoint

    return {s: load_checkpoint(SERIES / f"step_{s:07d}") for s in (0, 1000)}


def test_layer_rotation_is_zero_at_init_and_the_geometry_value_later(series_models):
    from probekit.geometry import layer_rotation as ref
    from probekit.hypotheses.kinds.layer_rotation import LayerRotationSpec, layer_rotation

    init, final = series_models[0], series_models[1000]
    at0 = layer_rotation(LayerRotationSpec(), FakeContext(model=init))
    np.testing.assert_allclose(at0.values, 0.0, atol=1e-9)
    assert at0.n == 9 and "step-0 checkpoint" in at0.details["init"]
    m = layer_rotation(LayerRotationSpec(), FakeContext(model=final))
    want = {k: float(v[-1]) for k, v in ref([init.state_dict(), final.state_dict()]).items()}
    assert m.details["per_weight"] == pytest.approx(want, rel=1e-9)
    assert m.estimate == pytest.approx(np.mean(list(want.values())), rel=1e-9)
    w0, w1 = init.W_E.detach().double(), final.W_E.detach().double()
    e = layer_rotation(LayerRotationSpec(weight="W_E"), FakeContext(model=final))
    assert e.estimate == pytest.approx(float(1 - (w0 * w1).sum() / (w0.norm() * w1.norm())), rel=1e-9)
    assert e.estimate == pytest.approx(want["embed.weight"], rel=1e-9)
    # the trainer's init is build_model(config): re-initialising gives the same reference
    rebuilt = layer_rotation(LayerRotationSpec(init="rebuild"), FakeContext(model=final))
    assert rebuilt.estimate == m.estimate and "re-initialised" in rebuilt.details["init"]


def test_layer_rotation_of_a_planted_rotation(tmp_path, series_models):
    from probekit.hypotheses.kinds.layer_rotation import LayerRotationSpec, layer_rotation
    from probekit.models import ModelConfig, load_checkpoint, save_checkpoint
    from probekit.models.checkpoint import read_checkpoint_meta

    init = series_models[0]
    run = tmp_path / "run" / "checkpoints"
    shutil.copytree(SERIES / "step_0000000", run / "step_0000000")
    w0 = init.state_dict()["blocks.0.mlp.in.weight"].double()
    u = torch.randn(w0.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    u = u - (u * w0).sum() / (w0 * w0).sum() * w0
    u = u * w0.norm() / u.norm()
    theta = 0.7
    moved = load_checkpoint(SERIES / "step_0000000")
    with torch.no_grad():
        moved.state_dict()["blocks.0.mlp.in.weight"].copy_(
            3.0 * (math.cos(theta) * w0 + math.sin(theta) * u))
    config = ModelConfig.from_dict(read_checkpoint_meta(SERIES / "step_0000000")["model"])
    save_checkpoint(moved, config, run / "step_0000010", extra={"step": 10})
    model = load_checkpoint(run / "step_0000010")
    one = layer_rotation(LayerRotationSpec(weight="blocks.0.mlp.W_in"), FakeContext(model=model))
    assert one.estimate == pytest.approx(1 - math.cos(theta), abs=1e-6)  # float32 weights
    allw = layer_rotation(LayerRotationSpec(init="run"), FakeContext(model=model))
    assert sorted(allw.values)[-1] == pytest.approx(1 - math.cos(theta), abs=1e-6)
    assert np.sum(allw.values > 1e-9) == 1  # every other weight is unchanged


def test_layer_rotation_without_an_init(series_models):
    from probekit.hypotheses.kinds.layer_rotation import LayerRotationSpec, layer_rotation
    from probekit.models import load_checkpoint

    lone = load_checkpoint(ROOT / "probes" / "checkpoints" / "modadd-p53")
    with pytest.raises(ConfigError, match="step_0000000.*probekit train"):
        layer_rotation(LayerRotationSpec(init="run"), FakeContext(model=lone))
    bare = load_checkpoint(SERIES / "step_0001000")
    del bare.probekit_checkpoint  # e.g. a pretrained model: no run, no recorded config
    with pytest.raises(NotApplicableError, match="initial weights"):
        layer_rotation(LayerRotationSpec(), FakeContext(model=bare))


# -- weight_condition_number --------------------------------------------------------------------
@pytest.fixture
def tiny():
    from probekit.models import ModelConfig, build_model

    return build_model(ModelConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, d_vocab=10, n_ctx=4,
                                   d_mlp=16, normalization_type=None, seed=0))


def test_weight_condition_number_of_a_planted_matrix(tiny):
    from probekit.geometry import weight_condition_numbers
    from probekit.hypotheses.kinds.weight_condition_number import (
        WeightConditionSpec,
        weight_condition_number,
    )

    g = torch.Generator().manual_seed(0)
    q1, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    planted = q1 @ torch.diag(torch.logspace(0, 3, 8, dtype=torch.float64)) @ q2  # s 1..1000
    with torch.no_grad():
        tiny.state_dict()["blocks.0.attn.q.weight"].copy_(planted)
    ctx = FakeContext(model=tiny)
    for name in ("blocks.0.attn.q.weight", "blocks.0.attn.W_Q"):  # heads joined: the same map
        m = weight_condition_number(WeightConditionSpec(weight=name), ctx)
        assert m.estimate == pytest.approx(1000.0, rel=1e-4) and m.n == 1
    log = weight_condition_number(WeightConditionSpec(weight="blocks.0.attn.W_Q", log10=True), ctx)
    assert log.estimate == pytest.approx(3.0, abs=1e-5)
    assert np.all(log.resamples == log.estimate)
    allw = weight_condition_number(WeightConditionSpec(weight="all", log10=True), ctx)
    want = {k: math.log10(v) for k, v in weight_condition_numbers(tiny.state_dict()).items()}
    assert allw.details["per_weight"] == pytest.approx(want)
    assert allw.estimate == pytest.approx(np.mean(list(want.values())))
    with torch.no_grad():
        tiny.state_dict()["blocks.0.mlp.in.weight"][:, 0] = 0.0  # rank 7 of 8
    with pytest.raises(NonFiniteError, match="singular"):
        weight_condition_number(WeightConditionSpec(weight="blocks.0.mlp.W_in"), ctx)


# -- probe_selectivity --------------------------------------------------------------------------
def test_selectivity_of_a_type_lookup_is_zero():
    """Activations = one-hot of the type: the probe learns any function of the type, control too."""
    from probekit.hypotheses.kinds.probe_selectivity import ProbeSelectivitySpec, probe_selectivity

    types = np.tile(np.arange(12), 10)
    X = np.eye(12)[types] * 5.0
    y = types % 3
    ctx = _ctx(X, y, train=np.arange(60), test=np.arange(60, 120),
               tokens=[[7, int(t)] for t in types])
    m = probe_selectivity(ProbeSelectivitySpec(site="resid_post@0", types="position", C=100.0), ctx)
    assert m.details["accuracy"] == 1.0 and m.details["control_accuracy"] == 1.0
    np.testing.assert_array_equal(m.values, 0.0)
    assert m.details["n_types"] == 12


def test_selectivity_equals_a_direct_computation_and_separates_planted_from_random():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from probekit.hypotheses.kinds.probe_selectivity import ProbeSelectivitySpec, probe_selectivity
    from probekit.probes import LogisticProbe, control_labels

    rng = np.random.default_rng(0)
    n = 300
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(3, 16))[y] * 1.5 + rng.normal(size=(n, 16))
    train, test = np.arange(200), np.arange(200, 300)
    spec = ProbeSelectivitySpec(site="resid_post@0", n_control_maps=3)
    planted = probe_selectivity(spec, _ctx(X, y, train=train, test=test))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        task = LogisticProbe(C=1.0, max_iter=200).fit(X[train], y[train]).predict(X[test]) == y[test]
        ctrl = []
        for j in range(3):
            c = control_labels(np.arange(n), task_labels=y, random_state=j)  # each input a type
            ctrl.append(LogisticProbe(C=1.0, max_iter=200).fit(X[train], c[train]).predict(X[test]) == c[test])
    np.testing.assert_allclose(planted.values, task - np.mean(ctrl, axis=0), atol=1e-9)
    assert planted.estimate > 0.5  # the label is read, the random relabelling is not
    random = probe_selectivity(spec, _ctx(X, rng.integers(0, 3, n), train=train, test=test))
    assert abs(random.estimate) < 0.15


def test_selectivity_with_a_single_type_is_refused():
    from probekit.hypotheses.kinds.probe_selectivity import ProbeSelectivitySpec, probe_selectivity

    X = np.random.default_rng(0).normal(size=(40, 4))
    ctx = _ctx(X, [0, 1] * 20, tokens=[[i, 9] for i in range(40)])
    with pytest.raises(ConfigError, match="one type"):
        probe_selectivity(ProbeSelectivitySpec(site="resid_post@0", types="position"), ctx)


# -- end to end: a claim file through `probekit test` -------------------------------------------
def test_marker_claims_through_the_runner(tmp_path, capsys):
    import json

    from safetensors.torch import load_file

    from probekit.cli import main
    from probekit.geometry import layer_rotation as rotations

    final = SERIES / "step_0001000"
    (tmp_path / "markers.toml").write_text(f'''
[model]
checkpoint = "{final}"
[data]
label = "answer"
train_split = "train"
test_split = "test_id"
max_per_split = 150
[capture]
positions = "last"
[[claim]]
name = "the weights rotated away from their initialisation"
measure = "layer_rotation"
compare = ">="
threshold = 0.5
[[claim]]
name = "W_E is conditioned within two decades"
measure = "weight_condition_number"
weight = "W_E"
log10 = true
compare = "between"
threshold = [1.0, 3.0]
[[claim]]
name = "the residual stream at '=' spreads over more than 2 dimensions"
measure = "participation_ratio"
site = "resid_post@0"
compare = ">="
threshold = 2.0
''')
    assert main(["test", str(tmp_path / "markers.toml"), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    claims = json.loads((tmp_path / "o" / "report.json").read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["PASS"] * 3
    s0 = load_file(str(SERIES / "step_0000000" / "model.safetensors"))
    s1 = load_file(str(final / "model.safetensors"))
    rot = [float(v[-1]) for v in rotations([s0, s1]).values()]
    assert claims[0]["effect"] == pytest.approx(np.mean(rot), rel=1e-9) and len(rot) == 9
    sv = torch.linalg.svdvals(s1["embed.weight"].double())
    assert claims[1]["effect"] == pytest.approx(math.log10(sv[0] / sv[-1]), rel=1e-9)
    assert claims[1]["ci"] == [pytest.approx(claims[1]["effect"])] * 2  # exact: no sampling unit
    assert claims[2]["effect"] > 2.0 and claims[2]["n"] == 150
    assert capsys.readouterr().out.count("PASS") == 3
