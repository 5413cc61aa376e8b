"""``simpact robot ...``: run plans on a Franka (franky) or on franky-sim.

``add_robot_parser(verbs)`` adds the ``robot`` verb; each subverb has its own ``add_*_parser(sub)`` and
``cmd_*`` function, so new subverbs are one more pair.

``simpact robot execute --host HOST --plan PLAN.json [--yes] --out DIR`` validates the plan (safety limits,
then a rollout in simulation checked for collisions), and moves only when confirmed: ``--yes``, or typing
``yes`` at the prompt; without a terminal and without ``--yes`` it is a dry run. It writes
``DIR/result.json`` with ``executed``, ``refused`` (the reason, or null), ``waypoint_errors_m``,
``gripper_widths`` and the validation. Exit status: 0 when executed or a dry run, 2 when refused or the
input is bad (nothing moved), 3 when the robot stopped with an error during the plan.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["EXIT_STOPPED", "add_robot_parser", "cmd_robot_execute"]

EXECUTE_DOC = __doc__.split("\n\n")[2]

EXIT_STOPPED = 3
"""Exit status when the robot stopped with an error during the plan."""


def add_robot_parser(verbs: Any) -> None:
    """Add ``simpact robot`` with its subverbs to the top-level subparsers ``verbs``."""
    robot = verbs.add_parser(
        "robot", help="execute plans on a Franka (franky) or a simulated one (franky-sim)"
    )
    sub = robot.add_subparsers(dest="robot_verb", required=True)
    add_execute_parser(sub)

    from robot.calibration import add_calibrate_parser
    from robot.camera import add_capture_parser
    from robot.loop import add_run_parser

    add_capture_parser(sub)
    add_calibrate_parser(sub)
    add_run_parser(sub)


def add_execute_parser(sub: Any) -> None:
    p = sub.add_parser(
        "execute",
        help="validate a plan, then execute it on the robot (dry run unless confirmed or --yes)",
        description=EXECUTE_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", required=True, help="the robot's FCI address (or a franky-sim server's)")
    p.add_argument("--plan", required=True, help="plan JSON with its start_pose (e.g. from simpact plan)")
    p.add_argument("--yes", action="store_true", help="move without asking for confirmation")
    p.add_argument("--dry-run", action="store_true", help="validate only; never move")
    p.add_argument(
        "--from-current",
        action="store_true",
        help="start the plan where the robot is instead of moving to its start_pose first",
    )
    scene = p.add_mutually_exclusive_group()
    scene.add_argument("--task", help="check collisions against this task's scene (name or config file)")
    scene.add_argument(
        "--scene",
        help="check collisions against this scene: a real2sim output folder (or its scene.json), or a "
        "Scene file (JSON/YAML)",
    )
    p.add_argument("--seed", type=int, default=0, help="scene seed with --task (0 = nominal)")
    p.add_argument("--limits", help="safety limits YAML (fields of robot.safety.SafetyLimits)")
    p.add_argument("--speed", type=float, help="peak tool speed, m/s (default: the plan's, 0.15)")
    p.add_argument("--plan-sha256", help="refuse unless the plan hashes to this (from an earlier dry run)")
    p.add_argument(
        "--no-realtime", action="store_true", help="connect without a real-time kernel (franky-sim, testing)"
    )
    p.add_argument("--recover", action="store_true", help="clear the robot's errors (after a reflex) first")
    p.add_argument(
        "--home", action="store_true", help="move to the home joint configuration before the start pose"
    )
    p.add_argument(
        "--resume-from", type=int, default=0, help="first action to execute (after a stop and --recover)"
    )
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_robot_execute)


class _Refused(Exception):
    """A refusal before any motion: reported, written to result.json, exit status 2."""


def _load_scene(args: argparse.Namespace) -> tuple[Any, str]:
    """The scene to check collisions against, and how it was chosen."""
    from simpact.core.scene import Scene, SceneError

    if args.task:
        from simpact.tasks import TaskError, load_task

        try:
            task = load_task(args.task)
            return task.scene(args.seed), f"task {task.name} seed {args.seed}"
        except TaskError as exc:
            raise _Refused(str(exc)) from None
    if args.scene:
        path = Path(args.scene)
        if path.is_dir() or path.name == "scene.json":  # a real2sim output folder or its scene.json
            from real2sim.pipeline import Real2SimError, load_scene

            folder = path if path.is_dir() else path.parent
            try:
                return load_scene(folder), f"real2sim scene {folder / 'scene.json'}"
            except Real2SimError as exc:
                raise _Refused(str(exc)) from None
        import yaml

        try:
            raw = yaml.safe_load(path.read_text())
            return Scene.from_dict(raw), f"scene file {path}"
        except OSError as exc:
            raise _Refused(f"scene file {path}: {exc.strerror or exc}") from None
        except (yaml.YAMLError, SceneError, TypeError, ValueError, AttributeError) as exc:
            raise _Refused(f"scene file {path}: {exc}") from None
    return None, "the table only (no --task or --scene)"


def confirm_motion(args: argparse.Namespace, plan: Any, digest: str, where: str) -> str | None:
    """None when the user confirmed moving the robot at ``where`` (``--yes`` or typing yes), else why this
    is a dry run."""
    if args.dry_run:
        return "dry run (--dry-run)"
    if args.yes:
        return None
    if not sys.stdin.isatty():
        return "dry run: not confirmed (no terminal); pass --yes to move"
    print(f"About to execute {len(plan.actions)} actions on {where}: {plan}")
    print(f"plan sha256 {digest}")
    answer = input("Type 'yes' to move the robot: ").strip().lower()
    return None if answer == "yes" else "dry run: not confirmed at the prompt"


def cmd_robot_execute(args: argparse.Namespace) -> None:
    from simpact.core.errors import UsageError
    from simpact.core.jsonio import write_json

    t0 = time.perf_counter()
    out = Path(args.out)
    result: dict[str, Any] = {
        "executed": False,
        "refused": None,
        "dry_run": False,
        "host": args.host,
        "plan": str(args.plan),
        "plan_sha256": None,
        "waypoint_errors_m": [],
        "gripper_widths": [],
        "error": None,
    }

    def save() -> Path:
        result["wall_s"] = round(time.perf_counter() - t0, 3)
        return write_json(out / "result.json", result)

    robot = None
    try:
        robot, validation = _prepare(args, result)
        reason = confirm_motion(args, validation.plan, validation.plan_sha256, f"the robot at {args.host}")
        if reason is not None:
            result["dry_run"] = True
            result["reason"] = reason
            path = save()
            print(f"robot execute: plan {validation.plan_sha256[:12]} passed validation; {reason} -> {path}")
            return
        _execute(args, robot, validation, result)
    except _Refused as exc:
        result["refused"] = str(exc)
        save()
        raise UsageError(f"refused, nothing moved: {exc} (see {out / 'result.json'})") from None
    except _Stopped as exc:
        save()
        print(f"simpact robot: error: {exc} (see {out / 'result.json'})", file=sys.stderr)
        raise SystemExit(EXIT_STOPPED) from None
    finally:
        if robot is not None:
            robot.disconnect()
    path = save()
    errors = result["waypoint_errors_m"]
    worst = max(errors) if errors else float("nan")
    print(
        f"robot execute: {len(validation.plan.actions)} actions executed on {args.host}, "
        f"{len(errors)} waypoints, worst error {1000 * worst:.2f} mm -> {path}"
    )


class _Stopped(Exception):
    """The robot stopped with an error during the plan (exit status 3)."""


def _prepare(args: argparse.Namespace, result: dict[str, Any]) -> tuple[Any, Any]:
    """Load and validate; connect first when the plan starts from the robot's current pose. Returns the
    robot (None unless connected) and the validation; raises _Refused."""
    from robot.safety import SafetyLimits, plan_sha256, validate_plan
    from simpact.core.actions import PlanError, StartPose, load_plan

    try:
        plan = load_plan(args.plan)
    except PlanError as exc:
        raise _Refused(str(exc)) from None
    digest = plan_sha256(plan)
    result["plan_sha256"] = digest
    if args.plan_sha256 and args.plan_sha256.lower() != digest:
        raise _Refused(
            f"the plan hashes to {digest}, not the expected {args.plan_sha256}: "
            "it is not the plan you validated"
        )
    try:
        limits = SafetyLimits.from_yaml(args.limits) if args.limits else SafetyLimits()
    except ValueError as exc:
        raise _Refused(str(exc)) from None
    if args.speed is not None and not 0 < args.speed <= limits.max_speed:
        raise _Refused(f"--speed {args.speed} m/s is outside (0, max_speed {limits.max_speed}] m/s")
    if args.resume_from and args.from_current:
        raise _Refused(
            "--resume-from moves to where the previous action ended; it cannot go with --from-current"
        )
    scene, scene_note = _load_scene(args)
    result["collision_scene"] = scene_note

    robot = None
    if args.from_current:
        robot = _connect(args, limits)
        position, quaternion = robot.tcp_pose()
        width = min(max(robot.gripper_width(), 0.0), 0.1)
        try:
            plan = plan.with_start_pose(
                StartPose.from_dict({"position": position, "quaternion": quaternion, "gripper_width": width})
            )
        except PlanError as exc:
            robot.disconnect()
            raise _Refused(f"the robot's current pose cannot start a plan: {exc}") from None
    elif plan.start_pose is None:
        raise _Refused(
            f"plan file {args.plan} has no start_pose; pass --from-current to start where the robot is"
        )
    try:
        validation = validate_plan(plan, limits, scene)
    except PlanError as exc:
        if robot is not None:
            robot.disconnect()
        raise _Refused(str(exc)) from None
    result["validation"] = validation.to_dict()
    result["executed_plan_sha256"] = validation.plan_sha256
    if not validation.ok:
        if robot is not None:
            robot.disconnect()
        raise _Refused(f"the plan violates the safety checks: {validation.reason}")
    return robot, validation


def _connect(args: argparse.Namespace, limits: Any) -> Any:
    from robot.base import RobotError
    from robot.franka import FrankaRobot

    robot = FrankaRobot(args.host, limits, realtime=not args.no_realtime)
    try:
        robot.connect()
    except RobotError as exc:
        raise _Refused(str(exc)) from None
    return robot


def _execute(args: argparse.Namespace, robot: Any, validation: Any, result: dict[str, Any]) -> None:
    from robot.base import ExecutionError, PlanRefused, RobotError
    from robot.execute import ExecutionOptions, execute_plan

    if robot is None:
        robot = _connect(args, validation.limits)
    try:
        if args.recover:
            robot.recover()
        if args.home and not args.from_current:
            print("  moving home", flush=True)
            robot.home()
        options = ExecutionOptions(
            speed=args.speed, from_current=args.from_current, resume_from=args.resume_from
        )
        executed = execute_plan(
            robot, validation, options, progress=lambda msg: print(f"  {msg}", flush=True)
        )
        executed["executed_plan_sha256"] = executed.pop("plan_sha256")  # plan_sha256 stays the file's
        result.update(executed)
    except PlanRefused as exc:
        raise _Refused(str(exc)) from None
    except ExecutionError as exc:
        result.update({k: v for k, v in exc.result.items() if k != "plan_sha256"})
        result["executed"] = False
        result["error"] = {
            "action": exc.action,
            "type": exc.action_type,
            "kind": exc.kind,
            "message": str(exc),
        }
        raise _Stopped(str(exc)) from None
    except RobotError as exc:
        result["error"] = {"action": None, "type": None, "kind": exc.kind, "message": str(exc)}
        raise _Stopped(str(exc)) from None
    finally:
        robot.disconnect()
