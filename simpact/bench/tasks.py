"""``simpact bench tasks``: success of the task suite over seeds with one planner, resumable and parallel.

Each finished (task, seed) episode is appended to ``DIR/runs.jsonl`` as one flushed JSON line, written by the
parent process alone; a rerun with the same ``DIR`` skips the episodes already there, so a killed benchmark
neither loses nor repeats one. Episodes run in a local process pool (each worker builds its own world) or,
with ``executor="ray"``, as Ray tasks. ``DIR/result.json`` summarises per task.

Planners: ``reference`` rolls out each task's reference plan; ``cem``, ``template`` and ``gaussian`` run
:func:`simpact.planner.offline.plan_offline`; ``vlm`` runs :func:`simpact.planner.loop.plan_with_vlm` with
the back-end that the episode's VLM settings describe (the flags of ``simpact plan``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from simpact.core.errors import SimpactError
from simpact.core.vocab import BENCH_PLANNERS, EXECUTORS

__all__ = [
    "EXECUTORS",
    "PLANNERS",
    "BenchError",
    "Episode",
    "Progress",
    "format_table",
    "parse_seeds",
    "run_episode",
    "run_tasks",
]

PLANNERS = BENCH_PLANNERS
RUNS = "runs.jsonl"


class BenchError(SimpactError, ValueError):
    """Bad benchmark input (a mismatched output directory, a missing executor): reported in one line."""


def parse_seeds(text: str) -> list[int]:
    """``"1-10"``, ``"0,3,5"`` or ``"0,2-4"`` to a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            seeds.extend(range(int(low), int(high or low) + 1))
        except ValueError:
            raise ValueError(f"seeds: cannot read {part!r}; write e.g. 1-10 or 0,3,5") from None
    return seeds


@dataclass(frozen=True)
class Episode:
    """One (task, seed) run with ``planner``; ``vlm`` holds the VLM flags of ``simpact plan`` (``vlm``,
    ``model``, ``base_url``, ``replay``, ``record``, ``k``, ``k_max``) for the ``vlm`` planner."""

    task: str
    seed: int
    planner: str = "reference"
    vlm: Mapping[str, Any] = field(default_factory=dict)


# --- one episode (runs in a worker) ---------------------------------------------------------------------


def run_episode(episode: Episode) -> dict[str, Any]:
    """Build the episode's world, plan (or roll out the reference plan) and return its JSON record."""
    os.environ.setdefault("MUJOCO_GL", "egl")  # a Ray worker may not inherit the CLI's setting
    from simpact.tasks import load_task
    from solvers.mujoco.world import MujocoWorld

    t0 = time.perf_counter()
    task = load_task(episode.task)
    scene = task.scene(episode.seed)
    world = MujocoWorld(scene)
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


def _planner_record(task: Any, scene: Any, world: Any, episode: Episode) -> dict[str, Any]:
    from simpact.planner.loop import LoopConfig
    from simpact.planner.session import plan_task
    from simpact.vlm.settings import build_vlm

    vlm, config = None, LoopConfig()
    if episode.planner == "vlm":
        settings = dict(episode.vlm)
        config = LoopConfig(k=settings.pop("k", 10), k_max=settings.pop("k_max", 13))
        vlm = build_vlm(settings.pop("vlm"), **settings)
    result = plan_task(task, scene, world, episode.seed, episode.planner, vlm, config)
    summary = result.to_dict()
    summary.pop("proposals")
    for key in ("task", "seed", "wall_s"):
        summary.pop(key)
    chosen = result.chosen
    return {
        **summary,
        "score": round(chosen.score, 4) if chosen is not None else 0.0,
        "details": chosen.evaluation.details if chosen is not None else {},
        "plan_wall_s": round(result.wall_s, 3),
    }


def _safe_episode(episode: Episode) -> dict[str, Any]:
    """:func:`run_episode`, with an exception turned into an ``error`` record (not logged, retried on
    resume) so that one broken episode does not stop the others."""
    try:
        return run_episode(episode)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(last.filename).name}:{last.lineno}"
        return {"task": episode.task, "seed": episode.seed, "error": f"{type(exc).__name__}: {exc} ({where})"}


# --- executors ------------------------------------------------------------------------------------------


def _execute(episodes: Sequence[Episode], executor: str, workers: int) -> Iterator[dict[str, Any]]:
    """Records of ``episodes`` in the order they finish."""
    if executor == "ray":
        return _ray(episodes, workers)
    if executor != "local":
        raise BenchError(f"unknown executor '{executor}'; expected one of {', '.join(EXECUTORS)}")
    if workers <= 1 or len(episodes) <= 1:
        return (_safe_episode(e) for e in episodes)
    return _pool(episodes, workers)


