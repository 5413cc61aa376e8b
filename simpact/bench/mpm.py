"""MPM benchmarks (``simpact bench mpm --out DIR``), each measured side by side in one run:

- ``mpm_vs_taichi``: the same plasticine squeeze (a 25^3-particle cube, 2 particles per cell per axis, a
  plate pressing down at 5 cm/s) simulated by the project's Warp MLS-MPM (two rollouts in two processes:
  Warp's CPU back-end runs one thread) and by a plain MLS-MPM written in Taichi's CPU back-end (two
  threads), as simulated seconds per wall second of the whole machine; ``repeats`` alternating pairs, the
  median ratio with its range. Taichi is installed for this benchmark only (``pip install taichi``);
  without it the row says so.
- ``task_convergence``: the converged cell by the task's own metric, as issue 11 defines it: the
  ``shape_dough`` reference rollout (seed 0) at grid cells of 1, 0.5 and 0.25 cm, the footprint's IoU with
  the target bar (its goal's ``footprint_iou``) when the plates have squeezed it, and its change when the
  cell halves; the converged cell is the coarsest whose change is below 10%. Reported beside it: the bar's
  length over width, and both once the plates have let go (at 0.25 cm a few dozen particles stay inside
  the opening plates and are carried off, a grid-contact artifact of the finest cell that the release
  step adds, so the squeezed state is the one compared).
- ``mpm_convergence``: a harder question, the same rule on the footprint area of a dough lump (real2sim's
  dough: plasticine, E 2e5 Pa) squeezed by a plate for 1 s at grid cells of 2, 1, 0.5 and 0.25 cm
  (top-down occupancy, :func:`simpact.goals.footprint.footprint_area`).
- ``dough_squeeze_wall_s``: the wall time of that 1 s squeeze at the cell ``task_convergence`` chose
  (target <= 10 s).

Both engines run the same algorithm (:mod:`simpact.bench.mpm_taichi` says what it shares with
:mod:`solvers.mpm.kernels`: B-splines, APIC, the Jacobi stretch decomposition, the return map, the
colliders) at the same step, ``_CFL`` times the cell over the P-wave speed. That is the largest stable
step, found by running the squeeze for 0.1-0.4 s at CFL 0.4 ... 2.0: it blows up (non-finite within
0.1 s) at 1.2, stays finite at 1.1 with particles 0.04 mm (mean) from the CFL 0.4 run, so both use 1.0;
each row says whether its run stayed finite and slower than 1 m/s. What differs is how each engine
executes it: Taichi one kernel call per substep, its four loops parallel over two threads (P2G with
atomic adds), over the whole grid; Warp one process per rollout, on the CPU a substep is two launches (a
serial kernel clearing and updating only the particles' bounding box of the grid, then G2P), stepped in
control periods of ``_CHUNK`` substeps as the composite World steps it. Not shown: the Taichi port is
this module's own, not a tuned library solver; timings are of one machine under whatever else runs on it.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from simpact.bench.mpm_taichi import build_taichi_squeeze
from simpact.goals.footprint import footprint_area
from simpact.tasks import load_task
from solvers.mpm import Body, Boxes, GridSpec, Material, MPMSolver, sample_box, sample_cylinder
from solvers.world import make_world

__all__ = ["run_mpm_bench"]

PLASTICINE = Material("plasticine", 3.0e5, 0.3, 1500.0, yield_stress=5.0e3)
DOUGH = Material("plasticine", 2.0e5, 0.3, 1200.0, yield_stress=3.0e3)
_EDGE = 25  # particles per cube edge (15,625 particles)
_SPACING = 0.002  # m
_PLATE_SPEED = 0.05  # m/s, downwards
_CFL = 1.0
"""Step = _CFL * cell / P-wave speed: the largest stable step of this algorithm (module docstring)."""
_CHUNK = 20
"""Warp substeps per ``MPMSolver.step`` call (the plate moves at constant velocity through them)."""
_START_DELAY_S = 1.5
"""Each engine's timed loop starts at one agreed instant, after every process has built its solver."""


def _cube_setup() -> tuple[np.ndarray, GridSpec, float]:
    side = _EDGE * _SPACING
    pts = sample_box((0.0, 0.0, side / 2), (side, side, side), _SPACING)
    grid = GridSpec.around((-side, -side, 0.0), (side, side, side * 1.5), 2 * _SPACING)
    dt = _CFL * grid.dx / PLASTICINE.wave_speed()
    return pts, grid, dt


def _plate(top: float, t: float, half: float) -> Boxes:
    """A plate of half width ``half`` whose bottom starts at ``top`` and moves down for ``t`` s."""
    return Boxes.one((0.0, 0.0, top - _PLATE_SPEED * t + 0.01), (half, half, 0.01), (0.0, 0.0, -_PLATE_SPEED))


def _wait_until(start: float) -> None:
    while time.perf_counter() < start:
        time.sleep(0.001)


def _stable(x: np.ndarray, v: np.ndarray) -> bool:
    """Finite and slower than 1 m/s (the plate moves at 0.05 m/s)."""
    return bool(np.isfinite(x).all() and np.isfinite(v).all() and np.abs(v).max() < 1.0)


