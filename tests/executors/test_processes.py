"""The local process-pool executor: same results as in-process, order kept, real workers, errors.

Each pool spawns two workers that import torch (a few seconds each): three pools in all.
"""

import argparse
import os
from pathlib import Path

import pytest

from probekit.errors import ConfigError
from probekit.executor import InProcessExecutor, get_executor, map_resumable
from probekit.executor_cli import add_executor_arguments, executor_from_args
from probekit.executors.processes import ProcessExecutor
from probekit.suites.spec import ExecutionSpec
from tests.executors.proc_tasks import Job, fails_on_four, poly, where


def test_results_order_workers_and_threads():
    # later items finish first: task i sleeps (n - i) x 0.15 s
    xs = (5, -3, 0, 11, 2, 7)
    items = [Job(x=x, delay_s=0.15 * (len(xs) - i)) for i, x in enumerate(xs)]
    ex = ProcessExecutor(workers=2, threads_per_worker=2, progress=False)
    got = ex.map(where, items, desc="poly")
    values = [g[0] for g in got]
    assert values == [poly(Job(x=x)) for x in xs] == [41, 49, 1, 287, -1, 99]
    assert values == InProcessExecutor(progress=False).map(poly, [Job(x=x) for x in xs])
    pids = {g[1] for g in got}
    assert os.getpid() not in pids and len(pids) == 2
    assert {(g[2], g[3]) for g in got} == {(2, "2")}
    assert ex.map(poly, []) == []


def test_failing_task_raises_its_error_naming_the_item():
    items = [Job(x=x) for x in range(6)]
    with pytest.raises(ValueError, match="bad x 4") as info:
        ProcessExecutor(workers=2, progress=False).map(fails_on_four, items, desc="xs")
    notes = "\n".join(info.value.__notes__)
    assert "executor task 4 of 'xs' failed: fails_on_four(Job(x=4, delay_s=0.0))" in notes
    assert "raise ValueError" in str(info.value.__cause__)  # the worker's traceback, chained


def test_map_resumable_records_every_task(tmp_path: Path):
    items = [Job(x=x) for x in (3, 1, 4)]
    ex = ProcessExecutor(workers=2, progress=False)
    assert map_resumable(ex, poly, items, tmp_path) == [7, -3, 21]
    assert len(list(tmp_path.glob("task-*.pkl"))) == 3

    class MustNotRun:
        def map(self, fn, items, *, desc=None):
            raise AssertionError(f"recorded tasks ran again: {items}")

    assert map_resumable(MustNotRun(), poly, items, tmp_path) == [7, -3, 21]


def test_unpicklable_task_refused_before_any_worker_starts():
    with pytest.raises(ConfigError, match=r"executor task 0 failed: .*cannot be pickled"):
        ProcessExecutor(workers=2).map(lambda job: job.x, [Job(x=1)])


@pytest.mark.parametrize(("options", "match"), [
    ({"workers": 0}, r"ProcessExecutor.workers must be >= 1 \(e.g. --executor-opt workers=4\), got 0"),
    ({"threads_per_worker": -1}, r"ProcessExecutor.threads_per_worker must be >= 1 .*got -1"),
    ({"start_method": "bogus"}, r"ProcessExecutor.start_method must be one of \[.spawn., .forkserver., .fork.\] \(spawn is safe with torch\), got .bogus."),
])
def test_bad_options_name_the_value(options, match):
    with pytest.raises(ConfigError, match=match):
        ProcessExecutor(**options)
    with pytest.raises(ConfigError, match=match):
        get_executor("processes", **options)


def test_registry_and_cli():
    assert get_executor("processes", workers=2) == ProcessExecutor(workers=2)
    assert ProcessExecutor().workers == (os.cpu_count() or 1)
    parser = argparse.ArgumentParser()
    add_executor_arguments(parser)
    ex = executor_from_args(parser.parse_args(["--executor", "processes", "--executor-opt",
                                               "workers=16", "--executor-opt", "start_method=fork"]),
                            progress=False)
    assert ex == ProcessExecutor(workers=16, start_method="fork", progress=False)
    assert executor_from_args(parser.parse_args(["--workers", "3"])) == ProcessExecutor(workers=3)
    with pytest.raises(ConfigError, match=r"executor 'processes' has no option 'threads'"):
        executor_from_args(parser.parse_args(["--executor", "processes", "--executor-opt", "threads=2"]))
    with pytest.raises(SystemExit):  # argparse refuses a non-integer --workers
        parser.parse_args(["--workers", "many"])
    # a suite's [execution] executor = "processes" with [execution.options] workers = 4
    spec = ExecutionSpec(executor="processes", options={"workers": 4})
    assert spec.make_executor(progress=False) == ProcessExecutor(workers=4, progress=False)


def test_building_the_executor_starts_no_pool():
    import subprocess
    import sys

    code = ("import sys; from probekit.executor import get_executor; "
            "e = get_executor('processes', workers=2); "
            "print(type(e).__name__, 'concurrent.futures.process' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ProcessExecutor", "False"]
