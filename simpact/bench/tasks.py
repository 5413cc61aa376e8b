"""``simpact bench tasks``: success of the task suite over seeds with one planner, resumable and parallel.

Each finished (task, seed) episode is one line of the resumable episode log ``DIR/runs.jsonl``
(:class:`simpact.bench.episodes.EpisodeLog`), keyed on the planner, the VLM settings and the task file's
content: a rerun with the same ``DIR`` skips the episodes already there, so a killed benchmark neither loses
nor repeats one, and reruns those whose settings changed. Episodes run in a local process pool (each worker
builds its own world) or, with ``executor="ray"``, as Ray tasks. ``DIR/result.json`` summarises per task.

Planners: ``reference`` rolls out each task's reference plan; ``tree`` runs the tree search over primitives
with no skeleton (:func:`simpact.planner.tree.plan_tree`); ``skeleton`` (alias ``cem``), ``template`` and
``gaussian`` run :func:`simpact.planner.offline.plan_offline` over the task's hand-written skeleton; ``vlm``
runs :func:`simpact.planner.loop.plan_with_vlm` with the back-end that the episode's VLM settings describe
(the flags of ``simpact plan``). ``result.json`` says which planner ran, whether it used a skeleton, and
that the VLM-free planners rank rollouts by the task's own goal score (privileged information a VLM does
not have). An episode succeeds only on a rollout SimuGuard did not flag; successes that needed a repaired
rerun are counted separately (``repaired_successes``).
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpact.bench.episodes import BenchError, EpisodeLog, Progress, task_settings
from simpact.bench.ray_executor import ray_map
from simpact.core.jsonio import write_json
from simpact.core.vocab import BENCH_PLANNERS, EXECUTORS
from simpact.planner.loop import LoopConfig
from simpact.planner.session import plan_task, planner_info
from simpact.tasks import load_task
from simpact.vlm.settings import build_vlm
from solvers.world import make_world

__all__ = ["TaskEpisode", "episode_settings", "format_table", "run_episode", "run_tasks"]

VLM_RESULT_FREE = ("record", "append", "timeout_s", "retries")
"""VLM settings that do not change an episode's result (where exchanges are recorded, how long a request may
take, how often it is retried): not in its key."""


@dataclass(frozen=True)
class TaskEpisode:
    """One (task, seed) run of ``bench tasks`` with ``planner``; ``vlm`` holds the VLM flags of
    ``simpact plan`` (``vlm``, ``model``, ``base_url``, ``replay``, ``record``, ``k``, ``k_max``) for the
    ``vlm`` planner."""

    task: str
    seed: int
    planner: str = "reference"
    vlm: Mapping[str, Any] = field(default_factory=dict)


# --- one episode (runs in a worker) ---------------------------------------------------------------------


def run_episode(episode: TaskEpisode) -> dict[str, Any]:
    """Build the episode's world, plan (or roll out the reference plan) and return its JSON record."""
    t0 = time.perf_counter()
    task = load_task(episode.task)
    scene = task.scene(episode.seed)
    world = make_world(scene)
    if episode.planner == "reference":
        record = _reference_record(task, scene, world, episode.seed)
    else:
        record = _planner_record(task, scene, world, episode)
    head = {"task": episode.task, "seed": episode.seed, "planner": episode.planner}
    return {**head, **record, "wall_s": round(time.perf_counter() - t0, 3)}


def _reference_record(task: Any, scene: Any, world: Any, seed: int) -> dict[str, Any]:
    rollout = world.rollout(task.reference_plan(scene, world.start_pose(), seed), tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene, seed)
    return {
        "success": evaluation.success,
        "score": round(evaluation.score, 4),
        "details": evaluation.details,
        "rollouts": 1,
        "plan_wall_s": round(rollout.wall_s, 3),
        "rollout_wall_s": round(rollout.wall_s, 3),
    }


