"""Sharded capture (one executor task per shard range) equals the in-process capture byte for byte.

The reference is :func:`capture_to_store` on the same checkpoint: every shard file and
``manifest.json`` must have the same bytes. Resuming after an interrupted driver captures only
the missing shards. The Ray side is in ``tests/test_ray_fanouts.py``.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from probekit.capture import Site, TokenIndex, all_layers, capture_sharded, capture_to_store
from probekit.capture.sharded import ShardRange, capture_shard_range
from probekit.errors import ConfigError
from probekit.executor import InProcessExecutor, PathCheck, check_worker_paths, probe_paths
from probekit.models import load_model, save_checkpoint
from probekit.models.cached import load_model_cached
from probekit.store import ActivationStore, StoreWriter
from probekit.store.manifest import PARTS, StoreMismatchError
from probekit.util.integrity import seal
from tests.conftest import TINY_CONFIGS, random_sequences

N = 23  # batch 4, 8 examples per shard -> shards of 8, 8, 7 examples


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from probekit.models import build_model

    cfg = TINY_CONFIGS["gqa_rotary_rms"]
    return save_checkpoint(build_model(cfg), cfg, tmp_path_factory.mktemp("ckpt") / "tiny")


def _inputs(n: int = N):
    seqs = random_sequences(n, TINY_CONFIGS["gqa_rotary_rms"].d_vocab, seed=5)
    meta = {"label": [i % 3 for i in range(n)], "word": [f"w{i}" for i in range(n)]}
    rule = TokenIndex([(i % len(s)) for i, s in enumerate(seqs)])
    return seqs, meta, rule


def _sites(model):
    """Every layer's residual plus an attention pattern (its key width is the whole dataset's)."""
    return [*all_layers(model), Site.parse("attn_pattern@1"), Site.parse("mlp_out@0")]


def _options(rule):
    return {"positions": rule, "batch_size": 4, "examples_per_shard": 8, "progress": False}


def store_bytes(directory: Path) -> dict[str, bytes]:
    """Every file of a store, by relative name (a sharded capture leaves no extra file).

    The empty writer lock file (``.probekit.lock``, issue 36) is not part of the data.
    """
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != ".probekit.lock"}


def reference_store(checkpoint: Path, directory: Path, n: int = N) -> dict[str, bytes]:
    seqs, meta, rule = _inputs(n)
    model = load_model(checkpoint)
    capture_to_store(model, seqs, directory, _sites(model), metadata=meta, **_options(rule))
    return store_bytes(directory)


class CountingExecutor:
    """In-process, pickling every task; records the tasks; raises after ``fail_after`` tasks."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.items: list[ShardRange] = []
        self.fail_after = fail_after

    def map(self, fn, items, *, desc=None):
        if fn is not capture_shard_range:  # the up-front worker path check
            return InProcessExecutor(check_picklable=True).map(fn, items)
        out = []
        for item in items:
            if self.fail_after is not None and len(self.items) == self.fail_after:
                raise KeyboardInterrupt("driver killed")  # like a kill between two tasks
            self.items.append(item)
            out.append(InProcessExecutor(check_picklable=True).map(fn, [item])[0])
        return out


@pytest.mark.parametrize("shards_per_task", [1, 2])
def test_sharded_capture_is_byte_identical_to_in_process(checkpoint, tmp_path, shards_per_task):
    expected = reference_store(checkpoint, tmp_path / "ref")
    seqs, meta, rule = _inputs()
    model = load_model(checkpoint)
    ex = CountingExecutor()
    store = capture_sharded(checkpoint, seqs, tmp_path / "sharded", _sites(model), executor=ex,
                            metadata=meta, shards_per_task=shards_per_task, **_options(rule))
    assert [len(t.tokens) for t in ex.items] == ([8, 8, 7] if shards_per_task == 1 else [16, 7])
    assert store_bytes(tmp_path / "sharded") == expected  # no parts/ left, same manifest bytes
    assert sorted(expected) == ["manifest.json"] + [f"shard-0000{i}.safetensors" for i in range(3)]
    assert store.examples().tolist() == list(range(N))
    assert store.metadata()["word"] == meta["word"]