def _warp_squeeze(job: tuple[int, float]) -> dict[str, Any]:
    """``steps`` substeps of the cube squeeze from the instant ``start`` (time.perf_counter, shared by the
    processes of one machine), after a first step that loads the kernels."""
    steps, start = job
    pts, grid, dt = _cube_setup()
    solver = MPMSolver([Body(pts, PLASTICINE, _SPACING**3)], grid, dt=dt)
    top = float(pts[:, 2].max()) + _SPACING
    solver.step(dt, _plate(top, dt, 0.04))
    _wait_until(start)
    begin = time.perf_counter()
    done = 1
    while done < steps + 1:
        n = min(_CHUNK, steps + 1 - done)
        done += n
        solver.step(n * dt, _plate(top, done * dt, 0.04))
    end = time.perf_counter()
    return {"begin": begin, "end": end, "stable": _stable(solver.positions(), solver.velocities())}


def _taichi_squeeze(job: tuple[int, float, int]) -> dict[str, Any]:
    """The same squeeze in the plain Taichi MLS-MPM (CPU back-end, ``threads`` threads)."""
    steps, start, threads = job
    import taichi as ti

    pts, grid, dt = _cube_setup()
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads, default_fp=ti.f32, random_seed=0, log_level=ti.ERROR)
    mu, lam = PLASTICINE.lame()
    step = build_taichi_squeeze(
        ti, pts, grid, dt, mu, lam, PLASTICINE.yield_stress, PLASTICINE.density * _SPACING**3, _SPACING**3
    )
    top = float(pts[:, 2].max()) + _SPACING
    step(top, 0)
    ti.sync()
    _wait_until(start)
    begin = time.perf_counter()
    for s in range(steps):
        step(top, s + 1)
    ti.sync()
    end = time.perf_counter()
    x, v = step.state()  # type: ignore[attr-defined]
    return {"begin": begin, "end": end, "stable": _stable(x, v)}