def _planner_record(task: Any, scene: Any, world: Any, episode: TaskEpisode) -> dict[str, Any]:
    vlm, config = None, LoopConfig()
    if episode.planner == "vlm":
        settings = dict(episode.vlm)
        config = LoopConfig(k=settings.pop("k", 10), k_max=settings.pop("k_max", 13))
        if settings.get("record"):  # the command checked the file before the first episode; all append to it
            settings["append"] = True
        vlm = build_vlm(settings.pop("vlm"), **settings)
    result = plan_task(task, scene, world, episode.seed, episode.planner, vlm, config)
    summary = result.to_dict()
    summary.pop("proposals")
    for key in ("task", "seed", "wall_s"):
        summary.pop(key)
    # the episode line names its planner as the bench does (``planner``: the name), the rest as planner_info
    summary["planner_info"] = summary.pop("planner", None)
    chosen = result.chosen
    return {
        **summary,
        "score": round(chosen.score, 4) if chosen is not None else 0.0,
        "details": chosen.evaluation.details if chosen is not None else {},
        "plan_wall_s": round(result.wall_s, 3),
    }


def _safe_episode(episode: TaskEpisode) -> dict[str, Any]:
    """:func:`run_episode`, with an exception turned into an ``error`` record (not logged, retried on
    resume) so that one broken episode does not stop the others."""
    try:
        return run_episode(episode)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(last.filename).name}:{last.lineno}"
        return {"task": episode.task, "seed": episode.seed, "error": f"{type(exc).__name__}: {exc} ({where})"}


# --- executors ------------------------------------------------------------------------------------------


def _execute(episodes: Sequence[TaskEpisode], executor: str, workers: int) -> Iterator[dict[str, Any]]:
    """Records of ``episodes`` in the order they finish."""
    if executor == "ray":  # each episode a Ray task, on a cluster or a local Ray instance
        return ray_map(_safe_episode, episodes, workers)
    if executor != "local":
        raise BenchError(f"unknown executor '{executor}'; expected one of {', '.join(EXECUTORS)}")
    if workers <= 1 or len(episodes) <= 1:
        return (_safe_episode(e) for e in episodes)
    return _pool(episodes, workers)


def _pool(episodes: Sequence[TaskEpisode], workers: int) -> Iterator[dict[str, Any]]:
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    pool = ProcessPoolExecutor(min(workers, len(episodes)), mp_context=context)
    try:
        futures = [pool.submit(_safe_episode, e) for e in episodes]
        for future in as_completed(futures):
            yield future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


# --- the benchmark --------------------------------------------------------------------------------------


def _task_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(records)
    walls = [r.get("plan_wall_s", r.get("rollout_wall_s", 0.0)) for r in records]
    rollouts = [r.get("simulated_rollouts", r.get("rollouts", 1)) for r in records]
    return {
        "successes": sum(bool(r["success"]) for r in records),
        "runs": n,
        "failed_seeds": [r["seed"] for r in records if not r["success"]],
        "repaired_successes": [r["seed"] for r in records if r.get("repaired_successes")],
        "wall_s": {str(r["seed"]): r.get("plan_wall_s") for r in sorted(records, key=lambda r: r["seed"])},
        "mean_score": round(sum(r["score"] for r in records) / n, 4) if n else None,
        "mean_wall_s": round(sum(walls) / n, 3) if n else None,
        "max_wall_s": round(max(walls), 3) if n else None,
        "mean_rollouts": round(sum(rollouts) / n, 2) if n else None,
        "audit": _audit_totals(records),
    }


AUDIT_COUNTS = (
    "audited",
    "recorded",
    "flagged",
    "rerun",
    "repaired",
    "particles_screened",
    "particles_flagged",
)


