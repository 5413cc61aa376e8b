"""A simulated camera and robot that share one stand-in "real world", so the closed loop
(:mod:`robot.loop`) runs end to end without hardware: ``simpact robot run TASK --sim``.

The world is a :class:`robot.sim2real.PerturbedWorld` of a task's scene: masses, frictions, object poses,
servo gains, physics step and solver iterations differ from what the planner will build from the camera
frame, the way a real set-up does. The pair is a documented test mode, never a default:

* :class:`SimCamera` renders the world's current state (RGB, metric depth, the camera pose ``T_base_cam``)
  exactly like ``simpact render``; the loop reads it like any camera, through real2sim.
* :class:`SimRobot` is a :class:`robot.base.RobotBase` that moves the world's arm: every Cartesian motion is
  solved into joint targets every control period (10 ms) by differential IK and tracked by the world's own
  (perturbed) joint servos while the physics steps, so objects the hand meets really move and the next
  frame shows the outcome. Time is simulated (a plan takes no wall-clock time beyond the computation).

How motions are interpolated: ``move_to`` follows a straight line with a minimum-jerk profile whose peak
speed is ``speed``; ``follow`` passes through the waypoints on cubic Hermite segments that meet each
waypoint with the velocity and yaw rate given for it (segment durations from the mean of the end speeds);
after every motion the arm holds still for ``settle_s``. The gripper is a position servo: ``gripper_grasp``
closes towards ``width`` and squeezes with the servo's stiffness, not with ``force``.

:class:`SimWorld` holds the pair and, for evaluation only, the world's own view of what happened
(:meth:`SimWorld.ground_truth`): the loop records it next to its verdict but never decides with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import mujoco
import numpy as np

from robot.base import MeasuredPath, RobotBase, RobotError
from robot.franka import FR3_SPECS
from robot.safety import SafetyLimits
from robot.sim2real import Perturbation, PerturbedWorld, RealityGap, draw_perturbation, stand_in_world
from simpact.core.frame import Frame
from simpact.core.rollout import Rollout, Trace, WorldState
from simpact.core.rotations import quat_about_z, quat_conj, quat_mul
from simpact.core.trajectory import min_jerk
from solvers.composite import CompositeWorld
from solvers.mujoco.robot import HOME_QPOS

__all__ = ["SIM_SPECS", "SimCamera", "SimRobot", "SimWorld", "StandIn"]

StandIn = PerturbedWorld | CompositeWorld
"""The stand-in world: a perturbed MuJoCo world, with its deformables when the scene has some."""

SIM_SPECS = replace(
    FR3_SPECS, name="simulated FR3 + Franka Hand (perturbed MuJoCo stand-in)", control_rate_hz=100.0
)
"""The simulated arm: the FR3's limits, joint targets every 10 ms (the simulator's control period)."""


def _slerp(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Quaternions (N, 4) from ``a`` to ``b`` at fractions ``s`` (N,)."""
    if float(np.dot(a, b)) < 0.0:
        b = -b
    dot = min(1.0, float(np.dot(a, b)))
    angle = math.acos(dot)
    if angle < 1e-9:
        return np.tile(a, (len(s), 1))
    out = (np.sin((1.0 - s) * angle)[:, None] * a + np.sin(s * angle)[:, None] * b) / math.sin(angle)
    return np.asarray(out / np.linalg.norm(out, axis=1, keepdims=True))


def _yaw_between(a: np.ndarray, b: np.ndarray) -> float:
    """Turn about z from orientation ``a`` to ``b`` (rad, in (-pi, pi])."""
    rel = quat_mul(np.asarray(b), quat_conj(np.asarray(a)))
    if rel[0] < 0:
        rel = -rel
    return 2.0 * math.atan2(float(rel[3]), float(rel[0]))


