"""Execute a validated plan on a robot and measure how closely it followed.

The plan is expanded exactly as the simulator expands it (``simpact.core.trajectory.expand_plan``, 100 Hz,
minimum-jerk) from its start pose, in the robot's base frame. Each motion action becomes one Cartesian
waypoint motion through a subsample of its expanded waypoints (one every ``waypoint_spacing`` metres of path
or ``yaw_spacing`` radians of turn, and always its last one), passed with the plan's own velocity there
(scaled to ``speed``), stopping at the action's end; GRASP and RELEASE become gripper commands.

What ``waypoint_errors_m`` measures, one value per subsampled waypoint: the distance from the commanded tool
position to the nearest tool position measured while the robot moved (sampled every few milliseconds); for
the last waypoint of each action it is the distance once the robot has stopped there. Before the first
motion the plan must have passed validation and still hash to the validated value.

One module (about 520 lines) for running a plan and a plan file (``simpact robot execute``): both share the
refusals and the result record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from real2sim.pipeline import Real2SimError, load_scene
from robot.base import ExecutionError, MeasuredPath, PlanRefused, RobotBase, RobotError
from robot.safety import SafetyLimits, Validation, plan_sha256, validate_plan
from simpact.core.actions import PlanError, StartPose, load_plan
from simpact.core.rotations import quat_conj, quat_mul
from simpact.core.scene import Scene, SceneError
from simpact.core.trajectory import Waypoints, expand_plan
from simpact.tasks import TaskError, load_task

__all__ = [
    "ExecutionOptions",
    "TABLE_ONLY_REFUSAL",
    "ExecutionRequest",
    "execute_plan",
    "load_collision_scene",
    "prepare_execution",
    "run_execution",
    "subsample",
]

GRIPPER_ACTIONS = ("GRASP", "RELEASE")


@dataclass(frozen=True)
class ExecutionOptions:
    """How a validated plan is run (SI units)."""

    speed: float | None = None
    """Peak tool speed, m/s; default the plan's own (its expansion's ``max_speed``). The path is the same at
    any speed; only its timing scales."""
    waypoint_spacing: float = 0.02
    """Path length between the waypoints sent to the robot, m."""
    yaw_spacing: float = 0.1
    """Turn between the waypoints sent to the robot, rad."""
    gripper_speed: float = 0.05
    """Finger speed, m/s."""
    grasp_force: float = 40.0
    """Squeeze of a GRASP that closes on something, N."""
    from_current: bool = False
    """Start where the robot is instead of moving to the plan's start pose first (the plan's start pose must
    then be the robot's current pose, within ``start_tolerance``)."""
    start_tolerance: float = 0.005
    """Largest distance between the robot and the plan's start with ``from_current``, m."""
    resume_from: int = 0
    """First action to execute (after a stop and a recovery); the robot first moves to where the previous
    action ended."""


def subsample(waypoints: Waypoints, part: slice, spacing: float, yaw_spacing: float) -> np.ndarray:
    """Indices into ``waypoints`` within ``part``: one wherever the path since the previous pick exceeds
    ``spacing`` m or the turn ``yaw_spacing`` rad, and always the last index of ``part``."""
    idx = np.arange(part.start, part.stop)
    if len(idx) == 0:
        return idx
    picks: list[int] = []
    last_pos = waypoints.position[idx[0] - 1] if idx[0] > 0 else waypoints.position[idx[0]]
    last_yaw = waypoints.yaw[idx[0] - 1] if idx[0] > 0 else waypoints.yaw[idx[0]]
    for i in idx[:-1]:
        if (
            np.linalg.norm(waypoints.position[i] - last_pos) >= spacing
            or abs(waypoints.yaw[i] - last_yaw) >= yaw_spacing
        ):
            picks.append(int(i))
            last_pos, last_yaw = waypoints.position[i], waypoints.yaw[i]
    picks.append(int(idx[-1]))
    return np.asarray(picks)


def _angle(q1: np.ndarray, q2: np.ndarray) -> float:
    rel = quat_mul(np.asarray(q1), quat_conj(np.asarray(q2)))
    return float(2.0 * math.acos(min(1.0, abs(float(rel[0])))))


def _peak_speed(path: MeasuredPath, window: float = 0.02) -> float:
    """Largest tool speed over windows of at least ``window`` s (m/s): the controller's millisecond clock
    makes sample-to-sample speeds jitter."""
    t, p = path.time, path.position
    picks = [0]
    for i in range(1, len(t)):
        if t[i] - t[picks[-1]] >= window:
            picks.append(i)
    if len(picks) < 2:
        return 0.0
    idx = np.asarray(picks)
    return float((np.linalg.norm(np.diff(p[idx], axis=0), axis=1) / np.diff(t[idx])).max())


