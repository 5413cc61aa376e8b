"""``simpact bench tasks``: success of the task suite over seeds, resumable.

Each (task, seed) run appends one JSON line to ``DIR/runs.jsonl``; a rerun with the same ``DIR`` skips the
runs already there, so an interrupted benchmark loses nothing. ``DIR/result.json`` summarises per task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simpact.tasks import load_task
from solvers.mujoco.world import MujocoWorld

__all__ = ["parse_seeds", "run_tasks"]


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


def _run(task_name: str, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    task = load_task(task_name)
    scene = task.scene(seed)
    world = MujocoWorld(scene)
    rollout = world.rollout(task.reference_plan(scene, world.start_pose(), seed), tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene, seed)
    return {
        "task": task_name,
        "seed": seed,
        "success": evaluation.success,
        "score": round(evaluation.score, 4),
        "details": evaluation.details,
        "rollout_wall_s": round(rollout.wall_s, 3),
        "wall_s": round(time.perf_counter() - t0, 3),
    }


def run_tasks(
    tasks: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Roll out every task's reference plan on every seed; results in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "runs.jsonl"
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                runs[(record["task"], record["seed"])] = record
    with log.open("a") as sink:
        for name in tasks:
            for seed in seeds:
                if (name, seed) in runs:
                    continue
                record = _run(name, seed)
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                runs[(name, seed)] = record
                if progress:
                    progress(record)
    summary = {}
    for name in tasks:
        records = [runs[(name, s)] for s in seeds]
        summary[name] = {
            "successes": sum(r["success"] for r in records),
            "runs": len(records),
            "failed_seeds": [r["seed"] for r in records if not r["success"]],
            "mean_score": round(sum(r["score"] for r in records) / len(records), 4),
            "mean_rollout_wall_s": round(sum(r["rollout_wall_s"] for r in records) / len(records), 3),
        }
    result = {"plan": "reference", "seeds": list(seeds), "tasks": summary}
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