def test_killed_driver_resumes_only_missing_shards(checkpoint, tmp_path):
    expected = reference_store(checkpoint, tmp_path / "ref")
    seqs, meta, rule = _inputs()
    sites = _sites(load_model(checkpoint))
    out = tmp_path / "s"
    with pytest.raises(KeyboardInterrupt):
        capture_sharded(checkpoint, seqs, out, sites, executor=CountingExecutor(fail_after=2),
                        metadata=meta, **_options(rule))
    assert sorted(p.name for p in (out / PARTS).iterdir()) == ["shard-00000.json", "shard-00001.json"]
    assert not json.loads((out / "manifest.json").read_text())["complete"]
    again = CountingExecutor()
    capture_sharded(checkpoint, seqs, out, sites, executor=again, metadata=meta, **_options(rule))
    assert [t.first_shard for t in again.items] == [2]  # shards 0 and 1 were skipped
    assert store_bytes(out) == expected
    third = CountingExecutor()  # complete: nothing runs
    capture_sharded(checkpoint, seqs, out, sites, executor=third, metadata=meta, **_options(rule))
    assert third.items == []


def test_damaged_record_and_in_process_prefix_are_recaptured_or_kept(checkpoint, tmp_path):
    expected = reference_store(checkpoint, tmp_path / "ref")
    seqs, meta, rule = _inputs()
    sites = _sites(load_model(checkpoint))
    out = tmp_path / "s"
    # an interrupted in-process capture: the manifest lists shard 0 only
    reference_store(checkpoint, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(complete=False, shards=manifest["shards"][:1])
    (out / "manifest.json").write_text(json.dumps(seal(manifest)))  # as the capture writes it
    with pytest.raises(KeyboardInterrupt):  # shard 1 captured and recorded, then the driver dies
        capture_sharded(checkpoint, seqs, out, sites, executor=CountingExecutor(fail_after=1),
                        metadata=meta, **_options(rule))
    raw = bytearray((out / "shard-00001.safetensors").read_bytes())
    raw[-1] ^= 0xFF  # damage the recorded shard: its record no longer verifies
    (out / "shard-00001.safetensors").write_bytes(bytes(raw))
    again = CountingExecutor()
    capture_sharded(checkpoint, seqs, out, sites, executor=again, metadata=meta, **_options(rule))
    assert [t.first_shard for t in again.items] == [1, 2]
    assert store_bytes(out) == expected


def test_worker_with_other_weights_is_refused(checkpoint, tmp_path):
    seqs, meta, rule = _inputs()
    model, fingerprint = load_model_cached(str(checkpoint))
    assert load_model_cached(str(checkpoint))[0] is model  # loaded once per process
    writer = StoreWriter(tmp_path / "s", _template_for(model, seqs))
    writer.open()
    from probekit.capture.collect import CaptureConfig

    task = ShardRange(model=str(checkpoint), device="cpu", directory=str(tmp_path / "s"),
                      config=CaptureConfig(sites=tuple(all_layers(model)), progress=False),
                      tokens=tuple(tuple(s) for s in seqs[:4]), metadata={}, first_example=0,
                      first_shard=0, model_fingerprint="0" * 16, identity="x")
    with pytest.raises(StoreMismatchError, match=rf"model '{checkpoint}' loads with fingerprint "
                                                 rf"{fingerprint}, the driver's with 0000"):
        capture_shard_range(task)


def _template_for(model, seqs):
    from probekit.capture.collect import CaptureConfig, store_template

    return store_template(model, seqs, CaptureConfig(sites=tuple(all_layers(model))), {}, None)[0]


def test_other_capture_in_directory_is_refused(checkpoint, tmp_path):
    seqs, meta, rule = _inputs()
    sites = _sites(load_model(checkpoint))
    reference_store(checkpoint, tmp_path / "s")
    with pytest.raises(StoreMismatchError, match="different capture"):
        capture_sharded(checkpoint, seqs[:-1], tmp_path / "s", sites, metadata=None,
                        **_options(TokenIndex(rule.indices[:-1])))
    assert ActivationStore(tmp_path / "s").manifest.n_examples == N


class BlindWorkers(CountingExecutor):
    """Workers on a node that does not mount the store's filesystem (the path check's answer)."""

    def map_each_node(self, fn, item):
        return [[], [("node-2", path, "does not exist there") for path in item.write]]


def test_workers_that_cannot_see_the_store_fail_before_any_work(checkpoint, tmp_path):
    seqs, meta, rule = _inputs()
    ex = BlindWorkers()
    out = tmp_path / "s"
    with pytest.raises(ConfigError, match=rf"path '{out}' does not exist there on worker node-2: "
                                          r"every worker must see .* same mount point"):
        capture_sharded(checkpoint, seqs, out, _sites(load_model(checkpoint)), executor=ex,
                        metadata=meta, **_options(rule))
    assert ex.items == [] and not list(out.glob("shard-*"))


def test_probe_paths_reports_missing_and_unwritable_paths(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    check = PathCheck(read=(str(tmp_path), str(tmp_path / "gone")), write=(str(tmp_path), str(afile)))
    host = socket.gethostname()
    problems = probe_paths(check)
    assert [(h, p) for h, p, _ in problems] == [(host, str(tmp_path / "gone")), (host, str(afile))]
    assert problems[0][2] == "does not exist there" and "not writable" in problems[1][2]
    assert list(tmp_path.iterdir()) == [afile]  # the write probe cleaned up after itself
    with pytest.raises(ConfigError, match=r"gone' does not exist there on worker .*\(1 more"):
        check_worker_paths(CountingExecutor(), read=check.read, write=check.write)
    check_worker_paths(InProcessExecutor(), read=[tmp_path / "gone"])  # the driver: not checked


KILLED_DRIVER = """
import sys, time
from pathlib import Path
from probekit.capture import capture_sharded
from probekit.models import load_model
from tests.capture.test_sharded import _inputs, _options, _sites

class StallBeforeTask:
    '''In-process tasks; before task ``k`` it signals and hangs (to be killed there).'''

    def __init__(self, k, marker):
        self.k, self.marker = k, marker

    def map(self, fn, items, desc=None):
        out = []
        for i, item in enumerate(items):
            if len(items) > 1 and i == self.k:
                Path(self.marker).write_text("stalled")
                time.sleep(600)
            out.append(fn(item))
        return out

ckpt, out, marker, executor = sys.argv[1:5]
seqs, meta, rule = _inputs()
ex = StallBeforeTask(2, marker) if executor == "stall" else executor
capture_sharded(ckpt, seqs, out, _sites(load_model(ckpt)), executor=ex, metadata=meta,
                **_options(rule))
"""


def run_and_kill_driver(checkpoint: Path, out: Path, marker: Path, executor: str,
                        until: str) -> None:
    """Start a capture driver in a subprocess; SIGKILL it once ``until`` exists in ``out``'s tree."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER, str(checkpoint), str(out),
                             str(marker), executor], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (out / until).exists() and not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"driver exited early: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("driver never reached the kill point")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow  # the driver subprocess imports torch + transformer-lens (~10-15 s)
def test_sigkilled_driver_rerun_skips_finished_shards(checkpoint, tmp_path):
    expected = reference_store(checkpoint, tmp_path / "ref")
    out = tmp_path / "s"
    run_and_kill_driver(checkpoint, out, tmp_path / "stalled", "stall", until="never")
    assert sorted(p.name for p in (out / PARTS).iterdir()) == ["shard-00000.json", "shard-00001.json"]
    assert not json.loads((out / "manifest.json").read_text())["complete"]
    seqs, meta, rule = _inputs()
    again = CountingExecutor()
    capture_sharded(checkpoint, seqs, out, _sites(load_model(checkpoint)), executor=again,
                    metadata=meta, **_options(rule))
    assert [t.first_shard for t in again.items] == [2]  # the two finished shards were skipped
    assert store_bytes(out) == expected
