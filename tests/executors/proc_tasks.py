"""Module-level tasks for the process-pool executor tests (spawned workers import them by name)."""

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Job:
    x: int
    delay_s: float = 0.0


def poly(job: Job) -> int:
    """3x^2 - 7x + 1 after ``delay_s`` seconds."""
    time.sleep(job.delay_s)
    return 3 * job.x * job.x - 7 * job.x + 1


def where(job: Job) -> tuple[int, int, int, str | None]:
    """``(poly(job), pid, torch intra-op threads, OMP_NUM_THREADS)`` of the process that ran it."""
    import torch

    return poly(job), os.getpid(), torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")


def fails_on_four(job: Job) -> int:
    if job.x == 4:
        raise ValueError(f"bad x {job.x}")
    return job.x
