"""``simpact plan TASK``: Algorithm 1 with a VLM, or a VLM-free planner with ``--vlm none`` (the default).

Writes the run's record under ``--out DIR`` (see :mod:`simpact.planner.report`) and prints a one-line
summary. Bad settings raise :class:`~simpact.planner.session.PlanningError`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from real2sim.task_scene import task_scene_from_frame
from simpact.cli.common import add_vlm_arguments, vlm_from_args
from simpact.core.vocab import OFFLINE_METHODS, VLM_CHOICES
from simpact.planner.loop import LoopConfig
from simpact.planner.report import write_report
from simpact.planner.rerun_log import log_session
from simpact.planner.session import PlanningError, plan_task
from simpact.tasks import load_task
from solvers.world import make_world

__all__ = ["add_parsers", "cmd_plan"]


def _progress(line: str) -> None:
    print(line, flush=True)


def cmd_plan(args: argparse.Namespace) -> None:
    """Plan ``args.task`` and write the record under ``args.out``."""
    try:
        config = LoopConfig(k=args.k, k_max=args.k_max)
    except ValueError as exc:
        raise PlanningError(str(exc)) from None
    vlm = vlm_from_args(args)
    task = load_task(args.task)
    scene = task.scene(args.seed)
    if getattr(args, "frame", None):
        scene = task_scene_from_frame(task, args.frame, Path(args.out) / "real2sim", vlm=vlm)
    world = make_world(scene)
    t0 = time.perf_counter()
    planner = args.method if vlm is None else "vlm"
    result = plan_task(task, scene, world, args.seed, planner, vlm, config, _progress)
    result.wall_s = time.perf_counter() - t0
    path = write_report(result, args.out, world, instruction=task.instruction, video=not args.no_video)
    if args.rerun:
        rrd = log_session(result, scene, Path(args.out) / "session.rrd")
        print(f"Rerun recording -> {rrd}", flush=True)
    verdict = "success" if result.success else "failure"
    score = f"score {result.chosen.score:.3f}" if result.chosen is not None else "no rollout"
    print(
        f"{task.name} seed {args.seed}: {verdict} ({score}), {len(result.proposals)} rollouts, "
        f"{result.iterations} round(s), {result.wall_s:.1f} s, VLM {result.vlm or 'none'} -> {path}"
    )


def add_parsers(verbs: Any) -> None:
    """Register ``plan`` (sets ``func``)."""
    p = verbs.add_parser("plan", help="plan a task: SIMPACT's VLM loop, or a VLM-free planner offline")
    p.add_argument("task", help="task name (see `simpact tasks`) or a task config file")
    add_vlm_arguments(p, VLM_CHOICES, "none", "VLM back-end (default none: offline)")
    p.add_argument("--seed", type=int, default=0, help="scene randomisation seed (0 = nominal)")
    p.add_argument(
        "--method", choices=OFFLINE_METHODS, default="cem", help="VLM-free planner (with --vlm none)"
    )
    p.add_argument(
        "--frame", help="plan on the scene real2sim builds from this RGB-D frame (bundle, PoseCNN png, .npy)"
    )
    p.add_argument("--no-video", action="store_true", help="skip rollout.mp4")
    p.add_argument(
        "--rerun", action="store_true", help="also log the session to DIR/session.rrd (needs rerun-sdk)"
    )
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_plan)
