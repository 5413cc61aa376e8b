"""``simpact bench sim2real``: how often the planner's predicted outcome matches the executed one, without
hardware.

Per (task, seed) episode the planner works in the nominal scene (a :class:`solvers.world.World`)
and the plans are then executed in a stand-in real world, :class:`robot.sim2real.PerturbedWorld` (the same
scene with seeded mass, friction, pose, servo-gain, time-step and solver differences; see
:mod:`robot.sim2real`). The plans of an episode:

* ``reference``: the task's reference plan (predicted outcome: its rollout in the planner's world);
* ``accepted``: the plan the VLM-free planner (:func:`simpact.planner.offline.plan_offline`) accepted, when
  it found one (predicted success);
* ``rejected``: up to ``rejected`` proposals the planner judged failures on artifact-free rollouts, the
  highest-scoring first (near misses: the hardest to predict), so that agreement is measured on both
  outcomes.

The planner stops at its first trusted success, which is deterministic for a seed; only when it finds none
does its time budget (``budget_s``) decide how many proposals it made, which depends on the machine.

Both outcomes are the task's own check (``task.evaluate``), the executed one on the stand-in world's scene.
Each finished episode is one line of the resumable episode log ``DIR/runs.jsonl``
(:class:`simpact.bench.episodes.EpisodeLog`, keyed on the configuration and the task file's content);
``DIR/result.json`` holds the agreement rate and the confusion matrix (predicted success
or failure x executed success or failure) per task, per plan kind and overall. The paper measured 89% on
its hardware.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot.sim2real import RealityGap, draw_perturbation, stand_in_world
from simpact.bench.episodes import BenchError, EpisodeLog, Progress, duration, task_settings
from simpact.core.jsonio import write_json
from simpact.core.vocab import OFFLINE_METHODS
from simpact.planner.audit import artifact_free
from simpact.planner.offline import plan_offline
from simpact.tasks import load_task
from solvers.world import make_world

__all__ = ["KINDS", "Sim2RealEpisode", "Sim2RealProgress", "format_table", "run_episode", "run_sim2real"]

KINDS = ("accepted", "reference", "rejected")


@dataclass(frozen=True)
class Sim2RealEpisode:
    """One (task, seed): plan with ``method`` (``budget_s`` s, ``population`` per round), keep ``rejected``
    failed proposals, execute in a world perturbed by ``gap`` (:class:`robot.sim2real.RealityGap` fields)."""

    task: str
    seed: int
    method: str = "cem"
    budget_s: float = 30.0
    rejected: int = 2
    population: int = 12
    gap: Mapping[str, Any] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        """Everything but (task, seed) that changes the episode's result."""
        return {
            "method": self.method,
            "budget_s": self.budget_s,
            "rejected": self.rejected,
            "population": self.population,
            "gap": RealityGap(**self.gap).to_dict(),
        }


def config_id(config: Mapping[str, Any]) -> str:
    """A short name of a configuration, stored with every run as its ``planner``."""
    digest = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:8]
    return f"sim2real-{config['method']}-{digest}"


# --- one episode (runs in a worker) ---------------------------------------------------------------------


