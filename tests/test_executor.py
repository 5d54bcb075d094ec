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
    with pytest.raises(ConfigError, match=r"unknown executor 'rya'.*\['inprocess', 'ray'\]"):
        get_executor("rya")
    with pytest.raises((ConfigError, TypeError)):  # TypeError: beartype's check, when on
        get_executor(42)

    @dataclass(frozen=True)
    class Reversed:
        def map(self, fn, items, *, desc=None):
            return [fn(x) for x in reversed(list(items))]

    register_executor("reversed_test", Reversed)
    try:
        assert "reversed_test" in available_executors()
        assert get_executor("reversed_test").map(square, [Square(value=1), Square(value=2)]) == [4, 1]
    finally:
        from probekit import executor as mod

        mod._FACTORIES.pop("reversed_test")


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
