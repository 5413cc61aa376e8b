"""Articulated parts in the planner: the ``joint_at`` goal predicate, its ``actuate`` hint, and the tree
planner pushing a slide part (a door along x, a button down) to a joint position."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simpact.core.actions import Plan
from simpact.goals import GoalError, GoalHint, goal_names, parse_goal
from simpact.goals.base import HINT_KINDS
from simpact.planner.primitives import geometry
from simpact.planner.suggest import primitives_for
from simpact.planner.tree import plan_tree
from simpact.tasks import Task
from solvers.mujoco.world import MujocoWorld

DOOR = {
    "name": "door",
    "shape": "box",
    "size": [0.04, 0.12, 0.08],
    "position": [0.55, 0.0, 0.04],
    "mass": 0.5,
    "fixed": True,
    "joint": {"type": "slide", "axis": [-1, 0, 0], "range": [0.0, 0.2], "position": 0.02, "damping": 2.0},
}
BUTTON = {
    "name": "button",
    "shape": "box",
    "size": [0.06, 0.06, 0.03],
    "position": [0.45, 0.15, 0.045],
    "mass": 0.1,
    "fixed": True,
    "joint": {"type": "slide", "axis": [0, 0, -1], "range": [0.0, 0.02], "frictionloss": 2.0},
}


def _task(goal: list[dict[str, Any]], *objects: dict[str, Any]) -> Task:
    return Task(
        {
            "name": "actuate",
            "instruction": "move the part",
            "tail_s": 0.3,
            "robot": {"position": [0.45, 0.0, 0.2], "yaw": 0.0, "gripper_width": 0.0},
            "objects": list(objects),
            "goal": goal,
            "reference": [],
        }
    )


def test_joint_at_hints_a_target_past_its_threshold() -> None:
    task = _task([{"joint_at": {"object": "door", "moved": 0.1}}], DOOR)
    scene = task.scene(0)
    hints = parse_goal([{"joint_at": {"object": "door", "moved": 0.1}}]).hints(scene, goal_names(scene, {}))
    assert hints == [GoalHint("door", "actuate", joint=pytest.approx(0.16))]  # 0.02 + 0.1 + a fifth of 0.2
    assert "actuate" in HINT_KINDS
    below = parse_goal([{"joint_at": {"object": "door", "below": 0.03}}]).hints(scene, {})
    assert below[0].joint == pytest.approx(0.0)  # clipped to the range
    prims = primitives_for(hints, geometry(scene, MujocoWorld(scene).state()), 0)
    assert [p.label for p in prims] == ["actuate(door -> joint 0.160)"]
    with pytest.raises(GoalError, match="exactly one"):
        parse_goal([{"joint_at": {"object": "door", "above": 0.1, "below": 0.2}}]).hints(scene, {})


def test_the_tree_slides_a_door_and_the_goal_judges_its_joint() -> None:
    task = _task([{"joint_at": {"object": "door", "moved": 0.1}}], DOOR)
    scene = task.scene(0)
    world = MujocoWorld(scene)
    result = plan_tree(task, scene, world, 0, population=6, iterations=2, max_rollouts=40, audit=False)
    assert result.success, [n.to_dict() for n in result.nodes]
    assert result.best is not None
    best = result.proposals[result.best]
    door = best.rollout.final.objects["door"]
    assert door.joint is not None and door.joint - 0.02 > 0.1
    assert np.allclose(door.position[1:], DOOR["position"][1:])  # along its axis only
    idle = Plan.from_actions([{"type": "LIFT", "dz": 0.0}])
    failed = task.evaluate(world.rollout(idle, tail_s=0.3), scene, 0)
    assert not failed.success and 0.0 < failed.score < 1.0


def test_the_tree_presses_a_button_down() -> None:
    task = _task([{"joint_at": {"object": "button", "above": 0.012}}], BUTTON)
    scene = task.scene(0)
    result = plan_tree(
        task, scene, MujocoWorld(scene), 0, population=6, iterations=2, max_rollouts=40, audit=False
    )
    assert result.success
    assert result.best is not None
    actions = result.proposals[result.best].plan.actions
    assert any(a.type == "MOVE" and a.params.get("dz", 0.0) < 0 for a in actions)
