"""``simpact bench perf``: simulation throughput, measured side by side in one run.

- ``rollout_vs_bare_ratio``: steps/s of the project's rollout path (waypoint expansion, IK, stepping, state
  extraction) over steps/s of a bare ``mj_step`` loop replaying the very same controls on the same model.
  Target >= 0.8.
- ``parallel_speedup``: wall time of K rollouts one after another over K rollouts on all cores.
  Target >= 1.7 on 2 cores.
- ``audit_overhead_ratio``: SimuGuard's monitor cost per physics step over the bare step, as the planner
  monitors every rollout: the controls stepped by ``mujoco.rollout`` and screened from the returned states
  (:mod:`simpact.guard.screen`; recorded in full as well when the screen cannot clear the rollout:
  ``audit_screen_suspicious``), over the same ``mujoco.rollout`` call alone, minus one. Target <= 0.25.
- ``audit_record_overhead_ratio``: the full recorder's cost (what a rollout the screen cannot clear pays): a
  recorded run of the same controls, chunks compressed and written to a temporary folder, over a bare
  ``mj_step`` loop, minus one; ``audit_record_in_memory_ratio`` the same with the recording kept in memory;
  ``audit_bytes_per_step``: compressed bytes recorded per physics step.
Each ratio is taken ``repeats`` times from back-to-back pairs of timings (A then B, alternating), and the
median is reported with its range: a shared, noisy machine shifts both halves of a pair alike.

This bench measures the MuJoCo World (:class:`~solvers.mujoco.world.MujocoWorld`): it builds one directly
and reaches MuJoCo's own objects only through the world's accessor, ``mujoco()``.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from simpact.core.actions import Plan
from simpact.guard.recorder import Recorder, model_hash
from simpact.guard.screen import screen
from simpact.tasks import load_task
from solvers.mujoco.world import MujocoAccess, MujocoWorld

__all__ = ["run_perf"]


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _paired(slow: Callable[[], object], fast: Callable[[], object], repeats: int) -> dict[str, Any]:
    """Median and range of slow/fast wall-time ratios over back-to-back pairs, with the median timings."""
    pairs = []
    for i in range(repeats):
        if i % 2:
            b, a = _timed(fast), _timed(slow)
        else:
            a, b = _timed(slow), _timed(fast)
        pairs.append((a, b))
    ratios = [a / b for a, b in pairs]
    return {
        "ratio": round(float(np.median(ratios)), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "slow_s": float(np.median([a for a, _ in pairs])),
        "fast_s": float(np.median([b for _, b in pairs])),
    }


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


def _physics_parallel_speedup(
    mj: MujocoAccess, plans: list[Plan], threads: int, repeats: int
) -> dict[str, Any]:
    """The machine's ceiling: the same batch's precomputed controls stepped by ``mujoco.rollout`` alone,
    serially vs one thread per core, with no Python work in between."""
    controls = [mj.controls(p, mj.initial_snapshot)[1] for p in plans]
    datas = [mj.new_data() for _ in range(threads)]
    mj.restore(mj.initial_snapshot, datas[0])
    state = np.empty(mujoco.mj_stateSize(mj.model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(mj.model, datas[0], state, mujoco.mjtState.mjSTATE_FULLPHYSICS)

    def step(data: mujoco.MjData, batch: list[np.ndarray]) -> None:
        for ctrl in batch:
            mj_rollout.rollout(mj.model, data, state[None], ctrl[None])

    def parallel() -> None:
        workers = [
            threading.Thread(target=step, args=(datas[i], controls[i::threads])) for i in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    return _paired(lambda: step(datas[0], controls), parallel, repeats)


def _audit_overhead(world: MujocoWorld, ctrl: np.ndarray, repeats: int) -> dict[str, Any]:
    """The screened C rollout vs the C rollout, and the full recorder vs the bare ``mj_step`` loop, each in
    alternating pairs, from the same state with the same controls."""
    mj = world.mujoco()
    model, data = mj.model, mj.new_data()
    digest = model_hash(model)  # computed once per model, as a World does
    mj.restore(mj.initial_snapshot, data)
    state = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    warmstart = data.qacc_warmstart.copy()
    first = (data.qpos.copy(), data.qvel.copy())
    nq, nv = model.nq, model.nv

    def c_rollout() -> np.ndarray:
        states, _ = mj_rollout.rollout(
            model, data, state[None], ctrl[None], initial_warmstart=warmstart[None]
        )
        return states[0]

    def screened() -> bool:
        states = c_rollout()
        qpos, qvel = states[:-1, 1 : 1 + nq], states[:-1, 1 + nq : 1 + nq + nv]
        result = screen(model, qpos, qvel, first=first, robot_bodies=mj.robot_bodies)
        if result.suspicious:
            monitored(write=False)
        return result.suspicious

    def bare() -> None:
        mj.restore(mj.initial_snapshot, data)
        for u in ctrl:
            data.ctrl[:] = u
            mujoco.mj_step(model, data)

    def monitored(write: bool = True) -> Recorder:
        mj.restore(mj.initial_snapshot, data)
        with tempfile.TemporaryDirectory(prefix="simuguard-perf-") as tmp:
            recorder = Recorder.for_world(world, data=data, out=tmp if write else None, model_hash=digest)
            recorder.run(ctrl)
            recorder.close()
        return recorder

    suspicious = screened()
    screen_pair = _paired(screened, c_rollout, repeats)
    warm = monitored()
    paired = _paired(monitored, bare, repeats)
    memory = _paired(lambda: monitored(write=False), bare, repeats)
    return {
        "overhead": round(screen_pair["ratio"] - 1.0, 3),
        "range": [round(r - 1.0, 3) for r in screen_pair["ratio_range"]],
        "suspicious": suspicious,
        "record": round(paired["ratio"] - 1.0, 3),
        "record_range": [round(r - 1.0, 3) for r in paired["ratio_range"]],
        "in_memory": round(memory["ratio"] - 1.0, 3),
        "bytes_per_step": round(warm.bytes_written / max(1, warm.nsteps), 1),
        "errors": warm.errors,
    }


def run_perf(task_name: str = "non_toppling_push", k: int = 10, repeats: int = 5) -> dict[str, Any]:
    task = load_task(task_name)
    scene = task.scene(0)
    world = MujocoWorld(scene)
    mj = world.mujoco()
    plan = task.reference_plan(scene, world.start_pose())
    _, ctrl, _, _ = mj.controls(plan, mj.initial_snapshot)
    nsteps = len(ctrl)
    model, data = mj.model, mj.new_data()

    def bare() -> None:
        mj.restore(mj.initial_snapshot, data)
        for u in ctrl:
            data.ctrl[:] = u
            mujoco.mj_step(model, data)

    # ratio of rollout time over bare time, inverted below: the project's path relative to bare stepping
    single = _paired(lambda: world.rollout(plan), bare, repeats)
    bare_s, rollout_s = single["fast_s"], single["slow_s"]

    plans = _variants(plan, k)
    threads = os.cpu_count() or 1
    serial = [world.rollout(p) for p in plans]
    parallel = world.rollouts(plans, nthread=threads)  # also warms every thread's scratch
    batch = _paired(
        lambda: [world.rollout(p) for p in plans], lambda: world.rollouts(plans, nthread=threads), repeats
    )
    serial_s, parallel_s = batch["slow_s"], batch["fast_s"]
    ceiling = _physics_parallel_speedup(mj, plans, threads, repeats)
    identical = all(
        a.trace is not None
        and b.trace is not None
        and np.array_equal(a.trace.qpos, b.trace.qpos)
        and np.array_equal(a.trace.qvel, b.trace.qvel)
        for a, b in zip(serial, parallel)
    )
    batch_steps = sum(r.nsteps for r in serial)
    audit = _audit_overhead(world, ctrl, repeats)
    return {
        "task": task.name,
        "timestep_s": mj.timestep,
        "steps_per_rollout": nsteps,
        "bare_steps_per_s": round(nsteps / bare_s, 1),
        "rollout_steps_per_s": round(nsteps / rollout_s, 1),
        "rollout_vs_bare_ratio": round(1.0 / single["ratio"], 3),
        "rollout_vs_bare_range": [round(1.0 / r, 3) for r in reversed(single["ratio_range"])],
        "k": k,
        "threads": threads,
        "serial_s": round(serial_s, 4),
        "parallel_s": round(parallel_s, 4),
        "serial_steps_per_s": round(batch_steps / serial_s, 1),
        "parallel_steps_per_s": round(batch_steps / parallel_s, 1),
        "parallel_speedup": batch["ratio"],
        "parallel_speedup_range": batch["ratio_range"],
        "parallel_equals_serial": identical,
        "physics_only_parallel_speedup": ceiling["ratio"],
        "physics_only_parallel_speedup_range": ceiling["ratio_range"],
        "audit_overhead_ratio": audit["overhead"],
        "audit_overhead_range": audit["range"],
        "audit_screen_suspicious": audit["suspicious"],
        "audit_record_overhead_ratio": audit["record"],
        "audit_record_overhead_range": audit["record_range"],
        "audit_record_in_memory_ratio": audit["in_memory"],
        "audit_bytes_per_step": audit["bytes_per_step"],
        "audit_monitor_errors": audit["errors"],
        "targets": {"rollout_vs_bare_ratio": 0.8, "parallel_speedup": 1.7, "audit_overhead_ratio": 0.25},
        "repeats": repeats,
        "mujoco": mujoco.__version__,
    }
