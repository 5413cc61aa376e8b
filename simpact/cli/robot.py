"""``simpact robot ...``: plans on a Franka (franky) or on franky-sim; capture, calibrate, the closed loop.

``add_parsers(verbs)`` adds the ``robot`` verb with its subverbs ``execute``, ``capture``, ``calibrate`` and
``run``; ``execute`` and ``run`` have their ``add_*_parser(sub)`` and ``cmd_*`` function here (they share the
confirmation), ``capture`` and ``calibrate`` theirs in :mod:`simpact.cli.camera`; the work itself lives in
:mod:`robot`.

``simpact robot execute --host HOST --plan PLAN.json (--task T | --scene S | --table-only) [--yes] --out DIR``
validates the plan (safety limits, then a rollout in simulation checked for collisions against the scene; a
check against the table alone must be asked for with --table-only), and moves only when confirmed:
``--yes``, or typing ``yes`` at the prompt; without a terminal and without ``--yes`` it is a dry run. It
writes ``DIR/result.json`` with ``executed``, ``refused`` (the reason, or null), ``waypoint_errors_m``,
``gripper_widths`` and the validation. Exit status: 0 when executed or a dry run, 2 when refused or the
input is bad (nothing moved), 3 when the robot stopped with an error during the plan.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from real2sim.labels import LabelError, parse_labels
from robot.base import PlanRefused, RobotBase, RobotError
from robot.calibration import load_T_base_cam
from robot.camera import Camera, open_camera
from robot.execute import TABLE_ONLY_REFUSAL, ExecutionRequest, prepare_execution, run_execution
from robot.franka import FrankaRobot
from robot.loop import run_loop
from robot.loop_records import PLANNERS, ClosedLoopConfig, InstructionTask, Oracle
from robot.safety import SafetyLimits
from robot.sim2real import RealityGap
from robot.simworld import SimWorld
from simpact.cli.camera import add_camera_parsers
from simpact.cli.common import add_vlm_arguments, vlm_from_args
from simpact.cli.preflight import finite, input_file, reusable_out, seed
from simpact.core.errors import EXIT_ROBOT_STOPPED, UsageError
from simpact.core.jsonio import write_json
from simpact.core.vocab import VLM_CHOICES
from simpact.tasks import load_task

__all__ = ["EXIT_STAGE_FAILED", "EXIT_STOPPED", "add_parsers", "confirm_motion"]

EXECUTE_DOC = __doc__.split("\n\n")[2]

EXIT_STOPPED = EXIT_ROBOT_STOPPED
"""Exit status when the robot stopped with an error during the plan."""
EXIT_STAGE_FAILED = 4
"""Exit status of ``simpact robot run`` when a stage other than the robot's motion failed."""


def add_parsers(verbs: Any) -> None:
    """Add ``simpact robot`` with its subverbs to the top-level subparsers ``verbs``."""
    robot = verbs.add_parser(
        "robot", help="execute plans on a Franka (franky) or a simulated one (franky-sim)"
    )
    sub = robot.add_subparsers(dest="robot_verb", required=True)
    add_execute_parser(sub)
    add_camera_parsers(sub)
    add_run_parser(sub)


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


def _indented(message: str) -> None:
    print(f"  {message}", flush=True)


def _stopped(message: str) -> SystemExit:
    """Report that the robot stopped (one line) and the exit that says so."""
    print(f"simpact robot: error: {message}", file=sys.stderr)
    return SystemExit(EXIT_STOPPED)


