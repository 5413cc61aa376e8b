"""The composite World: MuJoCo (the robot and rigid objects) and deformable solvers stepped in lockstep.

Coupling is one-way (see :mod:`solvers.deformable`): once per control period the deformables are stepped
against the fingertip pads, the hand and the rigid objects as MuJoCo placed them at the end of that period;
they do not push back. The MuJoCo part of a rollout is therefore exactly the MuJoCo World's
(:class:`~solvers.mujoco.world.MujocoWorld`), and its auditing accessor (``mujoco()`` through
:func:`~solvers.mujoco.world.mujoco_access`) is offered unchanged: a :class:`CompositeSnapshot` *is* the
MuJoCo integration state (an array) carrying the deformables' snapshots alongside.

Rollouts of K plans run MuJoCo's K rollouts (threads, as the MuJoCo World does), then step all K copies of
each deformable as one batch. Deterministic on the CPU; ``snapshot()`` / ``restore()`` exact.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from mujoco import MjData  # the World below has a method named ``mujoco``

from simpact.core.actions import Plan, StartPose
from simpact.core.frame import Frame
from simpact.core.rollout import DeformableState, Rollout, Trace, WorldState
from simpact.core.scene import Scene
from solvers.deformable import Colliders, DeformableSolver, Grip, build_solver, torch_solver_mode
from solvers.mujoco.render import CameraSpec, Renderer, VideoWriter, add_particles, add_rope, object_masks
from solvers.mujoco.world import SETTLE_S, VIDEO_CAMERA, MujocoAccess, MujocoWorld

__all__ = ["COUPLING", "CompositeSnapshot", "CompositeWorld", "rigid_part"]

TRACE_POINTS = 600_000
"""Most particle positions a rollout's trace keeps per deformable (the records are thinned evenly in time
beyond it; states at the end of each action are always kept in full)."""
MAX_SPHERES = 4000
"""Most spheres a particle cloud is drawn with (the renderer holds 10,000 geoms)."""
COUPLING = "one-way"
"""The robot and rigid objects move the deformables; the deformables do not push back."""


class CompositeSnapshot(np.ndarray):
    """MuJoCo's integration state (``mjSTATE_INTEGRATION``, so MuJoCo auditing reads it as it is) with the
    deformables' exact snapshots in ``deformables`` (one per solver, in scene order)."""

    deformables: tuple[Any, ...]

    def __new__(cls, state: np.ndarray, deformables: tuple[Any, ...]) -> CompositeSnapshot:
        out = np.asarray(state, dtype=np.float64).copy().view(cls)
        out.deformables = deformables
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self.deformables = getattr(obj, "deformables", ())

    def __reduce__(self) -> Any:
        return (CompositeSnapshot, (np.asarray(self).copy(), self.deformables))


@dataclass(frozen=True)
class _Boxes:
    """The MuJoCo geoms a deformable collides with: fingertip pads, the hand, rigid objects."""

    geoms: np.ndarray
    centre: np.ndarray
    """Bounding-box centre in each geom's frame (K, 3), m."""
    half: np.ndarray
    friction: np.ndarray
    owner: tuple[str, ...]
    pads: tuple[int, int]
    """Indices (into ``geoms``) of the left and right fingertip pads."""


def _boxes(model: mujoco.MjModel, objects: Sequence[str]) -> _Boxes:
    """The fingertip pads (each finger's largest collidable box), the hand's collidable geoms and every
    geom of the rigid ``objects``."""
    collidable = [g for g in range(model.ngeom) if model.geom_contype[g] or model.geom_conaffinity[g]]

    def body(g: int) -> str:
        return str(model.body(model.geom_bodyid[g]).name)

    pads = []
    for finger in ("left_finger", "right_finger"):
        boxes = [
            g for g in collidable if body(g) == finger and model.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX
        ]
        pads.append(max(boxes, key=lambda g: (float(np.prod(model.geom_size[g])), -g)))
    others = [g for g in collidable if body(g) == "hand" or body(g) in objects]
    idx = np.array(pads + others, dtype=int)
    return _Boxes(
        idx,
        model.geom_aabb[idx, :3].copy(),
        model.geom_aabb[idx, 3:].copy(),
        model.geom_friction[idx, 0].copy(),
        tuple(body(int(g)) for g in idx),
        (0, 1),
    )


_SKEW_I, _SKEW_J = [2, 0, 1], [1, 2, 0]
"""Index pairs of the skew-symmetric part's (x, y, z) entries."""


