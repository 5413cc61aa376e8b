"""The closed loop of SIMPACT on a robot (paper Supp. B.9): capture → real2sim → plan → execute → capture →
judge, replanning from the new frame until the judge says the task is done or ``attempts`` are spent.

``run_loop(camera, robot, task, ...)`` takes any :class:`robot.camera.Camera` and
:class:`robot.base.RobotBase` (a Franka with a RealSense, a Franka with recorded bundles, or the simulated
pair of :mod:`robot.simworld`). One attempt, each stage timed and saved under ``out/attempt_N/``:

1. ``capture``: a frame (``frame_before/``); from attempt 2 on it is the previous attempt's after-frame,
   and ``real2sim`` reuses that frame's scene (copied, not recomputed).
2. ``real2sim``: the task's scene from the frame (``real2sim/``; the task's labels, markers and fixtures, as
   ``simpact plan --frame`` builds it), with the robot starting at the capture pose: the task's robot start
   (``start="task"``) or where the robot was when the loop began (``start="current"``).
3. ``plan``: the planner in simulation (``planning/``: the planner's own record; ``plan.json``: the
   accepted plan with its start pose). Only an accepted plan (one that succeeded in simulation) is executed.
4. ``validate``: the safety checks of :mod:`robot.safety` against the robot's limits and the scene.
5. ``confirm``: the caller's decision to move (``--yes``, a prompt); a refusal makes this a dry run.
6. ``execute``: when the robot is not at the capture pose (the first attempt with ``start="task"``), it
   goes there first as in ``retreat``; then :func:`robot.execute.execute_plan` (``execution/result.json``,
   also when it stopped).
7. ``retreat``: back to the capture pose: straight up to the transit height, across, straight down; then
   the scene settles for ``settle_s``.
8. ``capture_after`` (``frame_after/``) and ``real2sim_after`` (``real2sim_after/``).
9. ``judge`` (``judgement.json``): ``task``: the task's own success check on the observed outcome (the
   objects' poses real2sim measured before and after, as a two-sample rollout: conditions the check
   evaluates "throughout" are evaluated at the two observations, and nothing touches the objects since the
   robot has retreated); ``vlm``: the VLM's TaskSuccess (``prompts/evaluate.md``) with both camera images
   and both measured scenes. With an ``oracle`` (the simulated world), its exact outcome is recorded as
   ``ground_truth`` next to the verdict, never used to decide.

A stage that fails ends the loop: its attempt records the stage, the error and everything computed before
it; ``out/result.json`` (rewritten after every stage) says which stage failed. Every plan starts at the
capture pose, so a replan pushes on from where the last attempt left the objects; nothing moves before the
first plan is confirmed.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from robot.base import RobotBase, RobotError
from robot.camera import Camera
from robot.judge import observed_rollout, vlm_judge
from simpact.core.jsonio import write_json
from simpact.core.vocab import BENCH_PLANNERS

__all__ = [
    "EXIT_STAGE_FAILED",
    "PLANNERS",
    "LoopConfig",
    "LoopResult",
    "Oracle",
    "StageFailed",
    "add_run_parser",
    "cmd_robot_run",
    "run_loop",
]

PLANNERS = BENCH_PLANNERS
"""``reference``: the task's reference plan on the perceived scene; ``cem``/``template``/``gaussian``: the
VLM-free planners; ``vlm``: Algorithm 1 with a VLM."""
EXIT_STAGE_FAILED = 4
"""Exit status of ``simpact robot run`` when a stage other than the robot's motion failed."""


class StageFailed(Exception):
    """A stage of an attempt failed: ``stage`` names it; ``robot_stopped`` when the robot stopped with an
    error (it stays stopped until recovered)."""

    def __init__(self, stage: str, message: str, robot_stopped: bool = False) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.message = message
        self.robot_stopped = robot_stopped


class Oracle(Protocol):
    """Exact knowledge of a simulated world, for evaluation: ``mark()`` when an execution begins,
    ``ground_truth(plan)`` the task's check on what the world did since."""

    def mark(self) -> None: ...

    def ground_truth(self, plan: Any) -> dict[str, Any]: ...


