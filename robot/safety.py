"""Safety limits and the checks a plan passes before the robot moves.

A plan is refused before the first motion when any of these fails, and every failure names the action (its
index and type) that causes it:

- its expanded end-effector path (``simpact.core.trajectory.expand_plan``, the same waypoints the simulator
  follows) leaves the workspace box or comes closer than ``min_tcp_clearance`` to the table;
- it moves faster than ``max_speed`` or turns faster than ``max_yaw_rate``, or one action moves further
  than ``max_step``;
- rolled out in simulation (``solvers.mujoco.world.MujocoWorld``) with the scene it was planned for (or the
  bare table), an arm link touches anything but the robot itself, the hand touches the table, or the arm
  cannot reach a waypoint.

Contacts that are the point of manipulation are allowed: the hand and fingers touching scene objects, and
the fingertips touching the table (pushing and sweeping low).

Frames: the robot base frame, z up; the table surface is the plane ``z = table_height``. Units: metres,
seconds, radians.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

from simpact.core.actions import Plan, PlanError, StartPose
from simpact.core.rotations import quat_conj, quat_mul
from simpact.core.scene import RobotStart, Scene
from simpact.core.trajectory import MotionLimits, Waypoints, expand_plan
from solvers.mujoco.robot import ROBOT_PREFIX
from solvers.mujoco.world import mujoco_access
from solvers.world import make_world

__all__ = [
    "HOME_TCP_QUATERNION",
    "SafetyLimits",
    "Validation",
    "Violation",
    "check_in_simulation",
    "check_plan",
    "plan_sha256",
    "start_yaw",
    "validate_plan",
]

HOME_TCP_QUATERNION = (0.0, 0.70710678, 0.70710678, 0.0)
"""Tool orientation (w, x, y, z) in the base frame at the simulator's home pose: gripper pointing down. Plans
keep its roll and pitch and turn only about z."""

FINGERS = ("left_finger", "right_finger")
HAND = ("hand", *FINGERS)
TABLE = "world"
"""Body of the table geom (it is part of the world body)."""


@dataclass(frozen=True)
class SafetyLimits:
    """Where and how fast the tool may move (base frame, SI units). Load a YAML file that sets some fields
    with :meth:`from_yaml`; the others keep these defaults."""

    workspace_min: tuple[float, float, float] = (0.2, -0.4, 0.0)
    """Lower corner of the box the tool-centre point must stay in, m."""
    workspace_max: tuple[float, float, float] = (0.8, 0.4, 0.6)
    """Upper corner of the box the tool-centre point must stay in, m."""
    table_height: float = 0.0
    """z of the table surface in the robot base frame, m."""
    min_tcp_clearance: float = 0.005
    """Closest the tool-centre point (between the fingertips) may come to the table, m."""
    max_speed: float = 0.25
    """Largest tool speed of the plan and of the executed motion, m/s."""
    max_yaw_rate: float = 1.5
    """Largest tool turn rate about z, rad/s."""
    max_step: float = 0.5
    """Largest displacement of one action, m."""
    max_reach_error: float = 0.005
    """Largest distance by which the simulated arm may miss a waypoint (out of reach), m."""

    def __post_init__(self) -> None:
        lo, hi = np.asarray(self.workspace_min, float), np.asarray(self.workspace_max, float)
        if lo.shape != (3,) or hi.shape != (3,) or not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            raise ValueError("safety limits: workspace_min and workspace_max must be 3 finite numbers each")
        if not (lo < hi).all():
            raise ValueError(
                f"safety limits: workspace_min {lo.tolist()} must be below workspace_max {hi.tolist()}"
            )
        for name in ("max_speed", "max_yaw_rate", "max_step", "max_reach_error"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"safety limits: {name} must be positive, got {value}")
        if not (math.isfinite(self.min_tcp_clearance) and self.min_tcp_clearance >= 0):
            raise ValueError(f"safety limits: min_tcp_clearance must be >= 0, got {self.min_tcp_clearance}")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "safety limits") -> SafetyLimits:
        if not isinstance(raw, Mapping):
            raise ValueError(f"{source}: expected a mapping of limit names to values")
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"{source}: unknown fields {sorted(unknown)}; allowed: {sorted(known)}")
        values: dict[str, Any] = {}
        try:
            for key, value in raw.items():
                if key in ("workspace_min", "workspace_max"):
                    values[key] = tuple(float(v) for v in value)
                else:
                    values[key] = float(value)
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{source}: {exc}") from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> SafetyLimits:
        """Limits from a YAML (or JSON) file; errors name the file."""
        path = Path(path)
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise ValueError(f"safety limits file {path}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"safety limits file {path} is not valid YAML: {exc}") from None
        return cls.from_dict(raw, f"safety limits file {path}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["workspace_min"] = list(self.workspace_min)
        out["workspace_max"] = list(self.workspace_max)
        return out

    def position_problem(self, position: np.ndarray) -> str | None:
        """Why the tool position (m, base frame) is not allowed, or None."""
        p = np.asarray(position, dtype=float)
        floor = self.table_height + self.min_tcp_clearance
        if p[2] < floor:
            return (
                f"the tool goes down to z = {p[2]:.3f} m, below the table clearance "
                f"(table at {self.table_height:.3f} m + {self.min_tcp_clearance:.3f} m)"
            )
        lo, hi = np.asarray(self.workspace_min), np.asarray(self.workspace_max)
        for axis, name in enumerate("xyz"):
            if not lo[axis] <= p[axis] <= hi[axis]:
                return (
                    f"the tool reaches {name} = {p[axis]:.3f} m, outside the workspace "
                    f"[{lo[axis]:.3f}, {hi[axis]:.3f}] m"
                )
        return None


@dataclass(frozen=True)
class Violation:
    """One reason to refuse a plan: the action (index and type; None for the start pose or the plan as a
    whole), the check that failed and a message with the numbers."""

    check: str
    """workspace, table, speed, yaw_rate, step, start_pose, reach, collision or hash."""
    message: str
    action: int | None = None
    type: str | None = None

    def __str__(self) -> str:
        where = "start pose" if self.action is None else f"action {self.action} ({self.type})"
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "type": self.type, "check": self.check, "message": str(self)}


@dataclass(frozen=True)
class Validation:
    """A plan with its start pose, its hash, and what the checks found; ``ok`` when nothing was violated."""

    plan: Plan
    plan_sha256: str
    limits: SafetyLimits
    violations: tuple[Violation, ...]
    simulation: dict[str, Any] | None = None
    """What the simulated check saw (scene, contacts, reach), None when it did not run."""
    motion: MotionLimits = field(default_factory=MotionLimits)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def reason(self) -> str:
        """The violations in one line ('' when ok)."""
        return "; ".join(str(v) for v in self.violations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "plan_sha256": self.plan_sha256,
            "violations": [v.to_dict() for v in self.violations],
            "limits": self.limits.to_dict(),
            "simulation": self.simulation,
        }


def plan_sha256(plan: Plan) -> str:
    """SHA-256 of the plan's canonical JSON (sorted keys, no spaces): equal hashes, identical plans."""
    text = json.dumps(plan.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def start_yaw(start: StartPose, tolerance: float = 0.02) -> float:
    """The start orientation as a turn about z from the gripper-down home orientation, rad.

    Raises ``PlanError`` when the orientation is tilted (more than ``tolerance`` rad) from any such turn.
    """
    rel = quat_mul(np.asarray(start.quaternion), quat_conj(np.asarray(HOME_TCP_QUATERNION)))
    rel = rel / np.linalg.norm(rel)
    tilt = 2.0 * math.asin(min(1.0, float(np.hypot(rel[1], rel[2]))))
    if tilt > tolerance:
        raise PlanError(
            f"start_pose: the orientation is tilted {math.degrees(tilt):.1f} deg from gripper-down; plans "
            "keep the gripper pointing down and turn only about z"
        )
    return 2.0 * math.atan2(float(rel[3]), float(rel[0]))


def _action_slices(waypoints: Waypoints) -> list[slice]:
    ends = [int(e) for e in waypoints.action_end]
    starts = [0, *(e + 1 for e in ends[:-1])]
    return [slice(s, e + 1) for s, e in zip(starts, ends)]


def check_plan(plan: Plan, limits: SafetyLimits, motion: MotionLimits = MotionLimits()) -> list[Violation]:
    """The plan's violations of ``limits`` that need no simulation (workspace, table, speed, step), checked
    on its expanded waypoints from its ``start_pose``; an empty list when it passes."""
    start = plan.start_pose
    if start is None:
        return [
            Violation(
                "start_pose", "the plan has no start_pose (use --from-current to start where the robot is)"
            )
        ]
    out: list[Violation] = []
    try:
        start_yaw(start)
    except PlanError as exc:
        out.append(Violation("start_pose", str(exc)))
    problem = limits.position_problem(np.asarray(start.position))
    if problem:
        out.append(Violation("workspace", problem.replace("the tool reaches", "it is at")))
    wp = expand_plan(plan, start, motion)
    previous = np.asarray(start.position, dtype=float)
    previous_yaw = 0.0
    for i, (action, part) in enumerate(zip(plan.actions, _action_slices(wp))):
        pos = np.vstack([previous, wp.position[part]])
        yaw = np.r_[previous_yaw, wp.yaw[part]]
        previous, previous_yaw = pos[-1], yaw[-1]

        def add(check: str, message: str, i: int = i, kind: str = action.type) -> None:
            out.append(Violation(check, message, i, kind))

        step = float(np.linalg.norm(pos[-1] - pos[0]))
        if step > limits.max_step + 1e-9:
            add("step", f"moves {step:.3f} m in one action, more than max_step {limits.max_step:.3f} m")
        speed = float(np.max(np.linalg.norm(np.diff(pos, axis=0), axis=1))) / wp.dt
        if speed > limits.max_speed + 1e-9:
            add("speed", f"moves at {speed:.3f} m/s, faster than max_speed {limits.max_speed:.3f} m/s")
        rate = float(np.max(np.abs(np.diff(yaw)))) / wp.dt
        if rate > limits.max_yaw_rate + 1e-9:
            add(
                "yaw_rate",
                f"turns at {rate:.3f} rad/s, faster than max_yaw_rate {limits.max_yaw_rate:.3f} rad/s",
            )
        # the worst waypoint of the action: lowest for the table, furthest out for the box
        floor = limits.table_height + limits.min_tcp_clearance
        lowest = pos[int(np.argmin(pos[:, 2]))]
        if lowest[2] < floor:
            add("table", str(limits.position_problem(lowest)))
        lo, hi = np.asarray(limits.workspace_min), np.asarray(limits.workspace_max)
        lo = np.array([lo[0], lo[1], max(lo[2], floor)])  # below the floor is the table check's business
        excess = np.maximum(lo - pos, 0.0) + np.maximum(pos - hi, 0.0)
        if excess.max() > 0 and lowest[2] >= floor:
            worst = pos[int(np.argmax(excess.max(axis=1)))]
            add("workspace", str(limits.position_problem(worst)))
    return out


def _robot_body(name: str) -> bool:
    return name.startswith(ROBOT_PREFIX)


def check_in_simulation(
    plan: Plan,
    limits: SafetyLimits,
    scene: Any = None,
    motion: MotionLimits = MotionLimits(),
    stride_s: float = 0.01,
) -> tuple[list[Violation], dict[str, Any]]:
    """Roll ``plan`` out from its start pose in MuJoCo with ``scene`` (a ``Scene``; default: the bare
    table) and report collisions and unreachable waypoints.

    Contacts are inspected every ``stride_s`` seconds of the rollout. A collision is any contact of an arm
    link (not the hand or fingers) with something other than the robot, or of the hand body with the table;
    the fingers touching the table and the hand touching scene objects are intended. The table is taken at
    the simulator's z = 0, so ``limits.table_height`` must describe the real table in the same frame.
    Returns the violations and a summary (contact pairs with the first time and action they occur).
    """
    start = plan.start_pose
    if start is None:
        return [Violation("start_pose", "the plan has no start_pose to simulate from")], {}
    yaw = start_yaw(start)
    scene = scene if scene is not None else Scene(())
    scene = replace(scene, robot=RobotStart(tuple(start.position), yaw, start.gripper_width))  # type: ignore[arg-type]
    world = make_world(scene, limits=motion)
    rollout = world.rollout(plan)
    trace = rollout.trace
    assert trace is not None
    model = mujoco_access(world).model
    data = mujoco.MjData(model)
    stride = max(1, round(stride_s / model.opt.timestep))
    ends = np.array([s.time for s in rollout.states])
    names = [model.body(i).name or TABLE for i in range(model.nbody)]
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    out: list[Violation] = []
    for k in range(0, len(trace.time), stride):
        data.qpos[:] = trace.qpos[k]
        mujoco.mj_fwdPosition(model, data)
        for c in range(data.ncon):
            a = names[model.geom_bodyid[data.contact.geom1[c]]]
            b = names[model.geom_bodyid[data.contact.geom2[c]]]
            ra, rb = _robot_body(a), _robot_body(b)
            if ra == rb:
                continue  # robot-robot (self) or object-object/table: not the arm's business here
            link, other = (a, b) if ra else (b, a)
            pair = (link, other)
            if pair in seen:
                seen[pair]["deepest_m"] = max(seen[pair]["deepest_m"], -float(data.contact.dist[c]))
                continue
            t = float(trace.time[k])
            action = min(int(np.searchsorted(ends, t - 1e-9)), len(plan.actions) - 1)
            if link in FINGERS:
                intended = True
            elif link in HAND:
                intended = other != TABLE
            else:
                intended = False
            seen[pair] = {
                "link": link,
                "other": "table" if other == TABLE else other,
                "first_time_s": round(t, 3),
                "action": action,
                "intended": intended,
                "deepest_m": -float(data.contact.dist[c]),
            }
            if not intended:
                what = "the table" if other == TABLE else f"'{other}'"
                out.append(
                    Violation(
                        "collision",
                        f"in simulation the robot's {link} hits {what} at t = {t:.2f} s",
                        action,
                        plan.actions[action].type,
                    )
                )
    if rollout.ik_residual_max > limits.max_reach_error:
        out.append(
            Violation(
                "reach",
                f"in simulation the arm falls {rollout.ik_residual_max:.3f} m short of a waypoint "
                f"(more than {limits.max_reach_error:.3f} m): out of reach",
            )
        )
    summary = {
        "scene_objects": [o.name for o in scene.objects],
        "contacts": [{**v, "deepest_m": round(v["deepest_m"], 5)} for v in seen.values()],
        "ik_residual_max_m": round(float(rollout.ik_residual_max), 6),
        "sim_time_s": round(float(trace.time[-1]), 3),
    }
    return out, summary


def validate_plan(
    plan: Plan,
    limits: SafetyLimits = SafetyLimits(),
    scene: Any = None,
    simulate: bool = True,
    motion: MotionLimits = MotionLimits(),
) -> Validation:
    """All checks on ``plan`` (which must carry its ``start_pose``): the static limits, then, when they
    pass and ``simulate`` is set, the simulated collision and reach check with ``scene``."""
    violations = check_plan(plan, limits, motion)
    simulation = None
    if simulate and not violations:
        found, simulation = check_in_simulation(plan, limits, scene, motion)
        violations.extend(found)
    return Validation(plan, plan_sha256(plan), limits, tuple(violations), simulation, motion)
