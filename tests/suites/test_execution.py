"""``[execution]`` suite table and ``probekit report --executor/--executor-opt/--ray-address``."""

import importlib.util

import pytest
import torch

from probekit.cli import main
from probekit.executor import InProcessExecutor
from probekit.suites import SuiteError, load_suite
from tests.suites.conftest import SUITE

HAS_RAY = importlib.util.find_spec("ray") is not None


def _suite(suite_dir, tmp_path, execution=""):
    text = SUITE.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace(
        '"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    path = tmp_path / "s.toml"
    path.write_text(text + execution)
    return path


def test_execution_table_parses_and_defaults_to_in_process(suite_dir, tmp_path):
    suite = load_suite(_suite(suite_dir, tmp_path))
    assert suite.execution.executor == "inprocess" and suite.execution.options == {}
    assert isinstance(suite.execution.make_executor(progress=False), InProcessExecutor)
    table = '\n[execution]\nexecutor = "ray"\n[execution.options]\naddress = "10.0.0.5:6379"\n'
    suite = load_suite(_suite(suite_dir, tmp_path, table))
    assert (suite.execution.executor, suite.execution.options) == ("ray", {"address": "10.0.0.5:6379"})
    assert suite.to_dict()["execution"]["options"] == {"address": "10.0.0.5:6379"}
    # the form of earlier versions (the backend's options beside `executor`) is refused, with the fix
    with pytest.raises(SuiteError, match=r"s\.toml:\d+: \[execution\] address: an option of the "
                       r"'ray' backend; write it in an \[execution\.options\] table"):
        load_suite(_suite(suite_dir, tmp_path, '\n[execution]\nexecutor = "ray"\naddress = "10.0.0.5:6379"\n'))


@pytest.mark.parametrize(("table", "match"), [
    ('executor = "rya"', r"s\.toml:\d+: \[execution\] executor: executor = 'rya': must be one of \['inprocess', 'processes', 'ray'\]"),
    ('executor = "inprocess"\naddress = "auto"', r"s\.toml:\d+: \[execution\] address: unknown key"),
    ('executor = "inprocess"\n[execution.options]\naddress = "auto"',
     r"executor 'inprocess' has no option 'address'; its options are \['check_picklable', 'progress'\]"),
    ('executor = "ray"\n[execution.options]\nnum_cpus = 2\naddress = "auto"', r"drop num_cpus"),
    ('executor = "ray"\n[execution.options]\naddress = "headnode"',
     r"Ray address 'headnode' is not .*ray start --head"),
    ('executor = "ray"\naddress = "headnode"', r"\[execution\] address: an option of the 'ray' backend"),
    ('executor = "processes"\n[execution.options]\nworkers = 0', r"workers must be >= 1 .*got 0"),
    ('executor = "ray"\naddres = "auto"', r"s\.toml:\d+: \[execution\] addres: unknown key"),
])
def test_execution_table_errors_name_the_line(suite_dir, tmp_path, table, match):
    with pytest.raises(SuiteError, match=match):
        load_suite(_suite(suite_dir, tmp_path, f"\n[execution]\n{table}\n"))


def test_cli_executor_errors_are_one_line(suite_dir, tmp_path, capsys):
    path = str(_suite(suite_dir, tmp_path))
    assert main(["report", path, "--check", "--executor", "rya"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'rya'" in err[0] and "['inprocess', 'processes', 'ray']" in err[0]
    assert main(["report", path, "--check", "--executor", "inprocess", "--ray-address", "auto"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use --executor ray" in err[0]
    # a dead address fails before the model loads, with how to start a cluster
    assert main(["report", path, "--out", str(tmp_path / "r"), "--ray-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    if HAS_RAY:
        assert "no Ray cluster reachable at address '127.0.0.1:1'" in err[0]
        assert "ray start --head" in err[0]
    else:
        assert "pip install 'probekit-interp[ray]'" in err[0]
    assert not (tmp_path / "r").exists()


@pytest.mark.slow  # each Ray worker imports torch + transformer-lens and loads the model
def test_suite_on_ray_gives_the_same_tables(suite_dir, ray_cluster):
    from probekit.executors.ray import RayExecutor
    from probekit.suites import run_suite

    suite = load_suite(suite_dir / "suite.toml")
    local = run_suite(suite, progress=False).to_dict()
    remote = run_suite(suite, progress=False, executor=RayExecutor(progress=False)).to_dict()
    assert ([a["data"]["sweep"] for a in remote["analyses"] if a["section"] == "probe"]
            == [a["data"]["sweep"] for a in local["analyses"] if a["section"] == "probe"])
    assert remote["hypotheses"] == local["hypotheses"]  # permutation p-values included


class _RecordingExecutor:
    """Runs tasks in order in this process and records which function ran over how many items."""

    def __init__(self):
        self.calls = []

    def map(self, fn, items, *, desc=None):
        items = list(items)
        self.calls.append((fn.__name__, len(items)))
        return [fn(item) for item in items]


def test_capture_runs_as_executor_tasks_with_identical_activations(suite_dir, tmp_path):
    from probekit.store import ActivationStore
    from probekit.suites.context import AnalysisContext

    suite = load_suite(_suite(suite_dir, tmp_path, "\n[execution]\ncapture_examples_per_shard = 7\n"))
    local_ctx = AnalysisContext(suite, progress=False, cache_dir=tmp_path / "local")
    local = local_ctx.activations()
    executor = _RecordingExecutor()
    ctx = AnalysisContext(suite, progress=False, cache_dir=tmp_path / "tasks", executor=executor)
    sharded = ctx.activations()
    n, size = len(ctx.examples.tokens), -(-7 // suite.capture.batch_size) * suite.capture.batch_size
    assert n > 2 * size  # several shards
    assert ("capture_shard_range", -(-n // size)) in executor.calls  # one task per shard (whole batches)
    assert list(sharded) == list(local)
    for site in local:
        assert torch.equal(sharded[site], local[site])
    store = ActivationStore(ctx.store_dir(list(sharded)))
    assert len(store.manifest.shards) == -(-n // size) and len(ActivationStore(
        local_ctx.store_dir(list(local))).manifest.shards) == 1
    with pytest.raises(SuiteError, match="capture_examples_per_shard = 0: must be >= 1"):
        load_suite(_suite(suite_dir, tmp_path, "\n[execution]\ncapture_examples_per_shard = 0\n"))
