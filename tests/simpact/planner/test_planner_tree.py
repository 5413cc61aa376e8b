"""The skeleton-free tree planner: primitives expand into valid plans, branches start bit-exactly from their
parent's end snapshot, a small goal task is solved, and the reporting says what ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from simpact.core.actions import Plan
from simpact.planner.primitives import Context, Tcp, geometry, safe_height
from simpact.planner.records import PlanHooks
from simpact.planner.suggest import primitives_for
from simpact.planner.tree import _Search, end_snapshot, plan_tree, task_hints, tree_markdown
from simpact.tasks import Task, list_tasks, load_task
from solvers.mujoco.world import MujocoWorld, mujoco_access

TINY = {
    "name": "tiny_place",
    "instruction": "Move the cube 7 cm forward (its centre within 3 cm of the point), keeping it upright.",
    "tail_s": 0.3,
    "robot": {"position": [0.42, 0.0, 0.10], "yaw": 0.0, "gripper_width": 0.0},
    "objects": [
        {
            "name": "cube",
            "shape": "box",
            "size": [0.04, 0.04, 0.04],
            "position": [0.50, 0.0, 0.02],
            "mass": 0.1,
            "friction": 0.5,
        },
    ],
    "randomize": {"cube.position": {"low": [-0.01, -0.01, 0.0], "high": [0.01, 0.01, 0.0]}},
    "goal": [
        {"at": {"object": "cube", "x": 0.57, "y": 0.0, "tolerance": 0.03}},
        {"upright": {"object": "cube", "max_deg": 15}},
    ],
    "reference": [{"type": "LIFT", "dz": 0.01}],
}


def _tiny(tmp_path: Path, **changes: Any) -> Task:
    path = tmp_path / "tiny_place.yaml"
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return load_task(path)


@pytest.mark.parametrize(
    "name", ["avoid_obstacle", "bowl_stacking", "non_toppling_push", "pivoting", "sweeping"]
)
def test_every_primitive_of_the_rigid_tasks_expands_into_a_valid_plan(name: str) -> None:
    """No rollouts: each suggested primitive at random parameters (and at its range corners) is a plan the
    action parser accepts, and every task's goal suggests at least one primitive."""
    task = load_task(name)
    scene = task.scene(3)
    world = MujocoWorld(scene)
    boxes = geometry(scene, world.state())
    start = world.start_pose()
    ctx = Context(boxes, Tcp(start.position, scene.robot.yaw), safe_height(boxes), start.to_dict())
    prims = primitives_for(task_hints(task, scene, 3), boxes, 1)
    assert [p for p in prims if p.kind != "retreat"], f"{name}: no primitive suggested"
    rng = np.random.default_rng(0)
    for prim in prims:
        for unit in [*rng.uniform(0, 1, (8, prim.dim)), np.zeros(prim.dim), np.ones(prim.dim)]:
            plan = Plan.from_actions(prim.actions(ctx, unit), start_pose=start.to_dict())
            assert plan.actions


def test_the_tasks_without_hints_fall_back_to_their_success_parameters() -> None:
    hinted = {name: task_hints(load_task(name), load_task(name).scene(0), 0) for name in list_tasks()}
    assert all(hinted.values()), [n for n, h in hinted.items() if not h]


def test_branches_start_bit_exactly_from_their_parents_end_snapshot(tmp_path: Path) -> None:
    """A hard tolerance keeps the search from stopping at depth 1, so nodes at depth 2 and 3 are made; each
    branch's own rollout, replayed from its parent's stored end snapshot, is identical bit for bit, and that
    snapshot is the parent's rollout's state at the end of its last action."""
    goal = [{"at": {"object": "cube", "x": 0.60, "y": 0.02, "tolerance": 0.0005}}]
    task = _tiny(tmp_path, goal=goal)
    scene = task.scene(1)
    world = MujocoWorld(scene)
    search = _Search(
        task,
        scene,
        world,
        1,
        population=2,
        iterations=1,
        max_depth=3,
        max_rollouts=8,
        budget_s=120.0,
        audit=False,
        progress=None,
        hooks=PlanHooks(),
    )
    search.run()
    deep = [n for n in search.nodes if n.depth >= 2]
    assert deep, "the search made no branch below depth 1"
    mj = mujoco_access(world)
    for node in deep:
        parent = search.nodes[node.parent]
        grand = search.nodes[parent.parent]
        again, row = end_snapshot(world, grand.snapshot, parent.own, task.tail_s)
        assert np.array_equal(again, parent.snapshot)
        assert np.array_equal(mj.new_data(parent.snapshot).qpos, parent.own.trace.qpos[row])
        replay = world.rollout(node.own.plan, snapshot=parent.snapshot, tail_s=task.tail_s)
        assert np.array_equal(replay.trace.qpos, node.own.trace.qpos)
        assert np.array_equal(replay.trace.qvel, node.own.trace.qvel)
        # the combined history the task judged continues the parent's without a gap
        assert node.rollout.trace.time[parent.cut + 1] > node.rollout.trace.time[parent.cut]
        assert np.array_equal(node.rollout.trace.qpos[parent.cut + 1], node.own.trace.qpos[0])


