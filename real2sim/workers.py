"""The processes that fit a frame's objects side by side (:func:`real2sim.perception.perceive`).

Each object's fit reads only the frame, the table and its own segment, and runs in Python, NumPy and
single-threaded Open3D, so two processes fit two objects in the time of one, bit for bit as one process
would. The calling process fits objects too, beside :func:`worker_count` - 1 helper processes: on two CPUs
one helper, which imports what fitting needs on the second CPU while this process finds the table and
the regions (:func:`~real2sim.perception.perceive` asks for it first thing). The helpers are loky's
reusable executor (joblib's): made on first use, kept for the life of the process (a bench fits every
frame with them), replaced when one dies, and safe in a script without an ``if __name__ == "__main__"``
guard (they do not run the caller's script again).

``SIMPACT_REAL2SIM_WORKERS`` sets the number of processes (default: the CPUs this process may use, at most
:data:`MAX_WORKERS`); 1 fits every object in the calling process alone.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

from real2sim.types import Real2SimError

__all__ = ["IDLE_S", "MAX_WORKERS", "WORKERS_ENV", "Helpers", "process_pool", "run_all", "worker_count"]

WORKERS_ENV = "SIMPACT_REAL2SIM_WORKERS"
MAX_WORKERS = 8
"""More processes than this gain little: few frames hold more objects of similar cost."""
IDLE_S = 600
"""Helpers left idle this long (s) exit; the next frame starts new ones."""


def worker_count() -> int:
    """The number of processes that fit a frame's objects, the calling one included:
    ``SIMPACT_REAL2SIM_WORKERS``, else the usable CPUs (at most :data:`MAX_WORKERS`). Raises
    :class:`Real2SimError` naming the setting when it is not a whole number of at least 1."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    if not text:
        return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))
    if not text.isdigit() or int(text) < 1:
        raise Real2SimError(f"{WORKERS_ENV}={text!r}: set it to a whole number of processes, 1 or more")
    return int(text)


@dataclasses.dataclass(frozen=True)
class Helpers:
    """The processes that work beside the calling one: loky's executor and how many it runs."""

    executor: Executor
    processes: int


def process_pool(warm_up: Callable[[], None] | None = None) -> Helpers | None:
    """The process-wide pool of :func:`worker_count` - 1 helper processes, each given ``warm_up`` to run
    (to import what the work will need) as soon as it starts; None when this process works alone."""
    processes = worker_count() - 1
    if processes < 1:
        return None
    try:
        from loky import get_reusable_executor
    except ModuleNotFoundError:
        raise Real2SimError(
            f"fitting objects side by side needs loky: pip install 'simpact[perception]' "
            f"or set {WORKERS_ENV}=1"
        ) from None
    executor = get_reusable_executor(max_workers=processes, timeout=IDLE_S)
    for _ in range(processes if warm_up is not None else 0):
        executor.submit(warm_up)
    return Helpers(executor, processes)


Result = TypeVar("Result")


def run_all(
    fn: Callable[..., Result],
    jobs: Sequence[tuple[Any, ...]],
    helpers: Helpers | None,
    costs: Sequence[float] | None = None,
) -> list[Result]:
    """``[fn(*job) for job in jobs]``, shared between this process and the ``helpers``: each takes the
    costliest job left (``costs``, one per job; by default in order) whenever it is free, so that none is
    left with a long one at the end. The first exception in a job is raised here, once the others stop."""
    if helpers is None or len(jobs) < 2:
        return [fn(*job) for job in jobs]
    left = deque(sorted(range(len(jobs)), key=lambda i: -costs[i]) if costs is not None else range(len(jobs)))
    results: dict[int, Result] = {}
    errors: list[BaseException] = []

    def next_job() -> int | None:
        try:
            return left.popleft()  # atomic: the threads below take jobs from it too
        except IndexError:
            return None

    def hand_over() -> None:  # a thread per helper process: gives it the next job when it is done
        try:
            while (i := next_job()) is not None:
                results[i] = helpers.executor.submit(fn, *jobs[i]).result()
        except BaseException as err:  # noqa: BLE001 - raised in the calling thread below
            left.clear()
            errors.append(err)

    threads = [
        threading.Thread(target=hand_over, daemon=True) for _ in range(min(helpers.processes, len(jobs) - 1))
    ]
    for thread in threads:
        thread.start()
    try:
        while (i := next_job()) is not None:
            results[i] = fn(*jobs[i])
    finally:
        left.clear()  # on an error here (or Ctrl-C) the helpers take no more
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return [results[i] for i in range(len(jobs))]
