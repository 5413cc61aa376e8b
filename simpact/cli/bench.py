"""``simpact bench ...``: the benchmarks (perf, tasks, audit, real2sim, sim2real, calvin)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robot.sim2real import RealityGap
from simpact.bench.audit import run_audit_bench
from simpact.bench.audit_rollouts import run_rollout_audit
from simpact.bench.calvin import MODES as CALVIN_MODES
from simpact.bench.calvin import VLM_MODE as CALVIN_VLM_MODE
from simpact.bench.calvin import CalvinProgress, run_calvin
from simpact.bench.calvin import format_table as calvin_table
from simpact.bench.episodes import BenchError, Progress, ignored_note, parse_seeds
from simpact.bench.mpm import run_mpm_bench
from simpact.bench.perf import run_perf
from simpact.bench.real2sim import bench_result, chosen_real_frames, run_real2sim_bench
from simpact.bench.real2sim_markdown import load_baseline, markdown_report
from simpact.bench.real2sim_report import format_table as real2sim_table
from simpact.bench.rope import run_rope_bench
from simpact.bench.sim2real import Sim2RealProgress, run_sim2real
from simpact.bench.sim2real import format_table as sim2real_table
from simpact.bench.tasks import format_table as tasks_table
from simpact.bench.tasks import run_tasks
from simpact.cli.common import VLM_ARGUMENTS, add_vlm_arguments, vlm_from_args
from simpact.cli.preflight import finite, positive_int, require_packages, reusable_out
from simpact.core.errors import UsageError
from simpact.core.jsonio import atomic_write_text
from simpact.core.rundir import RunRecord
from simpact.core.vocab import BENCH_PLANNERS, EXECUTORS, SKELETON_METHODS, VLM_CHOICES
from simpact.tasks import list_tasks, load_task

__all__ = ["add_parsers"]


def _seeds(text: str) -> list[int]:
    """``--seeds`` (``1-10``, ``0,3,5``) as a list, or a one-line usage error."""
    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _task_names(tasks: list[str]) -> list[str]:
    """The named tasks (all when none is named), each loaded so that an unknown name fails before any work."""
    names = tasks or list_tasks()
    for name in names:
        load_task(name)
    return names


def _with_ignored(line: str, result: dict[str, Any]) -> str:
    """``line`` with the note on earlier log lines under other settings, if any."""
    note = ignored_note(result.get("ignored", 0))
    return f"{line} ({note})" if note else line


def _recorded(out: Path, command: str, settings: dict[str, Any], run: Callable[[], dict[str, Any]]) -> Any:
    """``run()``'s result, with ``out/result.json`` saying ``running`` from the start and ``done`` (merged
    with the result), ``interrupted`` or ``failed`` at the end; finished episodes are in ``runs.jsonl``."""
    with RunRecord.start(out, command, settings) as record:
        result = run()
        record.update(**result)
    return result


def cmd_bench_tasks(args: argparse.Namespace) -> None:
    seeds = _seeds(args.seeds)
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    vlm: dict[str, Any] = {key: getattr(args, key) for key in VLM_ARGUMENTS}
    if args.planner == "vlm":
        if args.vlm is None:
            raise UsageError("--planner vlm needs --vlm gemini|openai|replay")
        vlm_from_args(args)  # a bad VLM setting fails here, before any episode
    elif args.vlm is not None:
        raise UsageError(f"--vlm goes with --planner vlm, not --planner {args.planner}")
    else:
        vlm_from_args(args, "none")  # --model etc. need --planner vlm
    names = _task_names(args.tasks)
    out = reusable_out(args.out)
    try:
        result = _recorded(
            out,
            "bench tasks",
            {"tasks": names, "seeds": seeds, "planner": args.planner, "workers": args.workers},
            lambda: run_tasks(
                names,
                seeds,
                out,
                Progress(sys.stderr),
                planner=args.planner,
                vlm=vlm if args.planner == "vlm" else None,
                workers=args.workers,
                executor=args.executor,
            ),
        )
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    print(tasks_table(result))
    planner = f"vlm {args.vlm}" if args.planner == "vlm" else args.planner
    line = f"bench tasks ({planner}, seeds {args.seeds}, {args.workers} workers) -> {out / 'result.json'}"
    print(_with_ignored(line, result))
    if result["errors"]:
        raise UsageError(
            f"{len(result['errors'])} episode(s) failed with an error (see above); rerun to retry"
        )


def cmd_bench_audit(args: argparse.Namespace) -> None:
    if args.rollouts:
        _bench_audit_rollouts(args)
        return
    seeds = _seeds(args.seeds) if args.seeds else None
    positive_int(args.episodes, "--episodes")

    def progress(record: dict[str, Any]) -> None:
        verdict = {"tp": "ok  ", "tn": "ok  ", "fn": "MISS", "fp": "FALSE"}.get(record["outcome"], "--  ")
        print(
            f"  {verdict} {record['name']} (label {record['label']}): flagged={record['flagged']}", flush=True
        )

    out = reusable_out(args.out)
    result = _recorded(
        out,
        "bench audit",
        {"split": args.split, "episodes": args.episodes, "seeds": seeds},
        lambda: run_audit_bench(
            out, args.split, args.episodes, progress=progress, pictures=args.pictures, seeds=seeds
        ),
    )

    def rate(key: str) -> str:
        value, ci = result[key], result[f"{key}_ci95"]
        return "n/a" if value is None else f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

    line = (
        f"bench audit ({result['split']}, {result['episodes']} episodes, {result['ambiguous']} ambiguous): "
        f"precision {rate('precision')}, recall {rate('recall')}, {result['fp']} false alarms, "
        f"{result['fn']} misses, {len(result['screen']['violations'])} screen violations "
        f"-> {out / 'result.json'}"
    )
    print(_with_ignored(line, result))


def _bench_audit_rollouts(args: argparse.Namespace) -> None:
    seeds = _seeds(args.seeds or "1-100")
    names = _task_names(args.tasks)

    def progress(record: dict[str, Any]) -> None:
        flag = f"FLAGGED ({len(record['events'])})" if record["flagged"] else "clean"
        print(f"  {record['task']} seed {record['seed']}: {flag}, success={record['success']}", flush=True)

    out = reusable_out(args.out)
    result = _recorded(
        out,
        "bench audit --rollouts",
        {"tasks": names, "seeds": seeds},
        lambda: run_rollout_audit(out, names, seeds, progress=progress),
    )
    total = result["all"]
    line = (
        f"bench audit --rollouts ({total['rollouts']} reference rollouts): {total['flagged']} flagged, "
        f"{total['outcome_changed']} outcomes changed by the repair rerun -> {out / 'result.json'}"
    )
    print(_with_ignored(line, result))


def cmd_bench(args: argparse.Namespace) -> None:
    positive_int(args.k, "--k")
    positive_int(args.repeats, "--repeats")
    load_task(args.task)  # an unknown name fails before any timing
    folder = reusable_out(args.out)
    result = _recorded(
        folder,
        "bench perf",
        {"task": args.task, "k": args.k, "repeats": args.repeats},
        lambda: run_perf(task_name=args.task, k=args.k, repeats=args.repeats),
    )
    out = folder / "result.json"
    print(
        f"bench perf on {result['task']}: rollout_vs_bare_ratio {result['rollout_vs_bare_ratio']:.2f}, "
        f"parallel_speedup {result['parallel_speedup']:.2f} on {result['threads']} threads -> {out}"
    )


def _sectioned(
    folder: Path,
    command: str,
    settings: dict[str, Any],
    run: Callable[[Callable[[str, dict[str, Any]], None]], dict[str, Any]],
) -> dict[str, Any]:
    """``run(progress)`` of a bench whose sections go into ``folder/result.json`` as each finishes (an
    interrupted run keeps the finished ones)."""
    with RunRecord.start(folder, command, settings) as record:

        def progress(name: str, section: dict[str, Any]) -> None:
            record.update(**{name: section})
            print(f"  {name}: done", flush=True)

        result = run(progress)
        record.finish("done")
    return result


def cmd_bench_rope(args: argparse.Namespace) -> None:
    positive_int(args.repeats, "--repeats")
    folder = reusable_out(args.out)
    result = _sectioned(
        folder, "bench rope", {"repeats": args.repeats}, lambda p: run_rope_bench(args.repeats, p)
    )
    cable, realtime = result["rope_vs_mujoco_cable"], result["realtime"]
    print(
        f"bench rope: rope_vs_mujoco_cable {cable['rope_vs_mujoco_cable']['median']:.2f}, "
        f"rope_realtime_factor {realtime['rope_realtime_factor']['median']:.1f}, batched "
        f"{result['batched']['batched_rope_seconds_per_s']['median']:.0f} rope-s/s "
        f"-> {folder / 'result.json'}"
    )


def cmd_bench_mpm(args: argparse.Namespace) -> None:
    positive_int(args.steps, "--steps")
    folder = reusable_out(args.out)
    result = _sectioned(
        folder, "bench mpm", {"steps": args.steps}, lambda p: run_mpm_bench(args.steps, progress=p)
    )
    ratio = result["mpm_vs_taichi"]["ratio"]
    squeeze = result["dough_squeeze_wall_s"]["wall_s"]
    print(
        f"bench mpm: mpm_vs_taichi {'n/a (no taichi)' if ratio is None else f'{ratio:.2f}'}, converged dx "
        f"{result['task_convergence']['converged_dx_m']} (shape_dough's IoU), dough squeeze 1 s in "
        f"{'n/a' if squeeze is None else f'{squeeze:.1f} s'} -> {folder / 'result.json'}"
    )


def cmd_bench_real2sim(args: argparse.Namespace) -> None:
    require_packages("cv2", "open3d")
    try:
        seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()] if args.seeds else [0]
    except ValueError:
        raise UsageError(f"--seeds {args.seeds!r}: expected comma-separated seeds, e.g. 0,3,5") from None
    if any(seed < 0 for seed in seeds):
        raise UsageError(f"--seeds {args.seeds!r}: seeds must be non-negative integers")
    for name in args.tasks or []:
        load_task(name)  # unknown names fail before any work
    baseline = load_baseline(args.baseline) if args.baseline else None
    real_frames = None
    if args.frames is not None:
        if args.no_real:
            raise UsageError("--frames names real frames and --no-real skips them: give one of the two")
        real_frames = chosen_real_frames([p.strip() for p in args.frames.split(",") if p.strip()])
    tasks = args.tasks or ([] if real_frames is not None else None)  # --frames alone: no rendered frames

    out = reusable_out(args.out)
    settings = {
        "tasks": args.tasks,
        "seeds": seeds,
        "real": not args.no_real,
        "frames": real_frames,
        "baseline": args.baseline,
    }
    with RunRecord.start(out, "bench real2sim", settings) as run:
        finished: list[dict[str, Any]] = []  # each frame's record as it finishes: kept if interrupted
        sections: dict[str, list[dict[str, Any]]] = {
            "rendered": [],
            "rendered_noisy": [],
            "real": [],
            "glass": [],
        }

        def progress(section: str, record: dict[str, Any]) -> None:
            if "error" in record:
                print(f"  {record['frame']}: error: {record['error']}", flush=True)
            else:
                print(f"  {record['frame']}: {record['seconds']:.1f} s", flush=True)
            finished.append(record)
            sections[section].append(record)
            run.update(finished=finished)

        try:
            result = run_real2sim_bench(
                out,
                tasks=tasks,
                seeds=seeds,
                real=not args.no_real,
                progress=progress,
                real_frames=real_frames,
            )
        except KeyboardInterrupt:  # the report of the frames that finished, marked as such
            partial = bench_result(
                sections["rendered"], sections["real"], sections["glass"], None, sections["rendered_noisy"]
            )
            partial["machine"] = run.payload["machine"]
            report = markdown_report(partial, out, baseline, str(args.baseline), interrupted=True)
            atomic_write_text(out / "report.md", report)
            raise
        run.payload.pop("finished", None)
        run.update(**result)
    print(real2sim_table(result))
    atomic_write_text(out / "report.md", markdown_report(run.payload, out, baseline, str(args.baseline)))
    if result["real_skipped"]:
        print(f"real frames skipped: {result['real_skipped']}")
    verdicts = {True: "met", False: "MISSED", None: "not measured"}
    met = ", ".join(f"{k} {verdicts[v]}" for k, v in result["targets_met"].items())
    print(f"bench real2sim: {met} -> {out / 'result.json'}, {out / 'report.md'}")


def cmd_bench_sim2real(args: argparse.Namespace) -> None:
    finite(args.gap_scale, "--gap-scale", minimum=0.0)
    finite(args.budget_s, "--budget-s", positive=True)
    if args.rejected < 0:
        raise UsageError(f"--rejected must be >= 0, got {args.rejected}")
    try:
        seeds = parse_seeds(args.seeds)
        gap = RealityGap().scaled(args.gap_scale)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    positive_int(args.workers, "--workers")
    names = _task_names(args.tasks)
    out = reusable_out(args.out)
    try:
        result = _recorded(
            out,
            "bench sim2real",
            {"tasks": names, "seeds": seeds, "planner": args.planner},
            lambda: run_sim2real(
                names,
                seeds,
                out,
                Sim2RealProgress(sys.stderr),
                method=args.planner,
                budget_s=args.budget_s,
                rejected=args.rejected,
                gap=gap.to_dict(),
                workers=args.workers,
            ),
        )
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    print(sim2real_table(result))
    overall = result["overall"]
    rate = "-" if overall["agreement"] is None else f"{overall['agreement']:.1%}"
    line = (
        f"bench sim2real ({args.planner}, seeds {args.seeds}): agreement {rate} over "
        f"{overall['plans']} plans -> {out / 'result.json'}"
    )
    print(_with_ignored(line, result))
    if result["errors"]:
        raise UsageError(
            f"{len(result['errors'])} episode(s) failed with an error (see above); rerun to retry"
        )


def cmd_bench_calvin(args: argparse.Namespace) -> None:
    positive_int(args.chains, "--chains")
    if not 0 <= args.start < 1000:
        raise UsageError(f"--start must be a chain index 0..999, got {args.start}")
    vlm: dict[str, Any] | None = None
    if args.mode == CALVIN_VLM_MODE:
        if args.vlm is None:
            raise UsageError(f"--mode {CALVIN_VLM_MODE} needs --vlm gemini|openai|replay")
        vlm_from_args(args)  # a bad VLM setting (a missing key) fails here, before any chain
        vlm = {key: getattr(args, key) for key in VLM_ARGUMENTS}
    elif args.vlm is not None:
        raise UsageError(f"--vlm goes with --mode {CALVIN_VLM_MODE}, not --mode {args.mode}")
    else:
        vlm_from_args(args, "none")  # --model etc. need --mode simpact
    out = reusable_out(args.out)
    settings = {"chains": args.chains, "start": args.start, "mode": args.mode, "backend": args.backend,
                "video": args.video, "executor": args.executor, "vlm": args.vlm}  # fmt: skip
    try:
        with RunRecord.start(out, "bench calvin", settings) as record:  # ``so_far``: the finished chains
            result = run_calvin(
                out,
                args.start,
                args.chains,
                args.mode,
                args.backend,
                CalvinProgress(),
                video=args.video,
                executor=args.executor,
                workers=os.cpu_count() or 1,  # the CPUs of a local Ray instance, when no cluster runs
                vlm=vlm,
                on_summary=lambda partial: record.update(so_far=partial),
            )
            record.payload.pop("so_far", None)
            record.update(**result)
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    print(calvin_table(result))
    last = args.start + result["chains"] - 1
    line = (
        f"bench calvin ({result['mode']}, {result['backend']}, chains {args.start}..{last}): "
        f"avg len {result['avg_len']:.2f} -> {out / 'result.json'}"
    )
    print(_with_ignored(line, result))


def _add_calvin(bench: Any) -> None:
    p = bench.add_parser("calvin", help="CALVIN long-horizon chains (SR1-5, average length; resumable)")
    p.add_argument("--chains", type=int, default=40, help="number of chains (default 40, the paper's)")
    p.add_argument("--start", type=int, default=0, help="first chain, in the official order (default 0)")
    p.add_argument(
        "--mode",
        choices=(*CALVIN_MODES, CALVIN_VLM_MODE),
        default="scripted",
        help="scripted: privileged scripted motions, a check of the environment and protocol; "
        "simpact-offline: the tree planner with each subtask's condition as its goal (privileged); "
        "simpact: the paper's, a VLM samples, optimises and judges (--vlm)",
    )
    p.add_argument(
        "--backend",
        choices=("auto", "official", "rebuild"),
        default="rebuild",
        help="official calvin_env or the PyBullet rebuild (auto: official when importable)",
    )
    p.add_argument("--video", action="store_true", help="film each chain's static camera (DIR/videos/)")
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="chains one after another here, or as Ray tasks (ray: the cluster at RAY_ADDRESS, else local)",
    )
    p.add_argument("--out", required=True, help="output directory; rerun with the same one to resume")
    add_vlm_arguments(p, VLM_CHOICES[1:], None, f"VLM back-end (with --mode {CALVIN_VLM_MODE})")
    p.set_defaults(func=cmd_bench_calvin)


def _add_perf(bench: Any) -> None:
    p = bench.add_parser("perf", help="rollout throughput vs bare mj_step, parallel speedup")
    p.add_argument("--task", default="non_toppling_push", help="task to time (default non_toppling_push)")
    p.add_argument("--k", type=int, default=10, help="rollouts in the parallel batch")
    p.add_argument("--repeats", type=int, default=5, help="timing pairs per ratio (median reported)")
    p.add_argument("--out", required=True, help="output directory (result.json)")
    p.set_defaults(func=cmd_bench)


def _add_rope(bench: Any) -> None:
    p = bench.add_parser("rope", help="PD rope: linear solves, vs MuJoCo's rope, batched, real-time factor")
    p.add_argument("--repeats", type=int, default=3, help="runs per figure (median reported)")
    p.add_argument("--out", required=True, help="output directory (result.json)")
    p.set_defaults(func=cmd_bench_rope)


def _add_mpm(bench: Any) -> None:
    p = bench.add_parser("mpm", help="MPM: Warp vs Taichi, grid convergence, dough squeeze time")
    p.add_argument("--steps", type=int, default=100, help="substeps timed per engine (default 100)")
    p.add_argument("--out", required=True, help="output directory (result.json)")
    p.set_defaults(func=cmd_bench_mpm)


def _add_tasks(bench: Any) -> None:
    p = bench.add_parser("tasks", help="success of a planner on every task over seeds (resumable, parallel)")
    p.add_argument("tasks", nargs="*", help="task names (default: all)")
    p.add_argument("--seeds", default="1-10", help="e.g. 1-10 or 0,3,5")
    p.add_argument(
        "--planner",
        choices=BENCH_PLANNERS,
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


def _add_audit(bench: Any) -> None:
    p = bench.add_parser(
        "audit", help="SimuGuard's detector on its labelled suite (precision, recall), or on task rollouts"
    )
    p.add_argument(
        "--split", choices=("dev", "eval"), default="eval", help="suite split (thresholds fixed on dev)"
    )
    p.add_argument(
        "--episodes", type=int, default=240, help="episodes of the split (a cycle of 24 over 16 families)"
    )
    p.add_argument(
        "--seeds", default=None, help="exact suite seeds instead (with --rollouts: task seeds, 1-100)"
    )
    p.add_argument(
        "--pictures", action="store_true", help="a PNG per miss, false alarm, ambiguous or flagged episode"
    )
    p.add_argument("--rollouts", action="store_true", help="audit the tasks' reference rollouts instead")
    p.add_argument("--tasks", nargs="*", default=[], help="with --rollouts: tasks (default all)")
    p.add_argument("--out", required=True, help="output directory; rerun with the same one to resume")
    p.set_defaults(func=cmd_bench_audit)


def _add_real2sim(bench: Any) -> None:
    p = bench.add_parser(
        "real2sim",
        help="real2sim accuracy on rendered task frames (exact depth and through a depth camera model: the "
        "development split) and the real frames",
    )
    p.add_argument("tasks", nargs="*", help="task names for rendered frames (default: all)")
    p.add_argument("--seeds", default="0", help="scene seeds of the rendered frames, comma-separated")
    p.add_argument("--no-real", action="store_true", help="skip the real frames of the shared data")
    p.add_argument(
        "--frames",
        help="only the real frames whose path contains one of these comma-separated parts (wildcards "
        "allowed: uois/image_0006,cleargrasp/*opaque*); without a TASK no rendered frame runs",
    )
    p.add_argument("--out", required=True, help="output directory (a rerun recomputes every frame)")
    p.add_argument(
        "--baseline",
        help="an earlier run's result.json (or its folder): report.md shows each value before -> after",
    )
    p.set_defaults(func=cmd_bench_real2sim)


def _add_sim2real(bench: Any) -> None:
    p = bench.add_parser(
        "sim2real",
        help="agreement of predicted and executed outcomes in a perturbed stand-in real world (resumable)",
    )
    p.add_argument("tasks", nargs="*", help="task names (default: all)")
    p.add_argument("--seeds", default="1-2", help="e.g. 1-3 or 0,3,5 (default 1-2)")
    p.add_argument(
        "--planner", choices=SKELETON_METHODS, default="cem", help="VLM-free planner (default cem)"
    )
    p.add_argument("--budget-s", type=float, default=30.0, help="planning time per episode, s (default 30)")
    p.add_argument(
        "--rejected", type=int, default=2, help="failed proposals executed per episode (default 2)"
    )
    p.add_argument(
        "--gap-scale",
        type=float,
        default=1.0,
        help="scale the reality gap's mass, friction, gain and pose ranges (1: +-20%%, 3 mm, 2 deg)",
    )
    p.add_argument("--workers", type=int, default=1, help="parallel episodes (each also uses every core)")
    p.add_argument("--out", required=True, help="output directory; rerun with the same one to resume")
    p.set_defaults(func=cmd_bench_sim2real)


def add_parsers(verbs: Any) -> None:
    """Register ``bench`` and its sub-verbs."""
    bench = verbs.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    for add in (
        _add_perf,
        _add_rope,
        _add_mpm,
        _add_tasks,
        _add_audit,
        _add_real2sim,
        _add_sim2real,
        _add_calvin,
    ):
        add(bench)
