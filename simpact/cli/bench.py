"""``simpact bench ...``: the benchmarks (perf, tasks, audit, real2sim, sim2real)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from simpact.core.errors import UsageError
from simpact.core.jsonio import write_json

__all__ = ["add_parsers"]


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


def add_parsers(verbs: Any) -> None:
    """Register ``bench`` and its sub-verbs."""
    from simpact.bench.tasks import EXECUTORS, PLANNERS
    from simpact.planner.commands import VLM_CHOICES, add_vlm_arguments

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