class SimRobot(RobotBase):
    """The arm of a :class:`~robot.sim2real.PerturbedWorld`, driven through the :class:`RobotBase` interface
    (see the module docstring). Not thread-safe; one robot per world."""

    specs = SIM_SPECS

    def __init__(self, world: StandIn, limits: SafetyLimits | None = None, settle_s: float = 0.2) -> None:
        super().__init__(limits)
        self.world = world
        self.settle_s = float(settle_s)
        """Hold after every motion, s."""
        self._connected = False
        self._mj = world.mujoco()
        """The world's MuJoCo objects (its own model and data are what this robot steps)."""
        self._ik = self._mj.ik()
        self._dt = self._mj.control_dt
        self._substeps = self._mj.substeps
        self._deformables = world if isinstance(world, CompositeWorld) else None
        """Stepped one control period after each of MuJoCo's, when the scene has deformables."""
        self.log_time: list[float] = []
        """Simulated time of every recorded control period, s (see :meth:`SimWorld.ground_truth`)."""
        self.log_qpos: list[np.ndarray] = []
        self._record()

    # --- connection ---------------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        self._connected = True

    def disconnect(self) -> None:
        self._connected = False

    def _require(self) -> None:
        if not self._connected:
            raise RobotError("the simulated robot is not connected (call connect())", "connection")

    # --- state --------------------------------------------------------------------------------------------
    def _sensor(self, name: str) -> np.ndarray:
        s = self._mj.model.sensor(name)
        return np.asarray(self._mj.data.sensordata[s.adr[0] : s.adr[0] + s.dim[0]]).copy()

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        mujoco.mj_forward(self._mj.model, self._mj.data)
        quat = self._sensor("tcp_quat")
        return self._sensor("tcp_pos"), quat / np.linalg.norm(quat)

    def gripper_width(self) -> float:
        mujoco.mj_forward(self._mj.model, self._mj.data)
        return float(self._sensor("finger_joint1")[0] + self._sensor("finger_joint2")[0])

    def _commanded(self) -> tuple[np.ndarray, np.ndarray]:
        """The tool pose the joint servos are holding (forward kinematics of the joint targets)."""
        pos, quat = self._ik.fk(self._mj.data.ctrl[:7].copy())
        return np.asarray(pos), np.asarray(quat)

    # --- stepping -----------------------------------------------------------------------------------------
    def _record(self) -> None:
        self.log_time.append(float(self._mj.data.time))
        self.log_qpos.append(self._mj.data.qpos.copy())

    def _track(self, q: np.ndarray, width: np.ndarray) -> np.ndarray:
        """Track joint targets ``q`` (N, 7) rad and gripper targets ``width`` (N,) m, one per control period,
        interpolated at every physics step; then hold ``settle_s``. Returns the tool position (N, 3) m at
        the end of each period."""
        model, data = self._mj.model, self._mj.data
        previous = data.ctrl[:8].copy()
        targets = np.column_stack([q, width])
        positions = np.empty((len(targets), 3))
        for k, target in enumerate(targets):
            before = data.qpos.copy()
            for j in range(1, self._substeps + 1):
                data.ctrl[:8] = previous + (target - previous) * (j / self._substeps)
                mujoco.mj_step(model, data)
            previous = target
            self._advance(before)
            mujoco.mj_forward(model, data)
            positions[k] = self._sensor("tcp_pos")
            self._record()
        self.hold(self.settle_s)
        return positions

    def hold(self, seconds: float) -> None:
        """Keep the current targets for ``seconds`` of simulated time (objects keep moving and settle)."""
        model, data = self._mj.model, self._mj.data
        for _ in range(round(seconds / self._dt)):
            before = data.qpos.copy()
            mujoco.mj_step(model, data, self._substeps)
            self._advance(before)
            self._record()

    def _advance(self, before: np.ndarray) -> None:
        """The deformables' step over the control period MuJoCo just stepped from ``before`` (qpos)."""
        if self._deformables is not None:
            self._deformables.advance(before, self._mj.data.qpos.copy())

    def _joint_path(self, positions: np.ndarray, quaternions: np.ndarray, keep: np.ndarray) -> np.ndarray:
        q0 = self._mj.data.ctrl[:7].copy()
        q, residual = self._ik.solve_path(q0, positions, quaternions, keep=keep)
        worst = float(residual.max(initial=0.0))
        if worst > self.limits.max_reach_error:
            raise RobotError(
                f"the simulated arm cannot reach the path (IK misses by {worst:.4f} m)", "reflex"
            )
        return np.asarray(q)

    # --- motion -------------------------------------------------------------------------------------------
    def home(self, dynamics_factor: float = 0.2) -> None:
        self._require()
        if not 0 < dynamics_factor <= 1:
            raise ValueError(f"dynamics_factor must be in (0, 1], got {dynamics_factor}")
        q0 = self._mj.data.ctrl[:7].copy()
        span = float(np.abs(HOME_QPOS - q0).max())
        n = max(1, math.ceil(max(span / (0.5 * dynamics_factor), 0.1) / self._dt))
        s = min_jerk(n)[:, None]
        width = np.full(n, self._mj.data.ctrl[7])
        self._track(q0 + s * (HOME_QPOS - q0), width)

    def move_to(self, position: np.ndarray, quaternion: np.ndarray, speed: float) -> None:
        self._require()
        self._check_speed(speed)
        p0, q0 = self._commanded()
        p1 = np.asarray(position, dtype=float)
        q1 = np.asarray(quaternion, dtype=float) / np.linalg.norm(quaternion)
        angle = 2.0 * math.acos(min(1.0, abs(float(np.dot(q0, q1)))))
        # minimum jerk peaks at 1.875 times the mean speed
        duration = max(
            1.875 * float(np.linalg.norm(p1 - p0)) / speed,
            1.875 * angle / self.specs.max_tcp_rotation_speed,
            self._dt,
        )
        n = math.ceil(duration / self._dt)
        s = min_jerk(n)
        path = p0 + s[:, None] * (p1 - p0)
        quats = _slerp(q0, q1, s)
        self._track(self._joint_path(path, quats, np.array([n - 1])), np.full(n, self._mj.data.ctrl[7]))

    def follow(
        self,
        position: np.ndarray,
        quaternion: np.ndarray,
        velocity: np.ndarray,
        yaw_rate: np.ndarray,
        speed: float,
    ) -> MeasuredPath:
        self._require()
        self._check_speed(speed)
        p_prev, q_prev = self._commanded()
        v_prev, r_prev = np.zeros(3), 0.0
        paths, quats, ends = [], [], []
        count = 0
        for p, q, v, r in zip(
            np.asarray(position, float), np.asarray(quaternion, float), np.asarray(velocity, float), yaw_rate
        ):
            q = q / np.linalg.norm(q)
            r = float(r)
            dp = p - p_prev
            dyaw = _yaw_between(q_prev, q)
            mean_speed = 0.5 * (float(np.linalg.norm(v_prev)) + float(np.linalg.norm(v)))
            mean_rate = 0.5 * (abs(r_prev) + abs(r))
            distance = float(np.linalg.norm(dp))
            if distance > 1e-6 and mean_speed > 1e-6:
                duration = distance / mean_speed
            elif abs(dyaw) > 1e-6 and mean_rate > 1e-6:
                duration = abs(dyaw) / mean_rate
            else:  # from or to rest on both ends: a minimum-jerk move at ``speed``
                duration = 1.875 * max(distance / speed, abs(dyaw) / self.specs.max_tcp_rotation_speed)
            duration = max(duration, distance / speed, self._dt)
            n = math.ceil(duration / self._dt)
            s = np.arange(1, n + 1) / n
            h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
            h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
            T = n * self._dt
            paths.append(
                h00[:, None] * p_prev + h10[:, None] * T * v_prev + h01[:, None] * p + h11[:, None] * T * v
            )
            yaw = h10 * T * r_prev + h01 * dyaw + h11 * T * r
            quats.append(np.stack([quat_mul(quat_about_z(a), q_prev) for a in yaw]))
            count += n
            ends.append(count - 1)
            p_prev, q_prev, v_prev, r_prev = p, q, v, r
        if not paths:
            pos, quat = self.tcp_pose()
            return MeasuredPath(np.zeros(1), pos[None], pos, quat)
        path, quat_path = np.vstack(paths), np.vstack(quats)
        q = self._joint_path(path, quat_path, np.asarray(ends))
        measured = self._track(q, np.full(len(q), self._mj.data.ctrl[7]))
        times = self._dt * np.arange(1, len(measured) + 1)
        final_pos, final_quat = self.tcp_pose()
        return MeasuredPath(times, measured, final_pos, final_quat)

    def _check_speed(self, speed: float) -> None:
        if not 0 < speed <= min(self.limits.max_speed, self.specs.max_tcp_speed):
            raise RobotError(f"speed {speed} m/s is outside (0, {self.limits.max_speed}] m/s", "state")

    def _gripper(self, width: float, speed: float) -> float:
        self._require()
        if not speed > 0:
            raise RobotError(f"gripper speed must be positive, got {speed} m/s", "gripper")
        target = float(np.clip(width, 0.0, self.specs.gripper_max_width))
        start = float(self._mj.data.ctrl[7])
        n = max(1, math.ceil(abs(target - start) / speed / self._dt))
        widths = start + (target - start) * np.arange(1, n + 1) / n
        self._track(np.tile(self._mj.data.ctrl[:7], (n, 1)), widths)
        return self.gripper_width()

    def gripper_move(self, width: float, speed: float) -> float:
        return self._gripper(width, speed)

    def gripper_grasp(self, width: float, speed: float, force: float) -> float:
        return self._gripper(width, speed)

    def recover(self) -> None:
        """Nothing to clear: the simulated arm raises errors but is never left in a reflex."""

    def stop(self) -> None:
        """Motions run to completion inside each call; there is nothing in flight to stop."""