def _audit_totals(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """SimuGuard's counts summed over the planner's episodes (reference runs have no audit)."""
    audits = [r["audit"] for r in records if isinstance(r.get("audit"), Mapping)]
    return {key: sum(int(a.get(key, 0)) for a in audits) for key in AUDIT_COUNTS}


def episode_settings(planner: str, vlm: Mapping[str, Any] | None) -> dict[str, Any]:
    """What besides the task file changes a ``bench tasks`` episode's result: the planner and, for the
    ``vlm`` planner, its VLM settings."""
    settings: dict[str, Any] = {"bench": "tasks", "planner": planner}
    if planner == "vlm":
        settings["vlm"] = {k: v for k, v in (vlm or {}).items() if k not in VLM_RESULT_FREE}
    return settings


def run_tasks(
    tasks: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    progress: Progress | None = None,
    *,
    planner: str = "reference",
    vlm: Mapping[str, Any] | None = None,
    workers: int = 1,
    executor: str = "local",
) -> dict[str, Any]:
    """Run every (task, seed) episode not yet in ``out/runs.jsonl`` under these settings with ``planner``;
    ``out/result.json`` summarises per task (wall times are per plan) and is returned."""
    if planner not in BENCH_PLANNERS:
        raise BenchError(f"unknown planner '{planner}'; expected one of {', '.join(BENCH_PLANNERS)}")
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    log = EpisodeLog(out, task_settings(tasks, episode_settings(planner, vlm)))
    wanted = [(name, seed) for name in tasks for seed in seeds]
    todo = [TaskEpisode(n, s, planner, dict(vlm or {})) for n, s in log.todo(wanted)]
    if progress is not None:
        progress.start(len(wanted), log.records(wanted), log.ignored)
    try:
        errors = log.append(_execute(todo, executor, workers), progress.record if progress else None)
    finally:
        if progress is not None:
            progress.close()
    result = {
        "planner": planner,
        "planner_info": _planner_info(planner),
        "vlm": (vlm or {}).get("vlm") if planner == "vlm" else None,
        "seeds": list(seeds),
        "workers": workers,
        "executor": executor,
        "total_wall_s": round(time.perf_counter() - t0, 3),
        "episodes": len(wanted),
        "resumed": len(wanted) - len(todo),
        "ignored": log.ignored,
        "tasks": {n: _task_summary(log.records((n, s) for s in seeds)) for n in tasks},
        "errors": errors,
    }
    write_json(out / "result.json", result)
    return result


def _planner_info(planner: str) -> dict[str, Any]:
    """What ``result.json`` says about the planner: for the VLM-free ones, whether a skeleton was used and
    that the score they rank by is the task's own goal (privileged)."""
    if planner == "reference":
        return {"name": planner, "skeleton_used": False, "hint": "the task's hand-written reference plan"}
    if planner == "vlm":
        return {"name": planner, "skeleton_used": False, "score": "the VLM judges; the task's check reports"}
    return planner_info(planner)


def format_table(result: Mapping[str, Any]) -> str:
    """The per-task success table of a :func:`run_tasks` result, with a total line."""
    rows = [("task", "ok/runs", "score", "wall s mean/max", "rollouts", "flagged/repaired", "failed seeds")]
    info = result.get("planner_info") or {}
    for name, s in result["tasks"].items():
        if not s["runs"]:
            rows.append((name, "0/0", "-", "-", "-", "-", "-"))
            continue
        failed = ",".join(map(str, s["failed_seeds"])) or "-"
        rows.append(
            (
                name,
                f"{s['successes']}/{s['runs']}",
                f"{s['mean_score']:.3f}",
                f"{s['mean_wall_s']:.1f} / {s['max_wall_s']:.1f}",
                f"{s['mean_rollouts']:.1f}",
                f"{s['audit']['flagged']}/{s['audit']['repaired']}",
                failed,
            )
        )
    ok = sum(s["successes"] for s in result["tasks"].values())
    runs = sum(s["runs"] for s in result["tasks"].values())
    rows.append(("total", f"{ok}/{runs}", "", f"wall {result['total_wall_s']:.1f} s", "", "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    if "skeleton_used" in info:
        lines.append(
            f"planner {info['name']}: {'uses' if info['skeleton_used'] else 'no'} skeleton"
            + (f"; {info['score']}" if "score" in info else "")
        )
    repaired = {n: s["repaired_successes"] for n, s in result["tasks"].items() if s.get("repaired_successes")}
    if repaired:
        lines.append(f"successes only after a SimuGuard repair (not counted): {repaired}")
    return "\n".join(lines)
