"""The executor seam: order, errors naming their item, equivalence with a loop, progress."""

import pickle
from dataclasses import dataclass

import numpy as np
import pytest

from probekit.errors import ConfigError, DataError
from probekit.executor import (
    Executor,
    InProcessExecutor,
    available_executors,
    get_executor,
    register_executor,
)


@dataclass(frozen=True, kw_only=True)
class Square:
    value: int


def square(task: Square) -> int:
    return task.value * task.value


def fails_on_three(task: Square) -> int:
    if task.value == 3:
        raise DataError(f"bad value {task.value}")
    return task.value


def col_mean(x: np.ndarray) -> float:
    return float(x.mean())


def test_order_is_preserved():
    items = [Square(value=v) for v in (5, -2, 9, 0, 3)]
    assert InProcessExecutor(progress=False).map(square, items) == [25, 4, 81, 0, 9]


def test_equivalent_to_a_plain_loop_on_arrays():
    rng = np.random.default_rng(0)
    items = [rng.normal(size=(50, 3)) for _ in range(7)]
    got = get_executor().map(col_mean, items, desc="means")
    assert got == [col_mean(x) for x in items]


def test_exception_keeps_type_and_names_the_failing_item():
    items = [Square(value=v) for v in (1, 2, 3, 4)]
    with pytest.raises(DataError, match="bad value 3") as info:
        InProcessExecutor(progress=False).map(fails_on_three, items, desc="squares")
    notes = "\n".join(info.value.__notes__)
    assert "executor task 2 of 'squares'" in notes
    assert "fails_on_three(Square(value=3))" in notes


def test_progress_bar_off_when_not_a_tty(capsys):
    InProcessExecutor().map(square, [Square(value=1)] * 3, desc="quiet-bar")
    assert "quiet-bar" not in capsys.readouterr().err  # pytest's stderr is not a TTY


def test_progress_bar_on_when_forced(capsys):
    InProcessExecutor(progress=True).map(square, [Square(value=1)] * 3, desc="loud-bar")
    assert "loud-bar" in capsys.readouterr().err


def test_check_picklable_refuses_a_closure():
    offset = 3
    with pytest.raises(ConfigError, match="cannot be pickled"):
        InProcessExecutor(progress=False, check_picklable=True).map(
            lambda t: t.value + offset, [Square(value=1)]
        )
    assert InProcessExecutor(check_picklable=True).map(square, [Square(value=4)]) == [16]


def test_get_executor_resolution_and_registration():
    assert isinstance(get_executor(None), InProcessExecutor)
    assert get_executor("inprocess", progress=False) == InProcessExecutor(progress=False)
    mine = InProcessExecutor(progress=False)
    assert get_executor(mine) is mine
    assert isinstance(mine, Executor)
    with pytest.raises(ConfigError, match=r"unknown executor 'rya'.*\['inprocess', 'processes', 'ray'\]"):
        get_executor("rya")
    with pytest.raises((ConfigError, TypeError)):  # TypeError: beartype's check, when on
        get_executor(42)

    @dataclass(frozen=True)
    class Reversed:
        def map(self, fn, items, *, desc=None):
            return [fn(x) for x in reversed(list(items))]

    from probekit.executor import EXECUTORS

    with EXECUTORS.temporary():
        register_executor("reversed_test", Reversed)
        assert "reversed_test" in available_executors()
        assert get_executor("reversed_test").map(square, [Square(value=1), Square(value=2)]) == [4, 1]
    assert "reversed_test" not in available_executors()


def test_executor_instance_is_picklable():
    ex = InProcessExecutor(progress=False)
    assert pickle.loads(pickle.dumps(ex)) == ex


def test_ray_backend_is_lazy_and_says_how_to_install(monkeypatch):
    import importlib.util
    import subprocess
    import sys

    code = ("import sys; from probekit.executor import get_executor; e = get_executor('ray'); "
            "print(type(e).__name__, 'ray' in sys.modules)")
    if importlib.util.find_spec("ray") is not None:  # registered on demand, ray not imported
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["RayExecutor", "False"]
    import probekit.executors.ray as backend

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "ray" else real(n, *a))
    with pytest.raises(ConfigError, match=r"needs the ray package.*pip install 'probekit-interp\[ray\]'"):
        backend.make_ray_executor(address="auto")