def test_the_tree_solves_a_small_goal_task_and_is_repeatable(tmp_path: Path) -> None:
    task = _tiny(tmp_path)
    scene = task.scene(2)
    runs = [
        plan_tree(task, scene, MujocoWorld(scene), 2, population=6, iterations=2, max_rollouts=40)
        for _ in range(2)
    ]
    first, second = runs
    assert first.success, tree_markdown([n.to_dict() for n in first.nodes])
    chosen = first.proposals[first.best]
    assert chosen.success and not chosen.notes.get("audit")  # a clean success
    assert chosen.source.startswith("tree/node")
    assert [p.plan.to_dict() for p in first.proposals] == [p.plan.to_dict() for p in second.proposals]
    assert [p.score for p in first.proposals] == [p.score for p in second.proposals]
    lines = tree_markdown([n.to_dict() for n in first.nodes])
    assert lines[0].startswith("- node 0: root") and any("replayed: **success**" in line for line in lines)


def test_result_says_which_planner_ran_and_that_its_score_is_privileged(tmp_path: Path) -> None:
    from simpact.planner.session import offline_result

    task = _tiny(tmp_path)
    scene = task.scene(2)
    result = offline_result(task, scene, MujocoWorld(scene), 2, "tree").to_dict()
    assert result["method"] == "tree" and result["planner"]["skeleton_used"] is False
    assert "privileged" in result["planner"]["score"]
    assert result["tree"][0]["primitive"] == "root" and result["repaired_successes"] == []
    assert result["simulated_rollouts"] >= len(result["proposals"])


def test_a_success_that_needed_a_repaired_rerun_is_not_counted() -> None:
    from simpact.planner.offline import _result
    from simpact.planner.records import Proposal
    from simpact.tasks import Evaluation

    repaired = {"audit": [{"body": "can"}], "audit_repair": {"artifact_free": True, "change": "x"}}
    win = Evaluation(True, 1.0)
    proposals = [
        Proposal(Plan.from_actions([{"type": "LIFT", "dz": 0.01}]), None, win, 0, "cem/0", repaired),  # type: ignore[arg-type]
        Proposal(
            Plan.from_actions([{"type": "LIFT", "dz": 0.02}]),
            None,
            Evaluation(False, 0.4),
            0,
            "cem/1",
            {"audit": []},
        ),  # type: ignore[arg-type]
    ]
    out = _result(proposals, 0.0)
    assert out.success is False and out.repaired == [0]
    proposals.append(
        Proposal(Plan.from_actions([{"type": "LIFT", "dz": 0.03}]), None, win, 1, "cem/2", {"audit": []})
    )  # type: ignore[arg-type]
    out = _result(proposals, 0.0)
    assert out.success is True and out.best == 2 and out.repaired == [0]


def test_bench_table_names_the_planner_and_the_repaired_successes() -> None:
    from simpact.bench.tasks import _planner_info, format_table

    summary = {
        "successes": 1,
        "runs": 2,
        "failed_seeds": [2],
        "repaired_successes": [2],
        "mean_score": 0.9,
        "mean_wall_s": 3.0,
        "max_wall_s": 4.0,
        "mean_rollouts": 10.0,
        "audit": {"flagged": 1, "repaired": 1},
    }
    result = {"tasks": {"t": summary}, "total_wall_s": 7.0, "planner_info": _planner_info("tree")}
    table = format_table(result)
    assert "planner tree: no skeleton" in table and "privileged" in table
    assert "not counted): {'t': [2]}" in table
    assert "planner skeleton: uses skeleton" in format_table(
        {**result, "planner_info": _planner_info("skeleton")}
    )
