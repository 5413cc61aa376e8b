"""``simpact bench rope``: the projective-dynamics rope's throughput and accuracy, side by side in one run.

- ``linear_solves``: one global-step solve of a 101-particle rope (3 right-hand sides per rope; 1 and 64
  ropes) by the explicit inverse the solver uses (a batched matmul), a prefactored dense Cholesky
  (``torch.cholesky_solve``), a banded Cholesky (``scipy.linalg.cho_solve_banded``) and scipy's sparse LU
  (``scipy.sparse.linalg.factorized``), microseconds per solve (median of ``repeats``).
- ``rope_vs_mujoco_cable``: a 1 m, 100-segment rope hung from both ends (0.8 m apart, started as a V), 10 s
  at dt 0.01 (both at rest by then): simulated seconds per wall second of the PD rope and of MuJoCo's own
  (``flexcomp dim="1"`` with elasticity, edge equalities and the discrete integrator), their ratio, each
  rope's length and the largest distance between the two at the end (m). The same rope in both: Young's
  modulus :data:`YOUNG` (MuJoCo's elasticity; the PD rope's bending stiffness E pi r^4 / 4), linear damping
  1/s (MuJoCo: each vertex's dof damping), MuJoCo's edges stiff (solref 0.002 s, solimp 0.99-0.999: with
  the defaults they stretched 6 %, and with E 1 GPa the rope bent like a rod, 8 cm off the catenary the PD
  rope keeps within 0.02 mm); a lower E made MuJoCo's rope stretch or diverge. MuJoCo's rope is only a fair
  reference when its length stays near 1 m: the result reports it.
- ``batched_rope_seconds_per_s``: 64 such ropes stepped as one batch for 1 s (swinging, not at rest),
  rope-seconds per wall second, next to one rope alone.
- ``rope_realtime_factor``: the ``shape_rope`` reference rollout through ``make_world`` (the composite
  World: MuJoCo robot plus the rope), simulated seconds per wall second, next to its MuJoCo part alone.

Each figure is a median over ``repeats`` runs with its range, in wall time and (``*_cpu``) in this process's
CPU time, the steadier of the two on a shared machine. What it does not show: a quiet machine (the timings
are taken as they come on a shared one), ropes in contact with many boxes, the planner's batches.

Measured on the idle 2-vCPU VM (Intel Xeon, AVX-512; ``--repeats 7``, 2026-12-03): rope_vs_mujoco_cable 1.33
(1.27-1.38), PD 45x and MuJoCo 34x real time, the two hanging ropes 4.2 mm apart at rest; 64 ropes 486
(479-523) rope-s per wall s; shape_rope with the robot 24.1x (23.7-24.8).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import mujoco
import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg

from simpact.tasks import load_task
from solvers.composite import CompositeWorld
from solvers.deformable import torch_solver_mode
from solvers.world import make_world

__all__ = ["run_rope_bench"]

SEGMENTS = 100
LENGTH = 1.0
SPAN = 0.8
DT = 0.01
RADIUS = 0.005
MASS = 0.1
DAMPING = 1.0
"""Linear velocity decay rate of both ropes, 1/s."""
YOUNG = 5.0e4
"""Young's modulus of both ropes, Pa."""
_BLAS_SPIN_S = 0.5
"""numpy's OpenBLAS keeps its worker threads spinning for a while after a threaded call (the inverse just
built): the timed loop starts once they sleep (with them spinning, the rope's loop measured 20-40 % more
CPU than wall time and ran up to 30 % slower on these 2 vCPUs)."""