class StopAfter:
    """In-process executor that counts the tasks it runs and dies (KeyboardInterrupt) after ``k``."""

    def __init__(self, k: int | None = None) -> None:
        self.k, self.ran = k, []

    def map(self, fn, items, *, desc=None):
        out = []
        for item in items:
            if self.k is not None and len(self.ran) == self.k:
                raise KeyboardInterrupt("driver killed")
            self.ran.append(item)
            out.append(fn(item))
        return out


def slow_square(task: Square) -> int:
    """``square`` that signals its start (a file) and takes a while when asked."""
    import time
    from pathlib import Path

    Path(f"{task.value}.started").write_text("")
    if task.value == 4 and Path("slow").exists():
        time.sleep(600)  # the driver is killed while this one runs
    return task.value * task.value


def test_map_resumable_skips_recorded_tasks(tmp_path):
    from probekit.executor import map_resumable

    items = [Square(value=v) for v in range(6)]
    with pytest.raises(KeyboardInterrupt):
        map_resumable(StopAfter(5), square, items, tmp_path / "rec")  # path check + 4 tasks
    assert len(list((tmp_path / "rec").glob("task-*.pkl"))) == 4
    again = StopAfter()
    assert map_resumable(again, square, items, tmp_path / "rec") == [v * v for v in range(6)]
    assert [item.value for _, item in again.ran[1:]] == [4, 5]  # ran[0]: the path check
    damaged = sorted((tmp_path / "rec").glob("task-*.pkl"))[0]
    damaged.write_bytes(b"not a pickle")
    third = StopAfter()
    assert map_resumable(third, square, items, tmp_path / "rec") == [v * v for v in range(6)]
    assert len(third.ran) == 2  # the path check and the one damaged task
    plain = StopAfter()
    assert map_resumable(plain, square, items, None) == [v * v for v in range(6)]
    assert len(plain.ran) == 6


_RESUMABLE_DRIVER = """
import importlib, sys
from probekit.executor import InProcessExecutor, map_resumable
mod = importlib.import_module(sys.argv[1])
items = [mod.Square(value=v) for v in range(6)]
map_resumable(InProcessExecutor(), mod.slow_square, items, sys.argv[2])
"""


