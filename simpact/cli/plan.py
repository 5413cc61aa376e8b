"""``simpact plan TASK``: Algorithm 1 with a VLM, or a VLM-free planner with ``--vlm none`` (the default).

Checks every input and the output folder before the first rollout or request, then writes the run's record
under ``--out DIR`` as it goes (see :mod:`simpact.planner.report`): ``result.json`` from the start with its
``status``, each proposal and VLM exchange when done, the full report at the end, or of the partial run
after Ctrl-C (exit 130) or a failed VLM service (exit 4). ``--resume`` continues a run from its folder
(:mod:`simpact.planner.resume`). Prints a one-line summary of the accepted plan's outcome.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from real2sim.task_scene import task_scene_from_frame
from simpact.cli.common import add_vlm_arguments, vlm_from_args
from simpact.cli.preflight import require_packages
from simpact.core.errors import ServiceError, UsageError
from simpact.core.rundir import RunRecord, prepare_out
from simpact.core.vocab import OFFLINE_METHODS, VLM_CHOICES
from simpact.planner.audit import audit_summary
from simpact.planner.loop import LoopConfig
from simpact.planner.records import PlanResult, best_by_score
from simpact.planner.report import RunWriter, outcome_line, write_report
from simpact.planner.rerun_log import log_session
from simpact.planner.resume import ReplayFirstVLM, Resumed
from simpact.planner.session import PlanningError, plan_task
from simpact.tasks import Task, load_task
from solvers.world import World, make_world

__all__ = ["add_parsers", "cmd_plan"]


def _progress(line: str) -> None:
    print(line, flush=True)


def _check_inputs(args: argparse.Namespace) -> None:
    """Every input path names a readable file (or, for ``--frame``, an existing path) before any work."""
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: must be 0 or more")
    for flag, value in (("--frame", args.frame), ("--replay", args.replay)):
        if value is not None and not Path(value).exists():
            raise UsageError(f"{flag} {value}: no such file")
    if args.replay is not None and Path(args.replay).is_dir():
        raise UsageError(f"--replay {args.replay}: is a folder, not a recording")
    if args.frame is not None:
        require_packages("cv2", "open3d")  # real2sim builds the scene from the frame


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in sorted(vars(args).items()) if k not in ("func", "verb")}


def _partial(task: Task, seed: int, writer: RunWriter, vlm: Any, planner: str, t0: float) -> PlanResult:
    """The run so far, from what the writer received: nothing accepted, best by score."""
    proposals = [writer.proposals[i] for i in sorted(writer.proposals)]
    return PlanResult(
        task=task.name,
        seed=seed,
        proposals=proposals,
        accepted=None,
        best=best_by_score(proposals),
        wall_s=time.perf_counter() - t0,
        vlm=None if vlm is None else vlm.name,
        iterations=max((p.iteration for p in proposals), default=-1) + 1,
        method="simpact" if planner == "vlm" else planner,
        audit=audit_summary(proposals),
        exchanges=[writer.exchanges[i] for i in sorted(writer.exchanges)],
    )


def _resimulate_chosen(result: PlanResult, world: World, task: Task) -> None:
    """A reused proposal has no physics trace: roll the chosen plan out again for its images and video."""
    chosen = result.chosen
    if chosen is not None and chosen.rollout.trace is None:
        chosen.rollout = world.rollouts([chosen.plan], tail_s=task.tail_s)[0]


def cmd_plan(args: argparse.Namespace) -> None:
    """Plan ``args.task`` and write the record under ``args.out`` as the run goes."""
    try:
        config = LoopConfig(k=args.k, k_max=args.k_max)
    except ValueError as exc:
        raise PlanningError(str(exc)) from None
    _check_inputs(args)
    task = load_task(args.task)
    vlm = vlm_from_args(args)
    out = prepare_out(args.out, overwrite=args.overwrite, resume=args.resume)
    resumed = Resumed.load(out) if args.resume else Resumed()
    planner = args.planner if vlm is None else "vlm"
    t0 = time.perf_counter()
    with RunRecord.start(out, "plan", _settings(args)) as run:
        writer = RunWriter(out, run)
        if vlm is not None:
            vlm = ReplayFirstVLM(vlm, resumed, writer.answer)
        scene = task.scene(args.seed)
        if args.frame:
            scene = task_scene_from_frame(task, args.frame, out / "real2sim", vlm=vlm)
        world = make_world(scene)
        try:
            result = plan_task(
                task, scene, world, args.seed, planner, vlm, config, _progress, writer.hooks(resumed.reuse)
            )
        except (KeyboardInterrupt, ServiceError) as exc:
            if isinstance(exc, ServiceError):
                run.finish("failed", error=str(exc))
            else:
                run.finish("interrupted")
            partial = _partial(task, args.seed, writer, vlm, planner, t0)
            write_report(
                partial, out, None, instruction=task.instruction, record=run, written=writer.proposals
            )
            raise
        result.wall_s = time.perf_counter() - t0
        if not args.no_video:
            _resimulate_chosen(result, world, task)
        resumed_counts = {"proposals": resumed.reused, "exchanges": resumed.replayed}
        extra = {"resumed": resumed_counts} if args.resume else {}
        path = write_report(
            result,
            out,
            world,
            instruction=task.instruction,
            video=not args.no_video,
            record=run,
            written=writer.proposals,
            extra=extra,
        )
    if args.rerun:
        rrd = log_session(result, scene, out / "session.rrd")
        print(f"Rerun recording -> {rrd}", flush=True)
    again = f", {resumed.reused} proposal(s) and {resumed.replayed} answer(s) reused" if args.resume else ""
    print(
        f"{task.name} seed {args.seed}: {outcome_line(result)}, "
        f"{result.extra.get('simulated_rollouts', len(result.proposals))} rollouts, "
        f"{result.iterations} round(s), {result.wall_s:.1f} s, VLM {result.vlm or 'none'}{again} -> {path}"
    )


def add_parsers(verbs: Any) -> None:
    """Register ``plan`` (sets ``func``)."""
    p = verbs.add_parser("plan", help="plan a task: SIMPACT's VLM loop, or a VLM-free planner offline")
    p.add_argument("task", help="task name (see `simpact tasks`) or a task config file")
    add_vlm_arguments(p, VLM_CHOICES, "none", "VLM back-end (default none: offline)")
    p.add_argument("--seed", type=int, default=0, help="scene randomisation seed (0 = nominal)")
    p.add_argument(
        "--planner",
        choices=OFFLINE_METHODS,
        default=OFFLINE_METHODS[0],
        help="VLM-free planner (with --vlm none): tree (default; primitives, no skeleton), skeleton (CEM "
        "over the task's skeleton; cem is its former name), template, gaussian",
    )
    p.add_argument("--method", dest="planner", choices=OFFLINE_METHODS, help=argparse.SUPPRESS)
    p.add_argument(
        "--frame", help="plan on the scene real2sim builds from this RGB-D frame (bundle, PoseCNN png, .npy)"
    )
    p.add_argument("--no-video", action="store_true", help="skip rollout.mp4")
    p.add_argument(
        "--rerun", action="store_true", help="also log the session to DIR/session.rrd (needs rerun-sdk)"
    )
    p.add_argument("--out", required=True, help="output directory (refused if it holds an earlier run)")
    p.add_argument(
        "--overwrite", action="store_true", help="clear an earlier run in --out first, then plan afresh"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out: reuse its VLM answers and rolled-out proposals, plan the rest",
    )
    p.set_defaults(func=cmd_plan)
