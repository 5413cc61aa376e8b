"""A scene whose robot starts holding an object (``robot.holding``): the tree planner offers ``place``
(set it down, no new grasp) at the root, and stacks the held block on another."""

from __future__ import annotations

from typing import Any

import pytest

from simpact.core.scene import Scene, SceneObject
from simpact.planner.primitives import MIN_Z, geometry, lowest_tcp
from simpact.planner.suggest import primitives_for
from simpact.planner.tree import plan_tree, task_hints
from simpact.tasks import Task
from solvers.mujoco.world import MujocoWorld


def _block(name: str, position: list[float]) -> dict[str, Any]:
    return {"name": name, "shape": "box", "size": [0.05, 0.05, 0.04], "position": position, "mass": 1.0,
            "friction": 0.7}  # fmt: skip


GOAL = [
    {"on_top_of": {"object": "held", "onto": "lower"}},
    {"not_touched": {"object": "held", "during": "end"}},
]


def _task(holding: str) -> Task:
    robot = {"position": [0.45, 0.0, 0.2], "yaw": 0.0, "gripper_width": 0.05, "holding": holding}
    objects = [_block("held", [0.45, 0.0, 0.2]), _block("lower", [0.5, 0.15, 0.02])]
    return Task({"name": "stack", "instruction": "put the held block on the other", "tail_s": 0.3,
                 "robot": robot, "objects": objects, "goal": GOAL, "reference": []})  # fmt: skip


def test_place_is_offered_for_the_held_object_at_the_root_only() -> None:
    task = _task("held")
    scene = task.scene(0)
    world = MujocoWorld(scene)
    boxes = geometry(scene, world.state())
    hints = task_hints(task, scene, 0)
    assert [p.kind for p in primitives_for(hints, boxes, 0, held="held")] == ["place"]
    assert "place" not in [p.kind for p in primitives_for(hints, boxes, 0)]  # not held: picked instead


def test_the_tree_stacks_the_held_block() -> None:
    task = _task("held")
    scene = task.scene(0)
    world = MujocoWorld(scene)
    result = plan_tree(task, scene, world, 0, population=6, iterations=2, max_rollouts=30, audit=False)
    assert result.success, [n.to_dict() for n in result.nodes]
    best = result.proposals[result.best or 0]
    kinds = [a.to_dict()["type"] for a in best.plan.actions]
    assert "GRASP" not in kinds and "RELEASE" in kinds
    held = best.rollout.final.objects["held"].position
    assert held[2] == pytest.approx(0.06, abs=0.005)  # on the lower block's top (0.04) + half its height


def test_the_lowest_tcp_follows_a_fixed_floor_below_the_table_plane() -> None:
    """A fixed box whose top is below the table plane (a drawer's floor) lowers how far primitives go."""
    floor = SceneObject("floor", "box", (0.3, 0.3, 0.02), (0.5, 0.0, -0.11), fixed=True)
    block = SceneObject("b", "box", (0.04, 0.04, 0.04), (0.5, 0.0, -0.08), mass=0.5)
    scene = Scene((floor, block))
    boxes = geometry(scene, MujocoWorld(scene).state())
    assert lowest_tcp(boxes) == pytest.approx(MIN_Z - 0.1)
    on_table = Scene((SceneObject("b", "box", (0.04, 0.04, 0.04), (0.5, 0.0, 0.02), mass=0.5),))
    assert lowest_tcp(geometry(on_table, MujocoWorld(on_table).state())) == MIN_Z
