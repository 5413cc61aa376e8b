"""``simpact tasks``, ``rollout`` and ``render``: list tasks, roll a plan out on a task, render its scene as a
frame bundle."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import yaml

from simpact.cli.preflight import input_file, seed
from simpact.core.actions import Plan, load_plan
from simpact.core.errors import UsageError
from simpact.core.frame import write_frame_bundle
from simpact.core.jsonio import write_json
from simpact.core.rundir import prepare_out
from simpact.core.scene import Scene
from simpact.tasks import Task, list_tasks, load_task
from solvers.mujoco.render import CameraSpec
from solvers.world import World, make_world

__all__ = ["add_parsers"]

REACH_TOLERANCE_M = 0.005
"""Waypoints the arm's joints cannot reach closer than this are reported, m."""


def _camera(task: Task, path: str | None) -> CameraSpec | None:
    """The rendering camera: from ``--camera FILE`` (YAML or JSON), else the task's ``camera``, else the
    default D435i view."""
    source = path or f"task {task.name} camera"
    try:
        raw = yaml.safe_load(input_file(path, "--camera").read_text()) if path else task.raw.get("camera")
        if raw is not None and not isinstance(raw, dict):
            raise ValueError(f"expected a mapping of camera fields, got {type(raw).__name__}")
        return None if raw is None else CameraSpec.from_dict(raw)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, TypeError) as exc:
        raise UsageError(f"{source}: {exc}") from None


def _world(task_name: str, seed: int, camera: str | None = None) -> tuple[Task, Scene, World]:
    task = load_task(task_name)
    scene = task.scene(seed)
    return task, scene, make_world(scene, camera=_camera(task, camera))


def _plan(path: str) -> Plan:
    """The plan file ``--plan``, read and checked before any simulation."""
    try:
        return load_plan(input_file(path, "--plan"))
    except (OSError, UnicodeDecodeError) as exc:  # a binary file, a file that vanished
        raise UsageError(f"--plan {path}: cannot read it ({exc})") from None


def cmd_tasks(args: argparse.Namespace) -> None:
    for name in list_tasks():
        print(name)


def cmd_rollout(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    seed(args.seed)
    plan = None if args.plan == "reference" else _plan(args.plan)
    task, scene, world = _world(args.task, args.seed)
    out = prepare_out(args.out, overwrite=args.overwrite)
    if plan is None:
        plan = task.reference_plan(scene, world.start_pose(), args.seed)
    rollout = world.rollout(plan, tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene, args.seed)
    rollout.plan.save(out / "plan.json")
    video = None
    if args.video:
        assert rollout.trace is not None
        print(
            f"rendering {out / 'rollout.mp4'} ({rollout.trace.time[-1]:.1f} s of simulation) ...", flush=True
        )
        video = world.write_video(rollout.trace, out / "rollout.mp4").name
    result = {
        "task": task.name,
        "instruction": task.instruction,
        "seed": args.seed,
        "success": evaluation.success,
        "score": evaluation.score,
        "details": evaluation.details,
        "final_state": {
            name: {"position": s["position"], "quaternion": s["quaternion"]}
            for name, s in rollout.final.to_dict()["objects"].items()
        },
        "states": rollout.to_dict()["states"],
        "plan": "plan.json",
        "video": video,
        "ik_residual_max_m": round(rollout.ik_residual_max, 6),
        "sim_time_s": round(rollout.final.time - rollout.initial.time, 4),
        "rollout_wall_s": round(rollout.wall_s, 4),
        "wall_s": round(time.perf_counter() - t0, 4),
    }
    write_json(out / "result.json", result)
    if rollout.ik_residual_max > REACH_TOLERANCE_M:
        print(
            f"simpact rollout: warning: the plan leaves the robot's reach (the arm falls "
            f"{rollout.ik_residual_max:.3f} m short of a waypoint)",
            file=sys.stderr,
        )
    verdict = "success" if evaluation.success else "failure"
    print(
        f"{task.name} seed {args.seed}: {verdict}, score {evaluation.score:.3f}, "
        f"{result['sim_time_s']} s simulated in {result['wall_s']} s -> {out / 'result.json'}"
    )


def cmd_render(args: argparse.Namespace) -> None:
    seed(args.seed)
    task, _, world = _world(args.task, args.seed, args.camera)
    prepare_out(args.out, overwrite=args.overwrite)
    frame = world.render()
    frame.metadata.update({"task": task.name, "seed": args.seed, "instruction": task.instruction})
    out = write_frame_bundle(frame, args.out)
    print(
        f"{task.name} seed {args.seed}: {frame.width}x{frame.height} frame with "
        f"{len(frame.mask_names)} object masks -> {out}"
    )


def add_parsers(verbs: Any) -> None:
    """Register ``tasks``, ``rollout`` and ``render``."""
    verbs.add_parser("tasks", help="list the task configs, one name per line").set_defaults(func=cmd_tasks)

    p = verbs.add_parser("rollout", help="roll a plan out on a task and judge it")
    p.add_argument("task", help="task name (see `simpact tasks`) or a task config file")
    p.add_argument(
        "--plan", required=True, help="plan JSON file, or 'reference' for the task's reference plan"
    )
    p.add_argument("--seed", type=int, default=0, help="scene randomisation seed (0 = nominal)")
    p.add_argument("--video", action="store_true", help="also write rollout.mp4")
    _add_out(p)
    p.set_defaults(func=cmd_rollout)

    p = verbs.add_parser("render", help="render a task scene as an RGB-D frame bundle")
    p.add_argument("task", help="task name (see `simpact tasks`) or a task config file")
    p.add_argument("--seed", type=int, default=0, help="scene randomisation seed (0 = nominal)")
    p.add_argument(
        "--camera", help="camera file (YAML/JSON: width, height, K, and T_base_cam or eye + target)"
    )
    _add_out(p, "frame bundle directory to write")
    p.set_defaults(func=cmd_render)


def _add_out(p: argparse.ArgumentParser, what: str = "output directory") -> None:
    p.add_argument("--out", required=True, help=f"{what} (refused if it holds an earlier run)")
    p.add_argument("--overwrite", action="store_true", help="clear an --out that holds an earlier run")