def _run(worker: Callable[[Any], dict[str, Any]], jobs: list[Any], steps: int, dt: float) -> dict[str, Any]:
    """``worker`` on each job in its own spawned process at once; the wall time from the first timed loop's
    start to the last one's end."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(len(jobs)) as pool:
        out = pool.map(worker, jobs)
    wall = max(o["end"] for o in out) - min(o["begin"] for o in out)
    return {"stable": all(o["stable"] for o in out), **_rate(len(jobs) * steps, dt, wall)}


def _rate(substeps: int, dt: float, wall: float) -> dict[str, Any]:
    """Throughput of ``substeps`` squeeze substeps of ``dt`` s (summed over processes) in ``wall`` s."""
    return {
        "dt_s": dt,
        "substeps": substeps,
        "wall_s": wall,
        "sim_s_per_wall_s": substeps * dt / wall,
        "particle_substeps_per_s": substeps * _EDGE**3 / wall,
    }


def mpm_vs_taichi(steps: int, repeats: int = 3, processes: int = 2, threads: int = 2) -> dict[str, Any]:
    """``repeats`` alternating pairs: Warp in ``processes`` processes, Taichi on ``threads`` threads."""
    _, _, dt = _cube_setup()
    try:
        import taichi  # noqa: F401
    except ImportError:
        taichi_ok = False
    else:
        taichi_ok = True
    pairs: list[dict[str, Any]] = []
    for _ in range(repeats):
        start = time.perf_counter() + _START_DELAY_S
        warp = _run(_warp_squeeze, [(steps, start)] * processes, steps, dt)
        pair: dict[str, Any] = {"warp": warp}
        if taichi_ok:
            start = time.perf_counter() + _START_DELAY_S
            pair["taichi"] = _run(_taichi_squeeze, [(steps, start, threads)], steps, dt)
            pair["ratio"] = warp["sim_s_per_wall_s"] / pair["taichi"]["sim_s_per_wall_s"]
        pairs.append(pair)
    ratios = [p["ratio"] for p in pairs if "ratio" in p]

    def median(engine: str, key: str) -> float:
        return statistics.median(p[engine][key] for p in pairs)

    out: dict[str, Any] = {
        "ratio": statistics.median(ratios) if ratios else None,
        "ratio_range": [min(ratios), max(ratios)] if ratios else None,
        "target": 1.5,
        "dt_s": dt,
        "cfl": _CFL,
        "warp_processes": processes,
        "warp_particle_substeps_per_s": median("warp", "particle_substeps_per_s"),
        "pairs": pairs,
    }
    if taichi_ok:
        out["taichi_threads"] = threads
        out["taichi_particle_substeps_per_s"] = median("taichi", "particle_substeps_per_s")
    else:
        out["taichi"] = {"skipped": "taichi is not installed (pip install taichi; for this benchmark only)"}
    return out


def dough_squeeze(dx: float, duration: float = 1.0) -> dict[str, Any]:
    """A 2.5 cm radius, 3 cm tall dough lump squeezed by a 12 cm plate that descends 1.8 cm in ``duration``
    s, at grid cell ``dx`` and the step of ``_CFL``; the final footprint area and the wall time (after
    kernel loading)."""
    pts = sample_cylinder((0.0, 0.0, 0.0), 0.025, 0.03, dx / 2)
    grid = GridSpec.around((-0.08, -0.08, 0.0), (0.08, 0.08, 0.045), dx)
    solver = MPMSolver([Body(pts, DOUGH)], grid, cfl=_CFL)
    speed, control = 0.018 / duration, 0.01
    top = 0.03 + dx / 4
    solver.step(solver.dt)
    start = time.perf_counter()
    for k in range(round(duration / control)):
        z = top - speed * (k + 1) * control
        solver.step(control, Boxes.one((0.0, 0.0, z + 0.01), (0.06, 0.06, 0.01), (0.0, 0.0, -speed)))
    wall = time.perf_counter() - start
    x = solver.positions()
    return {
        "dx_m": dx,
        "particles": len(pts),
        "dt_s": solver.dt,
        "substeps": solver.steps,
        "wall_s": wall,
        "stable": _stable(x, solver.velocities()),
        "footprint_m2": footprint_area(x),
        "height_m": float(np.percentile(x[:, 2], 99)),
    }


def task_convergence(cells: tuple[float, ...] = (0.01, 0.005, 0.0025), seed: int = 0) -> dict[str, Any]:
    """The ``shape_dough`` reference rollout at each grid cell (m): the goal's footprint IoU with the target
    bar when the plates have squeezed it (the end of the GRASP action) and at the end (released), the bar's
    length over width, the rollout's CPU time; the squeezed IoU's change when the cell halves, and the
    coarsest cell whose change is below 10%."""
    task = load_task("shape_dough")
    runs: list[dict[str, Any]] = []
    for dx in cells:
        scene = task.scene(seed)
        dough = scene.object("dough")
        scene = scene.replace_object(replace(dough, material={**(dough.material or {}), "grid_dx": dx}))
        world = make_world(scene)
        plan = task.reference_plan(scene, world.start_pose(), seed)
        start = time.process_time()
        rollout = world.rollout(plan, tail_s=task.tail_s)
        cpu = time.process_time() - start
        squeezed = rollout.states[[a.type for a in plan.actions].index("GRASP")]
        at_squeeze = task.evaluate(replace(rollout, final=squeezed), scene, seed).details
        released = task.evaluate(rollout, scene, seed).details
        runs.append(
            {
                "dx_m": dx,
                "iou": at_squeeze["footprint_iou:dough.iou"],
                "ratio": at_squeeze["footprint_ratio:dough.ratio"],
                "released_iou": released["footprint_iou:dough.iou"],
                "released_ratio": released["footprint_ratio:dough.ratio"],
                "rollout_cpu_s": cpu,
                "simulated_s": float(rollout.final.time - rollout.initial.time),
            }
        )
        if len(runs) > 1:
            runs[-2]["change_when_halved"] = abs(runs[-1]["iou"] - runs[-2]["iou"]) / runs[-1]["iou"]
    converged = next((r for r in runs if r.get("change_when_halved", 1.0) < 0.10), None)
    return {
        "task": "shape_dough",
        "seed": seed,
        "metric": "footprint_iou when squeezed",
        "runs": runs,
        "converged_dx_m": converged["dx_m"] if converged else None,
        "threshold": 0.10,
    }


def run_mpm_bench(
    steps: int = 100,
    cells: tuple[float, ...] = (0.02, 0.01, 0.005, 0.0025),
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    repeats: int = 3,
) -> dict[str, Any]:
    """Every MPM benchmark of the module docstring; ``progress(name, section)`` gets each as it finishes."""
    report = progress or (lambda name, section: None)
    vs = mpm_vs_taichi(steps, repeats)
    report("mpm_vs_taichi", vs)
    task = task_convergence()
    report("task_convergence", task)
    runs: list[dict[str, Any]] = []
    for dx in cells:
        runs.append(dough_squeeze(dx))
        if len(runs) > 1:
            coarse, fine = runs[-2], runs[-1]
            coarse["change_when_halved"] = (
                abs(fine["footprint_m2"] - coarse["footprint_m2"]) / fine["footprint_m2"]
            )
        report("mpm_convergence", {"runs": runs})
    converged = next((r for r in runs if r.get("change_when_halved", 1.0) < 0.10), None)
    convergence = {
        "runs": runs,
        "converged_dx_m": converged["dx_m"] if converged else None,
        "threshold": 0.10,
    }
    report("mpm_convergence", convergence)
    cell = task["converged_dx_m"]
    at_cell = next((r for r in runs if cell is not None and abs(r["dx_m"] - cell) < 1e-12), None)
    if at_cell is None and cell is not None:
        at_cell = dough_squeeze(cell)
    squeeze = {
        "dx_m": cell,
        "wall_s": at_cell["wall_s"] if at_cell else None,
        "target_s": 10.0,
        "cell_from": "task_convergence",
    }
    report("dough_squeeze_wall_s", squeeze)
    return {
        "mpm_vs_taichi": vs,
        "task_convergence": task,
        "mpm_convergence": convergence,
        "dough_squeeze_wall_s": squeeze,
    }