def _round(values: Any, digits: int = 6) -> Any:
    return np.round(np.asarray(values, dtype=float), digits).tolist()


def _checked_speed(robot: RobotBase, validation: Validation, options: ExecutionOptions) -> tuple[str, float]:
    """The validated plan's hash and the peak tool speed to run it at, m/s. Raises ``PlanRefused`` when the
    plan may not run: it failed or changed since validation, the robot's limits differ, or the speed or
    ``resume_from`` is outside them."""
    if not validation.ok:
        raise PlanRefused(f"the plan failed validation: {validation.reason}", validation.violations)
    plan = validation.plan
    digest = plan_sha256(plan)
    if digest != validation.plan_sha256:
        raise PlanRefused(
            f"the plan to execute hashes to {digest[:12]}..., not the validated "
            f"{validation.plan_sha256[:12]}...: it changed after validation"
        )
    limits = robot.limits
    if limits != validation.limits:
        raise PlanRefused("the robot's safety limits differ from those the plan was validated against")
    motion = validation.motion
    speed = motion.max_speed if options.speed is None else float(options.speed)
    if not 0 < speed <= limits.max_speed:
        raise PlanRefused(f"speed {speed} m/s is outside (0, max_speed {limits.max_speed}] m/s")
    assert plan.start_pose is not None  # validation requires it
    n_actions = len(plan.actions)
    if not 0 <= options.resume_from < n_actions:
        raise PlanRefused(
            f"resume_from {options.resume_from} is not an action of this {n_actions}-action plan"
        )
    return digest, speed


@dataclass(frozen=True)
class _Expanded:
    """The plan expanded as the simulator expands it: its waypoints, their velocity (m/s) and yaw rate
    (rad/s) scaled to the run's speed, and each action's last index and slice of the waypoints."""

    wp: Waypoints
    velocity: np.ndarray
    yaw_rate: np.ndarray
    ends: list[int]
    slices: list[slice]


def _expand(validation: Validation, start: StartPose, speed: float) -> _Expanded:
    motion = validation.motion
    wp = expand_plan(validation.plan, start, motion)
    scale = speed / motion.max_speed
    velocity = np.gradient(wp.position, wp.dt, axis=0) * scale
    yaw_rate = np.gradient(wp.yaw, wp.dt) * scale
    ends = [int(e) for e in wp.action_end]
    slices = [slice(s, e + 1) for s, e in zip([0, *(e + 1 for e in ends[:-1])], ends)]
    return _Expanded(wp, velocity, yaw_rate, ends, slices)


def _new_result(digest: str, speed: float, options: ExecutionOptions, n_actions: int) -> dict[str, Any]:
    """The result before anything moved (see the module docstring)."""
    return {
        "executed": False,
        "plan_sha256": digest,
        "speed_m_s": speed,
        "waypoint_spacing_m": options.waypoint_spacing,
        "waypoint_definition": (
            "one waypoint every waypoint_spacing_m of the expanded path (and every action's end); error = "
            "distance from the commanded tool position to the nearest measured one while moving, or to the "
            "tool at rest for an action's last waypoint"
        ),
        "resume_from": options.resume_from,
        "start": None,
        "waypoint_errors_m": [],
        "waypoints": [],
        "action_end_errors_m": [None] * n_actions,
        "action_end_rotation_errors_rad": [None] * n_actions,
        "gripper_widths": [],
        "max_measured_speed_m_s": 0.0,
    }


