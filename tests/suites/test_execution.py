"""``[execution]`` suite table and ``probekit report --executor/--ray-address``."""

import importlib.util

import pytest

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
    assert suite.execution.executor == "inprocess" and suite.execution.address is None
    assert isinstance(suite.execution.make_executor(progress=False), InProcessExecutor)
    suite = load_suite(_suite(suite_dir, tmp_path, '\n[execution]\nexecutor = "ray"\naddress = "10.0.0.5:6379"\n'))
    assert (suite.execution.executor, suite.execution.address) == ("ray", "10.0.0.5:6379")
    assert suite.to_dict()["execution"]["address"] == "10.0.0.5:6379"


@pytest.mark.parametrize(("table", "match"), [
    ('executor = "rya"', r"s\.toml:\d+: \[execution\]: executor = 'rya': must be one of \['inprocess', 'ray'\]"),
    ('executor = "inprocess"\naddress = "auto"', r"address/num_cpus are Ray options"),
    ('executor = "ray"\naddress = "headnode"', r"Ray address 'headnode' is not .*ray start --head"),
    ('executor = "ray"\naddres = "auto"', r"s\.toml:\d+: \[execution\] addres: unknown key"),
])
def test_execution_table_errors_name_the_line(suite_dir, tmp_path, table, match):
    with pytest.raises(SuiteError, match=match):
        load_suite(_suite(suite_dir, tmp_path, f"\n[execution]\n{table}\n"))


def test_cli_executor_errors_are_one_line(suite_dir, tmp_path, capsys):
    path = str(_suite(suite_dir, tmp_path))
    assert main(["report", path, "--check", "--executor", "rya"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'rya'" in err[0] and "['inprocess', 'ray']" in err[0]
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
    assert [a["sweep"] for a in remote["probes"]] == [a["sweep"] for a in local["probes"]]
    assert remote["hypotheses"] == local["hypotheses"]  # permutation p-values included
