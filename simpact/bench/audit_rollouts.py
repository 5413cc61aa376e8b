"""``simpact bench audit --rollouts``: SimuGuard on the product's own rollouts, resumable.

For every task and seed, the task's reference plan is rolled out as the planner rolls plans out, judged by
the task's check, and audited exactly as the planner audits a proposal
(:func:`simpact.planner.audit.audit_and_repair`: the screen, a full recording and :func:`detect` when the
screen cannot clear it, and for a flagged rollout a rerun with the planner's repair setting switched on
0.1 s before the first artifact). A rollout's outcome *changed* when the repaired rerun is artifact-free and
the task check's verdict differs from the original's.

``DIR/runs.jsonl``: one line per rollout (keyed on the task file and the detector's thresholds);
``DIR/result.json``: per task the rollouts, successes, screened suspicious, recorded, flagged (and events),
repaired, outcomes changed, and every flagged rollout. What it does not show: rollouts of other plans
(the planners' proposals are audited inside ``simpact plan`` / ``bench tasks``, see their ``audit`` block).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from simpact.bench.episodes import EpisodeLog, task_settings
from simpact.core.jsonio import write_json
from simpact.guard.detector import Thresholds
from simpact.planner.audit import REPAIR, audit_and_repair
from simpact.tasks import load_task
from solvers.world import make_world

__all__ = ["run_rollout_audit"]


def _one(name: str, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    task = load_task(name)
    scene = task.scene(seed)
    world = make_world(scene)
    plan = task.reference_plan(scene, world.start_pose(), seed)
    rollout = world.rollout(plan, tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene, seed)
    audit = audit_and_repair(world, task, scene, seed, rollout, evaluation)
    repair = audit.repair
    changed = bool(repair and repair["artifact_free"] and repair["success"] != bool(evaluation.success))
    return {
        "task": name,
        "seed": seed,
        "success": bool(evaluation.success),
        "score": float(evaluation.score),
        "screen": audit.screen.to_dict(),
        "recorded": audit.recorded,
        "flagged": bool(audit.events),
        "events": audit.events,
        "repair": repair,
        "outcome_changed": changed,
        "steps": rollout.nsteps,
        "wall_s": round(time.perf_counter() - t0, 3),
    }


def _per_task(records: list[dict[str, Any]]) -> dict[str, Any]:
    flagged = [r for r in records if r["flagged"]]
    return {
        "rollouts": len(records),
        "successes": sum(r["success"] for r in records),
        "screen_suspicious": sum(r["screen"]["suspicious"] for r in records),
        "recorded": sum(r["recorded"] for r in records),
        "flagged": len(flagged),
        "artifacts": sum(len(r["events"]) for r in records),
        "repaired": sum(bool(r["repair"] and r["repair"]["artifact_free"]) for r in flagged),
        "outcome_changed": sum(r["outcome_changed"] for r in records),
    }


def run_rollout_audit(
    out: Path,
    tasks: Sequence[str],
    seeds: Sequence[int],
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Audit the reference rollouts of ``tasks`` x ``seeds`` not yet in ``out/runs.jsonl``; results in
    ``out/result.json`` (see the module docstring)."""
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    common = {"bench": "audit-rollouts", "thresholds": Thresholds().to_dict(), "repair": str(REPAIR)}
    log = EpisodeLog(out, task_settings(tasks, common))
    wanted = [(t, s) for s in seeds for t in tasks]  # seed by seed: a partial run covers every task
    todo = log.todo(wanted)

    def run() -> Iterator[dict[str, Any]]:
        for name, seed in todo:
            yield _one(name, seed)

    log.append(run(), progress)
    records = log.records(wanted)
    flagged = [r for r in records if r["flagged"]]
    result = {
        "tasks": {t: _per_task([r for r in records if r["task"] == t]) for t in tasks},
        "all": _per_task(records),
        "flagged_rollouts": [
            {k: r[k] for k in ("task", "seed", "success", "events", "repair", "outcome_changed")}
            for r in flagged
        ],
        "seeds": list(seeds),
        "ran": len(todo),
        "ignored": log.ignored,
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    write_json(out / "result.json", result)
    return result
