"""``simpact bench perf``: simulation throughput, measured side by side in one run.

- ``rollout_vs_bare_ratio``: steps/s of the project's rollout path (waypoint expansion, IK, stepping, state
  extraction) over steps/s of a bare ``mj_step`` loop replaying the very same controls on the same model.
  Target >= 0.8.
- ``parallel_speedup``: wall time of K rollouts one after another over K rollouts on all cores.
  Target >= 1.7 on 2 cores.
Timings are the best of ``repeats`` to damp a noisy machine.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np

from simpact.actions import Plan
from simpact.tasks import load_task
from solvers.mujoco.world import MujocoWorld

__all__ = ["run_perf"]


def _best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _variants(plan: Plan, k: int) -> list[Plan]:
    """K distinct plans: the reference with its displacements scaled by 0.9 ... 1.1."""
    plans = []
    for scale in np.linspace(0.9, 1.1, k):
        actions = [
            {**a.to_dict(), **{f: v * scale for f, v in a.params.items() if f in ("dx", "dy", "dz")}}
            for a in plan.actions
        ]
        plans.append(Plan.from_actions(actions))
    return plans


def run_perf(task_name: str = "non_toppling_push", k: int = 10, repeats: int = 3) -> dict[str, Any]:
    task = load_task(task_name)
    scene = task.scene(0)
    world = MujocoWorld(scene)
    plan = task.reference_plan(scene, world.start_pose())
    _, ctrl, _, _ = world.controls(plan, world.initial_snapshot)
    nsteps = len(ctrl)
    model, data = world.model, mujoco.MjData(world.model)

    def bare() -> None:
        world.restore(world.initial_snapshot, data)
        for u in ctrl:
            data.ctrl[:] = u
            mujoco.mj_step(model, data)

    bare_s = _best(bare, repeats)
    rollout_s = _best(lambda: world.rollout(plan), repeats)

    plans = _variants(plan, k)
    threads = os.cpu_count() or 1
    serial = [world.rollout(p) for p in plans]  # also warms every thread's scratch
    world.rollouts(plans, nthread=threads)
    serial_s = _best(lambda: [world.rollout(p) for p in plans], repeats)
    parallel_s = _best(lambda: world.rollouts(plans, nthread=threads), repeats)
    parallel = world.rollouts(plans, nthread=threads)
    identical = all(
        a.trace is not None
        and b.trace is not None
        and np.array_equal(a.trace.qpos, b.trace.qpos)
        and np.array_equal(a.trace.qvel, b.trace.qvel)
        for a, b in zip(serial, parallel)
    )
    batch_steps = sum(r.nsteps for r in serial)
    return {
        "task": task.name,
        "timestep_s": world.options.timestep,
        "steps_per_rollout": nsteps,
        "bare_steps_per_s": round(nsteps / bare_s, 1),
        "rollout_steps_per_s": round(nsteps / rollout_s, 1),
        "rollout_vs_bare_ratio": round(bare_s / rollout_s, 3),
        "k": k,
        "threads": threads,
        "serial_s": round(serial_s, 4),
        "parallel_s": round(parallel_s, 4),
        "serial_steps_per_s": round(batch_steps / serial_s, 1),
        "parallel_steps_per_s": round(batch_steps / parallel_s, 1),
        "parallel_speedup": round(serial_s / parallel_s, 3),
        "parallel_equals_serial": identical,
        "targets": {"rollout_vs_bare_ratio": 0.8, "parallel_speedup": 1.7},
        "repeats": repeats,
        "mujoco": mujoco.__version__,
        "machine": {"cpus": threads, "processor": platform.processor() or platform.machine()},
    }
