"""small_work_threads: torch, BLAS and OpenMP counts set inside, restored after (exception, nesting).

ThreadTuner: the fastest count wins, a changed load is followed, counts in force inside only.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (loads scipy's BLAS too, so threadpoolctl sees it)
import torch
from threadpoolctl import threadpool_info

# Imported here, not in the test: with them comes scikit-learn's own libgomp, and a pool loaded
# after the `outside` fixture keeps the environment's count (OMP_NUM_THREADS=1 under -n 2),
# which read as a scope that failed to restore.
from probekit.errors import ConfigError
from probekit.geometry import centers
from probekit.homomorphism import operators
from probekit.probes import scipy_logistic
from probekit.util.threads import (
    WORK_PER_THREAD,
    ThreadTuner,
    small_work_threads,
    threads_for_work,
)


def _counts() -> tuple[int, dict[str, set[int]]]:
    """torch's intra-op count and, per threadpoolctl API (blas, openmp), the counts it reports."""
    pools: dict[str, set[int]] = {}
    for lib in threadpool_info():
        pools.setdefault(lib["user_api"], set()).add(int(lib["num_threads"]))
    return torch.get_num_threads(), pools


@pytest.fixture
def outside():
    """Every pool at 2 threads outside the block (restored after the test)."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    with threadpool_limits(limits=2):
        torch.set_num_threads(2)
        try:
            yield _counts()
        finally:
            torch.set_num_threads(before)


def test_blas_is_visible():
    np.ones((4, 4)) @ np.ones((4, 4))
    assert "blas" in _counts()[1]  # else the BLAS assertions below would be vacuous


def test_counts_inside_and_after(outside):
    assert outside[0] == 2 and all(v == {2} for v in outside[1].values())
    with small_work_threads(3) as n:
        torch_n, pools = _counts()
        assert (n, torch_n) == (3, 3)
        assert pools and all(v == {3} for v in pools.values())
    assert _counts() == outside
    with small_work_threads() as n:
        assert n == 1 and _counts()[0] == 1 and all(v == {1} for v in _counts()[1].values())
    assert _counts() == outside


def test_restored_after_exception(outside):
    with pytest.raises(RuntimeError, match="boom"), small_work_threads(1):
        assert _counts()[0] == 1
        raise RuntimeError("boom")
    assert _counts() == outside


def test_nesting_restores_the_enclosing_block(outside):
    with small_work_threads(3):
        with small_work_threads(1):
            assert _counts()[0] == 1 and all(v == {1} for v in _counts()[1].values())
        assert _counts()[0] == 3 and all(v == {3} for v in _counts()[1].values())
        with pytest.raises(ValueError), small_work_threads(1):
            raise ValueError
        assert _counts()[0] == 3 and all(v == {3} for v in _counts()[1].values())
    assert _counts() == outside


def test_work_rule(outside):
    assert threads_for_work(0) == 1
    assert threads_for_work(2 * WORK_PER_THREAD - 1) == 1
    assert threads_for_work(2 * WORK_PER_THREAD) == 2
    assert threads_for_work(10**12) == 2  # capped at the 2 configured outside
    assert threads_for_work(10**12, max_threads=5) == 5
    assert threads_for_work(3 * WORK_PER_THREAD, max_threads=8) == 3
    with small_work_threads(work=1000) as n:
        assert n == 1 and _counts()[0] == 1
    with small_work_threads(n=1, work=10**12) as n:  # work decides; n is not used
        assert n == 2 and _counts()[0] == 2
    assert _counts() == outside


@pytest.mark.parametrize("bad", [0, -1, True])
def test_bad_count_names_the_value(bad):
    with pytest.raises(ConfigError, match=f"n={bad!r}"), small_work_threads(bad):
        pass


def test_bad_work_names_the_value():
    with pytest.raises(ConfigError, match="work=-5"):
        threads_for_work(-5)


def _recording(monkeypatch, module, name, seen):
    """Wrap ``module.name``: each call records torch's count, the first 3 every pool's too."""
    inner = getattr(module, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] <= 3:  # threadpool_info walks the loaded libraries: ~1 ms
            torch_n, pools = _counts()
            seen.add((name, torch_n, frozenset(n for v in pools.values() for n in v)))
        else:
            seen.add((name, torch.get_num_threads(), frozenset({1})))
        return inner(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def test_inner_loops_run_on_one_thread_and_restore(outside, monkeypatch):
    """The K search objective, the scipy logistic loss and the HE Adam forward see 1 thread."""
    seen: set = set()
    _recording(monkeypatch, centers, "_residual_cost", seen)
    _recording(monkeypatch, scipy_logistic, "_loss_grad", seen)
    _recording(monkeypatch, operators, "mlp_forward", seen)
    gen = torch.Generator().manual_seed(0)
    centers.common_center_subspace(torch.randn(20, 8, generator=gen, dtype=torch.float64), max_k=2,
                                   n_reps=2, max_iter=30)
    X = torch.randn(60, 5, generator=gen, dtype=torch.float64).numpy()
    scipy_logistic.fit_logistic_scipy(X, (X[:, 0] > 0).astype(np.int64), 2, C=1.0, whiten=False)
    operators.adam_fit(torch.randn(1, 16, 4, generator=gen), torch.randn(1, 16, 3, generator=gen),
                       hidden=None, epochs=2, batch_size=8, lr=1e-2, weight_decay=0.0, seed=0)
    one = frozenset({1})
    assert seen == {("_residual_cost", 1, one), ("_loss_grad", 1, one), ("mlp_forward", 1, one)}
    assert _counts() == outside


_SOLVE_AFTER_SCOPE = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from probekit.util.threads import small_work_threads
g = torch.Generator().manual_seed(0)
A = torch.randn(4, 223, 223, dtype=torch.float64, generator=g)
B = torch.randn(4, 223, 3, dtype=torch.float64, generator=g)
with small_work_threads(1):
    inside = torch.get_num_threads()
    (torch.randn(50, 50) @ torch.randn(50, 50)).sum()
x = torch.linalg.solve(A, B)
print(inside, torch.get_num_threads(), float((A @ x - B).abs().max()))
"""


