"""The MuJoCo World: the FR3 and rigid objects; exact snapshots; plan rollouts, serial or in parallel.

A rollout expands the plan into waypoints, solves them into joint targets (kinematics only), interpolates
the targets at every physics step, and steps the physics with ``mujoco.rollout`` (C loop, GIL released).
Parallel rollouts run one MjData per thread and are bit-identical to the serial path.

:class:`MujocoWorld` implements :class:`solvers.world.World`. Layers above the solvers use it only through
that protocol, except for auditing (SimuGuard's recorder and screen, the planner's audit, the perf bench,
the sim2real stand-in robot), which needs MuJoCo's own objects: those are offered through ONE accessor,
:meth:`MujocoWorld.mujoco` (or :func:`mujoco_access` for a value typed ``World``), returning a
:class:`MujocoAccess`. Nothing above the solvers reads ``MujocoWorld``'s other attributes.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from simpact.core.actions import Plan, StartPose
from simpact.core.frame import Frame
from simpact.core.rollout import ObjectState, RobotState, Rollout, Trace, WorldState
from simpact.core.rotations import quat_about_z, quat_mul, quat_rotate
from simpact.core.scene import RobotStart, Scene, SceneError
from simpact.core.trajectory import MotionLimits, expand_plan
from solvers.mujoco.ik import DifferentialIK
from solvers.mujoco.render import CameraSpec, Renderer, VideoWriter, add_camera, object_masks
from solvers.mujoco.robot import ARM_JOINTS, HOME_QPOS, ROBOT_PREFIX
from solvers.mujoco.scene_builder import PhysicsOptions, build_spec, part_state

__all__ = ["VIDEO_CAMERA", "MujocoAccess", "MujocoWorld", "Snapshot", "mujoco_access"]

Snapshot = np.ndarray
"""A full integration state (``mjSTATE_INTEGRATION``: physics, controls and the solver's warm start)."""

_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION
_FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS
VIDEO_CAMERA = CameraSpec.look_at(
    (1.0, -0.75, 0.6),
    (0.55, 0.0, 0.08),
    width=400,
    height=300,
    K=np.array([[330.0, 0.0, 199.5], [0.0, 330.0, 149.5], [0.0, 0.0, 1.0]]),
)
"""An oblique, smaller view for rollout videos (rendering cost grows with pixels)."""
SETTLE_S = 0.3
"""Time the scene settles under gravity before the initial snapshot, s."""


class _Worker:
    """Per-thread scratch: an MjData and an IK solver."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self.data = mujoco.MjData(model)
        self.ik = DifferentialIK()


@dataclass(frozen=True)
class MujocoAccess:
    """What a :class:`MujocoWorld` offers to auditing: MuJoCo's own objects and the world's conversions.

    ``model`` and ``data`` are the world's own (treat them as read-only; step your own ``new_data()``).
    Ids and addresses are MuJoCo's: body ids, ``qpos`` / ``qvel`` addresses of each object's free joint
    (objects without one are fixed). Times in s.
    """

    model: mujoco.MjModel
    data: mujoco.MjData
    """The world's own data (its current state)."""
    spec: mujoco.MjSpec
    """The specification the model was compiled from (``spec.to_xml()``: the scene as MJCF)."""
    camera: CameraSpec
    """The rendering camera (``simpact_camera`` in the model)."""
    timestep: float
    """Physics step, s."""
    control_dt: float
    """Control period of a rollout's joint targets, s (``substeps`` physics steps)."""
    substeps: int
    initial_snapshot: Snapshot
    """The settled state rollouts start from by default."""
    objects: Mapping[str, int]
    """Object name -> body id, in scene order."""
    object_qpos: Mapping[str, int]
    """Object name -> ``qpos`` address of its free joint (movable objects only)."""
    object_dof: Mapping[str, int]
    """Object name -> ``qvel`` address of its free joint (movable objects only)."""
    robot_bodies: frozenset[int]
    """Body ids of the robot's links."""
    _world: MujocoWorld = field(repr=False, compare=False)

    def world_state(self, t: float, qpos: np.ndarray, qvel: np.ndarray, sensordata: np.ndarray) -> WorldState:
        """The planner's view of a MuJoCo state (time s, ``qpos``, ``qvel``, ``sensordata`` after a step)."""
        return self._world._world_state(t, qpos, qvel, sensordata)

    def new_data(self, snapshot: Snapshot | None = None) -> mujoco.MjData:
        """A fresh MjData of the model: at MuJoCo's defaults, or in ``snapshot`` exactly (then forwarded)."""
        data = mujoco.MjData(self.model)
        if snapshot is not None:
            self._world.restore(snapshot, data)
        return data

    def snapshot(self, data: mujoco.MjData) -> Snapshot:
        """The exact state of ``data`` (``mjSTATE_INTEGRATION``)."""
        return self._world.snapshot(data)

    def restore(self, snapshot: Snapshot, data: mujoco.MjData) -> None:
        """Put ``data`` into ``snapshot`` exactly (then ``mj_forward``)."""
        self._world.restore(snapshot, data)

    def state(self, data: mujoco.MjData) -> WorldState:
        """The planner's view of ``data`` (after ``mj_forward``)."""
        return self._world.state(data)

    def contacts(self, data: mujoco.MjData) -> list[tuple[str, str]]:
        """Body pairs in contact in ``data`` (names sorted within each pair, pairs sorted)."""
        return self._world.contacts(data)

    def controls(
        self, plan: Plan, snapshot: Snapshot | None = None, tail_s: float = 0.0
    ) -> tuple[Plan, np.ndarray, np.ndarray, float]:
        """What a rollout of ``plan`` from ``snapshot`` (default: the initial one) steps: the plan with its
        start pose, the control at every physics step (N, nu), the last step of each action, and the
        largest IK residual (m). Stepping these controls from the snapshot reproduces the rollout bit for
        bit."""
        return self._world.controls(plan, self.initial_snapshot if snapshot is None else snapshot, tail_s)

    def rollouts(
        self, plans: Sequence[Plan], *, snapshot: Snapshot | None = None, tail_s: float = 0.0, prefix: int = 0
    ) -> list[Rollout]:
        """:meth:`MujocoWorld.rollouts`; with ``prefix``, branches that continue whole plans exactly."""
        return self._world.rollouts(plans, snapshot=snapshot, tail_s=tail_s, prefix=prefix)

    def ik(self) -> DifferentialIK:
        """This thread's inverse-kinematics solver of the arm."""
        return self._world._worker().ik

    def render(self, data: mujoco.MjData) -> Frame:
        """RGB-D frame with object masks of ``data`` from the world's camera."""
        return self._world._render(data)


def mujoco_access(world: object) -> MujocoAccess:
    """:meth:`MujocoWorld.mujoco` for a value typed ``solvers.world.World``: the world's own, or the MuJoCo
    part (``rigid``) of a world that couples MuJoCo one way to other engines (its snapshots are MuJoCo
    states); a :class:`SceneError` when the world is simulated by another engine (MuJoCo auditing cannot
    attach to it)."""
    rigid = getattr(world, "rigid", None)
    if isinstance(rigid, MujocoWorld):
        return rigid.mujoco()
    if not isinstance(world, MujocoWorld):
        raise SceneError(f"this needs a MuJoCo world; {type(world).__name__} is simulated by another engine")
    return world.mujoco()


class MujocoWorld:
    """A Scene in MuJoCo with the robot, ready for rollouts from the initial (settled) snapshot."""

    def __init__(
        self,
        scene: Scene,
        options: PhysicsOptions = PhysicsOptions(),
        limits: MotionLimits = MotionLimits(),
        camera: CameraSpec | None = None,
    ) -> None:
        self.scene = scene
        self.options = options
        self.limits = limits
        self.camera = camera if camera is not None else CameraSpec()
        """The rendering camera, added to the model as ``simpact_camera``."""
        self.spec = build_spec(scene, options)
        add_camera(self.spec, self.camera)
        add_camera(self.spec, VIDEO_CAMERA, name="simpact_video")
        self.model = self.spec.compile()
        self.data = mujoco.MjData(self.model)
        self.substeps = round(limits.control_dt / options.timestep)
        if not np.isclose(self.substeps * options.timestep, limits.control_dt):
            raise ValueError(
                f"control_dt {limits.control_dt} s must be a multiple of the physics step "
                f"{options.timestep} s"
            )
        self.objects: dict[str, int] = {}
        """Object name -> body id."""
        self.object_qpos: dict[str, int] = {}
        self.object_dof: dict[str, int] = {}
        self.part_qpos: dict[str, tuple[int, int]] = {}
        """Articulated part (an object with a joint) -> ``qpos`` and ``qvel`` addresses of its joint."""
        for obj in scene.objects:
            body = self.model.body(obj.name)
            self.objects[obj.name] = body.id
            if body.jntnum[0] > 0 and obj.joint:
                joint = self.model.joint(body.jntadr[0])
                self.part_qpos[obj.name] = (int(joint.qposadr[0]), int(joint.dofadr[0]))
            elif body.jntnum[0] > 0:
                joint = self.model.joint(body.jntadr[0])
                self.object_qpos[obj.name] = int(joint.qposadr[0])
                self.object_dof[obj.name] = int(joint.dofadr[0])
        self.robot_bodies = frozenset(
            i for i in range(self.model.nbody) if self.model.body(i).name.startswith(ROBOT_PREFIX)
        )
        self._arm_qpos = np.array([self.model.joint(j).qposadr[0] for j in ARM_JOINTS])
        self._sensor = {
            name: slice(
                self.model.sensor(name).adr[0],
                self.model.sensor(name).adr[0] + self.model.sensor(name).dim[0],
            )
            for name in ("tcp_pos", "tcp_quat", "finger_joint1", "finger_joint2")
        }
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._place_robot(scene.robot)
        mujoco.mj_step(self.model, self.data, round(SETTLE_S / options.timestep))
        self.initial_snapshot = self.snapshot()

    # --- state -------------------------------------------------------------------------------------------
    def snapshot(self, data: mujoco.MjData | None = None) -> Snapshot:
        """The exact state of ``data`` (default: the world's own), restorable bit for bit."""
        data = self.data if data is None else data
        out = np.empty(mujoco.mj_stateSize(self.model, _INTEGRATION))
        mujoco.mj_getState(self.model, data, out, _INTEGRATION)
        return out

    def restore(self, snapshot: Snapshot, data: mujoco.MjData | None = None) -> None:
        """Put ``data`` (default: the world's own) back into ``snapshot`` exactly."""
        data = self.data if data is None else data
        mujoco.mj_setState(self.model, data, snapshot, _INTEGRATION)
        mujoco.mj_forward(self.model, data)

    def reset(self) -> None:
        self.restore(self.initial_snapshot)

    def state(self, data: mujoco.MjData | None = None) -> WorldState:
        """The planner's view of ``data``: tool pose, gripper opening, every object's pose and velocity."""
        data = self.data if data is None else data
        mujoco.mj_forward(self.model, data)
        return self._world_state(float(data.time), data.qpos, data.qvel, data.sensordata)

    def _world_state(
        self, t: float, qpos: np.ndarray, qvel: np.ndarray, sensordata: np.ndarray
    ) -> WorldState:
        s = self._sensor
        robot = RobotState(
            sensordata[s["tcp_pos"]].copy(),
            sensordata[s["tcp_quat"]].copy(),
            float(sensordata[s["finger_joint1"]][0] + sensordata[s["finger_joint2"]][0]),
        )
        objects = {}
        for obj in self.scene.objects:
            if obj.name in self.object_qpos:
                a, v = self.object_qpos[obj.name], self.object_dof[obj.name]
                quat = qpos[a + 3 : a + 7].copy()
                objects[obj.name] = ObjectState(
                    qpos[a : a + 3].copy(),
                    quat,
                    qvel[v : v + 3].copy(),
                    quat_rotate(quat, qvel[v + 3 : v + 6]),
                )
            elif obj.name in self.part_qpos:
                a, v = self.part_qpos[obj.name]
                objects[obj.name] = part_state(obj, float(qpos[a]), float(qvel[v]))
            else:
                zero = np.zeros(3)
                objects[obj.name] = ObjectState(np.array(obj.position), np.array(obj.quaternion), zero, zero)
        return WorldState(t, robot, objects)

    def contacts(self, data: mujoco.MjData | None = None) -> list[tuple[str, str]]:
        """Body pairs in contact (names sorted within each pair, pairs sorted)."""
        data = self.data if data is None else data
        names = set()
        for i in range(data.ncon):
            b1 = self.model.geom_bodyid[data.contact.geom1[i]]
            b2 = self.model.geom_bodyid[data.contact.geom2[i]]
            pair = sorted((self.model.body(b1).name or "world", self.model.body(b2).name or "world"))
            names.add((pair[0], pair[1]))
        return sorted(names)

    # --- robot -------------------------------------------------------------------------------------------
    def _place_robot(self, start: RobotStart) -> None:
        """Put the arm at ``start`` (joints by IK from home, or from home turned toward it where that
        finds none) with the controllers holding it there; the
        fingers at ``start.gripper_width``, commanded there, or closed when ``start.holding`` an object (the
        servo then squeezes it through the settle and after, as a grasp would)."""
        ik = self._worker().ik
        _, home_quat = ik.fk(HOME_QPOS)
        quat = quat_mul(quat_about_z(start.yaw), home_quat)
        target = np.asarray(start.position, dtype=float)
        q, residual = ik.converge(HOME_QPOS, target, quat, iterations=200)
        if residual > 1e-4:  # stuck from home (a target low and to the side): start turned toward it
            seed = HOME_QPOS.copy()
            seed[0] = np.clip(math.atan2(target[1], target[0]), ik.lower[0], ik.upper[0])
            q, residual = ik.converge(seed, target, quat, iterations=200)
        if residual > 1e-4:
            raise SceneError(
                f"robot start position {start.position} is out of reach (off by {residual:.3f} m)"
            )
        width = min(start.gripper_width, 0.08)
        self.data.qpos[self._arm_qpos] = q
        self.data.qpos[7:9] = width / 2
        self.data.ctrl[:7] = q
        self.data.ctrl[7] = 0.0 if start.holding else width
        mujoco.mj_forward(self.model, self.data)

    def start_pose(self, snapshot: Snapshot | None = None) -> StartPose:
        """The commanded tool pose and gripper width in ``snapshot`` (where a plan from it begins)."""
        data = self._worker().data
        mujoco.mj_setState(
            self.model, data, self.initial_snapshot if snapshot is None else snapshot, _INTEGRATION
        )
        return self._commanded_pose()

    def _commanded_pose(self) -> StartPose:
        """The tool pose the controllers in this thread's scratch data are holding."""
        worker = self._worker()
        pos, quat = worker.ik.fk(worker.data.ctrl[:7])
        return StartPose.from_dict(
            {"position": pos, "quaternion": quat, "gripper_width": float(worker.data.ctrl[7])}
        )

    def render(self, camera: CameraSpec | None = None) -> Frame:
        """An RGB-D frame with object masks of the world's own state, seen from ``camera`` (its own)."""
        if camera is not None and camera != self.camera:
            raise ValueError("render(camera): this world renders from the camera it was built with")
        return self._render(self.data)

    def render_trace(self, trace: Trace, row: int = -1) -> Frame:
        """An RGB-D frame with object masks of a rollout's recorded state ``trace.qpos[row]``."""
        data = mujoco.MjData(self.model)
        data.qpos[:] = trace.qpos[row]
        return self._render(data)

    def _render(self, data: mujoco.MjData) -> Frame:
        """RGB, metric depth and per-object masks (ids 1.. in scene order) of ``data`` (forwarded first)."""
        mujoco.mj_forward(self.model, data)
        ids = {name: i + 1 for i, name in enumerate(self.objects)}
        with Renderer(self.model, camera=self.camera) as renderer:
            view = renderer.render(data)
        masks = object_masks(view.segmentation, self.model, {self.objects[n]: i for n, i in ids.items()})
        return view.to_frame(masks, {i: n for n, i in ids.items()})

    def write_video(self, trace: Trace, path: str | Path, *, fps: float = 20.0) -> Path:
        """An mp4 of a rollout's trace at ``path``, ``fps`` frames per second of simulated time, from the
        oblique :data:`VIDEO_CAMERA`."""
        data = mujoco.MjData(self.model)
        times = np.arange(trace.time[0], trace.time[-1] + 1e-9, 1.0 / fps)
        rows = np.minimum(np.searchsorted(trace.time, times), len(trace) - 1)
        with (
            Renderer(self.model, "simpact_video", VIDEO_CAMERA) as renderer,
            VideoWriter(path, fps=fps) as video,
        ):
            for row in rows:
                data.qpos[:] = trace.qpos[row]
                mujoco.mj_kinematics(self.model, data)
                mujoco.mj_camlight(self.model, data)
                video.append(renderer.render_rgb(data, shadows=False))
        return Path(path)

    # --- auditing ----------------------------------------------------------------------------------------
    def mujoco(self) -> MujocoAccess:
        """MuJoCo's own objects for auditing (see :class:`MujocoAccess`): the one way layers above the
        solvers reach this engine."""
        return MujocoAccess(
            model=self.model,
            data=self.data,
            spec=self.spec,
            camera=self.camera,
            timestep=self.options.timestep,
            control_dt=self.limits.control_dt,
            substeps=self.substeps,
            initial_snapshot=self.initial_snapshot,
            objects=self.objects,
            object_qpos=self.object_qpos,
            object_dof=self.object_dof,
            robot_bodies=self.robot_bodies,
            _world=self,
        )

    # --- rollouts ----------------------------------------------------------------------------------------
    def _worker(self) -> _Worker:
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = _Worker(self.model)
        return worker

    def controls(
        self, plan: Plan, snapshot: Snapshot, tail_s: float = 0.0
    ) -> tuple[Plan, np.ndarray, np.ndarray, float]:
        """The plan with its start pose, the control at every physics step (N, nu), the index of the last step
        of each action, and the largest IK residual (m)."""
        worker = self._worker()
        data = worker.data
        mujoco.mj_setState(self.model, data, snapshot, _INTEGRATION)
        q0, width0 = data.ctrl[:7].copy(), float(data.ctrl[7])
        start = self._commanded_pose()
        waypoints = expand_plan(plan, start, self.limits)
        q, residual = worker.ik.solve_path(
            q0, waypoints.position, waypoints.quaternion, keep=waypoints.action_end
        )
        targets = np.column_stack([q, waypoints.gripper])
        previous = np.vstack([np.r_[q0, width0], targets[:-1]])
        sub = self.substeps
        frac = (np.arange(1, sub + 1) / sub)[None, :, None]
        ctrl = (previous[:, None, :] + frac * (targets - previous)[:, None, :]).reshape(-1, targets.shape[1])
        tail = round(tail_s / self.options.timestep)
        if tail:
            ctrl = np.vstack([ctrl, np.tile(ctrl[-1], (tail, 1))])
        action_end = (waypoints.action_end + 1) * sub - 1
        return plan.with_start_pose(start), ctrl, action_end, float(residual.max(initial=0.0))

    def rollout(
        self,
        plan: Plan,
        *,
        snapshot: Snapshot | None = None,
        tail_s: float = 0.0,
        trace: bool = True,
        prefix: int = 0,
    ) -> Rollout:
        """Roll ``plan`` out from ``snapshot`` (default: the initial one), then hold still for ``tail_s`` s;
        ``rollouts([plan], ...)[0]``. ``trace``: keep every physics step (a :class:`Trace`).

        ``prefix``: the plan's first ``prefix`` actions were already rolled out from the initial snapshot and
        ended in ``snapshot`` (the end of the last of them, before any hold). The whole plan is compiled from
        the initial snapshot and only its controls after them are stepped, so the rollout (of the remaining
        actions) continues bit for bit as the whole plan's would: a branch of a search tree replays exactly.

        The world's own state is left untouched; rollouts are deterministic and thread-safe.
        """
        t0 = time.perf_counter()
        snapshot = self.initial_snapshot if snapshot is None else snapshot
        worker = self._worker()
        data = worker.data
        if prefix:
            plan, ctrl, action_end, residual = self._branch_controls(plan, prefix, snapshot, tail_s)
        else:
            plan, ctrl, action_end, residual = self.controls(plan, snapshot, tail_s)
        mujoco.mj_setState(self.model, data, snapshot, _INTEGRATION)
        mujoco.mj_forward(self.model, data)
        initial = self._world_state(float(data.time), data.qpos, data.qvel, data.sensordata)
        full = np.empty(mujoco.mj_stateSize(self.model, _FULLPHYSICS))
        mujoco.mj_getState(self.model, data, full, _FULLPHYSICS)
        states, sensordata = mj_rollout.rollout(
            self.model, data, full[None], ctrl[None], initial_warmstart=data.qacc_warmstart.copy()[None]
        )
        states, sensordata = states[0], sensordata[0]
        nq, nv = self.model.nq, self.model.nv
        qpos, qvel = states[:, 1 : 1 + nq], states[:, 1 + nq : 1 + nq + nv]
        ends = [self._world_state(float(states[i, 0]), qpos[i], qvel[i], sensordata[i]) for i in action_end]
        final = self._world_state(float(states[-1, 0]), qpos[-1], qvel[-1], sensordata[-1])
        mujoco.mj_forward(self.model, data)
        s = self._sensor
        record = None
        if trace:
            record = Trace(
                time=states[:, 0],
                qpos=qpos,
                qvel=qvel,
                ctrl=ctrl,
                tcp_position=sensordata[:, s["tcp_pos"]],
                tcp_quaternion=sensordata[:, s["tcp_quat"]],
                gripper_width=sensordata[:, s["finger_joint1"]][:, 0]
                + sensordata[:, s["finger_joint2"]][:, 0],
                object_qpos=dict(self.object_qpos),
            )
        return Rollout(
            plan,
            initial,
            ends,
            final,
            record,
            self.contacts(data),
            residual,
            len(ctrl),
            time.perf_counter() - t0,
        )

    def _branch_controls(
        self, plan: Plan, prefix: int, snapshot: Snapshot, tail_s: float
    ) -> tuple[Plan, np.ndarray, np.ndarray, float]:
        """:meth:`controls` of the whole ``plan`` from the initial snapshot, cut after its first ``prefix``
        actions: the remaining actions (from the pose commanded in ``snapshot``), their controls, their
        last steps; a ValueError when ``snapshot`` does not hold the control the prefix ends with."""
        if not 0 < prefix < len(plan.actions):
            raise ValueError(f"prefix {prefix} must leave some of the plan's {len(plan.actions)} actions")
        _, ctrl, action_end, residual = self.controls(plan, self.initial_snapshot, tail_s)
        cut = int(action_end[prefix - 1]) + 1
        data = self._worker().data
        mujoco.mj_setState(self.model, data, snapshot, _INTEGRATION)
        if not np.array_equal(data.ctrl, ctrl[cut - 1]):
            raise ValueError(f"the snapshot was not reached by the plan's first {prefix} actions")
        rest = Plan(plan.actions[prefix:], self._commanded_pose(), plan.description, plan.extra)
        return rest, ctrl[cut:], action_end[prefix:] - cut, residual

    def rollouts(
        self,
        plans: Sequence[Plan],
        *,
        snapshot: Snapshot | None = None,
        tail_s: float = 0.0,
        trace: bool = True,
        nthread: int | None = None,
        prefix: int = 0,
    ) -> list[Rollout]:
        """Roll out every plan from the same snapshot, ``nthread`` threads (default: one per core); bit for
        bit equal to serial calls. ``prefix``: see :meth:`rollout`."""
        nthread = nthread or os.cpu_count() or 1
        kw: dict[str, Any] = {"snapshot": snapshot, "tail_s": tail_s, "trace": trace, "prefix": prefix}
        if nthread == 1 or len(plans) == 1:
            return [self.rollout(p, **kw) for p in plans]
        if self._pool is None or self._pool_size != nthread:
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = ThreadPoolExecutor(nthread, thread_name_prefix="simpact-rollout")
            self._pool_size = nthread
        return list(self._pool.map(lambda p: self.rollout(p, **kw), plans))
