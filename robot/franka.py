"""The Franka FR3 with the Franka hand, driven through franky (``pip install -e '.[robot]'``).

Tool poses are franky's end-effector frame ``O_T_EE``: with the Franka hand's default end-effector
configuration (flange + 0.1034 m along z, turned -45 deg about z) it is the tool-centre point between the
fingertip pads, the same frame as the simulator's ``tcp`` site, so plan positions are sent as they are.
Motions are Cartesian waypoint motions whose relative dynamics factor bounds the tool speed. A reflex or a
lost connection stops the robot; it then refuses motions until :meth:`FrankaRobot.recover` is called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from robot.base import MeasuredPath, RobotBase, RobotError, RobotSpecs
from robot.safety import SafetyLimits
from solvers.mujoco.robot import HOME_QPOS

__all__ = ["FR3_SPECS", "REALTIME_HINT", "FrankaRobot", "connection_error"]

FR3_SPECS = RobotSpecs(
    name="Franka Research 3 + Franka Hand (franky)",
    dof=7,
    control_rate_hz=1000.0,
    max_tcp_speed=1.7,
    max_tcp_rotation_speed=2.5,
    gripper_max_width=0.08,
    tcp_offset=0.1034,
)
"""FR3 facts (Franka datasheet; franky's Cartesian velocity limits)."""

SPEED_MARGIN = 0.9
"""Fraction of the requested speed given to franky's velocity bound."""
PLANNER_RETRIES = 1
"""Times a motion to one target is sent again after franky's motion planner (ruckig) failed on it: seen once
on franky-sim (error -111, ruckig's synchronisation) on a calibration move that passed in every other run."""


REALTIME_HINT = (
    "this computer cannot give libfranka's control loop real-time priority (no real-time kernel, or no "
    "permission to use it): pass --no-realtime (realtime=False) to connect without it, as for franky-sim, "
    "or set up the real-time kernel for a real robot"
)
"""What a connection refused for want of real-time scheduling adds to libfranka's message."""
_REALTIME_MARKERS = (
    "realtime",
    "real-time",
    "setscheduler",
    "scheduler priority",
    "insufficient permissions",
)


def connection_error(host: str, exc: BaseException) -> RobotError:
    """The :class:`RobotError` (kind ``connection``) for a failed connection to the Franka at ``host``: it
    keeps libfranka's text and, when real-time scheduling was what failed (franky's ``RealtimeException``,
    or a message about realtime, ``setscheduler`` or insufficient permissions), says to pass
    ``--no-realtime``."""
    text = str(exc).strip() or type(exc).__name__
    message = f"cannot connect to the Franka at {host}: {text}"
    lowered = text.lower()
    if type(exc).__name__ == "RealtimeException" or any(m in lowered for m in _REALTIME_MARKERS):
        message += f" ({REALTIME_HINT})"
    return RobotError(message, "connection")


def _xyzw(q_wxyz: np.ndarray) -> np.ndarray:
    q = np.asarray(q_wxyz, dtype=float)
    return np.array([q[1], q[2], q[3], q[0]])


def _wxyz(q_xyzw: np.ndarray) -> np.ndarray:
    q = np.asarray(q_xyzw, dtype=float).ravel()
    return np.array([q[3], q[0], q[1], q[2]])


class FrankaRobot(RobotBase):
    """An FR3 at ``host`` (its FCI address, or a franky-sim server's).

    ``realtime=False`` connects without a real-time kernel (franky-sim, or a workstation for testing);
    ``grasp_force`` is the squeeze of a GRASP, N; ``sample_period`` the spacing of tool-position samples
    taken while a motion runs, s.
    """

    specs = FR3_SPECS

    def __init__(
        self,
        host: str,
        limits: SafetyLimits | None = None,
        realtime: bool = True,
        grasp_force: float = 40.0,
        sample_period: float = 0.005,
    ) -> None:
        super().__init__(limits)
        if not host:
            raise ValueError("FrankaRobot needs the robot's host name or IP address")
        self.host = host
        self.realtime = realtime
        self.grasp_force = grasp_force
        self.sample_period = sample_period
        self._robot: Any = None
        self._gripper: Any = None
        self._faulted: str | None = None
        self.planner_retries = 0
        """How many motions were sent again after a motion planner failure (:data:`PLANNER_RETRIES`)."""

    # --- connection --------------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._robot is not None

    def connect(self) -> None:
        if self._robot is not None:
            return
        try:
            import franky
        except ImportError as exc:
            raise RobotError(
                "the Franka driver needs franky: pip install -e '.[robot]' (franky-control)", "connection"
            ) from exc
        config = franky.RealtimeConfig.Enforce if self.realtime else franky.RealtimeConfig.Ignore
        try:
            robot = franky.Robot(self.host, realtime_config=config)
            gripper = franky.Gripper(self.host)
        except Exception as exc:  # franky raises its own exception types, not one base class
            raise connection_error(self.host, exc) from None
        self._robot, self._gripper = robot, gripper

    def disconnect(self) -> None:
        self._robot = None
        self._gripper = None

    def _require(self) -> Any:
        if self._robot is None:
            raise RobotError(f"not connected to the Franka at {self.host}; call connect() first", "state")
        return self._robot

    def _require_ready(self) -> Any:
        robot = self._require()
        if self._faulted:
            raise RobotError(
                f"the robot stopped after an error ({self._faulted}) and moves again only after recover()",
                "state",
            )
        return robot

    def _fail(self, exc: BaseException, what: str) -> RobotError:
        """Stop, remember the fault, and turn a franky exception into a RobotError naming what failed."""
        import franky

        kind = "reflex"
        if type(exc) is RuntimeError:
            kind = "planner"
        elif isinstance(exc, (franky.NetworkException, franky.ProtocolException)):
            kind = "connection"
        elif isinstance(exc, franky.GripperException):
            kind = "gripper"
        message = str(exc).strip() or type(exc).__name__
        self._faulted = f"{type(exc).__name__}: {message}"
        if kind != "connection" and self._robot is not None:
            try:
                self._robot.stop()
            except Exception:  # already stopped by the reflex, or the link is gone
                pass
        return RobotError(f"{what} failed with {type(exc).__name__}: {message}", kind)

    def _errors(self) -> tuple[type[BaseException], ...]:
        import franky

        return (
            franky.ControlException,
            franky.NetworkException,
            franky.CommandException,
            franky.ProtocolException,
            franky.InvalidOperationException,
            franky.RealtimeException,
            franky.GripperException,
            franky.Exception,
            RuntimeError,  # franky's motion planner (ruckig) rejecting a trajectory
        )

    # --- state -------------------------------------------------------------------------------------------
    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        robot = self._require()
        try:
            pose = robot.current_cartesian_state.pose.end_effector_pose
        except self._errors() as exc:
            raise self._fail(exc, "reading the robot state") from None
        return np.asarray(pose.translation, dtype=float).ravel(), _wxyz(pose.quaternion)

    def joint_positions(self) -> np.ndarray:
        """Measured arm joint angles (7,), rad."""
        robot = self._require()
        try:
            return np.asarray(robot.current_joint_positions, dtype=float).ravel()
        except self._errors() as exc:
            raise self._fail(exc, "reading the joint state") from None

    def gripper_width(self) -> float:
        self._require()
        try:
            return float(self._gripper.width)
        except self._errors() as exc:
            raise self._fail(exc, "reading the gripper state") from None

    # --- motion ------------------------------------------------------------------------------------------
    def _dynamics(self, speed: float, direction: np.ndarray | None = None) -> Any:
        """Relative dynamics factor that bounds the tool speed by ``speed`` m/s along ``direction``.

        franky bounds each axis's speed, so a diagonal move may go faster than the bound along it: the
        factor shrinks by the largest axis share of the unit direction, and by ``SPEED_MARGIN`` for the
        overshoot between waypoints passed at speed (measured up to 7 % on franky-sim). Acceleration and
        jerk factors are twice the velocity factor so short moves are not crawling.
        """
        import franky

        if not 0 < speed <= self.limits.max_speed + 1e-9:
            raise ValueError(f"speed {speed} m/s must be in (0, max_speed {self.limits.max_speed}] m/s")
        share = 1.0
        if direction is not None and np.linalg.norm(direction) > 1e-6:
            share = float(np.abs(direction).max() / np.linalg.norm(direction))
        velocity = min(1.0, SPEED_MARGIN * speed * share / self.specs.max_tcp_speed)
        rest = min(1.0, 2.0 * velocity)
        return franky.RelativeDynamicsFactor(velocity, rest, rest)

    def _check_target(self, position: np.ndarray) -> None:
        problem = self.limits.position_problem(position)
        if problem:
            raise RobotError(f"target {np.round(position, 4).tolist()} refused: {problem}", "state")

    def home(self, dynamics_factor: float = 0.2) -> None:
        import franky

        home = HOME_QPOS.tolist()
        self._move_point_to_point(
            lambda: franky.JointMotion(home, relative_dynamics_factor=dynamics_factor), "moving home"
        )

    def move_to(self, position: np.ndarray, quaternion: np.ndarray, speed: float) -> None:
        import franky

        self._require_ready()
        self._check_target(position)
        target = franky.Affine(np.asarray(position, dtype=float), _xyzw(quaternion))

        def motion() -> Any:  # from where the tool is now: a retry starts where the first try stopped
            here, _ = self.tcp_pose()
            dynamics = self._dynamics(speed, np.asarray(position, dtype=float) - here)
            absolute = franky.ReferenceType.Absolute
            return franky.CartesianMotion(target, absolute, relative_dynamics_factor=dynamics)

        where = np.round(np.asarray(position, dtype=float), 4).tolist()
        self._move_point_to_point(motion, f"moving to {where}")

    def _move_point_to_point(self, motion: Callable[[], Any], what: str) -> None:
        """Run ``motion()`` (a franky motion to one absolute target). When franky's motion planner (ruckig)
        fails on it, recover and send it again, up to :data:`PLANNER_RETRIES` times: the target is absolute,
        so the same motion from where the robot stopped ends where the first would have. Any other error, or
        a failure that repeats, stops the robot as :meth:`_fail` does."""
        robot = self._require_ready()
        for attempt in range(PLANNER_RETRIES + 1):
            try:
                robot.move(motion())
                return
            except self._errors() as exc:
                if type(exc) is not RuntimeError or attempt == PLANNER_RETRIES or not self._recovered():
                    raise self._fail(exc, what) from None
                self.planner_retries += 1

    def _recovered(self) -> bool:
        """Whether franky's error recovery succeeded (after a motion planner failure)."""
        try:
            return self._require().recover_from_errors() is not False
        except self._errors():
            return False

    def follow(
        self,
        position: np.ndarray,
        quaternion: np.ndarray,
        velocity: np.ndarray,
        yaw_rate: np.ndarray,
        speed: float,
    ) -> MeasuredPath:
        import franky

        robot = self._require_ready()
        for p in position:
            self._check_target(p)
        waypoints = []
        for p, q, v, w in zip(position, quaternion, velocity, yaw_rate):
            pose = franky.RobotPose(franky.Affine(np.asarray(p, dtype=float), _xyzw(q)))
            # pass-through velocities within the margin the dynamics factor leaves (ruckig rejects more)
            twist = franky.Twist(
                SPEED_MARGIN * np.asarray(v, dtype=float), np.array([0.0, 0.0, SPEED_MARGIN * float(w)])
            )
            state = franky.CartesianState(pose, franky.RobotVelocity(twist))
            waypoints.append(franky.CartesianWaypoint(state, franky.ReferenceType.Absolute))
        here, _ = self.tcp_pose()
        dynamics = self._dynamics(speed, np.asarray(position[-1], dtype=float) - here)
        motion = franky.CartesianWaypointMotion(waypoints, relative_dynamics_factor=dynamics)
        times: list[float] = []
        samples: list[np.ndarray] = []
        t0: float | None = None
        try:
            robot.move(motion, asynchronous=True)
            while True:
                done = robot.join_motion(self.sample_period)
                state = robot.state  # one consistent sample: the controller's clock and the tool pose
                t = float(state.time.to_sec())
                t0 = t if t0 is None else t0
                times.append(t - t0)
                samples.append(np.asarray(state.O_T_EE.translation, dtype=float).ravel())
                if done:
                    break
        except self._errors() as exc:
            raise self._fail(exc, "following the path") from None
        final_position, final_quaternion = self.tcp_pose()
        return MeasuredPath(np.asarray(times), np.asarray(samples), final_position, final_quaternion)

    def gripper_move(self, width: float, speed: float) -> float:
        self._require_ready()
        width = float(np.clip(width, 0.0, self.specs.gripper_max_width))
        try:
            ok = self._gripper.move(width, speed)
        except self._errors() as exc:
            raise self._fail(exc, f"moving the gripper to {width:.3f} m") from None
        if not ok:
            raise self._fail(
                RuntimeError("the gripper reported failure"), f"moving the gripper to {width:.3f} m"
            )
        return self.gripper_width()

    def gripper_grasp(self, width: float, speed: float, force: float) -> float:
        self._require_ready()
        width = float(np.clip(width, 0.0, self.specs.gripper_max_width))
        try:
            # wide tolerances: "grasped" whatever the object's size, as the simulator's squeezing servo does
            self._gripper.grasp(width, speed, force, epsilon_inner=1.0, epsilon_outer=1.0)
        except self._errors() as exc:
            raise self._fail(exc, f"grasping at {width:.3f} m") from None
        return self.gripper_width()

    def recover(self) -> None:
        robot = self._require()
        try:
            ok = robot.recover_from_errors()
        except self._errors() as exc:
            raise self._fail(exc, "error recovery") from None
        if ok is False:
            raise RobotError("the robot's automatic error recovery failed; check it at the robot", "reflex")
        self._faulted = None

    def stop(self) -> None:
        if self._robot is None:
            return
        try:
            self._robot.stop()
        except self._errors():
            pass