def _go_to_start(
    robot: RobotBase,
    first: tuple[np.ndarray, np.ndarray, float],
    options: ExecutionOptions,
    speed: float,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Bring the robot to the first pose (position m, quaternion, gripper width m), or with ``from_current``
    check that it is there; returns the result's ``start`` record."""
    first_pos, first_quat, first_width = first
    now_pos, _ = robot.tcp_pose()
    if options.from_current:
        gap = float(np.linalg.norm(now_pos - first_pos))
        if gap > options.start_tolerance:
            raise PlanRefused(
                f"the robot is {gap:.4f} m from where the plan starts (more than "
                f"{options.start_tolerance} m): validate the plan from the current pose again"
            )
    else:
        say(f"moving to the start pose {np.round(first_pos, 3).tolist()}")
        robot.move_to(first_pos, first_quat, speed)
    if abs(robot.gripper_width() - first_width) > 0.002:
        robot.gripper_move(first_width, options.gripper_speed)
    reached_pos, reached_quat = robot.tcp_pose()
    return {
        "commanded": _round(first_pos),
        "reached": _round(reached_pos),
        "error_m": round(float(np.linalg.norm(reached_pos - first_pos)), 6),
        "rotation_error_rad": round(_angle(reached_quat, first_quat), 6),
        "gripper_width_m": round(robot.gripper_width(), 6),
    }


def _run_gripper(
    robot: RobotBase, k: int, action_type: str, target: float, options: ExecutionOptions
) -> dict[str, Any]:
    """Run the GRASP or RELEASE action ``k`` to the finger width ``target`` (m); returns its record."""
    before = robot.gripper_width()
    if action_type == "GRASP" and target < before - 0.001:
        measured = robot.gripper_grasp(target, options.gripper_speed, options.grasp_force)
    else:
        measured = robot.gripper_move(target, options.gripper_speed)
    return {
        "action": k,
        "type": action_type,
        "commanded_m": round(target, 6),
        "measured_m": round(measured, 6),
    }


def _run_action(
    robot: RobotBase,
    k: int,
    action_type: str,
    path: _Expanded,
    options: ExecutionOptions,
    speed: float,
    result: dict[str, Any],
) -> None:
    """Run action ``k`` (a gripper command, a hold, or a waypoint motion) and add what was measured to
    ``result``: each subsampled waypoint's error and the action's end errors."""
    wp, part, end = path.wp, path.slices[k], path.ends[k]
    if action_type in GRIPPER_ACTIONS:
        result["gripper_widths"].append(_run_gripper(robot, k, action_type, float(wp.gripper[end]), options))
    picks = subsample(wp, part, options.waypoint_spacing, options.yaw_spacing)
    moving = (
        np.linalg.norm(wp.position[end] - wp.position[part.start - 1 if part.start else 0]) > 1e-6
        or abs(wp.yaw[end] - wp.yaw[part.start - 1 if part.start else 0]) > 1e-6
    )
    if action_type in GRIPPER_ACTIONS or not moving:
        picks = np.asarray([end])
        final_pos, final_quat = robot.tcp_pose()
        samples = final_pos[None]
    else:
        vel = path.velocity[picks].copy()
        rate = path.yaw_rate[picks].copy()
        vel[-1] = 0.0
        rate[-1] = 0.0
        measured_path = robot.follow(wp.position[picks], wp.quaternion[picks], vel, rate, speed)
        final_pos, final_quat = measured_path.final_position, measured_path.final_quaternion
        samples = np.vstack([measured_path.position, final_pos[None]])
        result["max_measured_speed_m_s"] = max(
            result["max_measured_speed_m_s"], round(_peak_speed(measured_path), 4)
        )
    for j, i in enumerate(picks):
        commanded = wp.position[i]
        last = j == len(picks) - 1
        if last:
            reached = final_pos
        else:
            reached = samples[int(np.argmin(np.linalg.norm(samples - commanded, axis=1)))]
        error = float(np.linalg.norm(reached - commanded))
        result["waypoint_errors_m"].append(round(error, 6))
        result["waypoints"].append(
            {
                "action": k,
                "commanded": _round(commanded),
                "reached": _round(reached),
                "error_m": round(error, 6),
                "at_rest": last,
            }
        )
    result["action_end_errors_m"][k] = round(float(np.linalg.norm(final_pos - wp.position[end])), 6)
    result["action_end_rotation_errors_rad"][k] = round(_angle(final_quat, wp.quaternion[end]), 6)


def execute_plan(
    robot: RobotBase,
    validation: Validation,
    options: ExecutionOptions = ExecutionOptions(),
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the validated plan on the connected ``robot``; returns the result (see the module docstring).

    Raises ``PlanRefused`` before any motion (the validation failed, the plan no longer hashes to the
    validated value, a setting is outside the limits, the robot is not where ``from_current`` needs it) and
    ``ExecutionError`` (with the action it happened at and the partial result) when the robot stops.
    """
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    digest, speed = _checked_speed(robot, validation, options)
    plan = validation.plan
    start = plan.start_pose
    assert start is not None  # validation requires it
    n_actions = len(plan.actions)
    path = _expand(validation, start, speed)
    wp, ends = path.wp, path.ends

    k0 = options.resume_from
    if k0 == 0:
        first_pos, first_quat = np.asarray(start.position), np.asarray(start.quaternion)
        first_width = min(start.gripper_width, robot.specs.gripper_max_width)
    else:
        first_pos, first_quat = wp.position[ends[k0 - 1]], wp.quaternion[ends[k0 - 1]]
        first_width = float(wp.gripper[ends[k0 - 1]])
    result = _new_result(digest, speed, options, n_actions)

    def finish() -> dict[str, Any]:
        errors = np.asarray(result["waypoint_errors_m"], dtype=float)
        result["error_max_m"] = round(float(errors.max()), 6) if len(errors) else None
        result["error_mean_m"] = round(float(errors.mean()), 6) if len(errors) else None
        result["wall_s"] = round(time.perf_counter() - t0, 3)
        return result

    k = k0
    try:
        result["start"] = _go_to_start(robot, (first_pos, first_quat, first_width), options, speed, say)
        for k in range(k0, n_actions):
            action = plan.actions[k]
            say(f"action {k} ({action})")
            _run_action(robot, k, action.type, path, options, speed, result)
    except RobotError as exc:
        if result["start"] is None:
            raise ExecutionError(exc, None, "moving to the start pose", finish()) from exc
        raise ExecutionError(exc, k, plan.actions[k].type, finish()) from exc
    result["executed"] = True
    return finish()


# --- a plan file to execute (``simpact robot execute``) -----------------------------------------------------


@dataclass(frozen=True)
class ExecutionRequest:
    """A plan file to validate and execute, and how (paths; SI units)."""

    plan: str
    """Plan JSON, with its start pose unless ``from_current``."""
    limits: str | None = None
    """Safety limits YAML (fields of :class:`robot.safety.SafetyLimits`); default limits otherwise."""
    speed: float | None = None
    """Peak tool speed, m/s (default: the plan's)."""
    expected_sha256: str | None = None
    """Refuse unless the plan file hashes to this."""
    from_current: bool = False
    """Start where the robot is instead of at the plan's start pose."""
    resume_from: int = 0
    """First action to execute (after a stop and a recovery)."""
    task: str | None = None
    """Check collisions against this task's scene (name or config file) ..."""
    scene: str | None = None
    """... or against this scene: a real2sim output folder (or its scene.json), or a Scene file."""
    seed: int = 0
    """Scene seed with ``task``."""
    table_only: bool = False
    """Without ``task`` and ``scene``, check collisions against the table only (must be asked for)."""
    recover: bool = False
    """Clear the robot's errors before moving."""
    home: bool = False
    """Move to the home joint configuration before the start pose."""


TABLE_ONLY_REFUSAL = (
    "no scene to check collisions against: give --task or --scene (the collision pre-check needs one), "
    "or --table-only to check against the table alone"
)
"""Why a plan is refused without a scene and without ``table_only``."""


def load_collision_scene(
    task: str | None, scene: str | None, seed: int = 0, *, table_only: bool = False
) -> tuple[Scene | None, str]:
    """The scene to check collisions against (``task``'s at ``seed``, or the ``scene`` file or real2sim
    folder, or None for the table only, which ``table_only`` must ask for) and how it was chosen. Raises
    :class:`PlanRefused`."""
    if task:
        try:
            loaded = load_task(task)
            return loaded.scene(seed), f"task {loaded.name} seed {seed}"
        except TaskError as exc:
            raise PlanRefused(str(exc)) from None
    if scene:
        path = Path(scene)
        if path.is_dir() or path.name == "scene.json":  # a real2sim output folder or its scene.json
            folder = path if path.is_dir() else path.parent
            try:
                return load_scene(folder), f"real2sim scene {folder / 'scene.json'}"
            except Real2SimError as exc:
                raise PlanRefused(str(exc)) from None
        try:
            raw = yaml.safe_load(path.read_text())
            return Scene.from_dict(raw), f"scene file {path}"
        except OSError as exc:
            raise PlanRefused(f"scene file {path}: {exc.strerror or exc}") from None
        except (yaml.YAMLError, SceneError, TypeError, ValueError, AttributeError) as exc:
            raise PlanRefused(f"scene file {path}: {exc}") from None
    if not table_only:
        raise PlanRefused(TABLE_ONLY_REFUSAL)
    return None, "the table only (--table-only)"


def _connected(make_robot: Callable[[SafetyLimits], RobotBase], limits: SafetyLimits) -> RobotBase:
    """A robot from ``make_robot(limits)``, connected; a failed connection is a refusal."""
    robot = make_robot(limits)
    try:
        robot.connect()
    except RobotError as exc:
        raise PlanRefused(str(exc)) from None
    return robot


def _checked_request(request: ExecutionRequest, record: dict[str, Any]) -> tuple[Any, SafetyLimits]:
    """The plan and the limits of ``request``, after the checks that need no robot and no scene."""
    try:
        plan = load_plan(request.plan)
    except PlanError as exc:
        raise PlanRefused(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:  # a folder, an unreadable or binary file
        raise PlanRefused(f"plan file {request.plan}: cannot read it ({exc})") from None
    digest = plan_sha256(plan)
    record["plan_sha256"] = digest
    if request.expected_sha256 and request.expected_sha256.lower() != digest:
        raise PlanRefused(
            f"the plan hashes to {digest}, not the expected {request.expected_sha256}: "
            "it is not the plan you validated"
        )
    try:
        limits = SafetyLimits.from_yaml(request.limits) if request.limits else SafetyLimits()
    except ValueError as exc:
        raise PlanRefused(str(exc)) from None
    if request.speed is not None and not 0 < request.speed <= limits.max_speed:
        raise PlanRefused(f"--speed {request.speed} m/s is outside (0, max_speed {limits.max_speed}] m/s")
    if request.resume_from and request.from_current:
        raise PlanRefused(
            "--resume-from moves to where the previous action ended; it cannot go with --from-current"
        )
    return plan, limits


def prepare_execution(
    request: ExecutionRequest, make_robot: Callable[[SafetyLimits], RobotBase], record: dict[str, Any]
) -> tuple[RobotBase | None, Validation]:
    """Load and validate the plan of ``request``, connecting first (``make_robot(limits)``) when it starts
    from the robot's current pose. Fills ``record`` (``plan_sha256``, ``collision_scene``, ``validation``,
    ``executed_plan_sha256``) as it goes. Returns the robot (None unless connected) and the validation;
    raises :class:`PlanRefused` (nothing moved, the robot disconnected)."""
    plan, limits = _checked_request(request, record)
    scene, record["collision_scene"] = load_collision_scene(
        request.task, request.scene, request.seed, table_only=request.table_only
    )
    robot = None
    try:
        if request.from_current:
            robot = _connected(make_robot, limits)
            position, quaternion = robot.tcp_pose()
            width = min(max(robot.gripper_width(), 0.0), 0.1)
            start = {"position": position, "quaternion": quaternion, "gripper_width": width}
            try:
                plan = plan.with_start_pose(StartPose.from_dict(start))
            except PlanError as exc:
                raise PlanRefused(f"the robot's current pose cannot start a plan: {exc}") from None
        elif plan.start_pose is None:
            raise PlanRefused(
                f"plan file {request.plan} has no start_pose; pass --from-current to start where the robot is"
            )
        try:
            validation = validate_plan(plan, limits, scene)
        except PlanError as exc:
            raise PlanRefused(str(exc)) from None
        record["validation"] = validation.to_dict()
        record["executed_plan_sha256"] = validation.plan_sha256
        if not validation.ok:
            raise PlanRefused(f"the plan violates the safety checks: {validation.reason}")
    except PlanRefused:
        if robot is not None:
            robot.disconnect()
        raise
    return robot, validation


def run_execution(
    request: ExecutionRequest,
    robot: RobotBase | None,
    make_robot: Callable[[SafetyLimits], RobotBase],
    validation: Validation,
    record: dict[str, Any],
    progress: Callable[[str], None] | None = None,
) -> None:
    """Execute the validated plan (connecting ``make_robot(limits)`` unless ``robot`` is connected) and
    update ``record`` with the measurements; the robot is disconnected at the end. Raises
    :class:`PlanRefused` before any motion, :class:`ExecutionError` (``record["error"]`` names the action)
    or :class:`RobotError` when the robot stopped."""
    say = progress or (lambda _msg: None)
    if robot is None:
        robot = _connected(make_robot, validation.limits)
    try:
        if request.recover:
            robot.recover()
        if request.home and not request.from_current:
            say("moving home")
            robot.home()
        options = ExecutionOptions(
            speed=request.speed, from_current=request.from_current, resume_from=request.resume_from
        )
        executed = execute_plan(robot, validation, options, progress=say)
        executed["executed_plan_sha256"] = executed.pop("plan_sha256")  # plan_sha256 stays the file's
        record.update(executed)
    except ExecutionError as exc:
        record.update({k: v for k, v in exc.result.items() if k != "plan_sha256"})
        record["executed"] = False
        record["error"] = {
            "action": exc.action,
            "type": exc.action_type,
            "kind": exc.kind,
            "message": str(exc),
        }
        raise
    except RobotError as exc:
        record["error"] = {"action": None, "type": None, "kind": exc.kind, "message": str(exc)}
        raise
    finally:
        robot.disconnect()
