"""Thread counts scoped to the size of the work: inner loops on small tensors run on few threads.

An optimiser loop on small tensors (a scipy L-BFGS-B objective written in torch, a per-sample
loop, a minibatch Adam loop) starts one OpenMP parallel region per tensor op, thousands of times.
Each region ends at a barrier that waits for its slowest thread. On a quiet machine that costs
microseconds; beside another busy process a thread that lost its core waits a scheduler slice
(milliseconds) while the others spin, so every tiny op costs a slice: the centre-subspace ``K``
search of ``probes/modadd_geometry.toml`` on 2 cores with one busy took over 15 min instead of
about a minute (docs/bench/README.md). Limiting BLAS alone is not enough: torch's intra-op
OpenMP pool spins too.

:func:`small_work_threads` sets, for the duration of a ``with`` block, the BLAS and OpenMP pools
that threadpoolctl finds (numpy/scipy's OpenBLAS, torch's OpenMP runtime, which torch's intra-op
pool reads), and restores every previous value on exit, also when the block raises. Nested blocks
restore their enclosing block's values. It never calls ``torch.set_num_threads``: with torch
2.13's MKL that call breaks later batched LAPACK solves in the process.

The rule for the count (:func:`threads_for_work`): with ``w`` the flops of the largest single
tensor op of one iteration of the loop and ``T`` the threads configured outside,

    threads(w) = min(T, max(1, floor(w / WORK_PER_THREAD))),   WORK_PER_THREAD = 2^24,

i.e. one thread per ~16.8 Mflop of the largest op (a few ms on one core, about one scheduler
slice), so that a thread that loses its core for one slice costs at most about the op's own time;
below 2 x 2^24 flops the loop runs on one thread. The rule never raises the count above what the
caller configured for torch (``torch.get_num_threads()``, e.g. ``threads_per_worker`` of the
process executor); the BLAS pools inside the block get the same count.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence

import torch
from threadpoolctl import ThreadpoolController, threadpool_limits

from ..errors import ConfigError

WORK_PER_THREAD = 1 << 24
"""Flops of the largest op of one iteration per thread (see the module docstring)."""


def threads_for_work(work: int, max_threads: int | None = None) -> int:
    """Threads for a loop whose largest op costs ``work`` flops: ``min(T, max(1, work // 2^24))``.

    Args:
        work: flops of the largest single tensor op of one iteration (e.g. ``2 m n k`` for an
            ``(m, n) @ (n, k)`` matmul, summed over a batch).
        max_threads: ``T``, the cap (default: ``torch.get_num_threads()``, the count configured
            outside).

    Returns:
        The thread count, at least 1.
    """
    if work < 0:
        raise ConfigError(f"work={work}; expected the flops of one op, >= 0")
    cap = torch.get_num_threads() if max_threads is None else max_threads
    if cap < 1:
        raise ConfigError(f"max_threads={max_threads}; expected >= 1 (or None for torch's count)")
    return int(min(cap, max(1, work // WORK_PER_THREAD)))


@contextlib.contextmanager
def small_work_threads(n: int = 1, work: int | None = None) -> Iterator[int]:
    """Run the ``with`` block on ``n`` threads, or on :func:`threads_for_work` ``(work)``.

    Sets threadpoolctl's BLAS and OpenMP limits (torch's intra-op pool among them); restores the
    previous values on exit, also on an exception.

    Args:
        n: the thread count when ``work`` is not given (default 1: a loop on small tensors).
        work: flops of the largest op of one iteration; when given the count is
            ``threads_for_work(work)`` (never above the threads configured outside) and ``n`` is
            not used.

    Yields:
        The thread count in force inside the block.
    """
    if work is None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"n={n!r}; expected a thread count >= 1")
        count = n
    else:
        count = threads_for_work(work)
    # threadpoolctl sets the BLAS pools and every OpenMP runtime loaded (torch's libgomp among
    # them: torch's intra-op pool and its MKL read omp_get_max_threads, so torch.get_num_threads()
    # is `count` inside) and restores them on exit. Not torch.set_num_threads: with torch 2.13's
    # MKL, lowering it and raising it back breaks later batched LAPACK calls in the process
    # (torch.linalg.solve: "Pivots given to lu_solve must all be >= 1", MKL DLASWP errors; seen
    # as probes/scan_homomorphism.toml failing after a probe fit; tests/util/test_threads.py)
    with threadpool_limits(limits=count, user_api=None):
        yield count


class ThreadTuner:
    """The thread count of a loop of like iterations, chosen by how fast each count runs *now*.

    The flop rule of :func:`threads_for_work` protects loops of small ops. A loop of model forwards
    needs more: beside one busy process on 2 cores, SmolLM2-135M forwards (batch 32, 8-token
    prompts) took about 3x their quiet time on torch's 2 threads (2.9-3.5x), and 1.0x on one
    thread, which is 1.4-1.6x slower than 2 threads on a quiet box (``python
    scripts/bench_load.py OUT --tuner``).
    No fixed count is right for both, and the load can change during a run, so the tuner measures.

    Each iteration runs under one candidate count (``1`` and the threads configured outside, by
    default) and its seconds per unit of ``work`` (e.g. tokens of the batch) are kept as an
    exponential moving average (weight ``1/2`` on the newest). Every candidate is tried once
    first (after one warm-up iteration that is not scored); then the fastest runs, and every
    ``reprobe``-th iteration re-times the candidate measured longest ago, so a count that became
    faster (the busy process ended, or started) takes over within a few probes. Outside a
    :meth:`run` block the counts are those configured outside.

    Thread counts change only the order of float reductions inside a kernel, if at all: results
    are equal to rounding (an argmax decision can differ only at an exact tie).

    Args:
        candidates: thread counts to choose from (default ``{1, torch.get_num_threads()}``).
        reprobe: re-time a non-best count every ``reprobe`` iterations (>= 2).
        clock: seconds as a float (default :func:`time.perf_counter`; tests inject one).
    """

    def __init__(
        self, candidates: Sequence[int] | None = None, *, reprobe: int = 16,
        clock: Callable[[], float] | None = None,
    ) -> None:
        cap = torch.get_num_threads()
        counts = sorted({1, cap}) if candidates is None else sorted(set(candidates))
        if not counts or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in counts):
            raise ConfigError(f"candidates={candidates!r}; expected thread counts >= 1")
        if isinstance(reprobe, bool) or not isinstance(reprobe, int) or reprobe < 2:
            raise ConfigError(f"reprobe={reprobe!r}; expected an iteration count >= 2")
        self.candidates: tuple[int, ...] = tuple(counts)
        self.reprobe = reprobe
        self.rate: dict[int, float] = {}  # count -> seconds per unit of work (EMA)
        self.last: dict[int, int] = {}  # count -> iteration it was last timed at
        self.iteration = 0
        self._clock = clock or time.perf_counter
        self._controller: ThreadpoolController | None = None

    def choose(self) -> int:
        """The count of the next iteration (warm-up, untried, re-probe, else the fastest)."""
        if self.iteration == 0 or len(self.candidates) == 1:
            return self.candidates[-1]
        untried = [c for c in reversed(self.candidates) if c not in self.rate]
        if untried:
            return untried[0]
        best = min(self.candidates, key=lambda c: self.rate[c])
        if self.iteration % self.reprobe == 0:
            others = [c for c in self.candidates if c != best]
            return min(others, key=lambda c: self.last[c])
        return best

    def record(self, count: int, seconds: float, work: float | int = 1.0) -> None:
        """Score one iteration: ``seconds`` for ``work`` units under ``count`` threads."""
        if self.iteration > 0:  # the first iteration warms up (allocations, caches): not scored
            per = seconds / max(float(work), 1e-12)
            old = self.rate.get(count)
            self.rate[count] = per if old is None else (old + per) / 2
            self.last[count] = self.iteration
        self.iteration += 1

    @contextlib.contextmanager
    def run(self, work: float | int = 1.0) -> Iterator[int]:
        """One iteration of ``work`` units under the chosen count (the count is yielded)."""
        if work < 0:
            raise ConfigError(f"work={work}; expected the iteration's size, >= 0")
        count = self.choose()
        start = self._clock()
        with self._limited(count):
            yield count
        self.record(count, self._clock() - start, work)

    def _limited(self, count: int) -> contextlib.AbstractContextManager:
        """``count`` threads for the block: nothing to do at torch's count, else the pools set.

        One threadpoolctl controller per tuner (its library scan costs milliseconds; its
        ``limit`` microseconds), made at the first iteration that needs it.
        """
        if count == torch.get_num_threads():
            return contextlib.nullcontext()
        if self._controller is None:
            self._controller = ThreadpoolController()
        return self._controller.limit(limits=count, user_api=None)