def test_a_batched_solve_after_the_scope_still_works():
    """Regression: scoping through torch.set_num_threads (1, then back to 2) broke torch 2.13's MKL
    LAPACK for the rest of the process ("Pivots given to lu_solve must all be >= 1"; the HE ridge
    of probes/scan_homomorphism.toml after a probe fit). Fresh process: MKL's state is global."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    # two threads, as a default 2-core process has (under `make test` the workers pin 1 thread,
    # and the bug needs MKL's parallel path)
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    env.update(OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    res = subprocess.run([sys.executable, "-c", _SOLVE_AFTER_SCOPE, str(root)], capture_output=True,
                         text=True, timeout=120, env=env, check=False)
    assert res.returncode == 0, res.stderr[-800:]
    _inside, after, residual = res.stdout.split()
    assert int(after) == 2 and float(residual) < 1e-8  # restored, and the solve is right

class FakeClock:
    """A clock the simulated iterations advance by ``seconds_per_unit[count] * work``."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(tuner: ThreadTuner, clock: FakeClock, rates: dict[int, float], n: int,
             work: float = 10.0) -> list[int]:
    """Run ``n`` iterations whose cost under ``c`` threads is ``rates[c] * work`` seconds."""
    used = []
    for _ in range(n):
        with tuner.run(work=work) as count:
            clock.now += rates[count] * work
        used.append(count)
    return used


def test_picks_the_faster_count_and_reprobes(outside):
    clock = FakeClock()
    tuner = ThreadTuner(reprobe=8, clock=clock)
    assert tuner.candidates == (1, 2)
    used = simulate(tuner, clock, {1: 3.0, 2: 2.0}, 64)  # quiet: 2 threads faster
    # warm-up at 2 (not scored), each count timed once, then 2 but every 8th iteration
    assert used[:3] == [2, 2, 1]
    assert tuner.rate == {1: 3.0, 2: 2.0}
    probes = [i for i, c in enumerate(used) if c == 1]
    assert probes == [2, 8, 16, 24, 32, 40, 48, 56]


def test_follows_a_change_of_load(outside):
    clock = FakeClock()
    tuner = ThreadTuner(reprobe=4, clock=clock)
    simulate(tuner, clock, {1: 3.0, 2: 2.0}, 20)
    assert tuner.choose() in (1, 2) and min(tuner.rate, key=tuner.rate.get) == 2
    # a busy core appears: 2 threads now 3.5x slower, 1 thread unchanged
    used = simulate(tuner, clock, {1: 3.0, 2: 7.0}, 40)
    assert min(tuner.rate, key=tuner.rate.get) == 1
    assert used[-8:].count(1) >= 6  # the one-thread count runs all but the re-probes
    # the busy core goes away again
    used = simulate(tuner, clock, {1: 3.0, 2: 2.0}, 40)
    assert min(tuner.rate, key=tuner.rate.get) == 2 and used[-8:].count(2) >= 6


def test_rates_are_per_unit_of_work(outside):
    clock = FakeClock()
    tuner = ThreadTuner(reprobe=4, clock=clock)
    # 2 threads faster per unit although its batches are 10x larger (so slower in seconds)
    for _ in range(30):
        count = tuner.choose()
        work = 100.0 if count == 2 else 10.0
        with tuner.run(work=work) as c:
            assert c == count
            clock.now += {1: 3.0, 2: 2.0}[c] * work
    assert tuner.rate == {1: pytest.approx(3.0), 2: pytest.approx(2.0)}


def test_count_in_force_inside_and_restored(outside):
    tuner = ThreadTuner(candidates=[1, 2])
    seen = []
    for _ in range(4):
        with tuner.run() as count:
            seen.append((count, torch.get_num_threads()))
        assert torch.get_num_threads() == 2
    assert all(c == inside for c, inside in seen)
    assert {c for c, _ in seen} == {1, 2}


def test_one_candidate_is_never_probed(outside):
    clock = FakeClock()
    tuner = ThreadTuner(candidates=[2], clock=clock)
    assert set(simulate(tuner, clock, {2: 1.0}, 10)) == {2}


@pytest.mark.parametrize("kwargs", [{"candidates": []}, {"candidates": [0, 2]},
                                    {"reprobe": 1}, {"reprobe": True}])
def test_bad_arguments_name_the_value(kwargs):
    key = next(iter(kwargs))
    with pytest.raises(ConfigError, match=key):
        ThreadTuner(**kwargs)


def test_negative_work_is_refused():
    with pytest.raises(ConfigError, match="work=-1"), ThreadTuner().run(work=-1):
        pass
