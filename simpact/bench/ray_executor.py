"""Ray as a benchmark executor (``--executor ray`` of ``bench tasks`` and ``bench calvin``).

:func:`ray_map` connects to a running Ray cluster (``RAY_ADDRESS``, or a local ``ray start --head``) or, when
none runs, starts a local one with ``workers`` CPUs; it then submits one Ray task per job and yields the
results in the order they finish, so that the caller appends each to its episode log as it arrives. Every
Ray worker imports the installed project (nothing is uploaded: each machine of a cluster needs it installed,
and the data at the same paths), builds its own world or environment and returns a JSON-able record. A Ray
instance this module started stays up for the rest of the process (Ray shuts it down at exit).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from simpact.bench.episodes import BenchError

__all__ = ["FORWARDED_ENV", "ray_map"]

J = TypeVar("J")
R = TypeVar("R")

FORWARDED_ENV = ("SIMPACT_CALVIN_DATA", "SIMPACT_SHARED_DATA")
"""Settings of the driver's environment that go with each task when set (the data folders)."""


def _connect(workers: int) -> Any:
    try:
        import ray
    except ImportError:
        raise BenchError("--executor ray needs Ray, which is not installed: pip install ray") from None
    if not ray.is_initialized():
        try:
            ray.init(address="auto")  # an existing cluster (RAY_ADDRESS or a local `ray start`)
        except ConnectionError:
            ray.init(num_cpus=workers)  # none running: start a local one
    return ray


def _runtime_env() -> dict[str, Any]:
    """Environment variables for each task: mujoco picks its GL back-end at import, before the task runs, so
    a cluster's worker gets ``MUJOCO_GL`` here; the data folders follow the driver's settings."""
    env_vars = {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env_vars.update({name: os.environ[name] for name in FORWARDED_ENV if os.environ.get(name)})
    return {"env_vars": env_vars}


def ray_map(func: Callable[[J], R], jobs: Iterable[J], workers: int) -> Iterator[R]:
    """``func(job)`` for each job as a Ray task (``func`` a module-level function, so that workers import
    it), yielded as each finishes. Closing the iterator early (a kill, an error) cancels the tasks left. No
    jobs: no Ray (a fully resumed run does not start one)."""
    jobs = list(jobs)
    if not jobs:
        return
    ray = _connect(workers)
    remote = ray.remote(runtime_env=_runtime_env())(func)
    pending = [remote.remote(job) for job in jobs]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