# --- execute ------------------------------------------------------------------------------------------------


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
    scene.add_argument(
        "--table-only",
        action="store_true",
        help="no scene: check collisions against the table alone (objects on it are not checked)",
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


def _check_execute_flags(args: argparse.Namespace) -> Path:
    """Refuse bad flags before anything is read or connected; the output folder, checked."""
    if not (args.task or args.scene or args.table_only):
        raise UsageError(TABLE_ONLY_REFUSAL)
    seed(args.seed)
    finite(args.speed, "--speed", positive=True)
    if args.resume_from < 0:
        raise UsageError(f"--resume-from must be an action index >= 0, got {args.resume_from}")
    input_file(args.plan, "--plan")
    if args.limits:
        input_file(args.limits, "--limits")
    if args.scene and not Path(args.scene).exists():
        raise UsageError(f"--scene {args.scene}: no such file or folder")
    return reusable_out(args.out)


def cmd_robot_execute(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    out = _check_execute_flags(args)
    request = ExecutionRequest(
        plan=str(args.plan),
        limits=args.limits,
        speed=args.speed,
        expected_sha256=args.plan_sha256,
        from_current=args.from_current,
        resume_from=args.resume_from,
        task=args.task,
        scene=args.scene,
        seed=args.seed,
        table_only=args.table_only,
        recover=args.recover,
        home=args.home,
    )

    def make_robot(limits: SafetyLimits) -> RobotBase:
        return FrankaRobot(args.host, limits, realtime=not args.no_realtime)

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
        robot, validation = prepare_execution(request, make_robot, result)
        if args.table_only:
            print(
                "robot execute: --table-only: collisions were checked against the table alone; objects on "
                "it were not checked",
                flush=True,
            )
        reason = confirm_motion(args, validation.plan, validation.plan_sha256, f"the robot at {args.host}")
        if reason is not None:
            result["dry_run"] = True
            result["reason"] = reason
            path = save()
            print(f"robot execute: plan {validation.plan_sha256[:12]} passed validation; {reason} -> {path}")
            return
        try:
            run_execution(request, robot, make_robot, validation, result, progress=_indented)
        except RobotError as exc:
            save()
            raise _stopped(f"{exc} (see {out / 'result.json'})") from None
    except PlanRefused as exc:
        result["refused"] = str(exc)
        save()
        raise PlanRefused(f"refused, nothing moved: {exc} (see {out / 'result.json'})") from None
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


# --- run: the closed loop -----------------------------------------------------------------------------------

RUN_DOC = """\
simpact robot run TASK|--instruction TEXT (--sim | --host HOST [--frames DIR ...]) [--planner ...] [--yes]
    --out DIR

Capture → real2sim → plan → execute → capture → judge, replanning up to --attempts times (see robot.loop).
--sim runs the loop against a perturbed MuJoCo stand-in world (a simulated camera and robot; no hardware);
--host drives the Franka at HOST with a RealSense (or recorded bundles with --frames). The robot moves only
when confirmed: --yes, or typing yes at the prompt for each plan; otherwise the first plan is validated and
the run ends as a dry run. Writes DIR/attempt_N/ (frame_before/, real2sim/, planning/, plan.json,
execution/result.json, frame_after/, real2sim_after/, judgement.json) and DIR/result.json. Exit status: 0
when the loop ran (success or attempts exhausted) or was a dry run, 2 for bad input, 3 when the robot
stopped with an error, 4 when another stage failed (result.json names it). An --instruction without a task
has no success check of its own: it needs a VLM (--vlm), which plans and judges.
"""


def add_run_parser(sub: Any) -> None:
    """Add ``run`` to the ``simpact robot`` sub-parsers."""
    p = sub.add_parser(
        "run",
        help="the closed loop: capture, real2sim, plan, execute, judge, replan (up to 3 attempts)",
        description=RUN_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("task", nargs="?", help="task name (see `simpact tasks`) or a task config file")
    p.add_argument("--instruction", help="instead of a task: the task in words (needs --vlm; the VLM judges)")
    p.add_argument(
        "--labels", help='with --instruction: objects to look for, comma-separated ("carton, box")'
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--sim", action="store_true", help="a simulated camera and robot in a stand-in world")
    where.add_argument("--host", help="the robot's FCI address (or a franky-sim server's)")
    p.add_argument(
        "--frames",
        nargs="+",
        metavar="DIR",
        help="with --host: recorded bundles as the camera, one per capture in order (or a folder of them)",
    )
    p.add_argument("--serial", help="RealSense serial number (default: the first connected device)")
    p.add_argument("--extrinsics", help="calibration YAML (simpact robot calibrate): the camera's T_base_cam")
    p.add_argument("--no-realtime", action="store_true", help="connect without a real-time kernel")
    p.add_argument("--planner", choices=PLANNERS, help="default: vlm with --vlm NAME, else cem")
    add_vlm_arguments(p, VLM_CHOICES, "none", "VLM for planning, labels, physics and --judge vlm")
    p.add_argument(
        "--judge", choices=("task", "vlm"), help="who decides success (default: task; vlm with --instruction)"
    )
    p.add_argument("--attempts", type=int, default=3, help="most attempts (3)")
    p.add_argument("--seed", type=int, default=0, help="task seed: its targets; with --sim also the world")
    p.add_argument("--gap", type=float, default=1.0, help="with --sim: scale of the reality gap (1.0)")
    p.add_argument("--limits", help="safety limits YAML (fields of robot.safety.SafetyLimits)")
    p.add_argument("--speed", type=float, help="peak tool speed of the plans, m/s (default: the plan's)")
    p.add_argument("--transit-height", type=float, default=0.3, help="tool height of the retreat, m (0.3)")
    p.add_argument("--settle-s", type=float, default=1.0, help="wait before the after-frame, s (1.0)")
    p.add_argument(
        "--start",
        choices=("task", "current"),
        help="capture pose and plan start: the task's robot start (default with TASK; the robot goes there "
        "once the first plan is confirmed) or where the robot is (default with --instruction)",
    )
    p.add_argument("--yes", action="store_true", help="move without asking for confirmation")
    p.add_argument("--dry-run", action="store_true", help="plan and validate the first attempt; never move")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_robot_run)


def _confirmer(args: argparse.Namespace, where: str) -> Callable[[Any], str | None]:
    def confirm(validation: Any) -> str | None:
        return confirm_motion(args, validation.plan, validation.plan_sha256, where)

    return confirm


def _check_run_flags(args: argparse.Namespace) -> tuple[str, Literal["task", "vlm"]]:
    """Refuse flags that do not go together; the planner and the judge the flags ask for."""
    if args.frames and not args.host:
        raise UsageError("--frames replaces the camera of a real robot: it goes with --host")
    if args.sim and (args.serial or args.extrinsics):
        raise UsageError("--serial and --extrinsics configure the RealSense: they go with --host")
    if (args.task is None) == (args.instruction is None):
        raise UsageError("give a TASK or --instruction TEXT (one of them)")
    if args.labels and not args.instruction:
        raise UsageError("--labels goes with --instruction (a task names its own objects)")
    if args.instruction and args.sim:
        raise UsageError("--sim builds its stand-in world from a task: give TASK")
    planner = args.planner or ("vlm" if args.vlm != "none" else "cem")
    judge: Literal["task", "vlm"] = args.judge or ("vlm" if args.instruction else "task")
    if args.instruction and (planner != "vlm" or judge != "vlm" or args.vlm == "none"):
        raise UsageError(
            "--instruction has no success check of its own: it needs a VLM (--vlm gemini|openai|replay) "
            "to plan (--planner vlm) and to judge (--judge vlm)"
        )
    return planner, judge


def _run_settings(
    args: argparse.Namespace, planner: str, judge: Literal["task", "vlm"]
) -> tuple[ClosedLoopConfig, SafetyLimits, Any, Any]:
    """The loop's settings, the safety limits, the task and the VLM the flags ask for."""
    try:
        config = ClosedLoopConfig(
            attempts=args.attempts,
            planner=planner,
            judge=judge,
            seed=args.seed,
            speed=args.speed,
            transit_height=args.transit_height,
            settle_s=args.settle_s,
            start=args.start or ("current" if args.instruction else "task"),
            k=args.k,
            k_max=args.k_max,
        )
        limits = SafetyLimits.from_yaml(args.limits) if args.limits else SafetyLimits()
        if args.instruction:
            try:
                labels = parse_labels(args.labels) if args.labels else None
            except LabelError as exc:
                raise ValueError(f"--labels: {exc}") from None
            task: Any = InstructionTask(args.instruction, labels)
        else:
            task = load_task(args.task)
        vlm = vlm_from_args(args)
    except ValueError as exc:  # the settings' own checks, an unknown task (TaskError), bad --labels
        raise UsageError(str(exc)) from None
    if planner == "vlm" and vlm is None:
        raise UsageError("--planner vlm needs a VLM: --vlm gemini|openai|replay")
    if judge == "vlm" and vlm is None:
        raise UsageError("--judge vlm needs a VLM: --vlm gemini|openai|replay")
    return config, limits, task, vlm


def _check_run_numbers(args: argparse.Namespace) -> None:
    """Refuse negative seeds, NaN/inf and missing files before the loop's settings are built."""
    seed(args.seed)
    finite(args.gap, "--gap", minimum=0.0)
    finite(args.speed, "--speed", positive=True)
    finite(args.transit_height, "--transit-height")
    finite(args.settle_s, "--settle-s", minimum=0.0)
    for flag, path in (("--limits", args.limits), ("--extrinsics", args.extrinsics)):
        if path:
            input_file(path, flag)


def cmd_robot_run(args: argparse.Namespace) -> None:
    planner, judge = _check_run_flags(args)
    _check_run_numbers(args)
    config, limits, task, vlm = _run_settings(args, planner, judge)
    reusable_out(args.out)
    header: dict[str, Any] = {"planner": planner, "vlm": args.vlm}
    oracle: Oracle | None = None
    camera: Camera
    robot: RobotBase
    if args.sim:
        sim = SimWorld.create(task, args.seed, RealityGap().scaled(args.gap), limits)
        camera, robot, oracle = sim.camera, sim.robot, sim
        header.update(mode="sim", world=sim.describe())
        where = "the simulated robot"
    else:
        T = None if args.extrinsics is None else load_T_base_cam(args.extrinsics)
        camera = open_camera(args.frames, serial=args.serial, T_base_cam=T)
        robot = FrankaRobot(args.host, limits, realtime=not args.no_realtime)
        header.update(mode="robot", host=args.host, camera="bundles" if args.frames else "realsense")
        where = f"the robot at {args.host}"
    out = Path(args.out)
    try:
        result = run_loop(
            camera,
            robot,
            task,
            out,
            config,
            vlm=vlm,
            confirm=_confirmer(args, where),
            oracle=oracle,
            progress=lambda line: print(line, flush=True),
            header=header,
        )
    finally:
        camera.close()
    timings = ", ".join(f"attempt {a.index} {sum(a.timings_s.values()):.1f} s" for a in result.attempts)
    summary = (
        f"robot run {task.name}: {result.stopped}, success {result.success}, {len(result.attempts)} "
        f"attempt(s) ({timings}), {result.wall_s:.1f} s -> {out / 'result.json'}"
    )
    if result.failed_stage is not None:
        print(f"simpact robot: error: {summary}; failed at {result.failed_stage}", file=sys.stderr)
        raise SystemExit(EXIT_STOPPED if result.robot_stopped else EXIT_STAGE_FAILED)
    print(summary)
