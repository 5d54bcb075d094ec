"""probekit.util: atomic writes, sha256, cache root, key checks, standardisation, diff of means."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest
import torch
from sklearn.preprocessing import StandardScaler

from probekit.errors import ConfigError, DataError
from probekit.util import cache, config, io, numeric


def test_atomic_writes_roundtrip_and_leave_no_temp(tmp_path):
    io.atomic_write_bytes(tmp_path / "a.bin", b"\x00\x01")
    io.atomic_write_text(tmp_path / "b.txt", "héllo")
    io.atomic_write_json(tmp_path / "c.json", {"x": [1, 2]})
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "b.txt").read_text(encoding="utf-8") == "héllo"
    assert json.loads((tmp_path / "c.json").read_text()) == {"x": [1, 2]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.txt", "c.json"]


def test_atomic_path_keeps_old_file_when_writer_fails(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="boom"), io.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_atomic_path_fsyncs_file_and_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBEKIT_FSYNC", "1")  # tests/conftest.py turns the fsyncs off
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}"))
                        or real(fd))
    io.atomic_write_text(tmp_path / "x.txt", "1")
    assert any(s.endswith(".x.txt.tmp-" + str(os.getpid())) for s in synced)
    assert str(tmp_path) in synced


def test_fsync_off_keeps_the_write_atomic(tmp_path, monkeypatch):
    """``PROBEKIT_FSYNC=0`` (the test suite's setting) skips every fsync, not the rename."""
    monkeypatch.setenv("PROBEKIT_FSYNC", "0")
    monkeypatch.setattr(os, "fsync", lambda fd: pytest.fail("fsync called with PROBEKIT_FSYNC=0"))
    (tmp_path / "x.txt").write_text("old")
    io.atomic_write_text(tmp_path / "x.txt", "new")
    assert (tmp_path / "x.txt").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]  # the temp file was renamed
    io.fsync_dir(tmp_path)


def test_sha256_matches_hashlib(tmp_path):
    data = os.urandom(5_000_000)
    (tmp_path / "d").write_bytes(data)
    assert io.sha256_file(tmp_path / "d") == hashlib.sha256(data).hexdigest()
    assert io.sha256_bytes(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_cache_root_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path))
    assert cache.cache_root() == tmp_path
    assert cache.cache_dir("models") == tmp_path / "models"
    monkeypatch.delenv("PROBEKIT_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_root() == tmp_path / "home" / ".cache" / "probekit"


def test_check_keys_names_unknown_valid_and_close_match():
    config.check_keys({"lr": 1, "steps": 2}, {"lr", "steps"}, what="TrainConfig")
    with pytest.raises(ConfigError) as err:
        config.check_keys({"stpes": 1, "lr": 2}, {"lr", "steps"}, what="TrainConfig")
    assert str(err.value) == (
        "unknown TrainConfig key 'stpes' (did you mean 'steps'?); "
        "valid keys are ['lr', 'steps']"
    )
    assert isinstance(err.value, ValueError)
    with pytest.raises(ConfigError, match=r"keys \['lrr', 'zzz'\] \(did you mean 'lr' for 'lrr'\?\)"):
        config.check_keys({"lrr": 1, "zzz": 2}, {"lr", "steps"}, what="TrainConfig")


@pytest.mark.parametrize("as_torch", [False, True])
def test_standardization_matches_standard_scaler(as_torch):
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(2, 40, 5))
    X[:, :, 2] = 7.0  # constant feature -> scale 1, standardised to 0
    Xin = torch.tensor(X) if as_torch else X
    mean, scale = numeric.standardization(Xin)
    Z = np.asarray(numeric.standardize(Xin, mean, scale))
    for b in range(2):
        ref = StandardScaler().fit(X[b])
        np.testing.assert_allclose(np.asarray(mean[b]), ref.mean_, rtol=1e-9)
        np.testing.assert_allclose(np.asarray(scale[b]), ref.scale_, rtol=1e-9)
        np.testing.assert_allclose(Z[b], ref.transform(X[b]), rtol=1e-9, atol=1e-9)
    assert float(np.asarray(scale)[0, 2]) == 1.0


@pytest.mark.parametrize("as_torch", [False, True])
def test_diff_of_means_matches_masked_means(as_torch):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3, 30, 4))
    pos = rng.random(30) > 0.4
    Xin, pin = (torch.tensor(X), torch.tensor(pos)) if as_torch else (X, pos)
    w, mu = numeric.diff_of_means(Xin, pin)
    m1, m0 = X[:, pos].mean(1), X[:, ~pos].mean(1)
    np.testing.assert_allclose(np.asarray(w), m1 - m0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(mu), 0.5 * (m1 + m0), atol=1e-9)


def test_diff_of_means_batches_labelings_and_refuses_one_class():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(25, 3))
    P = rng.random((6, 25)) > 0.5
    w, _ = numeric.diff_of_means(X, P)
    assert w.shape == (6, 3)
    for i in range(6):
        np.testing.assert_allclose(w[i], X[P[i]].mean(0) - X[~P[i]].mean(0), atol=1e-9)
    with pytest.raises(DataError, match="both classes"):
        numeric.diff_of_means(X, np.ones(25, dtype=bool))


def test_close_match_hint():
    assert config.close_match_hint("splt", ["scale", "split"]) == " (did you mean 'split'?)"
    assert config.close_match_hint("zzz", ["scale", "split"]) == ""
