"""SIMPACT in the loop of CALVIN's long-horizon evaluation, per subtask: mode ``simpact``, the paper's.

For each subtask, from the environment's current state (the robot is never reset between subtasks):

1. **Scene.** As mode ``simpact-offline`` builds it (:func:`simpact.bench.calvin_simpact.calvin_scene`):
   the blocks from the static camera's RGB-D with ground-truth segmentation (real2sim's ``masks``
   back-end), the table's fixed parts, the robot where CALVIN's is.
2. **Plan.** Algorithm 1 (:func:`simpact.planner.loop.plan_with_vlm`): the VLM samples K plans from the
   instruction, the scene's description and the static camera's image; each is rolled out in a MuJoCo world
   of the scene; the VLM optimises new plans with the rollouts as context and judges success (TaskSuccess),
   up to K_max rollouts. The subtask's success condition is not used: the task has no check
   (:func:`no_check`), so the VLM sees no score (``LoopConfig.task_scores`` False) and its verdict alone
   accepts a plan; when it accepts none, the last plan proposed is executed.
3. **Execute.** The plan's actions through CALVIN's absolute action interface
   (:func:`simpact.bench.calvin_simpact.execute`); CALVIN's own check judges, in the evaluation wrapper.

The VLM is built once per process from its settings (the flags of ``simpact plan``: ``vlm``, ``model``,
``base_url``, ``timeout_s``, ``retries``, ``replay``, ``record``, ``k``, ``k_max``), so a Ray worker builds
its own. What the subtask's record says of the planning is in its ``policy`` entry: VLM verdict, rollouts,
wall time, the executed actions' count.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from simpact.bench.calvin_simpact import SCENE_SOURCE, TAIL_S, calvin_scene, execute, family
from simpact.calvin.evaluate import Policy
from simpact.core.errors import SimpactError
from simpact.core.scene import Scene
from simpact.planner.loop import LoopConfig, plan_with_vlm
from simpact.tasks import Evaluation, Task
from simpact.vlm import VLM
from simpact.vlm.settings import build_vlm
from solvers.world import make_world

__all__ = ["PRIVILEGED", "no_check", "subtask_task", "vlm_policy"]

PRIVILEGED = (
    "ground-truth segmentation masks (the paper's protocol); ground-truth poses for blocks the static camera"
    " does not see"
)
"""What mode ``simpact`` takes from the simulator rather than from the frame."""

_VLMS: dict[str, VLM] = {}
"""The VLM of each settings (their ``repr``), built once per process."""


def no_check(rollout: Any, scene: Scene, targets: Mapping[str, Any], params: Mapping[str, Any]) -> Evaluation:
    """The check of a CALVIN subtask in mode ``simpact``: none (the VLM judges; CALVIN's own condition
    decides the benchmark), so every rollout scores 0 and is not a success by this check."""
    return Evaluation(False, 0.0, {"judge": "vlm"})


def subtask_task(task: str, instruction: str, scene: Scene) -> Task:
    """A SIMPACT :class:`Task` of the subtask: the scene's objects and robot, the instruction, no check."""
    raw = {
        "name": task,
        "instruction": instruction,
        "tail_s": TAIL_S,
        **scene.to_dict(),
        "success": {"check": f"{__name__}:no_check"},
        "reference": [],
    }
    return Task(raw)


def _vlm(settings: Mapping[str, Any]) -> VLM:
    key = repr(sorted(settings.items()))
    if key not in _VLMS:
        options = {k: v for k, v in settings.items() if k not in ("vlm", "k", "k_max")}
        if options.get("record"):  # every subtask (and chain) adds to the one recording
            options["append"] = True
        vlm = build_vlm(str(settings["vlm"]), **options)
        if vlm is None:
            raise SimpactError("mode simpact needs a VLM: --vlm gemini|openai|replay")
        _VLMS[key] = vlm
    return _VLMS[key]


def simpact_vlm_policy(
    env: Any, task: str, instruction: str, *, settings: Mapping[str, Any], vlm: VLM | None = None
) -> None:
    """Mode ``simpact``: plan the subtask with the VLM the ``settings`` describe (or ``vlm``; module
    docstring) and execute the accepted plan, or the last one proposed."""
    if not hasattr(env, "table") or not hasattr(env, "pb"):
        raise SimpactError("mode simpact reads the simulator for unseen blocks: use --backend rebuild")
    notes = getattr(env, "notes", None)
    record: dict[str, Any] = {"family": family(task), "scene_source": SCENE_SOURCE, "privileged": PRIVILEGED}
    try:
        vlm = vlm or _vlm(settings)
        scene = calvin_scene(env, SCENE_SOURCE)
        config = LoopConfig(
            k=int(settings.get("k", 10)), k_max=int(settings.get("k_max", 13)), judge="vlm", task_scores=False
        )
        t0 = time.perf_counter()
        world = make_world(scene)
        try:
            result = plan_with_vlm(subtask_task(task, instruction, scene), scene, world, vlm, config=config)
        finally:
            close = getattr(world, "close", None)
            if callable(close):
                close()
        record.update(accepted=result.accepted is not None, rollouts=len(result.proposals),
                      failures=len(result.failures), plan_s=round(time.perf_counter() - t0, 2))  # fmt: skip
        if result.best is None:
            raise SimpactError(f"{task}: the VLM proposed no plan ({len(result.failures)} failed queries)")
        actions = [a.to_dict() for a in result.proposals[result.best].plan.actions]
        record["actions"] = len(actions)
        execute(env, actions)
    finally:  # the subtask's record says what was planned (evaluate.Judged)
        if isinstance(notes, dict):
            notes.update(record)


def vlm_policy(settings: Mapping[str, Any]) -> Policy:
    """Mode ``simpact``'s policy with the VLM these settings describe (a picklable callable)."""
    if not settings.get("vlm") or settings["vlm"] == "none":
        raise SimpactError("mode simpact needs a VLM: --vlm gemini|openai|replay")
    return partial(simpact_vlm_policy, settings=dict(settings))
