"""The ``simpact`` command. Every verb that produces results writes ``--out DIR/result.json`` and prints a
one-line summary; bad input exits with status 2 and a one-line reason."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simpact.jsonio import write_json

__all__ = ["main"]


REACH_TOLERANCE_M = 0.005
"""Waypoints the arm's joints cannot reach closer than this are reported, m."""


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


def _camera(task: Any, path: str | None) -> Any:
    """The rendering camera: from ``--camera FILE`` (YAML or JSON), else the task's ``camera``, else the
    default D435i view."""
    import yaml

    from solvers.mujoco.render import CameraSpec

    source = path or f"task {task.name} camera"
    try:
        raw = yaml.safe_load(Path(path).read_text()) if path else task.raw.get("camera")
        return None if raw is None else CameraSpec.from_dict(raw)
    except (OSError, yaml.YAMLError, ValueError, TypeError) as exc:
        raise UsageError(f"{source}: {exc}") from None


def _world(task_name: str, seed: int, camera: str | None = None) -> tuple[Any, Any, Any]:
    from simpact.tasks import load_task
    from solvers.mujoco.world import MujocoWorld

    task = load_task(task_name)
    scene = task.scene(seed)
    return task, scene, MujocoWorld(scene, camera=_camera(task, camera))


def cmd_tasks(args: argparse.Namespace) -> None:
    from simpact.tasks import list_tasks

    for name in list_tasks():
        print(name)


