"""The shared scripted VLM by role, and a shared world of ``non_toppling_push``, for the planner tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests.vlm_doubles import ScriptedVLM

LIFT_PLAN = '{"actions": [{"type": "LIFT", "dz": 0.02}]}'
"""What the scripted VLM answers a role its script does not name."""


def plan_text(actions: list[dict[str, Any]], description: str = "test plan") -> str:
    return json.dumps({"description": description, "actions": actions})


@pytest.fixture(scope="session")
def push_world() -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    """(task, scene, world, reference actions) of non_toppling_push, seed 0."""
    from simpact.tasks import load_task
    from solvers.mujoco.world import MujocoWorld

    task = load_task("non_toppling_push")
    scene = task.scene(0)
    world = MujocoWorld(scene)
    ref = task.reference_plan(scene, world.start_pose(), 0)
    return task, scene, world, [a.to_dict() for a in ref.actions]


@pytest.fixture(scope="session")
def scripted() -> Callable[..., ScriptedVLM]:
    """``scripted({role or "prefix*": entry}, default=LIFT_PLAN)``: the shared scripted VLM answering by role
    (an entry: a text, a list of texts one per call, an exception, or a callable(parts, role))."""

    def make(script: Mapping[str, Any], default: Any = LIFT_PLAN) -> ScriptedVLM:
        return ScriptedVLM(roles=script, default=default)

    return make


@pytest.fixture(scope="session")
def as_plan() -> Callable[..., str]:
    return plan_text
