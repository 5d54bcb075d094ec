"""Ray executor: same results as in-process, worker death retried, trainings bit-identical.

A local cluster starts inside this module (``ray_cluster`` in conftest: ``ray.init(num_cpus=2)``,
no external service) and is shut down after it. Skipped when Ray is not installed (``pip install 'probekit-interp[ray]'``).
"""

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from probekit.errors import ConfigError, DataError  # noqa: E402
from probekit.executor import InProcessExecutor, get_executor  # noqa: E402
from probekit.executors.ray import RayExecutor  # noqa: E402
from probekit.train.population import TrainRun, train_population  # noqa: E402


@pytest.fixture(scope="module")
def cluster(ray_cluster):
    return ray_cluster


@dataclass(frozen=True, kw_only=True)
class Poly:
    x: int
    crash_marker: str | None = None  # kill this task's worker on its first attempt


def poly(task: Poly) -> int:
    """3x^2 - 7x + 1; with a marker: the first attempt kills its own worker process."""
    if task.crash_marker is not None and not os.path.exists(task.crash_marker):
        Path(task.crash_marker).write_text(str(os.getpid()))
        os._exit(1)  # a hard worker death (no exception, no cleanup), like a kill -9 / OOM kill
    return 3 * task.x * task.x - 7 * task.x + 1


def fails_on_four(task: Poly) -> int:
    if task.x == 4:
        raise DataError(f"bad x {task.x}")
    return task.x


def test_lazy_registration_and_config_errors():
    ex = get_executor("ray", num_cpus=2, progress=False)
    assert ex == RayExecutor(num_cpus=2, progress=False)
    with pytest.raises(ConfigError, match=r"Ray address 'head-node' is not .*ray start --head"):
        RayExecutor(address="head-node")
    with pytest.raises(ConfigError, match=r"num_cpus=2 with address 'auto'"):
        RayExecutor(address="auto", num_cpus=2)
    # port 1 on localhost: nothing listens, refused at once (checked before ray.init)
    from probekit.executors.ray import check_reachable

    with pytest.raises(ConfigError, match=r"no Ray cluster reachable at address '127\.0\.0\.1:1'.*"
                                          r"ray start --head.*--ray-address HEAD:6379"):
        check_reachable("127.0.0.1:1", 2.0)


def test_results_equal_in_process_and_keep_order(cluster):
    items = [Poly(x=x) for x in (5, -3, 0, 11, 2, 7, -8)]
    expected = InProcessExecutor(progress=False, check_picklable=True).map(poly, items)
    assert RayExecutor(progress=False).map(poly, items, desc="poly") == expected
    assert expected == [41, 49, 1, 287, -1, 99, 249]
    assert RayExecutor(progress=False).map(poly, []) == []


def test_task_exception_keeps_type_and_names_the_task(cluster):
    items = [Poly(x=x) for x in range(6)]
    with pytest.raises(DataError, match="bad x 4") as info:
        RayExecutor(progress=False).map(fails_on_four, items, desc="xs")
    notes = "\n".join(info.value.__notes__)
    assert "executor task 4 of 'xs' failed" in notes and "fails_on_four(Poly(x=4" in notes
    assert "remote traceback" in notes


def test_killed_worker_is_retried_and_result_unchanged(cluster, tmp_path):
    plain = [Poly(x=x) for x in range(4)]
    crashing = [Poly(x=x, crash_marker=str(tmp_path / f"m{x}") if x == 2 else None)
                for x in range(4)]
    got = RayExecutor(max_retries=2, progress=False).map(poly, crashing)
    assert (tmp_path / "m2").is_file()  # the first attempt did kill its worker
    assert got == InProcessExecutor(progress=False).map(poly, plain)
    # without retries the same death surfaces as Ray's worker-crash error, naming the task
    with pytest.raises(ray.exceptions.RayError) as info:
        RayExecutor(max_retries=0, progress=False).map(
            poly, [Poly(x=1), Poly(x=9, crash_marker=str(tmp_path / "m9"))], desc="no-retry"
        )
    assert "executor task 1 of 'no-retry'" in "\n".join(info.value.__notes__)


def _metrics(history):
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in history.records]


@pytest.mark.slow  # each Ray worker imports torch + transformer-lens once (~5 s idle, ~25 s loaded)
def test_population_trainings_bit_identical_to_in_process(cluster, tmp_path, single_thread):
    sets = ("task.p=13", "train.eval_every=3", "train.n_checkpoints=1")
    runs = {where: [TrainRun(preset="modular_addition", out_dir=str(tmp_path / where / f"s{s}"),
                             seed=s, steps=6, sets=sets) for s in (0, 1)]
            for where in ("local", "ray")}
    local = train_population(runs["local"])
    remote = train_population(runs["ray"], RayExecutor(progress=False))
    assert [_metrics(h) for h in remote] == [_metrics(h) for h in local]  # exact floats
    assert _metrics(local[0]) != _metrics(local[1])  # the seeds differ: the test can fail
    assert len(local[0]) >= 3 and local[0].records[-1]["step"] == 6


def test_path_check_runs_on_every_node_and_names_the_path(cluster, tmp_path):
    from probekit.executor import PathCheck, check_worker_paths, probe_paths

    ex = RayExecutor(progress=False)
    reports = ex.map_each_node(probe_paths, PathCheck(read=(str(tmp_path / "gone"),),
                                                      write=(str(tmp_path),)))
    assert len(reports) == len([n for n in ray.nodes() if n["Alive"]]) == 1
    assert [(p, why) for _, p, why in reports[0]] == [(str(tmp_path / "gone"), "does not exist there")]
    check_worker_paths(ex, read=[tmp_path], write=[tmp_path])  # visible: no error
    with pytest.raises(ConfigError, match=r"path '/no/such/store' does not exist there on worker .*"
                                          r"same mount point"):
        check_worker_paths(ex, read=["/no/such/store"])
