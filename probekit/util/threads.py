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
from collections.abc import Iterator

import torch
from threadpoolctl import threadpool_limits

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