class InstructionTask:
    """A task given only by its instruction (``--instruction``): it has no success check of its own, so the
    VLM decides: real2sim asks it for the objects to look for (unless ``labels`` are given), the planner
    accepts on its TaskSuccess (every proposal scores 0 here) and the loop's judge is the VLM."""

    name = "instruction"
    tail_s = 1.0
    """Hold after a simulated plan, s (as the shipped tasks)."""
    skeleton = None

    def __init__(self, instruction: str, labels: list[str] | None = None) -> None:
        from simpact.core.scene import Scene

        if not instruction.strip():
            raise ValueError("the instruction is empty")
        self.instruction = instruction.strip()
        self.labels = labels
        self.raw: dict[str, Any] = {}
        self.nominal_scene = Scene(())

    def targets(self, seed: int = 0) -> dict[str, float]:
        return {}

    def evaluate(self, rollout: Any, scene: Any, seed: int = 0) -> Any:
        from simpact.tasks import Evaluation

        return Evaluation(False, 0.0, {"check": "none: an instruction is judged by the VLM"})

    def reference_plan(self, scene: Any, start: Any, seed: int = 0) -> Any:
        from simpact.tasks import TaskError

        raise TaskError("an instruction has no reference plan: plan with --planner vlm")


def _scene_from_frame(task: Any, frame_dir: Path, out: Path, vlm: Any) -> Any:
    """The scene to plan on from the bundle in ``frame_dir`` (real2sim written under ``out``): the task's
    scene (:func:`real2sim.commands.task_scene_from_frame`), or for an instruction what real2sim finds with
    its labels (the first frame's labels are kept for later frames, so objects keep their names)."""
    if not isinstance(task, InstructionTask):
        from real2sim.task_scene import task_scene_from_frame

        return task_scene_from_frame(task, frame_dir, out, vlm=vlm)
    from real2sim.pipeline import run_real2sim
    from simpact.core.frame import read_frame_bundle

    found = run_real2sim(
        read_frame_bundle(frame_dir), labels=task.labels, instruction=task.instruction, vlm=vlm, out=out
    )
    if task.labels is None and found.labels.labels:
        task.labels = list(found.labels.labels)
    return found.scene


@dataclass(frozen=True)
class LoopConfig:
    """Settings of the loop (SI units)."""

    attempts: int = 3
    """Most plan-and-execute attempts."""
    planner: str = "cem"
    """One of :data:`PLANNERS`."""
    judge: Literal["task", "vlm"] = "task"
    seed: int = 0
    """The task's seed: its targets (and, with ``--sim``, the stand-in world's scene)."""
    speed: float | None = None
    """Peak tool speed of the executed plan, m/s (default: the plan's own)."""
    transit_height: float = 0.3
    """Height of the tool while it crosses back to the capture pose, m (at least the higher end's)."""
    transit_speed: float = 0.1
    """Peak tool speed of the retreat, m/s."""
    settle_s: float = 1.0
    """Wait after the retreat before the after-frame, s."""
    start: Literal["task", "current"] = "task"
    """Where plans start and frames are taken (the capture pose): the task's robot start (the robot goes
    there, up-over-down, once the first plan is confirmed), or wherever the robot is when the loop begins."""
    k: int = 10
    """Algorithm 1's K (with the ``vlm`` planner)."""
    k_max: int = 13

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if self.planner not in PLANNERS:
            raise ValueError(f"planner must be one of {', '.join(PLANNERS)}, got {self.planner!r}")
        if self.start not in ("task", "current"):
            raise ValueError(f"start must be task or current, got {self.start!r}")
        if self.judge not in ("task", "vlm"):
            raise ValueError(f"judge must be task or vlm, got {self.judge!r}")
        for name in ("transit_height", "transit_speed"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not (math.isfinite(self.settle_s) and self.settle_s >= 0):
            raise ValueError(f"settle_s must be >= 0 s, got {self.settle_s}")
        if self.speed is not None and not (math.isfinite(self.speed) and self.speed > 0):
            raise ValueError(f"speed must be positive, got {self.speed}")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Attempt:
    """What one attempt did: per-stage wall times, the verdict, and the failed stage (if any)."""

    index: int
    dir: Path
    timings_s: dict[str, float] = field(default_factory=dict)
    stages_done: list[str] = field(default_factory=list)
    success: bool | None = None
    """The judge's verdict; None when the attempt did not reach it."""
    failed_stage: str | None = None
    error: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.index,
            "dir": self.dir.name,
            "success": self.success,
            "stages_done": list(self.stages_done),
            "failed_stage": self.failed_stage,
            "error": self.error,
            "timings_s": dict(self.timings_s),
            "total_s": round(sum(self.timings_s.values()), 3),
            **self.info,
        }