def run_episode(episode: Sim2RealEpisode) -> dict[str, Any]:
    """Plan in the nominal world, execute the chosen plans in the perturbed one; the episode's JSON record."""
    t0 = time.perf_counter()
    task = load_task(episode.task)
    seed = episode.seed
    scene = task.scene(seed)
    world = make_world(scene)
    candidates: list[tuple[str, str, Any, Any]] = []  # kind, source, plan, predicted evaluation
    reference = world.rollout(task.reference_plan(scene, world.start_pose(), seed), tail_s=task.tail_s)
    candidates.append(("reference", "reference", reference.plan, task.evaluate(reference, scene, seed)))
    planned = plan_offline(
        task,
        scene,
        world,
        seed,
        method=episode.method,
        budget_s=episode.budget_s,
        population=episode.population,
    )
    if planned.success and planned.best is not None:
        best = planned.proposals[planned.best]
        candidates.append(
            ("accepted", best.source, best.plan, best.evaluation)
        )  # on the repaired rerun if any
    # Predicted failures the simulation can vouch for (SimuGuard found no artifact, or its repair rerun
    # removed it); the highest-scoring first, ties in proposal order.
    failures = sorted(
        (p for p in planned.proposals if not p.success and artifact_free(p.notes)),
        key=lambda p: p.score,
        reverse=True,
    )
    for p in failures[: episode.rejected]:
        candidates.append(("rejected", p.source, p.plan, p.evaluation))
    plan_wall = time.perf_counter() - t0

    t1 = time.perf_counter()
    perturbation = draw_perturbation(scene, RealityGap(**episode.gap), task.name, seed)
    real = stand_in_world(scene, perturbation)
    plans = []
    for kind, source, plan, predicted in candidates:
        executed = task.evaluate(real.rollout(plan, tail_s=task.tail_s), real.scene, seed)
        plans.append(
            {
                "kind": kind,
                "source": source,
                "predicted": {"success": predicted.success, "score": round(predicted.score, 4)},
                "executed": {
                    "success": executed.success,
                    "score": round(executed.score, 4),
                    "details": executed.details,
                },
                "agree": predicted.success == executed.success,
                "plan": plan.to_dict(),
            }
        )
    agree = sum(p["agree"] for p in plans)
    return {
        "task": episode.task,
        "seed": seed,
        "planner": config_id(episode.config()),
        "success": agree == len(plans),
        "score": round(agree / len(plans), 4),
        "rollouts": len(plans),
        "planner_success": planned.success,
        "planner_rollouts": len(planned.proposals),
        "plans": plans,
        "perturbation": perturbation.to_dict(),
        "plan_wall_s": round(plan_wall, 3),
        "execute_wall_s": round(time.perf_counter() - t1, 3),
        "wall_s": round(time.perf_counter() - t0, 3),
    }


def _safe_episode(episode: Sim2RealEpisode) -> dict[str, Any]:
    """:func:`run_episode` with an exception turned into an ``error`` record (retried on resume)."""
    try:
        return run_episode(episode)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(last.filename).name}:{last.lineno}"
        return {"task": episode.task, "seed": episode.seed, "error": f"{type(exc).__name__}: {exc} ({where})"}


def _execute(episodes: Sequence[Sim2RealEpisode], workers: int) -> Iterator[dict[str, Any]]:
    if workers <= 1 or len(episodes) <= 1:
        yield from (_safe_episode(e) for e in episodes)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(min(workers, len(episodes)), mp_context=context)
    try:
        futures = [pool.submit(_safe_episode, e) for e in episodes]
        for future in as_completed(futures):
            yield future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class Sim2RealProgress(Progress):
    """:class:`simpact.bench.episodes.Progress` with one line per episode saying which plans agreed."""

    def record(self, record: Mapping[str, Any]) -> None:
        if "error" in record:
            super().record(record)
            return
        self.done += 1
        self.ok += bool(record["success"])
        outcomes = ", ".join(
            f"{p['kind']} {_mark(p['predicted']['success'])}->{_mark(p['executed']['success'])}"
            for p in record["plans"]
        )
        agree = sum(p["agree"] for p in record["plans"])
        self._emit(
            f"  {record['task']} seed {record['seed']}: {agree}/{len(record['plans'])} agree ({outcomes}), "
            f"{record['wall_s']:.1f} s"
        )
        self._bar()


def _mark(success: bool) -> str:
    return "ok" if success else "fail"


# --- the benchmark --------------------------------------------------------------------------------------


