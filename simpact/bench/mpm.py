"""MPM benchmarks (``simpact bench mpm --out DIR``), each measured side by side in one run:

- ``mpm_vs_taichi``: the same plasticine squeeze (a 25^3-particle cube, 2 particles per cell per axis, a
  plate pressing down at 5 cm/s, the same CFL step) simulated by the project's Warp MLS-MPM (two rollouts in
  two processes: Warp's CPU back-end runs one thread) and by a plain MLS-MPM written in Taichi's CPU back-end
  (two threads), as simulated seconds per wall second of the whole machine. Taichi is installed for this
  benchmark only (``pip install taichi``); without it the row says so.
- ``mpm_convergence``: a dough lump (real2sim's dough: plasticine, E 2e5 Pa) squeezed by a plate for 1 s
  at grid cells of 2, 1 and 0.5 cm; the footprint area (top-down occupancy,
  :func:`simpact.goals.footprint.footprint_area`) and its change when the cell halves; the converged cell
  is the coarsest whose change is below 10%.
- ``dough_squeeze_wall_s``: the wall time of that 1 s squeeze at the converged cell (target <= 10 s).

What this does not show: the Taichi port is this file's own (same transfer, material and collision rules),
not a tuned library solver; both run at the same step (the CFL step of the P-wave speed), not each at a
searched stability limit; timings are of one machine under whatever else runs on it.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from simpact.bench.mpm_taichi import build_taichi_squeeze
from simpact.goals.footprint import footprint_area
from solvers.mpm import Body, Boxes, GridSpec, Material, MPMSolver, sample_box, sample_cylinder

__all__ = ["run_mpm_bench"]

PLASTICINE = Material("plasticine", 3.0e5, 0.3, 1500.0, yield_stress=5.0e3)
DOUGH = Material("plasticine", 2.0e5, 0.3, 1200.0, yield_stress=3.0e3)
_EDGE = 25  # particles per cube edge (15,625 particles)
_SPACING = 0.002  # m
_PLATE_SPEED = 0.05  # m/s, downwards


def _cube_setup() -> tuple[np.ndarray, GridSpec, float]:
    side = _EDGE * _SPACING
    pts = sample_box((0.0, 0.0, side / 2), (side, side, side), _SPACING)
    grid = GridSpec.around((-side, -side, 0.0), (side, side, side * 1.5), 2 * _SPACING)
    dt = 0.4 * grid.dx / PLASTICINE.wave_speed()
    return pts, grid, dt


def _plate(top: float, t: float, half: float) -> Boxes:
    """A plate of half width ``half`` whose bottom starts at ``top`` and moves down for ``t`` s."""
    return Boxes.one((0.0, 0.0, top - _PLATE_SPEED * t + 0.01), (half, half, 0.01), (0.0, 0.0, -_PLATE_SPEED))


def _warp_squeeze(steps: int) -> float:
    """Wall seconds of ``steps`` substeps of the cube squeeze (after one warm-up step)."""
    pts, grid, dt = _cube_setup()
    solver = MPMSolver([Body(pts, PLASTICINE, _SPACING**3)], grid, dt=dt)
    top = float(pts[:, 2].max()) + _SPACING
    solver.step(dt, _plate(top, dt, 0.04))
    start = time.perf_counter()
    for s in range(steps):
        solver.step(dt, _plate(top, (s + 2) * dt, 0.04))
    return time.perf_counter() - start


def _warp_rate(steps: int, processes: int) -> dict[str, Any]:
    """Simulated s per wall s of ``processes`` squeezes run at once (spawned processes)."""
    _, _, dt = _cube_setup()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes) as pool:
        pool.map(_warp_squeeze, [1] * processes)  # compile / load kernels in every process first
        start = time.perf_counter()
        pool.map(_warp_squeeze, [steps] * processes)
        wall = time.perf_counter() - start
    return {"processes": processes, **_rate(processes * steps, dt, wall)}


def _rate(substeps: int, dt: float, wall: float) -> dict[str, Any]:
    """Throughput of ``substeps`` squeeze substeps of ``dt`` s (summed over processes) in ``wall`` s."""
    return {
        "dt_s": dt,
        "substeps": substeps,
        "wall_s": wall,
        "sim_s_per_wall_s": substeps * dt / wall,
        "particle_substeps_per_s": substeps * _EDGE**3 / wall,
    }


def _taichi_rate(steps: int, threads: int = 2) -> dict[str, Any]:
    """The same squeeze in a plain Taichi MLS-MPM on the CPU back-end."""
    try:
        import taichi as ti
    except ImportError:
        return {"skipped": "taichi is not installed (pip install taichi; for this benchmark only)"}
    pts, grid, dt = _cube_setup()
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads, default_fp=ti.f32, random_seed=0)
    mu, lam = PLASTICINE.lame()
    step = build_taichi_squeeze(
        ti, pts, grid, dt, mu, lam, PLASTICINE.yield_stress, PLASTICINE.density * _SPACING**3, _SPACING**3
    )
    top = float(pts[:, 2].max()) + _SPACING
    step(top, 0)
    ti.sync()
    start = time.perf_counter()
    for s in range(steps):
        step(top, s + 1)
    ti.sync()
    wall = time.perf_counter() - start
    return {"threads": threads, **_rate(steps, dt, wall)}


def dough_squeeze(dx: float, duration: float = 1.0) -> dict[str, Any]:
    """A 2.5 cm radius, 3 cm tall dough lump squeezed by a 12 cm plate that descends 1.8 cm in ``duration``
    s, at grid cell ``dx``; the final footprint area and the wall time (after kernel loading)."""
    pts = sample_cylinder((0.0, 0.0, 0.0), 0.025, 0.03, dx / 2)
    grid = GridSpec.around((-0.08, -0.08, 0.0), (0.08, 0.08, 0.045), dx)
    solver = MPMSolver([Body(pts, DOUGH)], grid)
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
        "wall_s": wall,
        "footprint_m2": footprint_area(x),
        "height_m": float(np.percentile(x[:, 2], 99)),
    }


def run_mpm_bench(
    steps: int = 100,
    cells: tuple[float, ...] = (0.02, 0.01, 0.005),
    progress: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every MPM benchmark of the module docstring; ``progress(name, section)`` gets each as it finishes."""
    report = progress or (lambda name, section: None)
    warp_two = _warp_rate(steps, 2)
    taichi = _taichi_rate(steps)
    ratio = warp_two["sim_s_per_wall_s"] / taichi["sim_s_per_wall_s"] if "wall_s" in taichi else None
    vs = {"warp_two_processes": warp_two, "taichi": taichi, "ratio": ratio, "target": 1.5}
    report("mpm_vs_taichi", vs)
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
    squeeze = {"wall_s": converged["wall_s"] if converged else None, "target_s": 10.0}
    report("mpm_convergence", convergence)
    report("dough_squeeze_wall_s", squeeze)
    return {"mpm_vs_taichi": vs, "mpm_convergence": convergence, "dough_squeeze_wall_s": squeeze}