@dataclass
class LoopResult:
    """The loop's outcome: ``success`` (the last judge's verdict; None when no attempt was judged),
    ``stopped`` (why it ended: ``success``, ``attempts exhausted``, ``dry run``, ``failed``), the attempts."""

    success: bool | None = None
    stopped: str = "running"
    failed_stage: str | None = None
    robot_stopped: bool = False
    dry_run: str | None = None
    """Why nothing moved (the confirmation's answer), or None."""
    attempts: list[Attempt] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.header,
            "success": self.success,
            "stopped": self.stopped,
            "failed_stage": self.failed_stage,
            "robot_stopped": self.robot_stopped,
            "dry_run": self.dry_run,
            "n_attempts": len(self.attempts),
            "attempts": [a.to_dict() for a in self.attempts],
            "wall_s": round(self.wall_s, 3),
        }


# --- planning -----------------------------------------------------------------------------------------------


def _plan(task: Any, scene: Any, world: Any, vlm: Any, config: LoopConfig, say: Callable[[str], None]) -> Any:
    """The planner's :class:`~simpact.planner.records.PlanResult` on ``world``, a World of ``scene``."""
    from simpact.planner.loop import LoopConfig as PlannerConfig
    from simpact.planner.session import PlanningError, plan_task

    try:
        return plan_task(
            task,
            scene,
            world,
            config.seed,
            config.planner,
            vlm,
            PlannerConfig(k=config.k, k_max=config.k_max),
            say,
        )
    except PlanningError as exc:
        raise StageFailed("plan", str(exc)) from None


# --- the loop -----------------------------------------------------------------------------------------------


def _transit(robot: RobotBase, target: Any, config: LoopConfig, stage: str) -> list[list[float]]:
    """Up to the transit height, across above ``target`` (a StartPose), down onto it; returns the
    waypoints. Every waypoint must be inside the safety limits (else ``StageFailed(stage)``)."""
    pos, quat = robot.tcp_pose()
    goal = np.asarray(target.position, float)
    top = robot.limits.workspace_max[2] - 0.01
    z = min(max(float(pos[2]), float(goal[2]), config.transit_height), top)
    path = [
        (np.array([pos[0], pos[1], z]), quat),
        (np.array([goal[0], goal[1], z]), np.asarray(target.quaternion, float)),
        (goal, np.asarray(target.quaternion, float)),
    ]
    done = []
    for point, orientation in path:
        problem = robot.limits.position_problem(point)
        if problem:
            raise StageFailed(stage, f"the way to the capture pose is not allowed: {problem}")
        here, _ = robot.tcp_pose()
        if float(np.linalg.norm(point - here)) > 1e-3:
            robot.move_to(point, orientation, config.transit_speed)
        done.append([round(float(v), 4) for v in point])
    if abs(robot.gripper_width() - target.gripper_width) > 0.002:
        robot.gripper_move(target.gripper_width, 0.05)
    return done


def _label(attempt: Attempt) -> str:
    return f"attempt {attempt.index}" if attempt.index else "setup"


def _wait(robot: RobotBase, seconds: float) -> None:
    """Let the scene settle: simulated time for a simulated robot (``hold``), wall-clock time otherwise."""
    hold = getattr(robot, "hold", None)
    if callable(hold):
        hold(seconds)
    else:
        time.sleep(seconds)


