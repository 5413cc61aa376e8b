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
first plan is confirmed. The loop's settings and records are in :mod:`robot.loop_records`.
"""

from __future__ import annotations

import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from real2sim.pipeline import run_real2sim
from real2sim.task_scene import task_scene_from_frame
from robot.base import ExecutionError, PlanRefused, RobotBase, RobotError
from robot.camera import Camera
from robot.execute import ExecutionOptions, execute_plan
from robot.judge import observed_rollout, vlm_judge
from robot.loop_records import (
    Attempt,
    ClosedLoopConfig,
    InstructionTask,
    LoopResult,
    Motion,
    Observed,
    Oracle,
    StageFailed,
)
from robot.safety import HOME_TCP_QUATERNION, Validation, start_yaw, validate_plan
from simpact.core.actions import Plan, PlanError, StartPose
from simpact.core.errors import SimpactError
from simpact.core.frame import Frame, read_frame_bundle, write_frame_bundle
from simpact.core.jsonio import write_json
from simpact.core.rotations import quat_about_z, quat_mul
from simpact.core.scene import RobotStart, Scene
from simpact.planner.loop import LoopConfig as PlannerConfig
from simpact.planner.records import PlanResult
from simpact.planner.report import write_report
from simpact.planner.session import PlanningError, plan_task
from solvers.world import World, make_world

__all__ = ["run_loop"]

_DEFAULT_CONFIG = ClosedLoopConfig()  # frozen: one default instance serves every call


def _scene_from_frame(task: Any, frame_dir: Path, out: Path, vlm: Any) -> Scene:
    """The scene to plan on from the bundle in ``frame_dir`` (real2sim written under ``out``): the task's
    scene (:func:`real2sim.task_scene.task_scene_from_frame`), or for an instruction what real2sim finds with
    its labels (the first frame's labels are kept for later frames, so objects keep their names)."""
    if not isinstance(task, InstructionTask):
        return task_scene_from_frame(task, frame_dir, out, vlm=vlm)
    found = run_real2sim(
        read_frame_bundle(frame_dir), labels=task.labels, instruction=task.instruction, vlm=vlm, out=out
    )
    if task.labels is None and found.labels.labels:
        task.labels = list(found.labels.labels)
    return found.scene


@dataclass
class _Run:
    """One call of :func:`run_loop`: its devices, settings and result, and how a stage is run and recorded."""

    camera: Camera
    robot: RobotBase
    task: Any
    out: Path
    config: ClosedLoopConfig
    vlm: Any
    confirm: Callable[[Any], str | None]
    oracle: Oracle | None
    say: Callable[[str], None]
    result: LoopResult
    t0: float = field(default_factory=time.perf_counter)

    def save(self) -> None:
        """Rewrite ``out/result.json``."""
        self.result.wall_s = time.perf_counter() - self.t0
        write_json(self.out / "result.json", self.result.to_dict())

    @contextmanager
    def stage(self, attempt: Attempt, name: str) -> Iterator[None]:
        """Time the stage ``name`` of ``attempt``; any error becomes :class:`StageFailed` naming it (a bug's
        traceback is kept in the attempt's record); the result is saved after the stage."""
        t = time.perf_counter()
        self.say(f"{_label(attempt)}: {name} ...")
        try:
            yield
        except StageFailed:
            raise
        except RobotError as exc:  # a failed connection leaves the robot as it was
            raise StageFailed(name, str(exc), robot_stopped=exc.kind != "connection") from exc
        except SimpactError as exc:
            raise StageFailed(name, str(exc)) from exc
        except Exception as exc:  # a bug must still leave the record of what was done
            attempt.info.setdefault("traceback", traceback.format_exc())
            raise StageFailed(name, f"{type(exc).__name__}: {exc}") from exc
        finally:
            attempt.timings_s[name] = round(time.perf_counter() - t, 3)
        attempt.stages_done.append(name)
        self.save()

    def fail(self, attempt: Attempt, exc: StageFailed) -> None:
        """Record that ``attempt`` failed at ``exc.stage``: the loop ends."""
        attempt.failed_stage = exc.stage
        attempt.error = {"stage": exc.stage, "message": exc.message}
        self.result.failed_stage = exc.stage
        self.result.robot_stopped = exc.robot_stopped
        self.result.stopped = "failed"
        self.say(f"{_label(attempt)}: {exc.stage} failed: {exc.message}")


# --- setup --------------------------------------------------------------------------------------------------


def _connect(run: _Run) -> tuple[StartPose, RobotStart] | None:
    """Connect and fix the capture pose (the start of every plan); None when that failed (recorded)."""
    setup = Attempt(0, run.out)
    try:
        with run.stage(setup, "connect"):
            capture_pose = _capture_pose(run)
            try:
                yaw = start_yaw(capture_pose)
            except PlanError as exc:
                raise StageFailed("connect", f"the robot's pose cannot start a plan: {exc}") from None
        run.result.header["capture_pose"] = capture_pose.to_dict()
        run.result.header["connect_s"] = setup.timings_s.get("connect")
    except StageFailed as exc:
        run.fail(setup, exc)
        run.result.header["connect_error"] = setup.error
        run.save()
        return None
    return capture_pose, RobotStart(capture_pose.position, yaw, capture_pose.gripper_width)


def _capture_pose(run: _Run) -> StartPose:
    """Connect the robot, record where it is, and return the capture pose: the task's robot start
    (``start="task"``) or the robot's current pose."""
    run.robot.connect()
    position, quaternion = run.robot.tcp_pose()
    width = float(np.clip(run.robot.gripper_width(), 0.0, 0.1))
    run.result.header["initial_pose"] = {
        "position": [round(float(v), 6) for v in position],
        "quaternion": [round(float(v), 6) for v in quaternion],
        "gripper_width": round(width, 6),
    }
    if run.config.start == "task":
        begin = run.task.nominal_scene.robot
        quaternion = quat_mul(quat_about_z(begin.yaw), np.asarray(HOME_TCP_QUATERNION))
        position, width = np.asarray(begin.position), begin.gripper_width
    return StartPose.from_dict({"position": position, "quaternion": quaternion, "gripper_width": width})


# --- the stages of an attempt -------------------------------------------------------------------------------


def _real2sim(run: _Run, attempt: Attempt, carried: Observed | None, robot_start: RobotStart) -> Scene:
    """The scene of the before-frame (the previous after-frame's, copied, from attempt 2 on), with the robot
    at the capture pose."""
    adir = attempt.dir
    if carried is not None:
        shutil.copytree(carried.real2sim_dir, adir / "real2sim", dirs_exist_ok=True)
        scene = carried.scene
        attempt.info["real2sim_from"] = f"{carried.real2sim_dir.parent.name}/{carried.real2sim_dir.name}"
    else:
        scene = _scene_from_frame(run.task, adir / "frame_before", adir / "real2sim", run.vlm)
    return replace(scene, robot=robot_start)


def _plan(
    task: Any, scene: Scene, world: World, vlm: Any, config: ClosedLoopConfig, say: Callable[[str], None]
) -> PlanResult:
    """The planner's record on ``world``, a World of ``scene``."""
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


def _plan_stage(run: _Run, attempt: Attempt, scene: Scene) -> tuple[Plan, World]:
    """The plan the planner accepted in simulation on ``scene`` and the World it was simulated in; the
    planner's record goes to ``planning/``, the plan to ``plan.json`` (``best_plan.json`` when none was
    accepted, which fails the stage)."""
    adir = attempt.dir
    world = make_world(scene)
    planned = _plan(run.task, scene, world, run.vlm, run.config, lambda line: run.say(f"  {line.strip()}"))
    write_report(planned, adir / "planning", world, instruction=run.task.instruction, video=False)
    chosen = planned.chosen
    attempt.info["planner"] = {
        "method": planned.method,
        "rollouts": len(planned.proposals),
        "accepted": planned.accepted is not None,
        "success_in_simulation": planned.success,
        "score": None if chosen is None else round(chosen.score, 6),
    }
    if chosen is not None:
        chosen.plan.save(adir / ("plan.json" if planned.accepted is not None else "best_plan.json"))
    if planned.accepted is None or chosen is None:
        best = "no rollout" if chosen is None else f"best score {chosen.score:.3f}"
        raise StageFailed(
            "plan", f"the planner accepted no plan in simulation ({best}; see {adir / 'planning'})"
        )
    return chosen.plan, world


def _validate(run: _Run, attempt: Attempt, plan: Plan, scene: Scene) -> tuple[Validation, dict[str, Any]]:
    """The safety checks against the robot's limits and ``scene``; returns the validation and the execution
    record started in ``execution/result.json``."""
    validation = validate_plan(plan, run.robot.limits, scene)
    execution: dict[str, Any] = {
        "executed": False,
        "plan_sha256": validation.plan_sha256,
        "validation": validation.to_dict(),
    }
    attempt.info["plan_sha256"] = validation.plan_sha256
    write_json(attempt.dir / "execution" / "result.json", execution)
    if not validation.ok:
        raise StageFailed("validate", f"the plan violates the safety checks: {validation.reason}")
    return validation, execution


def _confirmed(run: _Run, attempt: Attempt, validation: Validation, execution: dict[str, Any]) -> bool:
    """Ask the caller to move; a refusal makes the run a dry run (recorded) and returns False."""
    reason = run.confirm(validation)
    if reason is None:
        return True
    run.result.dry_run = reason
    run.result.stopped = "dry run"
    execution["dry_run"] = reason
    write_json(attempt.dir / "execution" / "result.json", execution)
    run.say(f"attempt {attempt.index}: plan {validation.plan_sha256[:12]} passed validation; {reason}")
    return False


def _execute(
    run: _Run, attempt: Attempt, validation: Validation, capture_pose: StartPose, execution: dict[str, Any]
) -> tuple[tuple[Any, Any, float], float]:
    """Go to the capture pose if the robot is elsewhere, then execute the plan; the execution record is
    written also when the robot stopped. Returns the tool pose before the plan and when it began (s)."""
    robot = run.robot
    here, _ = robot.tcp_pose()
    if float(np.linalg.norm(here - np.asarray(capture_pose.position))) > 0.005:
        attempt.info["transit_to_start"] = _transit(robot, capture_pose, run.config, "execute")
    before_pose = (*robot.tcp_pose(), robot.gripper_width())
    if run.oracle is not None:
        run.oracle.mark()
    t_exec = time.perf_counter()
    try:
        execution.update(
            execute_plan(
                robot,
                validation,
                ExecutionOptions(speed=run.config.speed),
                progress=lambda msg: run.say(f"  {msg}"),
            )
        )
    except PlanRefused as exc:
        execution["refused"] = str(exc)
        raise StageFailed("execute", f"refused before moving: {exc}") from None
    except ExecutionError as exc:
        execution.update(exc.result)
        execution["error"] = {"action": exc.action, "type": exc.action_type, "message": str(exc)}
        raise StageFailed("execute", str(exc), robot_stopped=True) from None
    finally:
        write_json(attempt.dir / "execution" / "result.json", execution)
    return before_pose, t_exec


def _retreat(run: _Run, attempt: Attempt, capture_pose: StartPose) -> tuple[Any, Any, float]:
    """Back to the capture pose (up, across, down) and let the scene settle; returns the tool pose there."""
    attempt.info["retreat_path"] = _transit(run.robot, capture_pose, run.config, "retreat")
    _wait(run.robot, run.config.settle_s)
    return (*run.robot.tcp_pose(), run.robot.gripper_width())


def _judge(
    run: _Run,
    attempt: Attempt,
    plan: Plan,
    world: World,
    scenes: tuple[Scene, Scene],
    frames: tuple[Frame, Frame],
    motion: Motion,
) -> bool:
    """The verdict on the observed outcome (``judgement.json``): the task's check, or the VLM's with
    ``judge="vlm"``; with an oracle its ground truth is recorded next to it, never used."""
    config, task = run.config, run.task
    scene, scene_after = scenes
    observed = observed_rollout(plan, scene, scene_after, motion.before, motion.after, motion.elapsed_s)
    judgement: dict[str, Any] = {"judge": config.judge}
    evaluation = task.evaluate(observed, scene, config.seed)
    if not isinstance(task, InstructionTask):
        judgement["task_check"] = {
            "success": evaluation.success,
            "score": round(evaluation.score, 6),
            "details": evaluation.details,
        }
    if config.judge == "vlm":
        if run.vlm is None:
            raise StageFailed("judge", "--judge vlm needs a VLM (--vlm gemini|openai|replay)")
        verdict = vlm_judge(run.vlm, task.instruction, scene, world, observed, [f.rgb for f in frames])
        judgement["vlm"] = verdict
        success = verdict["success"]
        judgement["reason"] = verdict["reason"]
    else:
        success = evaluation.success
    judgement["observed"] = {
        "before": observed.initial.to_dict()["objects"],
        "after": observed.final.to_dict()["objects"],
    }
    if run.oracle is not None:
        judgement["ground_truth"] = run.oracle.ground_truth(plan)
        attempt.info["ground_truth_success"] = judgement["ground_truth"]["success"]
    judgement["success"] = success
    write_json(attempt.dir / "judgement.json", judgement)
    if success is None:
        raise StageFailed("judge", f"no verdict: {judgement.get('reason')}")
    return bool(success)


def _attempt(
    run: _Run, attempt: Attempt, carried: Observed | None, capture_pose: StartPose, robot_start: RobotStart
) -> Observed | None:
    """One attempt, stage by stage (see the module docstring); returns what it observed after the plan, or
    None for a dry run. Raises :class:`StageFailed`."""
    adir = attempt.dir
    with run.stage(attempt, "capture"):
        frame = carried.frame if carried is not None else run.camera.capture()
        write_frame_bundle(frame, adir / "frame_before")
    with run.stage(attempt, "real2sim"):
        scene = _real2sim(run, attempt, carried, robot_start)
    with run.stage(attempt, "plan"):
        plan, world = _plan_stage(run, attempt, scene)
    with run.stage(attempt, "validate"):
        validation, execution = _validate(run, attempt, plan, scene)
    if not _confirmed(run, attempt, validation, execution):
        return None
    with run.stage(attempt, "execute"):
        before, t_exec = _execute(run, attempt, validation, capture_pose, execution)
    with run.stage(attempt, "retreat"):
        motion = Motion(before, _retreat(run, attempt, capture_pose), time.perf_counter() - t_exec)
    with run.stage(attempt, "capture_after"):
        frame_after = run.camera.capture()
        write_frame_bundle(frame_after, adir / "frame_after")
    with run.stage(attempt, "real2sim_after"):
        scene_after = _scene_from_frame(run.task, adir / "frame_after", adir / "real2sim_after", run.vlm)
    with run.stage(attempt, "judge"):
        success = _judge(run, attempt, plan, world, (scene, scene_after), (frame, frame_after), motion)
        attempt.success = success
        run.result.success = success
        run.say(f"attempt {attempt.index}: judged {'success' if success else 'failure'} ({run.config.judge})")
    return Observed(frame_after, scene_after, adir / "real2sim_after")


# --- the loop -----------------------------------------------------------------------------------------------


def _transit(robot: RobotBase, target: Any, config: ClosedLoopConfig, stage: str) -> list[list[float]]:
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
    config: ClosedLoopConfig = _DEFAULT_CONFIG,
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
    if isinstance(task, InstructionTask) and (
        config.judge != "vlm" or config.planner != "vlm" or vlm is None
    ):
        raise ValueError(
            "an instruction without a task needs a VLM to plan and to judge (planner and judge vlm)"
        )
    if isinstance(task, InstructionTask) and config.start == "task":
        raise ValueError("an instruction has no start pose of its own: start from the current pose")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = LoopResult(header={"task": task.name, "instruction": task.instruction, **(header or {})})
    result.header["config"] = config.to_dict()
    say = progress or (lambda _line: None)
    run = _Run(camera, robot, task, out, config, vlm, confirm, oracle, say, result)
    start = _connect(run)
    if start is None:
        return result
    carried: Observed | None = None  # the last after-frame, its scene and real2sim folder
    try:
        for n in range(1, config.attempts + 1):
            attempt = Attempt(n, out / f"attempt_{n}")
            result.attempts.append(attempt)
            try:
                carried = _attempt(run, attempt, carried, *start)
            except StageFailed as exc:
                run.fail(attempt, exc)
                break
            if carried is None:  # a dry run
                break
            run.save()
            if result.success:
                result.stopped = "success"
                break
        else:
            result.stopped = "attempts exhausted"
    finally:
        try:
            robot.disconnect()
        finally:
            run.save()
    return result