def _pool(episodes: Sequence[Episode], workers: int) -> Iterator[dict[str, Any]]:
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    pool = ProcessPoolExecutor(min(workers, len(episodes)), mp_context=context)
    try:
        futures = [pool.submit(_safe_episode, e) for e in episodes]
        for future in as_completed(futures):
            yield future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _ray(episodes: Sequence[Episode], workers: int) -> Iterator[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise BenchError("--executor ray needs Ray, which is not installed: pip install ray") from None
    if not ray.is_initialized():
        try:
            ray.init(address="auto")  # an existing cluster (RAY_ADDRESS or a local `ray start`)
        except ConnectionError:
            ray.init(num_cpus=workers)  # none running: start a local one
    remote = ray.remote(_safe_episode)
    pending = [remote.remote(e) for e in episodes]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


# --- progress -------------------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class Progress:
    """Done/total, successes, elapsed time and ETA on ``stream``: one ``\\r``-updated line on a terminal,
    a plain line per episode otherwise."""

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.total = self.done = self.ok = self.resumed = 0
        self.t0 = time.perf_counter()

    def start(self, total: int, records: Sequence[Mapping[str, Any]]) -> None:
        self.total, self.resumed = total, len(records)
        self.done, self.ok = len(records), sum(bool(r["success"]) for r in records)
        self.t0 = time.perf_counter()
        if self.resumed:
            self._emit(f"resuming: {self.resumed} of {total} episodes already in {RUNS}")
        self._bar()

    def record(self, record: Mapping[str, Any]) -> None:
        if "error" in record:
            self._emit(f"  ERROR {record['task']} seed {record['seed']}: {record['error']}")
        else:
            self.done += 1
            self.ok += bool(record["success"])
            verdict = "ok  " if record["success"] else "FAIL"
            self._emit(
                f"  {verdict} {record['task']} seed {record['seed']}: score {record['score']:.3f}, "
                f"{record['rollouts']} rollouts, {record['plan_wall_s']:.1f} s"
            )
        self._bar()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def status(self) -> str:
        elapsed = time.perf_counter() - self.t0
        ran = self.done - self.resumed
        left = self.total - self.done
        eta = _duration(elapsed / ran * left) if ran else "?"
        return (
            f"[{self.done}/{self.total}] {self.ok} ok, elapsed {_duration(elapsed)}, "
            f"ETA {eta if left else '0s'}"
        )

    def _emit(self, line: str) -> None:
        if self.tty:
            line = "\r\033[K" + line + "\n"
        else:
            line = f"{line}  {self.status()}\n" if line.startswith("  ") else line + "\n"
        self.stream.write(line)
        self.stream.flush()

    def _bar(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + self.status())
            self.stream.flush()


# --- the benchmark --------------------------------------------------------------------------------------


def _load_runs(log: Path, planner: str) -> dict[tuple[str, int], dict[str, Any]]:
    """Records already in ``log``; a torn last line (a kill mid-write) is cut off."""
    if not log.exists():
        return {}
    text = log.read_text()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        log.write_text(text)
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        logged = record.get("planner", "reference")
        if logged != planner:
            raise BenchError(f"{log} holds runs of planner '{logged}', not '{planner}'; choose another --out")
        runs[(record["task"], record["seed"])] = record
    return runs


def _task_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(records)
    walls = [r.get("plan_wall_s", r.get("rollout_wall_s", 0.0)) for r in records]
    return {
        "successes": sum(bool(r["success"]) for r in records),
        "runs": n,
        "failed_seeds": [r["seed"] for r in records if not r["success"]],
        "mean_score": round(sum(r["score"] for r in records) / n, 4) if n else None,
        "mean_wall_s": round(sum(walls) / n, 3) if n else None,
        "max_wall_s": round(max(walls), 3) if n else None,
        "mean_rollouts": round(sum(r.get("rollouts", 1) for r in records) / n, 2) if n else None,
        "audit": _audit_totals(records),
    }


AUDIT_COUNTS = ("audited", "recorded", "flagged", "rerun", "repaired")


def _audit_totals(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """SimuGuard's counts summed over the planner's episodes (reference runs have no audit)."""
    audits = [r["audit"] for r in records if isinstance(r.get("audit"), Mapping)]
    return {key: sum(int(a.get(key, 0)) for a in audits) for key in AUDIT_COUNTS}


def append_runs(
    log: Path,
    records: Iterable[dict[str, Any]],
    runs: dict[tuple[str, int], dict[str, Any]],
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Append each finished episode to ``log`` as it arrives (a killed run resumes from there) and to ``runs``
    by (task, seed); the records that carry an ``error`` are returned instead. Closes ``progress``."""
    errors: list[dict[str, Any]] = []
    try:
        with log.open("a") as sink:
            for record in records:
                if "error" in record:
                    errors.append(record)
                else:
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    runs[(record["task"], record["seed"])] = record
                if progress is not None:
                    progress.record(record)
    finally:
        if progress is not None:
            progress.close()
    return errors


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
    """Run every (task, seed) episode not yet in ``out/runs.jsonl`` with ``planner``; ``out/result.json``
    summarises per task (wall times are per plan) and is returned."""
    if planner not in PLANNERS:
        raise BenchError(f"unknown planner '{planner}'; expected one of {', '.join(PLANNERS)}")
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    log = out / RUNS
    runs = _load_runs(log, planner)
    wanted = [(name, seed) for name in tasks for seed in seeds]
    todo = [Episode(n, s, planner, dict(vlm or {})) for n, s in wanted if (n, s) not in runs]
    if progress is not None:
        progress.start(len(wanted), [runs[key] for key in wanted if key in runs])
    errors = append_runs(log, _execute(todo, executor, workers), runs, progress)
    result = {
        "planner": planner,
        "vlm": (vlm or {}).get("vlm") if planner == "vlm" else None,
        "seeds": list(seeds),
        "workers": workers,
        "executor": executor,
        "total_wall_s": round(time.perf_counter() - t0, 3),
        "episodes": len(wanted),
        "resumed": len(wanted) - len(todo),
        "tasks": {n: _task_summary([runs[(n, s)] for s in seeds if (n, s) in runs]) for n in tasks},
        "errors": errors,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_table(result: Mapping[str, Any]) -> str:
    """The per-task success table of a :func:`run_tasks` result, with a total line."""
    rows = [("task", "ok/runs", "score", "wall s mean/max", "rollouts", "flagged/repaired", "failed seeds")]
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
    return "\n".join(lines)