def run_loop(
    camera: Camera,
    robot: RobotBase,
    task: Any,
    out: str | Path,
    config: LoopConfig = LoopConfig(),
    *,
    vlm: Any = None,
    confirm: Callable[[Any], str | None] = lambda validation: None,
    oracle: Oracle | None = None,
    progress: Callable[[str], None] | None = None,
    header: dict[str, Any] | None = None,
) -> LoopResult:
    """Run the loop (see the module docstring) with ``robot`` (connected here, disconnected at the end) and
    ``camera`` (left open). ``confirm(validation)`` returns None to move or why not (then the attempt
    stops after validation: a dry run). Never raises for a failed stage: the result names it."""
    from real2sim.commands import input_errors
    from robot.base import ExecutionError, PlanRefused
    from robot.camera import CameraError
    from robot.execute import ExecutionOptions, execute_plan
    from robot.safety import HOME_TCP_QUATERNION, start_yaw, validate_plan
    from simpact.core.actions import PlanError, StartPose
    from simpact.core.frame import write_frame_bundle
    from simpact.core.rotations import quat_about_z, quat_mul
    from simpact.core.scene import RobotStart
    from simpact.planner.report import write_report
    from solvers.mujoco.world import MujocoWorld

    if isinstance(task, InstructionTask) and (
        config.judge != "vlm" or config.planner != "vlm" or vlm is None
    ):
        raise ValueError(
            "an instruction without a task needs a VLM to plan and to judge (planner and judge vlm)"
        )
    if isinstance(task, InstructionTask) and config.start == "task":
        raise ValueError("an instruction has no start pose of its own: start from the current pose")
    say = progress or (lambda _line: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t_loop = time.perf_counter()
    result = LoopResult(header={"task": task.name, "instruction": task.instruction, **(header or {})})
    result.header["config"] = config.to_dict()
    errors: tuple[type[BaseException], ...] = (*input_errors(), CameraError, PlanError)

    def save() -> None:
        result.wall_s = time.perf_counter() - t_loop
        write_json(out / "result.json", result.to_dict())

    @contextmanager
    def stage(attempt: Attempt, name: str) -> Iterator[None]:
        t = time.perf_counter()
        say(f"{_label(attempt)}: {name} ...")
        try:
            yield
        except StageFailed:
            raise
        except RobotError as exc:  # a failed connection leaves the robot as it was
            raise StageFailed(name, str(exc), robot_stopped=exc.kind != "connection") from exc
        except errors as exc:
            raise StageFailed(name, str(exc)) from exc
        except Exception as exc:  # a bug must still leave the record of what was done
            attempt.info.setdefault("traceback", traceback.format_exc())
            raise StageFailed(name, f"{type(exc).__name__}: {exc}") from exc
        finally:
            attempt.timings_s[name] = round(time.perf_counter() - t, 3)
        attempt.stages_done.append(name)
        save()

    def fail(attempt: Attempt, exc: StageFailed) -> None:
        attempt.failed_stage = exc.stage
        attempt.error = {"stage": exc.stage, "message": exc.message}
        result.failed_stage = exc.stage
        result.robot_stopped = exc.robot_stopped
        result.stopped = "failed"
        say(f"{_label(attempt)}: {exc.stage} failed: {exc.message}")

    setup = Attempt(0, out)
    try:
        with stage(setup, "connect"):
            robot.connect()
            position, quaternion = robot.tcp_pose()
            width = float(np.clip(robot.gripper_width(), 0.0, 0.1))
            result.header["initial_pose"] = {
                "position": [round(float(v), 6) for v in position],
                "quaternion": [round(float(v), 6) for v in quaternion],
                "gripper_width": round(width, 6),
            }
            if config.start == "task":
                begin = task.nominal_scene.robot
                quaternion = quat_mul(quat_about_z(begin.yaw), np.asarray(HOME_TCP_QUATERNION))
                position, width = np.asarray(begin.position), begin.gripper_width
            capture_pose = StartPose.from_dict(
                {"position": position, "quaternion": quaternion, "gripper_width": width}
            )
            try:
                yaw = start_yaw(capture_pose)
            except PlanError as exc:
                raise StageFailed("connect", f"the robot's pose cannot start a plan: {exc}") from None
        result.header["capture_pose"] = capture_pose.to_dict()
        result.header["connect_s"] = setup.timings_s.get("connect")
    except StageFailed as exc:
        fail(setup, exc)
        result.header["connect_error"] = setup.error
        save()
        return result
    robot_start = RobotStart(capture_pose.position, yaw, capture_pose.gripper_width)

    carried: tuple[Any, Any, Path] | None = None  # (frame, scene, real2sim dir) of the last after-frame
    try:
        for n in range(1, config.attempts + 1):
            attempt = Attempt(n, out / f"attempt_{n}")
            result.attempts.append(attempt)
            adir = attempt.dir
            try:
                with stage(attempt, "capture"):
                    frame = carried[0] if carried is not None else camera.capture()
                    write_frame_bundle(frame, adir / "frame_before")
                with stage(attempt, "real2sim"):
                    if carried is not None:
                        shutil.copytree(carried[2], adir / "real2sim", dirs_exist_ok=True)
                        scene = carried[1]
                        attempt.info["real2sim_from"] = f"{carried[2].parent.name}/{carried[2].name}"
                    else:
                        scene = _scene_from_frame(task, adir / "frame_before", adir / "real2sim", vlm)
                    scene = replace(scene, robot=robot_start)
                with stage(attempt, "plan"):
                    world = MujocoWorld(scene)
                    planned = _plan(task, scene, world, vlm, config, lambda line: say(f"  {line.strip()}"))
                    write_report(planned, adir / "planning", world, instruction=task.instruction, video=False)
                    chosen = planned.chosen
                    attempt.info["planner"] = {
                        "method": planned.method,
                        "rollouts": len(planned.proposals),
                        "accepted": planned.accepted is not None,
                        "success_in_simulation": planned.success,
                        "score": None if chosen is None else round(chosen.score, 6),
                    }
                    if chosen is not None:
                        accepted = planned.accepted is not None
                        chosen.plan.save(adir / ("plan.json" if accepted else "best_plan.json"))
                    if planned.accepted is None or chosen is None:
                        best = "no rollout" if chosen is None else f"best score {chosen.score:.3f}"
                        raise StageFailed(
                            "plan",
                            f"the planner accepted no plan in simulation ({best}; see {adir / 'planning'})",
                        )
                    plan = chosen.plan
                with stage(attempt, "validate"):
                    validation = validate_plan(plan, robot.limits, scene)
                    execution: dict[str, Any] = {
                        "executed": False,
                        "plan_sha256": validation.plan_sha256,
                        "validation": validation.to_dict(),
                    }
                    attempt.info["plan_sha256"] = validation.plan_sha256
                    write_json(adir / "execution" / "result.json", execution)
                    if not validation.ok:
                        raise StageFailed(
                            "validate", f"the plan violates the safety checks: {validation.reason}"
                        )
                reason = confirm(validation)
                if reason is not None:
                    result.dry_run = reason
                    result.stopped = "dry run"
                    execution["dry_run"] = reason
                    write_json(adir / "execution" / "result.json", execution)
                    say(f"attempt {n}: plan {validation.plan_sha256[:12]} passed validation; {reason}")
                    break
                with stage(attempt, "execute"):
                    here, _ = robot.tcp_pose()
                    if float(np.linalg.norm(here - np.asarray(capture_pose.position))) > 0.005:
                        attempt.info["transit_to_start"] = _transit(robot, capture_pose, config, "execute")
                    before_pose = (*robot.tcp_pose(), robot.gripper_width())
                    if oracle is not None:
                        oracle.mark()
                    t_exec = time.perf_counter()
                    try:
                        execution.update(
                            execute_plan(
                                robot,
                                validation,
                                ExecutionOptions(speed=config.speed),
                                progress=lambda msg: say(f"  {msg}"),
                            )
                        )
                    except PlanRefused as exc:
                        execution["refused"] = str(exc)
                        raise StageFailed("execute", f"refused before moving: {exc}") from None
                    except ExecutionError as exc:
                        execution.update(exc.result)
                        execution["error"] = {
                            "action": exc.action,
                            "type": exc.action_type,
                            "message": str(exc),
                        }
                        raise StageFailed("execute", str(exc), robot_stopped=True) from None
                    finally:
                        write_json(adir / "execution" / "result.json", execution)
                with stage(attempt, "retreat"):
                    attempt.info["retreat_path"] = _transit(robot, capture_pose, config, "retreat")
                    _wait(robot, config.settle_s)
                    after_pose = (*robot.tcp_pose(), robot.gripper_width())
                    elapsed = time.perf_counter() - t_exec
                with stage(attempt, "capture_after"):
                    frame_after = camera.capture()
                    write_frame_bundle(frame_after, adir / "frame_after")
                with stage(attempt, "real2sim_after"):
                    scene_after = _scene_from_frame(task, adir / "frame_after", adir / "real2sim_after", vlm)
                with stage(attempt, "judge"):
                    observed = observed_rollout(plan, scene, scene_after, before_pose, after_pose, elapsed)
                    judgement: dict[str, Any] = {"judge": config.judge}
                    evaluation = task.evaluate(observed, scene, config.seed)
                    if not isinstance(task, InstructionTask):
                        judgement["task_check"] = {
                            "success": evaluation.success,
                            "score": round(evaluation.score, 6),
                            "details": evaluation.details,
                        }
                    if config.judge == "vlm":
                        if vlm is None:
                            raise StageFailed("judge", "--judge vlm needs a VLM (--vlm gemini|openai|replay)")
                        verdict = vlm_judge(
                            vlm, task.instruction, scene, world, observed, [frame.rgb, frame_after.rgb]
                        )
                        judgement["vlm"] = verdict
                        success = verdict["success"]
                        judgement["reason"] = verdict["reason"]
                    else:
                        success = evaluation.success
                    judgement["observed"] = {
                        "before": observed.initial.to_dict()["objects"],
                        "after": observed.final.to_dict()["objects"],
                    }
                    if oracle is not None:
                        judgement["ground_truth"] = oracle.ground_truth(plan)
                        attempt.info["ground_truth_success"] = judgement["ground_truth"]["success"]
                    judgement["success"] = success
                    write_json(adir / "judgement.json", judgement)
                    if success is None:
                        raise StageFailed("judge", f"no verdict: {judgement.get('reason')}")
                    attempt.success = bool(success)
                    result.success = bool(success)
                    say(f"attempt {n}: judged {'success' if success else 'failure'} ({config.judge})")
                carried = (frame_after, scene_after, adir / "real2sim_after")
                save()
                if result.success:
                    result.stopped = "success"
                    break
            except StageFailed as exc:
                fail(attempt, exc)
                break
        else:
            result.stopped = "attempts exhausted"
    finally:
        try:
            robot.disconnect()
        finally:
            save()
    return result


# --- the command --------------------------------------------------------------------------------------------

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
    from simpact.planner.commands import VLM_CHOICES, add_vlm_arguments

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
    from robot.commands import confirm_motion

    def confirm(validation: Any) -> str | None:
        return confirm_motion(args, validation.plan, validation.plan_sha256, where)

    return confirm


def cmd_robot_run(args: argparse.Namespace) -> None:
    from robot.camera import BundlePlayer, CameraError, RealSenseCamera
    from robot.safety import SafetyLimits
    from simpact.core.errors import UsageError
    from simpact.planner.commands import PlanningError, build_vlm
    from simpact.tasks import TaskError, load_task

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
    try:
        config = LoopConfig(
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
            from real2sim.labels import LabelError, parse_labels

            try:
                labels = parse_labels(args.labels) if args.labels else None
            except LabelError as exc:
                raise ValueError(f"--labels: {exc}") from None
            task: Any = InstructionTask(args.instruction, labels)
        else:
            task = load_task(args.task)
        vlm = build_vlm(args)
    except (ValueError, TaskError, PlanningError) as exc:
        raise UsageError(str(exc)) from None
    if planner == "vlm" and vlm is None:
        raise UsageError("--planner vlm needs a VLM: --vlm gemini|openai|replay")
    if judge == "vlm" and vlm is None:
        raise UsageError("--judge vlm needs a VLM: --vlm gemini|openai|replay")
    if args.gap < 0:
        raise UsageError(f"--gap must be >= 0, got {args.gap}")

    header: dict[str, Any] = {"planner": planner, "vlm": args.vlm}
    oracle: Oracle | None = None
    camera: Any
    robot: RobotBase
    if args.sim:
        from robot.sim2real import RealityGap
        from robot.simworld import SimWorld

        sim = SimWorld.create(task, args.seed, RealityGap().scaled(args.gap), limits)
        camera, robot, oracle = sim.camera, sim.robot, sim
        header.update(mode="sim", world=sim.describe())
        where = "the simulated robot"
    else:
        from robot.calibration import CalibrationError, load_T_base_cam
        from robot.franka import FrankaRobot

        try:
            T = None if args.extrinsics is None else load_T_base_cam(args.extrinsics)
            if args.frames:
                camera = BundlePlayer(args.frames[0] if len(args.frames) == 1 else args.frames, T_base_cam=T)
            else:
                camera = RealSenseCamera(serial=args.serial, T_base_cam=T)
        except (CameraError, CalibrationError, ValueError) as exc:
            raise UsageError(str(exc)) from None
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
        from robot.commands import EXIT_STOPPED

        raise SystemExit(EXIT_STOPPED if result.robot_stopped else EXIT_STAGE_FAILED)
    print(summary)