def cmd_rollout(args: argparse.Namespace) -> None:
    from simpact.actions import load_plan

    t0 = time.perf_counter()
    plan = None if args.plan == "reference" else load_plan(args.plan)
    task, scene, world = _world(args.task, args.seed)
    if plan is None:
        plan = task.reference_plan(scene, world.start_pose(), args.seed)
    rollout = world.rollout(plan, tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rollout.plan.save(out / "plan.json")
    video = None
    if args.video:
        from solvers.mujoco.playback import write_rollout_video

        assert rollout.trace is not None
        print(
            f"rendering {out / 'rollout.mp4'} ({rollout.trace.time[-1]:.1f} s of simulation) ...", flush=True
        )
        video = write_rollout_video(world, rollout.trace, out / "rollout.mp4").name
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
        "sim_time_s": round(rollout.nsteps * world.options.timestep, 4),
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
    from real2sim.frame import write_frame_bundle
    from solvers.mujoco.playback import render_frame

    task, _, world = _world(args.task, args.seed, args.camera)
    frame = render_frame(world)
    frame.metadata.update({"task": task.name, "seed": args.seed, "instruction": task.instruction})
    out = write_frame_bundle(frame, args.out)
    print(
        f"{task.name} seed {args.seed}: {frame.width}x{frame.height} frame with "
        f"{len(frame.mask_names)} object masks -> {out}"
    )


def _seeds(text: str) -> list[int]:
    """``--seeds`` (``1-10``, ``0,3,5``) as a list, or a one-line usage error."""
    from simpact.bench.tasks import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_bench_tasks(args: argparse.Namespace) -> None:
    from simpact.bench.tasks import BenchError, Progress, format_table, run_tasks
    from simpact.planner.commands import VLM_ARGUMENTS, build_vlm
    from simpact.tasks import list_tasks, load_task

    seeds = _seeds(args.seeds)
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    vlm: dict[str, Any] = {key: getattr(args, key) for key in VLM_ARGUMENTS}
    if args.planner == "vlm":
        if args.vlm is None:
            raise UsageError("--planner vlm needs --vlm gemini|openai|replay")
        build_vlm(args)  # a bad VLM setting fails here, before any episode
    elif args.vlm is not None:
        raise UsageError(f"--vlm goes with --planner vlm, not --planner {args.planner}")
    else:
        build_vlm(argparse.Namespace(**{**vlm, "vlm": "none"}))  # --model etc. need --planner vlm
    names = args.tasks or list_tasks()
    for name in names:
        load_task(name)  # unknown names fail before any work

    out = Path(args.out)
    try:
        result = run_tasks(
            names,
            seeds,
            out,
            Progress(sys.stderr),
            planner=args.planner,
            vlm=vlm if args.planner == "vlm" else None,
            workers=args.workers,
            executor=args.executor,
        )
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    print(format_table(result))
    planner = f"vlm {args.vlm}" if args.planner == "vlm" else args.planner
    print(f"bench tasks ({planner}, seeds {args.seeds}, {args.workers} workers) -> {out / 'result.json'}")
    if result["errors"]:
        raise UsageError(
            f"{len(result['errors'])} episode(s) failed with an error (see above); rerun to retry"
        )


def cmd_bench_audit(args: argparse.Namespace) -> None:
    from simpact.bench.audit import run_audit_bench

    seeds = _seeds(args.seeds)

    def progress(record: dict[str, Any]) -> None:
        verdict = "ok  " if record["correct"] else "MISS"
        label = "artifact" if record["artifact"] else "clean"
        print(f"  {verdict} {record['name']} ({label}): flagged={record['flagged']}", flush=True)

    out = Path(args.out)
    result = run_audit_bench(out, seeds, progress=progress, pictures=args.pictures)
    print(
        f"bench audit ({len(seeds)} episodes): precision {result['precision']:.3f}, "
        f"recall {result['recall']:.3f}, {result['fp']} false positives, {result['fn']} false negatives "
        f"-> {out / 'result.json'}"
    )


def cmd_bench(args: argparse.Namespace) -> None:
    from simpact.bench.perf import run_perf

    result = run_perf(task_name=args.task, k=args.k, repeats=args.repeats)
    out = write_json(Path(args.out) / "result.json", result)
    print(
        f"bench perf on {result['task']}: rollout_vs_bare_ratio {result['rollout_vs_bare_ratio']:.2f}, "
        f"parallel_speedup {result['parallel_speedup']:.2f} on {result['threads']} threads -> {out}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simpact", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)

    verbs.add_parser("tasks", help="list the task configs, one name per line").set_defaults(func=cmd_tasks)

    p = verbs.add_parser("rollout", help="roll a plan out on a task and judge it")
    p.add_argument("task", help="task name (see `simpact tasks`) or a task config file")
    p.add_argument(
        "--plan", required=True, help="plan JSON file, or 'reference' for the task's reference plan"
    )
    p.add_argument("--seed", type=int, default=0, help="scene randomisation seed (0 = nominal)")
    p.add_argument("--video", action="store_true", help="also write rollout.mp4")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_rollout)

    p = verbs.add_parser("render", help="render a task scene as an RGB-D frame bundle")
    p.add_argument("task")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--camera", help="camera file (YAML/JSON: width, height, K, and T_base_cam or eye + target)"
    )
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_render)

    from simpact.guard.commands import add_audit_parser

    add_audit_parser(verbs)

    from robot.commands import add_robot_parser

    add_robot_parser(verbs)

    from simpact.bench.tasks import EXECUTORS, PLANNERS
    from simpact.planner.commands import VLM_CHOICES, add_plan_parser, add_vlm_arguments

    add_plan_parser(verbs)

    from real2sim.commands import add_real2sim_parser

    add_real2sim_parser(verbs)

    bench = verbs.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    p = bench.add_parser("perf", help="rollout throughput vs bare mj_step, parallel speedup")
    p.add_argument("--task", default="non_toppling_push")
    p.add_argument("--k", type=int, default=10, help="rollouts in the parallel batch")
    p.add_argument("--repeats", type=int, default=5, help="timing pairs per ratio (median reported)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_bench)
    p = bench.add_parser("tasks", help="success of a planner on every task over seeds (resumable, parallel)")
    p.add_argument("tasks", nargs="*", help="task names (default: all)")
    p.add_argument("--seeds", default="1-10", help="e.g. 1-10 or 0,3,5")
    p.add_argument(
        "--planner",
        choices=PLANNERS,
        default="reference",
        help="reference plans, a VLM-free planner, or SIMPACT's VLM loop (default reference)",
    )
    add_vlm_arguments(p, VLM_CHOICES[1:], None, "VLM back-end (with --planner vlm)")
    p.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="parallel episodes (default: cores)"
    )
    p.add_argument(
        "--executor", choices=EXECUTORS, default="local", help="local process pool, or a Ray cluster (ray)"
    )
    p.add_argument("--out", required=True, help="output directory; rerun with the same one to resume")
    p.set_defaults(func=cmd_bench_tasks)
    p = bench.add_parser("audit", help="SimuGuard precision and recall on a labelled suite (resumable)")
    p.add_argument("--seeds", default="0-53", help="episode seeds; 9 families cycle through them")
    p.add_argument("--pictures", action="store_true", help="also write an HTML report with plots per episode")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_bench_audit)

    from simpact.bench.real2sim import add_bench_real2sim_parser

    add_bench_real2sim_parser(bench)

    from simpact.bench.sim2real import add_sim2real_parser

    add_sim2real_parser(bench)
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    from real2sim.frame import FrameError
    from simpact.actions import PlanError
    from simpact.guard.commands import AuditError
    from simpact.planner.commands import PlanningError
    from simpact.scene import SceneError
    from simpact.tasks import TaskError

    return (
        UsageError,
        AuditError,
        PlanningError,
        PlanError,
        TaskError,
        SceneError,
        FrameError,
        FileNotFoundError,
    )


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering without a display; read at mujoco import
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], None] = args.func
    try:
        func(args)
    except _user_errors() as exc:
        print(f"simpact {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