def _median(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def _hung_points() -> np.ndarray:
    s = np.linspace(0.0, 1.0, SEGMENTS + 1)
    sag = np.sqrt((LENGTH / 2) ** 2 - (SPAN / 2) ** 2)
    return np.stack([-SPAN / 2 + SPAN * s, np.zeros_like(s), 1.0 - sag * (1 - np.abs(2 * s - 1))], axis=1)


def _pd_rope(batch: int = 1) -> Any:
    from solvers.pd.rope import RopeParams, RopeSolver

    params = RopeParams(
        length=LENGTH,
        radius=RADIUS,
        mass=MASS,
        segments=SEGMENTS,
        stretch_stiffness=200.0,
        bending_stiffness=YOUNG * math.pi * RADIUS**4 / 4,
        damping=DAMPING,
    )
    rope = RopeSolver("rope", params, _hung_points(), pinned=(0, SEGMENTS))
    return rope if batch == 1 else rope.replicate(batch)


def _mujoco_rope_xml() -> str:
    point = " ".join(f"{v:.6f}" for v in _hung_points().ravel())
    element = " ".join(f"{i} {i + 1}" for i in range(SEGMENTS))
    return f"""<mujoco><option timestep="{DT}" integrator="discrete"/>
<worldbody><flexcomp name="rope" type="direct" dim="1" radius="{RADIUS}" mass="{MASS}" point="{point}"
 element="{element}"><elasticity young="{YOUNG}" damping="0.001"/>
<edge equality="true" solref="0.002 1" solimp="0.99 0.999 0.001"/>
<contact selfcollide="none" conaffinity="0" contype="0"/><pin id="0 {SEGMENTS}"/></flexcomp></worldbody>
</mujoco>"""


class _Timer:
    """Wall and CPU seconds (``wall``, ``cpu``: this process, all its threads) of a ``with`` block."""

    def __enter__(self) -> _Timer:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def _mujoco_rope(seconds: float) -> tuple[_Timer, np.ndarray]:
    """The time of ``seconds`` of MuJoCo's rope, and its vertices at the end."""
    model = mujoco.MjModel.from_xml_string(_mujoco_rope_xml())
    model.dof_damping[:] = DAMPING * MASS / (SEGMENTS + 1)  # N s/m: the PD rope's decay rate
    data = mujoco.MjData(model)
    with _Timer() as timer:
        mujoco.mj_step(model, data, round(seconds / DT))
    return timer, data.flexvert_xpos.copy()


def _pd_run(seconds: float, batch: int = 1) -> tuple[_Timer, np.ndarray]:
    warm = _pd_rope(batch)
    for _ in range(3):  # TorchScript profiles the iterations' first runs, then optimises them
        warm.step(DT)
    rope = _pd_rope(batch)
    rope._operators(DT, rope._constraints(None)[0])  # and builds the global step's inverse
    time.sleep(_BLAS_SPIN_S)
    with _Timer() as timer, torch_solver_mode():  # held once for the loop, as the composite World holds it
        for _ in range(round(seconds / DT)):
            rope.step(DT)
    return timer, rope.positions()


def _timed_us(fn: Callable[[], object], calls: int, repeats: int) -> dict[str, float]:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return _median(samples)


def linear_solves(repeats: int) -> dict[str, Any]:
    """Microseconds per global-step solve, by method and batch size."""
    import torch

    rope = _pd_rope()
    matrix = rope._matrix(DT)  # the solver's own global matrix
    n = len(matrix)
    inverse = torch.from_numpy(np.linalg.inv(matrix))
    factor = torch.linalg.cholesky(torch.from_numpy(matrix))
    banded = scipy.linalg.cholesky_banded(
        np.array([np.r_[np.zeros(k), np.diag(matrix, k)] for k in (2, 1, 0)])
    )
    lu = scipy.sparse.linalg.factorized(scipy.sparse.csc_matrix(matrix))
    out: dict[str, Any] = {"unknowns_per_coordinate": n}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for batch in (1, 64):
            rhs = torch.rand(batch, n, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
            flat = rhs.transpose(0, 1).reshape(n, 3 * batch).numpy().copy()
            solvers: dict[str, tuple[Callable[[], object], int]] = {
                "explicit_inverse_bmm": (partial(torch.bmm, inverse.expand(batch, -1, -1), rhs), 200),
                "torch_cholesky_solve": (partial(torch.cholesky_solve, rhs, factor), 200),
                "scipy_cho_solve_banded": (
                    partial(scipy.linalg.cho_solve_banded, (banded, False), flat),
                    200,
                ),
                "scipy_factorized_lu": (partial(_columns, lu, flat), 20),
            }
            out[f"batch_{batch}"] = {k: _timed_us(fn, calls, repeats) for k, (fn, calls) in solvers.items()}
    finally:
        torch.set_num_threads(threads)
    return out


def _columns(solve: Callable[[np.ndarray], np.ndarray], rhs: np.ndarray) -> list[np.ndarray]:
    """A sparse LU's solve applied to each column of ``rhs`` (it takes one vector at a time)."""
    return [solve(rhs[:, j]) for j in range(rhs.shape[1])]


def rope_vs_mujoco(repeats: int) -> dict[str, Any]:
    seconds = 10.0
    pd: list[_Timer] = []
    mj: list[_Timer] = []
    pd_end = mj_end = np.zeros((SEGMENTS + 1, 3))
    for i in range(repeats):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for which in order:
            if which == 0:
                timer, ends = _pd_run(seconds)
                pd.append(timer)
                pd_end = ends[0]
            else:
                timer, mj_end = _mujoco_rope(seconds)
                mj.append(timer)
    return {
        "pd_sim_s_per_wall_s": _median([seconds / t.wall for t in pd]),
        "mujoco_sim_s_per_wall_s": _median([seconds / t.wall for t in mj]),
        "rope_vs_mujoco_cable": _median([b.wall / a.wall for a, b in zip(pd, mj)]),
        "rope_vs_mujoco_cable_cpu": _median([b.cpu / a.cpu for a, b in zip(pd, mj)]),
        "pd_length_m": float(np.linalg.norm(np.diff(pd_end, axis=0), axis=1).sum()),
        "mujoco_length_m": float(np.linalg.norm(np.diff(mj_end, axis=0), axis=1).sum()),
        "max_distance_m": float(np.linalg.norm(pd_end - mj_end, axis=1).max()),
        "target_ratio": 1.2,
        "target_distance_m": 0.005,
    }


def batched(repeats: int, batch: int = 64) -> dict[str, Any]:
    seconds = 1.0
    many, one = [], []
    for _ in range(repeats):
        many.append(_pd_run(seconds, batch)[0])
        one.append(_pd_run(seconds, 1)[0])
    return {
        "batch": batch,
        "batched_rope_seconds_per_s": _median([batch * seconds / t.wall for t in many]),
        "batched_rope_seconds_per_cpu_s": _median([batch * seconds / t.cpu for t in many]),
        "single_rope_seconds_per_s": _median([seconds / t.wall for t in one]),
        "target": 400.0,
    }


def realtime(repeats: int) -> dict[str, Any]:
    task = load_task("shape_rope")
    scene = task.scene(0)
    world = make_world(scene)
    assert isinstance(world, CompositeWorld)
    plan = task.reference_plan(scene, world.start_pose(), 0)
    rigid = world.rigid  # its MuJoCo part
    composite: list[_Timer] = []
    mujoco_only: list[_Timer] = []
    world.rollout(plan, tail_s=task.tail_s)  # compiles the rope's iterations (TorchScript)
    for _ in range(repeats):
        with _Timer() as timer:
            rollout = world.rollout(plan, tail_s=task.tail_s)
        composite.append(timer)
        with _Timer() as timer:
            rigid.rollout(plan, tail_s=task.tail_s)
        mujoco_only.append(timer)
    assert rollout.trace is not None
    simulated = float(rollout.trace.time[-1] - rollout.initial.time)
    return {
        "task": "shape_rope",
        "simulated_s": simulated,
        "rope_realtime_factor": _median([simulated / t.wall for t in composite]),
        "rope_realtime_factor_cpu": _median([simulated / t.cpu for t in composite]),
        "mujoco_part_realtime_factor": _median([simulated / t.wall for t in mujoco_only]),
        "success": bool(task.evaluate(rollout, scene, 0).success),
        "target": 20.0,
    }


def run_rope_bench(
    repeats: int = 3, progress: Callable[[str, dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Every section above; ``progress(name, section)`` is called as each one finishes."""
    result: dict[str, Any] = {"repeats": repeats, "dt": DT}
    for name, fn in (
        ("linear_solves", linear_solves),
        ("rope_vs_mujoco_cable", rope_vs_mujoco),
        ("batched", batched),
        ("realtime", realtime),
    ):
        result[name] = fn(repeats)
        if progress is not None:
            progress(name, result[name])
    return result
