"""``simpact plan TASK``: Algorithm 1 with a VLM, or a VLM-free planner with ``--vlm none`` (the default).

Writes the run's record under ``--out DIR`` (see :mod:`simpact.planner.report`) and prints a one-line
summary. Bad input raises :class:`PlanningError`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simpact.core.errors import SimpactError

__all__ = [
    "VLM_ARGUMENTS",
    "PlanningError",
    "add_plan_parser",
    "add_vlm_arguments",
    "build_vlm",
    "cmd_plan",
]

VLM_CHOICES = ("none", "gemini", "openai", "replay")
METHODS = ("cem", "gaussian", "template")


class PlanningError(SimpactError, ValueError):
    """Bad input to ``simpact plan`` (an unusable VLM setting, a missing file, a missing planner)."""


def build_vlm(args: argparse.Namespace) -> Any:
    """The VLM the flags ask for (see :func:`simpact.vlm.settings.build_vlm`)."""
    from simpact.vlm.settings import build_vlm as from_settings

    return from_settings(
        args.vlm, model=args.model, base_url=args.base_url, replay=args.replay, record=args.record
    )


def cmd_plan(args: argparse.Namespace) -> None:
    """Plan ``args.task`` and write the record under ``args.out``."""
    from simpact.planner.loop import LoopConfig
    from simpact.planner.report import write_report
    from simpact.planner.session import PlanningError, plan_task
    from simpact.tasks import load_task
    from solvers.mujoco.world import MujocoWorld

    try:
        config = LoopConfig(k=args.k, k_max=args.k_max)
    except ValueError as exc:
        raise PlanningError(str(exc)) from None
    vlm = build_vlm(args)
    task = load_task(args.task)
    scene = task.scene(args.seed)
    if getattr(args, "frame", None):
        from real2sim.task_scene import task_scene_from_frame

        scene = task_scene_from_frame(task, args.frame, Path(args.out) / "real2sim", vlm=vlm)
    world = MujocoWorld(scene)

    def progress(line: str) -> None:
        print(line, flush=True)

    t0 = time.perf_counter()
    planner = args.method if vlm is None else "vlm"
    result = plan_task(task, scene, world, args.seed, planner, vlm, config, progress)
    result.wall_s = time.perf_counter() - t0
    path = write_report(result, args.out, world, instruction=task.instruction, video=not args.no_video)
    if args.rerun:
        from simpact.planner.rerun_log import log_session

        try:
            rrd = log_session(result, scene, Path(args.out) / "session.rrd")
        except ImportError as exc:
            raise PlanningError(str(exc)) from None
        print(f"Rerun recording -> {rrd}", flush=True)
    verdict = "success" if result.success else "failure"
    score = f"score {result.chosen.score:.3f}" if result.chosen is not None else "no rollout"
    print(
        f"{task.name} seed {args.seed}: {verdict} ({score}), {len(result.proposals)} rollouts, "
        f"{result.iterations} round(s), {result.wall_s:.1f} s, VLM {result.vlm or 'none'} -> {path}"
    )


VLM_ARGUMENTS = ("vlm", "model", "base_url", "replay", "record", "k", "k_max")
"""Destinations of the flags of :func:`add_vlm_arguments` (what :func:`build_vlm` and ``LoopConfig`` read)."""


def add_vlm_arguments(
    p: argparse.ArgumentParser, choices: Sequence[str], default: str | None, vlm_help: str
) -> None:
    """Add the VLM flags of ``simpact plan`` to ``p``: ``--vlm`` (``choices``, ``default``), ``--model``,
    ``--base-url``, ``--replay``, ``--record``, and Algorithm 1's ``--k`` and ``--k-max``."""
    p.add_argument("--vlm", choices=choices, default=default, help=vlm_help)
    p.add_argument("--model", help="VLM model name (back-end default otherwise)")
    p.add_argument("--base-url", help="server URL for an OpenAI-compatible or Gemini endpoint")
    p.add_argument("--replay", help="JSONL of recorded answers (with --vlm replay)")
    p.add_argument("--record", help="append every VLM request and answer to this JSONL file")
    p.add_argument("--k", type=int, default=10, help="plans sampled in the first round")
    p.add_argument("--k-max", type=int, default=13, help="most rollouts in all")


def add_plan_parser(verbs: Any) -> argparse.ArgumentParser:
    """Register ``plan`` on the ``simpact`` subparsers (sets ``func``)."""
    p = verbs.add_parser("plan", help="plan a task: SIMPACT's VLM loop, or a VLM-free planner offline")
    p.add_argument("task", help="task name (see `simpact tasks`) or a task config file")
    add_vlm_arguments(p, VLM_CHOICES, "none", "VLM back-end (default none: offline)")
    p.add_argument("--seed", type=int, default=0, help="scene randomisation seed (0 = nominal)")
    p.add_argument("--method", choices=METHODS, default="cem", help="VLM-free planner (with --vlm none)")
    p.add_argument(
        "--frame", help="plan on the scene real2sim builds from this RGB-D frame (bundle, PoseCNN png, .npy)"
    )
    p.add_argument("--no-video", action="store_true", help="skip rollout.mp4")
    p.add_argument(
        "--rerun", action="store_true", help="also log the session to DIR/session.rrd (needs rerun-sdk)"
    )
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_plan)
    return p