def _angular_velocity(previous: np.ndarray, current: np.ndarray, dt: float) -> np.ndarray:
    """World angular velocity (..., 3) rad/s turning rotations ``previous`` into ``current`` (..., 3, 3)."""
    skew = current @ np.swapaxes(previous, -1, -2)
    return 0.5 * (skew[..., _SKEW_I, _SKEW_J] - skew[..., _SKEW_J, _SKEW_I]) / dt


class _Poses:
    """Box poses of one MuJoCo state: centres (K, 3) and rotations (K, 3, 3), and the grip frame between the
    pads (centre (3,), rotation (3, 3), opening m; see :class:`solvers.deformable.Grip`)."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, boxes: _Boxes, qpos: np.ndarray) -> None:
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        rot = data.geom_xmat[boxes.geoms].reshape(-1, 3, 3).copy()
        self.rotation = rot
        self.centre = data.geom_xpos[boxes.geoms] + np.einsum("kij,kj->ki", rot, boxes.centre)
        self.grip_centre, self.grip_rotation, self.opening = _grip_frame(boxes, self.centre, rot)


def _grip_frame(
    boxes: _Boxes, centre: np.ndarray, rotation: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """The grip frame of box poses ``centre`` (K, 3), ``rotation`` (K, 3, 3): centre, rotation, opening."""
    left, right = boxes.pads
    axis = centre[left] - centre[right]
    gap = math.sqrt(axis @ axis)
    axis = axis / max(gap, 1e-12)
    rot = rotation[left]
    across = int(np.argmax(np.abs(rot.T @ axis)))  # the pad's thickness axis
    column = rot[:, 1 if across == 0 else 0]
    y = column - (column @ axis) * axis
    y = y / math.sqrt(y @ y)
    z = np.array(
        [axis[1] * y[2] - axis[2] * y[1], axis[2] * y[0] - axis[0] * y[2], axis[0] * y[1] - axis[1] * y[0]]
    )
    frame = np.array([axis, y, z]).T
    return 0.5 * (centre[left] + centre[right]), frame, gap - 2.0 * float(boxes.half[left][across])


def _grip(boxes: _Boxes, now: list[_Poses], before: list[_Poses], dt: float) -> Grip:
    """The grip frame between the pads (see :class:`solvers.deformable.Grip`) for every member."""
    pad = boxes.half[boxes.pads[0]]
    across = int(np.argmin(pad))
    half = np.array([pad[i] for i in range(3) if i != across])
    centre = np.array([p.grip_centre for p in now])
    rotation = np.array([p.grip_rotation for p in now])
    return Grip(
        centre=centre,
        rotation=rotation,
        half=half,
        opening=np.array([p.opening for p in now]),
        velocity=(centre - np.array([p.grip_centre for p in before])) / dt,
        angular_velocity=_angular_velocity(np.array([p.grip_rotation for p in before]), rotation, dt),
    )


def _colliders(boxes: _Boxes, now: list[_Poses], before: list[_Poses], dt: float, scene: Scene) -> Colliders:
    centre = np.array([p.centre for p in now])
    rotation = np.array([p.rotation for p in now])
    return Colliders(
        table_z=0.0,
        table_friction=scene.table_friction,
        centre=centre,
        rotation=rotation,
        half=boxes.half,
        velocity=(centre - np.array([p.centre for p in before])) / dt,
        angular_velocity=_angular_velocity(np.array([p.rotation for p in before]), rotation, dt),
        friction=boxes.friction,
        owner=boxes.owner,
        grip=_grip(boxes, now, before, dt),
    )


def rigid_part(scene: Scene) -> Scene:
    """``scene`` with only its rigid objects: what MuJoCo simulates of it."""
    return replace(scene, objects=tuple(o for o in scene.objects if o.kind == "rigid"))


class CompositeWorld:
    """A scene with deformable objects: MuJoCo for the robot and rigid objects, one deformable solver per
    ``pd`` / ``mpm`` object, coupled one way (:data:`COUPLING`). Implements :class:`solvers.world.World`;
    ``options`` go to the MuJoCo World (``options``, ``limits``, ``camera``)."""

    coupling = COUPLING

    def __init__(self, scene: Scene, *, rigid: MujocoWorld | None = None, **options: Any) -> None:
        self.scene = scene
        rigid_scene = rigid_part(scene)
        self.rigid = rigid if rigid is not None else MujocoWorld(rigid_scene, **options)
        """The MuJoCo part (robot, rigid objects; ``rigid`` if given, a world of :func:`rigid_part`); its
        auditing accessor is this world's."""
        self.camera: CameraSpec = self.rigid.camera
        self.deformables: list[DeformableSolver] = [
            build_solver(o, scene) for o in scene.objects if o.kind != "rigid"
        ]
        self.dt = self.rigid.limits.control_dt
        """The deformables' step, s: one per control period."""
        self._boxes = _boxes(self.rigid.model, [o.name for o in rigid_scene.objects])
        self._data = mujoco.MjData(self.rigid.model)
        rest = self._poses(self.rigid.initial_snapshot[None])
        colliders = _colliders(self._boxes, rest, rest, self.dt, scene)
        for _ in range(round(SETTLE_S / self.dt)):
            for solver in self.deformables:
                solver.step(self.dt, colliders)
        self.initial_snapshot = self.snapshot()

    # --- state ---------------------------------------------------------------------------------------------
    def snapshot(self) -> CompositeSnapshot:
        return CompositeSnapshot(self.rigid.snapshot(), tuple(s.snapshot() for s in self.deformables))

    def restore(self, snapshot: CompositeSnapshot) -> None:
        self.rigid.restore(snapshot)
        for solver, snap in zip(self.deformables, snapshot.deformables, strict=True):
            solver.restore(snap)

    def reset(self) -> None:
        self.restore(self.initial_snapshot)

    def state(self) -> WorldState:
        return self._with_deformables(self.rigid.state(), [s.positions()[0] for s in self.deformables])

    def start_pose(self, snapshot: CompositeSnapshot | None = None) -> StartPose:
        return self.rigid.start_pose(self.initial_snapshot if snapshot is None else snapshot)

    def mujoco(self) -> MujocoAccess:
        """The MuJoCo part's auditing accessor (see the module docstring)."""
        return self.rigid.mujoco()

    def _with_deformables(self, state: WorldState, particles: Sequence[np.ndarray]) -> WorldState:
        named = {
            s.name: DeformableState(np.asarray(p, dtype=np.float64))
            for s, p in zip(self.deformables, particles)
        }
        return replace(state, deformables=named)

    def _poses(self, qpos_rows: np.ndarray) -> list[_Poses]:
        """Box poses for each MuJoCo ``qpos`` row, or each snapshot row (1 + nq + ... values: time first)."""
        nq = self.rigid.model.nq
        rows = qpos_rows[:, 1 : 1 + nq] if qpos_rows.shape[1] != nq else qpos_rows
        return [_Poses(self.rigid.model, self._data, self._boxes, q) for q in rows]

    def advance(self, before: np.ndarray, now: np.ndarray) -> None:
        """Step the deformables one control period (:attr:`dt`) along MuJoCo's own stepping, from ``qpos``
        ``before`` to ``now``: for a world driven live rather than through rollouts (``robot run --sim``'s
        stand-in, whose robot steps MuJoCo itself)."""
        colliders = _colliders(
            self._boxes, self._poses(now[None]), self._poses(before[None]), self.dt, self.scene
        )
        for solver in self.deformables:
            solver.step(self.dt, colliders)

    # --- rollouts ------------------------------------------------------------------------------------------
    def rollout(
        self, plan: Plan, *, snapshot: CompositeSnapshot | None = None, tail_s: float = 0.0
    ) -> Rollout:
        return self.rollouts([plan], snapshot=snapshot, tail_s=tail_s)[0]

    def rollouts(
        self,
        plans: Sequence[Plan],
        *,
        snapshot: CompositeSnapshot | None = None,
        tail_s: float = 0.0,
        prefix: int = 0,
    ) -> list[Rollout]:
        """MuJoCo's rollouts of every plan from ``snapshot`` (default: the initial one), then every
        deformable stepped through them, all plans in one batch. Each plan's rollout is the same whether
        rolled out alone or with others. ``prefix``: the plans' first actions already happened up to
        ``snapshot`` (a branch of a tree search: see :meth:`MujocoWorld.rollout`)."""
        t0 = time.perf_counter()
        snapshot = self.initial_snapshot if snapshot is None else snapshot
        rigid = self.rigid.rollouts(plans, snapshot=snapshot, tail_s=tail_s, prefix=prefix)
        with torch_solver_mode():  # once for every step of the deformables (see torch_solver_mode)
            return self._couple(rigid, snapshot, t0)

    def snapshot_at(
        self, start: CompositeSnapshot, trace: Trace, row: int, rigid: np.ndarray
    ) -> CompositeSnapshot:
        """The state at ``trace`` row ``row`` (the last physics step of a control period) of a rollout from
        ``start``, given MuJoCo's state there (``rigid``): the deformables stepped from ``start``'s as
        that rollout stepped them, so the floats are the rollout's (a member's do not depend on its
        batch). A tree search branches from it."""
        sub = self.rigid.substeps
        if (row + 1) % sub:
            raise ValueError(f"row {row} does not end a control period ({sub} physics steps each)")
        solvers = self._replicas(start, 1)
        before = self._poses(np.asarray(start)[None])[0]
        with torch_solver_mode():
            for c in range((row + 1) // sub):
                now = self._period_poses(trace, c, len(trace) // sub, before)
                colliders = _colliders(self._boxes, [now], [before], self.dt, self.scene)
                for solver in solvers:
                    solver.step(self.dt, colliders)
                before = now
        return CompositeSnapshot(rigid, tuple(s.snapshot() for s in solvers))

    def _period_poses(self, trace: Trace, c: int, periods: int, before: _Poses) -> _Poses:
        """The box poses at the end of control period ``c`` of ``trace`` (``periods`` long: held at its last
        one after), ``before`` itself when qpos did not change since the period before."""
        sub = self.rigid.substeps
        q = trace.qpos[min(c, periods - 1) * sub + sub - 1]
        same = c > 0 and np.array_equal(q, trace.qpos[min(c - 1, periods - 1) * sub + sub - 1])
        return before if same else self._poses(q[None])[0]

    def _replicas(self, snapshot: CompositeSnapshot, batch: int) -> list[DeformableSolver]:
        """``batch`` copies of every deformable at ``snapshot`` (this world's own solvers unchanged)."""
        out = []
        for solver, snap in zip(self.deformables, snapshot.deformables, strict=True):
            own = solver.snapshot()
            solver.restore(snap)
            out.append(solver.replicate(batch))
            solver.restore(own)
        return out

    def _couple(self, rigid: list[Rollout], snapshot: CompositeSnapshot, t0: float) -> list[Rollout]:
        """Step the deformables through the MuJoCo rollouts ``rigid`` (one batch member per rollout)."""
        sub = self.rigid.substeps
        traces = [r.trace for r in rigid]
        assert all(t is not None for t in traces)
        periods = [len(t) // sub for t in traces if t is not None]
        batch = len(rigid)
        start = self._poses(np.asarray(snapshot)[None])[0]
        before = [start] * batch
        solvers = self._replicas(snapshot, batch)
        t_start = float(rigid[0].initial.time)
        most = max(s.positions().shape[1] for s in solvers)
        keep = [self._kept_periods(r, n, most, t_start) for r, n in zip(rigid, periods)]
        records: list[list[dict[int, np.ndarray]]] = [[{} for _ in rigid] for _ in solvers]
        for k, solver in enumerate(solvers):
            first = solver.positions()
            for b in range(batch):
                records[k][b][0] = first[b]
        for c in range(max(periods)):
            now = []
            for b, (t, n) in enumerate(zip(traces, periods)):
                assert t is not None
                now.append(self._period_poses(t, c, n, before[b]))
            colliders = _colliders(self._boxes, now, before, self.dt, self.scene)
            for k, solver in enumerate(solvers):
                solver.step(self.dt, colliders)
                if any(c + 1 in kept for kept in keep):
                    positions = solver.positions()
                    for b, kept in enumerate(keep):
                        if c + 1 in kept:
                            records[k][b][c + 1] = positions[b]
            before = now
        return [self._rollout(r, [rec[b] for rec in records], t0) for b, r in enumerate(rigid)]

    def _kept_periods(self, rigid: Rollout, periods: int, particles: int, t_start: float) -> set[int]:
        """The control periods whose particles a rollout keeps: its start, every action's end, its end, and
        evenly spaced ones for the trace (all of them unless that would pass :data:`TRACE_POINTS`)."""
        ends = {int(round((s.time - t_start) / self.dt)) for s in (*rigid.states, rigid.final)}
        stride = max(1, -(-particles * (periods + 1) // TRACE_POINTS))
        return {0, periods, *ends, *range(0, periods + 1, stride)}

    def _rollout(self, rigid: Rollout, records: list[dict[int, np.ndarray]], t0: float) -> Rollout:
        """``rigid`` with the deformables' particles: in every state and in the trace."""
        trace = rigid.trace
        assert trace is not None
        t_start = float(rigid.initial.time)

        def at(state: WorldState) -> WorldState:
            period = int(round((state.time - t_start) / self.dt))
            return self._with_deformables(state, [r[min(period, max(r))] for r in records])

        kept = sorted(records[0])
        particle_time = t_start + self.dt * np.array(kept, dtype=float)
        new_trace = replace(
            trace,
            particles={
                s.name: np.array([r[c] for c in kept], dtype=np.float32)
                for s, r in zip(self.deformables, records)
            },
            particle_time=particle_time,
        )
        return replace(
            rigid,
            initial=at(rigid.initial),
            states=[at(s) for s in rigid.states],
            final=at(rigid.final),
            trace=new_trace,
            wall_s=time.perf_counter() - t0,
        )

    # --- pictures ------------------------------------------------------------------------------------------
    def _decorate(self, particles: Sequence[np.ndarray]) -> Any:
        """A ``decorate`` callback drawing each deformable's particles (labels: index in ``deformables``)."""
        objects = {o.name: o for o in self.scene.objects}

        def draw(scene: mujoco.MjvScene) -> None:
            for k, (solver, points) in enumerate(zip(self.deformables, particles)):
                obj = objects[solver.name]
                if (
                    obj.kind == "pd"
                ):  # capsules between consecutive particles (a rope) or along a cloth's grid
                    edges = getattr(solver, "render_edges", None)
                    add_rope(scene, points, max(solver.radius, 0.002), obj.rgba, label=k, edges=edges)
                else:  # a particle cloud: spheres, at most MAX_SPHERES of them (evenly subsampled)
                    stride = max(1, -(-len(points) // MAX_SPHERES))
                    add_particles(scene, points[::stride], solver.radius * stride ** (1 / 3), obj.rgba, k)

        return draw

    def _frame(self, data: MjData, particles: Sequence[np.ndarray]) -> Frame:
        """RGB-D frame of MuJoCo ``data`` and the deformables' ``particles``, with object masks (ids 1.. in
        scene order)."""
        mujoco.mj_forward(self.rigid.model, data)
        ids = {o.name: i + 1 for i, o in enumerate(self.scene.objects)}
        with Renderer(self.rigid.model, camera=self.camera) as renderer:
            view = renderer.render(data, decorate=self._decorate(particles))
        bodies = {self.rigid.objects[n]: ids[n] for n in self.rigid.objects}
        masks = object_masks(view.segmentation, self.rigid.model, bodies)
        assert view.extra is not None
        for k, solver in enumerate(self.deformables):
            masks[view.extra == k] = ids[solver.name]
        return view.to_frame(masks, {i: n for n, i in ids.items()})

    def render(self, camera: CameraSpec | None = None) -> Frame:
        """An RGB-D frame with object masks of the world's own state (its own camera only)."""
        if camera is not None and camera != self.camera:
            raise ValueError("render(camera): this world renders from the camera it was built with")
        return self._frame(self.rigid.data, [s.positions()[0] for s in self.deformables])

    def render_trace(self, trace: Trace, row: int = -1) -> Frame:
        """An RGB-D frame with object masks of a rollout's state at trace row ``row``."""
        data = mujoco.MjData(self.rigid.model)
        data.qpos[:] = trace.qpos[row]
        row = row % len(trace)
        return self._frame(data, [trace.particles_at(s.name, row) for s in self.deformables])

    def write_video(self, trace: Trace, path: str | Path, *, fps: float = 20.0) -> Path:
        """An mp4 of a rollout's trace, ``fps`` frames per simulated second, from the oblique video camera."""
        model = self.rigid.model
        data = mujoco.MjData(model)
        times = np.arange(trace.time[0], trace.time[-1] + 1e-9, 1.0 / fps)
        rows = np.minimum(np.searchsorted(trace.time, times), len(trace) - 1)
        with (
            Renderer(model, "simpact_video", VIDEO_CAMERA) as renderer,
            VideoWriter(path, fps=fps) as video,
        ):
            for row in rows:
                data.qpos[:] = trace.qpos[row]
                mujoco.mj_kinematics(model, data)
                mujoco.mj_camlight(model, data)
                particles = [trace.particles_at(s.name, int(row)) for s in self.deformables]
                video.append(renderer.render_rgb(data, shadows=False, decorate=self._decorate(particles)))
        return Path(path)
