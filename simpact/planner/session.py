"""One entry to planning a task on a World: the task's reference plan, a VLM-free planner, or SIMPACT's VLM
loop (Algorithm 1), each returning a :class:`~simpact.planner.records.PlanResult`."""

from __future__ import annotations

import time
from typing import Any

from simpact.core.errors import SimpactError
from simpact.core.scene import Scene
from simpact.core.vocab import OFFLINE_METHODS
from simpact.planner.audit import audit_summary
from simpact.planner.loop import LoopConfig, Progress, plan_with_vlm
from simpact.planner.offline import plan_offline
from simpact.planner.records import PlanHooks, PlanResult, Proposal
from simpact.planner.tree import plan_tree
from simpact.tasks import Task
from simpact.vlm import VLM
from simpact.vlm.context import real2sim_warnings
from solvers.world import World

__all__ = ["PlanningError", "plan_task", "offline_result", "reference_result"]


class PlanningError(SimpactError, ValueError):
    """Settings that cannot plan (a planner that needs a VLM without one, an unknown planner)."""


def reference_result(task: Task, scene: Any, world: World, seed: int) -> PlanResult:
    """The task's reference plan rolled out once and checked, as a :class:`PlanResult`."""
    t0 = time.perf_counter()
    rollout = world.rollouts([task.reference_plan(scene, world.start_pose(), seed)], tail_s=task.tail_s)[0]
    evaluation = task.evaluate(rollout, scene, seed)
    proposals = [Proposal(rollout.plan, rollout, evaluation, 0, "reference")]
    return PlanResult(
        task=task.name,
        seed=seed,
        proposals=proposals,
        accepted=0 if evaluation.success else None,
        best=0,
        wall_s=time.perf_counter() - t0,
        vlm=None,
        iterations=1,
        method="reference",
        audit=audit_summary(proposals),
    )


PRIVILEGED = (
    "the task's own goal score and check (privileged information a VLM does not have) rank the rollouts"
)


def planner_info(method: str, *, hints: list[Any] | None = None) -> dict[str, Any]:
    """What ``result.json`` and ``bench tasks`` say about a VLM-free planner: its name, whether it used the
    task's skeleton or other hints, and that its score is the task's own goal."""
    skeleton = method != "tree"
    info: dict[str, Any] = {
        "name": method,
        "skeleton_used": skeleton,
        "hint": "the task's skeleton: an action sequence with ranges, written by hand for this task"
        if skeleton
        else "the goal's hints (which objects, where they should go); no skeleton, no reference plan",
        "score": PRIVILEGED,
    }
    if hints is not None:
        info["goal_hints"] = [_hint_dict(h) for h in hints]
    return info


def _hint_dict(h: Any) -> dict[str, Any]:
    return {k: getattr(h, k) for k in ("object", "kind", "point", "onto", "face", "height") if getattr(h, k)}


def offline_method(task: Task, scene: Scene, method: str) -> str:
    """The VLM-free planner that runs for ``method``: the skeleton planner instead of the tree on a scene
    with MPM objects whose task has a skeleton (an MPM rollout costs seconds, and the tree's hundreds did
    not fit its budget: sweeping_sand seed 1 failed in 299 s); ``method`` otherwise."""
    if method == "tree" and task.skeleton is not None and any(o.kind == "mpm" for o in scene.objects):
        return "skeleton"
    return method


def offline_result(
    task: Task,
    scene: Any,
    world: World,
    seed: int,
    method: str,
    progress: Progress | None = None,
    hooks: PlanHooks | None = None,
) -> PlanResult:
    """Plan without a VLM: the tree search over primitives (``tree``,
    :func:`simpact.planner.tree.plan_tree`) or a skeleton planner
    (:func:`simpact.planner.offline.plan_offline`), as a :class:`PlanResult`. Success counts only a rollout
    SimuGuard did not flag; successes that needed a repaired rerun are listed in ``repaired_successes``. The
    planner is :func:`offline_method`'s choice."""
    t0 = time.perf_counter()
    method = offline_method(task, scene, method)
    if method == "tree":
        tree = plan_tree(task, scene, world, seed, progress, hooks=hooks)
        proposals, best, success = list(tree.proposals), tree.best, tree.success
        extra: dict[str, Any] = {
            "planner": planner_info(method, hints=tree.hints),
            "simulated_rollouts": tree.rollouts,
            "tree": [n.to_dict() for n in tree.nodes],
        }
        repaired = tree.repaired
    else:
        out = plan_offline(task, scene, world, seed, method=method, progress=progress, hooks=hooks)
        proposals, best, success = list(out.proposals), out.best, out.success
        extra = {"planner": planner_info(method), "simulated_rollouts": len(proposals)}
        repaired = out.repaired
    extra["repaired_successes"] = [proposals[i].source for i in repaired]
    return PlanResult(
        task=task.name,
        seed=seed,
        proposals=proposals,
        accepted=best if success else None,
        best=best,
        wall_s=time.perf_counter() - t0,
        vlm=None,
        iterations=max((p.iteration for p in proposals), default=-1) + 1,
        method=method,
        audit=audit_summary(proposals),
        extra=extra,
    )


def plan_task(
    task: Task,
    scene: Any,
    world: World,
    seed: int,
    planner: str,
    vlm: VLM | None = None,
    config: LoopConfig = LoopConfig(),
    progress: Progress | None = None,
    hooks: PlanHooks | None = None,
) -> PlanResult:
    """Plan ``task`` on ``world`` (built from ``scene``) with ``planner``: ``reference``, one of
    :data:`~simpact.core.vocab.OFFLINE_METHODS`, or ``vlm`` (Algorithm 1 with ``vlm`` and ``config``);
    ``hooks`` hears of each proposal and VLM exchange as it is done (the reference plan: none). A scene
    real2sim built from a photo passes its fit warnings on: ``result.json``'s ``real2sim_warnings``."""
    if planner == "reference":
        result = reference_result(task, scene, world, seed)
    elif planner == "vlm":
        if vlm is None:
            raise PlanningError("the vlm planner needs a VLM (--vlm gemini|openai|replay)")
        result = plan_with_vlm(task, scene, world, vlm, seed, config, progress, hooks)
    elif planner not in OFFLINE_METHODS:
        raise PlanningError(
            f"unknown planner {planner!r}; expected reference, vlm or one of {OFFLINE_METHODS}"
        )
    else:
        result = offline_result(task, scene, world, seed, planner, progress, hooks)
    warnings = real2sim_warnings(scene)
    if warnings:
        result.extra["real2sim_warnings"] = warnings
    return result