def test_map_resumable_after_sigkilled_driver(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from probekit.executor import map_resumable

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    (tmp_path / "slow").write_text("")
    proc = subprocess.Popen([sys.executable, "-c", _RESUMABLE_DRIVER, slow_square.__module__,
                             str(tmp_path / "rec")], cwd=tmp_path, env=env,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (tmp_path / "4.started").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stderr.close()
    assert len(list((tmp_path / "rec").glob("task-*.pkl"))) == 4  # tasks 0-3 finished
    for p in [*tmp_path.glob("*.started"), tmp_path / "slow"]:
        p.unlink()
    again = StopAfter()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        items = [Square(value=v) for v in range(6)]
        assert map_resumable(again, slow_square, items, tmp_path / "rec") == [v * v for v in range(6)]
    finally:
        os.chdir(cwd)
    assert [item.value for _, item in again.ran[1:]] == [4, 5]  # ran[0]: the path check
    assert sorted(p.name for p in tmp_path.glob("*.started")) == ["4.started", "5.started"]


_KEY_CHILD = """
import sys, torch, numpy as np
from functools import partial
from probekit.executor import task_key
from test_executor import Square, square
item = (Square(value=3), partial(square, Square(value=1)), torch.arange(6.0).reshape(2, 3),
        {"idx": np.arange(4), "name": "x"})
print(task_key(square, item))
"""


def test_task_key_is_stable_across_processes_and_content_based():
    import os
    import subprocess
    import sys
    from functools import partial
    from pathlib import Path

    import torch

    from probekit.executor import task_key

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    child = subprocess.run([sys.executable, "-c", _KEY_CHILD], env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    item = (Square(value=3), partial(square, Square(value=1)), torch.arange(6.0).reshape(2, 3),
            {"idx": np.arange(4), "name": "x"})
    assert task_key(square, item) == child  # tensor pickles differ between processes; keys not
    changed = (*item[:2], item[2] + 1e-6, item[3])
    assert task_key(square, changed) != child
    assert task_key(fails_on_three, item) != child


TOY_BACKEND = '''"""A toy backend: one module, registered on import like the shipped ones."""
from dataclasses import dataclass

from probekit.errors import ConfigError
from probekit.executor import CliAlias, register_executor


@dataclass(frozen=True, kw_only=True)
class ToyExecutor:
    label: str = "toy"
    reverse: bool = False
    progress: bool | None = None

    def __post_init__(self):
        if not self.label:
            raise ConfigError("toy executor: label must be non-empty, e.g. label=run1")

    def map(self, fn, items, *, desc=None):
        items = list(items)
        order = list(reversed(range(len(items)))) if self.reverse else list(range(len(items)))
        out = {i: fn(items[i]) for i in order}
        RAN.append((self.label, order))
        return [out[i] for i in range(len(items))]


RAN = []
register_executor("toy", ToyExecutor, options=ToyExecutor,
                  aliases=(CliAlias(flag="--toy-label", option="label", help="the toy's label"),))
'''


@pytest.fixture
def toy_backend(tmp_path, monkeypatch):
    """``toy.py`` dropped into the backend package's search path: discovered, never imported by name."""
    import sys

    import probekit.executors
    from probekit import executor as mod

    (tmp_path / "toy.py").write_text(TOY_BACKEND)
    monkeypatch.setattr(probekit.executors, "__path__", [*probekit.executors.__path__, str(tmp_path)])
    with mod.EXECUTORS.temporary():  # registrations end with the test
        mod.EXECUTORS.rescan()  # the package's modules are imported again on the next lookup
        yield
    sys.modules.pop("probekit.executors.toy", None)


def test_a_backend_module_registers_its_options_and_aliases(toy_backend, tmp_path):
    import argparse
    import sys

    from probekit.executor import executor_options, make_executor
    from probekit.executor_cli import add_executor_arguments, executor_from_args

    assert "toy" in available_executors()
    toy = sys.modules["probekit.executors.toy"]
    # options are validated by the backend's own class, before anything runs
    assert executor_options("toy", {"label": "a", "reverse": True}) == {"label": "a", "reverse": True}
    with pytest.raises(ConfigError, match="label must be non-empty"):
        executor_options("toy", {"label": ""})
    with pytest.raises(ConfigError, match=r"executor 'toy' has no option 'lable'; its options are "
                       r"\['label', 'progress', 'reverse'\]"):
        executor_options("toy", {"lable": "a"})
    ex = make_executor("toy", {"reverse": True}, progress=False)
    assert (ex.reverse, ex.progress) == (True, False)
    assert ex.map(square, [Square(value=v) for v in (1, 2, 3)]) == [1, 4, 9]
    assert toy.RAN[-1] == ("toy", [2, 1, 0])
    # the CLI: --executor NAME --executor-opt KEY=VALUE (JSON values) and the backend's alias
    parser = argparse.ArgumentParser()
    add_executor_arguments(parser)
    ex = executor_from_args(parser.parse_args(["--executor", "toy", "--executor-opt", "reverse=true",
                                               "--executor-opt", "label=b"]))
    assert (ex.label, ex.reverse) == ("b", True)
    ex = executor_from_args(parser.parse_args(["--toy-label", "c"]))  # the alias implies the backend
    assert isinstance(ex, toy.ToyExecutor) and ex.label == "c"
    with pytest.raises(ConfigError, match=r"--toy-label 'c' given with --executor 'inprocess'; use "
                       r"--executor toy \(or drop --toy-label\)"):
        executor_from_args(parser.parse_args(["--executor", "inprocess", "--toy-label", "c"]))
    with pytest.raises(ConfigError, match="label must be non-empty"):
        executor_from_args(parser.parse_args(["--executor", "toy", "--executor-opt", "label="]))
    assert executor_from_args(parser.parse_args([])) is None


def test_a_backend_module_serves_suites(toy_backend, tmp_path):
    from probekit.suites import SuiteError, load_suite
    from tests.conftest import write_tiny_suite
    from tests.suites.conftest import SUITE

    (tmp_path / "suite").mkdir()
    suite_dir = write_tiny_suite(tmp_path / "suite", SUITE)
    path = suite_dir / "suite.toml"
    text = path.read_text()
    path.write_text(text + '\n[execution]\nexecutor = "toy"\n[execution.options]\nlabel = "suite"\n'
                    "reverse = true\n")
    ex = load_suite(path).execution.make_executor(progress=False)
    assert (type(ex).__name__, ex.label, ex.reverse, ex.progress) == ("ToyExecutor", "suite", True, False)
    path.write_text(text + '\n[execution]\nexecutor = "toy"\n[execution.options]\nlabel = ""\n')
    with pytest.raises(SuiteError, match=r"suite\.toml:\d+: \[execution\]: .*label must be non-empty"):
        load_suite(path)
