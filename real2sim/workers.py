"""The processes that fit a frame's objects side by side (:func:`real2sim.perception.perceive`).

Each object's fit reads only the frame, the table and its own segment, and runs in Python, NumPy and
single-threaded Open3D, so two processes fit two objects in the time of one, bit for bit as one process
would. The pool is loky's reusable executor (joblib's): made on first use, kept for the life of the
process (a bench fits every frame with it), replaced when a worker dies, and safe in a script without an
``if __name__ == "__main__"`` guard (its workers do not run the caller's script again).
:func:`~real2sim.perception.perceive` asks for it first thing, and the workers import what fitting needs
while the table and the regions are found.

``SIMPACT_REAL2SIM_WORKERS`` sets the number of processes (default: the CPUs this process may use, at most
:data:`MAX_WORKERS`); 1 fits every object in the calling process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

from real2sim.types import Real2SimError

__all__ = ["IDLE_S", "MAX_WORKERS", "WORKERS_ENV", "process_pool", "run_all", "worker_count"]

WORKERS_ENV = "SIMPACT_REAL2SIM_WORKERS"
MAX_WORKERS = 8
"""More processes than this gain little: few frames hold more objects of similar cost."""
IDLE_S = 600
"""Workers left idle this long (s) exit; the next frame starts new ones."""


def worker_count() -> int:
    """The number of fitting processes: ``SIMPACT_REAL2SIM_WORKERS``, else the usable CPUs (at most
    :data:`MAX_WORKERS`). Raises :class:`Real2SimError` naming the setting when it is not a whole number
    of at least 1."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    if not text:
        return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))
    if not text.isdigit() or int(text) < 1:
        raise Real2SimError(f"{WORKERS_ENV}={text!r}: set it to a whole number of processes, 1 or more")
    return int(text)


def process_pool(warm_up: Callable[[], None] | None = None) -> Executor | None:
    """The process-wide pool of :func:`worker_count` processes, each given ``warm_up`` to run (to import
    what the work will need) as soon as it starts; None for one worker."""
    workers = worker_count()
    if workers <= 1:
        return None
    try:
        from loky import get_reusable_executor
    except ModuleNotFoundError:
        raise Real2SimError(
            f"fitting objects side by side needs loky: pip install 'simpact[perception]' "
            f"or set {WORKERS_ENV}=1"
        ) from None
    pool = get_reusable_executor(max_workers=workers, timeout=IDLE_S)
    for _ in range(workers if warm_up is not None else 0):
        pool.submit(warm_up)
    return pool


Result = TypeVar("Result")


def run_all(
    fn: Callable[..., Result],
    jobs: Sequence[tuple[Any, ...]],
    pool: Executor | None,
    costs: Sequence[float] | None = None,
) -> list[Result]:
    """``[fn(*job) for job in jobs]``, in ``pool``'s processes when there is one and more than one job:
    submitted costliest first (``costs``, one per job; by default in order), so that no worker is left with
    a long one at the end. An exception in a job is raised here."""
    if pool is None or len(jobs) < 2:
        return [fn(*job) for job in jobs]
    order = sorted(range(len(jobs)), key=lambda i: -costs[i]) if costs is not None else range(len(jobs))
    futures = {i: pool.submit(fn, *jobs[i]) for i in order}
    return [futures[i].result() for i in range(len(jobs))]
