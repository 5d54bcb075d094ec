"""scripts/bench_load.py: the suites it runs and the busy-core process it starts and ends."""

from __future__ import annotations

import os

from probekit.examples import list_examples
from scripts import bench, bench_load


def test_runs_every_shipped_probe_suite_and_no_diagnosis():
    expected = sorted(e.name for e in list_examples() if e.folder == "probes" and e.command == "report")
    assert bench_load.shipped_suites() == expected
    assert "modadd_geometry" in expected and not any(n.startswith("diagnose_") for n in expected)
    assert bench.OPTIONAL["load"] == ("scripts.bench_load", "bench_load")


def test_busy_core_is_a_live_process_ended_on_exit():
    with bench_load.busy_core() as pid:
        assert pid is not None
        os.kill(pid, 0)  # alive
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().split()[2] in "RS"  # running (or between slices)
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
    with bench_load.busy_core(False) as none:
        assert none is None


def test_children_run_without_the_openblas_overrides(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    env = bench_load._child_env()
    assert not set(bench_load.UNSET) & set(env)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(bench_load.ROOT)