class SimCamera:
    """Renders the world's current state from its camera (a :class:`robot.camera.Camera`)."""

    def __init__(self, world: StandIn) -> None:
        self.world = world
        self.captures = 0

    def capture(self) -> Frame:
        frame = self.world.render()
        self.captures += 1
        frame.metadata.update(
            {
                "camera": {"model": "simulated", "world": "perturbed MuJoCo stand-in"},
                "sim_time_s": round(float(self.world.mujoco().data.time), 4),
            }
        )
        return frame

    def close(self) -> None:
        pass


@dataclass
class SimWorld:
    """A stand-in real world for ``task`` seed ``seed`` (see :mod:`robot.sim2real`) with its camera and
    robot. Build with :meth:`create`."""

    task: Any
    seed: int
    world: StandIn
    perturbation: Perturbation
    camera: SimCamera
    robot: SimRobot
    _mark: int = field(default=0)

    @classmethod
    def create(
        cls,
        task: Any,
        seed: int = 0,
        gap: RealityGap | None = None,
        limits: SafetyLimits | None = None,
    ) -> SimWorld:
        """The stand-in world of ``task`` seed ``seed`` with ``gap`` (default ``RealityGap()``)."""
        gap = gap if gap is not None else RealityGap()
        scene = task.scene(seed)
        perturbation = draw_perturbation(scene, gap, task.name, seed)
        world = stand_in_world(scene, perturbation)
        return cls(task, seed, world, perturbation, SimCamera(world), SimRobot(world, limits))

    def describe(self) -> dict[str, Any]:
        return {
            "task": self.task.name,
            "seed": self.seed,
            "perturbation": self.perturbation.to_dict(),
            "robot": self.robot.specs.to_dict(),
        }

    def mark(self) -> None:
        """Start a new episode for :meth:`ground_truth` (at the current simulated time)."""
        self._mark = len(self.robot.log_time) - 1

    def ground_truth(self, plan: Any) -> dict[str, Any]:
        """The task's own check on what the world did since :meth:`mark` (its full trace, exact states):
        for evaluating the loop's judge only."""
        world, log = self.world, self.robot
        mj = world.mujoco()
        first = self._mark
        qpos = np.asarray(log.log_qpos[first:])
        times = np.asarray(log.log_time[first:])
        zeros = np.zeros((len(times), 0))
        trace = Trace(
            time=times,
            qpos=qpos,
            qvel=zeros,
            ctrl=zeros,
            tcp_position=np.zeros((len(times), 3)),
            tcp_quaternion=np.zeros((len(times), 4)),
            gripper_width=np.zeros(len(times)),
            object_qpos=dict(mj.object_qpos),
        )
        data = mj.new_data()
        data.qpos[:] = qpos[0]
        initial: WorldState = mj.state(data)
        final = world.state()
        rollout = Rollout(plan, initial, [], final, trace, mj.contacts(mj.data), 0.0, len(times), 0.0)
        evaluation = self.task.evaluate(rollout, world.scene, self.seed)
        return {
            "success": evaluation.success,
            "score": round(evaluation.score, 6),
            "details": evaluation.details,
            "final_objects": {
                name: {"position": s["position"], "quaternion": s["quaternion"]}
                for name, s in final.to_dict()["objects"].items()
            },
        }