def _wilson(k: int, n: int, z: float = 1.96) -> list[float] | None:
    """The Wilson score interval of a proportion k / n (95% by default)."""
    if n == 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def _confusion(plans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    def count(pred: bool, done: bool) -> int:
        return sum(p["predicted"]["success"] == pred and p["executed"]["success"] == done for p in plans)

    n = len(plans)
    agree = sum(bool(p["agree"]) for p in plans)
    return {
        "plans": n,
        "agree": agree,
        "agreement": round(agree / n, 4) if n else None,
        "agreement_95ci": _wilson(agree, n),
        "confusion": {
            "predicted_success": {
                "executed_success": count(True, True),
                "executed_failure": count(True, False),
            },
            "predicted_failure": {
                "executed_success": count(False, True),
                "executed_failure": count(False, False),
            },
        },
    }


def summarise(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Agreement and confusion over every plan of ``records``, and per plan kind."""
    plans = [p for r in records for p in r["plans"]]
    out = _confusion(plans)
    out["by_kind"] = {k: _confusion([p for p in plans if p["kind"] == k]) for k in KINDS}
    out["episodes"] = len(records)
    out["mean_wall_s"] = round(sum(r["wall_s"] for r in records) / len(records), 3) if records else None
    return out


def run_sim2real(
    tasks: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    progress: Progress | None = None,
    *,
    method: str = "cem",
    budget_s: float = 30.0,
    rejected: int = 2,
    population: int = 12,
    gap: Mapping[str, Any] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Run every (task, seed) episode not yet in ``out/runs.jsonl``; ``out/result.json`` (returned) holds
    the agreement per task, per plan kind and overall."""
    if method not in OFFLINE_METHODS:
        raise BenchError(f"unknown planner '{method}'; expected one of {', '.join(OFFLINE_METHODS)}")
    if rejected < 0 or budget_s <= 0 or population < 2:
        raise BenchError("rejected must be >= 0, budget_s > 0 and population >= 2")
    try:
        RealityGap(**(gap or {}))
    except (TypeError, ValueError) as exc:
        raise BenchError(f"reality gap: {exc}") from None
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    make: dict[str, Any] = {
        "method": method,
        "budget_s": budget_s,
        "rejected": rejected,
        "population": population,
        "gap": dict(gap or {}),
    }
    config = Sim2RealEpisode("", 0, **make).config()
    log = EpisodeLog(out, task_settings(tasks, {"bench": "sim2real", **config}))
    wanted = [(name, seed) for name in tasks for seed in seeds]
    todo = [Sim2RealEpisode(n, s, **make) for n, s in log.todo(wanted)]
    if progress is not None:
        progress.start(len(wanted), log.records(wanted), log.ignored)
    try:
        errors = log.append(_execute(todo, workers), progress.record if progress else None)
    finally:
        if progress is not None:
            progress.close()
    done = log.records(wanted)
    result = {
        "config": {**config, "id": config_id(config)},
        "seeds": list(seeds),
        "workers": workers,
        "total_wall_s": round(time.perf_counter() - t0, 3),
        "episodes": len(wanted),
        "resumed": len(wanted) - len(todo),
        "ignored": log.ignored,
        "overall": summarise(done),
        "tasks": {n: summarise([r for r in done if r["task"] == n]) for n in tasks},
        "errors": errors,
        "paper_agreement": 0.89,
    }
    write_json(out / "result.json", result)
    return result


def format_table(result: Mapping[str, Any]) -> str:
    """Per-task agreement and confusion counts (P = predicted, E = executed; + success, - failure)."""
    header = ("task", "agree/plans", "rate", "P+E+", "P+E-", "P-E+", "P-E-", "accepted ok", "wall s/ep")
    rows = [header]
    summaries = [*result["tasks"].items(), ("total", result["overall"])]
    for name, s in summaries:
        if not s["plans"]:
            rows.append((name, "0/0", *(["-"] * (len(header) - 2))))
            continue
        c = s["confusion"]
        acc = s["by_kind"]["accepted"]
        accepted = acc["confusion"]["predicted_success"]
        rows.append(
            (
                name,
                f"{s['agree']}/{s['plans']}",
                f"{s['agreement']:.2f}",
                str(c["predicted_success"]["executed_success"]),
                str(c["predicted_success"]["executed_failure"]),
                str(c["predicted_failure"]["executed_success"]),
                str(c["predicted_failure"]["executed_failure"]),
                f"{accepted['executed_success']}/{acc['plans']}",
                f"{s['mean_wall_s']:.1f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    overall = result["overall"]
    if overall["plans"]:
        kinds = ", ".join(
            f"{kind} {k['agree']}/{k['plans']}" for kind, k in overall["by_kind"].items() if k["plans"]
        )
        low, high = overall["agreement_95ci"]
        lines.append(f"agreement by plan kind: {kinds}; overall 95% interval [{low:.2f}, {high:.2f}]")
    lines.append(
        f"total wall {duration(result['total_wall_s'])}; the paper measured 89% agreement on hardware"
    )
    return "\n".join(lines)
