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
    parent's stored end snapshot is its rollout's state at the end of its last action, and each branch's
    history (parent's trace, then its own rollout from that snapshot) is bit for bit the whole plan's
    rollout from the initial snapshot."""
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
        # the combined history the task judged continues the parent's without a gap
        assert node.rollout.trace.time[parent.cut + 1] > node.rollout.trace.time[parent.cut]
        assert np.array_equal(node.rollout.trace.qpos[parent.cut + 1], node.own.trace.qpos[0])
        # and is, bit for bit, the whole plan rolled out from the initial snapshot (as the verdict replays it)
        whole = world.rollout(node.rollout.plan, tail_s=task.tail_s)
        assert np.array_equal(whole.trace.ctrl, node.rollout.trace.ctrl)
        assert np.array_equal(whole.trace.qpos, node.rollout.trace.qpos)
        assert np.array_equal(whole.trace.qvel, node.rollout.trace.qvel)


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


def test_a_branch_that_fails_a_whole_rollout_predicate_is_a_dead_end(tmp_path: Path) -> None:
    """Moving the cube while it must never move: every sample fails a predicate judged over the whole
    rollout, so no node is expanded below depth 1 and each is marked a dead end in the report."""
    goal = [
        {"at": {"object": "cube", "x": 0.57, "y": 0.0, "tolerance": 0.005}},
        {"not_moved": {"object": "cube", "tolerance": 0.002}},
    ]
    task = _tiny(tmp_path, goal=goal)
    scene = task.scene(1)
    result = plan_tree(task, scene, MujocoWorld(scene), 1, population=3, iterations=1, max_rollouts=30)
    children = [n for n in result.nodes if n.depth >= 1]
    moved = [n for n in children if n.details.get("not_moved:cube.ok") is False]
    assert moved and all(n.dead for n in moved)
    assert not any(n.parent in {m.id for m in moved} for n in result.nodes)
    assert any("(dead end)" in line for line in tree_markdown([n.to_dict() for n in result.nodes]))


def _root(name: str, seed: int) -> tuple[list[Any], Context]:
    """A task's primitives at the root of its tree (``seed``) and the context they are built in."""
    task = load_task(name)
    scene = task.scene(seed)
    world = MujocoWorld(scene)
    boxes = geometry(scene, world.state())
    start = world.start_pose()
    ctx = Context(boxes, Tcp(start.position, scene.robot.yaw), safe_height(boxes), start.to_dict())
    return primitives_for(task_hints(task, scene, seed), boxes, 0), ctx


def _corner_push() -> tuple[Any, Context]:
    """box_to_corner's push primitive (seed 2) and the context it is built in."""
    prims, ctx = _root("box_to_corner", 2)
    (push,) = [p for p in prims if p.kind == "push"]
    return push, ctx


def test_a_wall_the_goal_lies_against_is_not_an_obstacle_to_push_around() -> None:
    """The box's goal is the corner: the straight push toward it goes to the corner, not around a wall."""
    push, ctx = _corner_push()
    unit = np.full(push.dim, 0.5)
    unit[push.names.index("route")] = 0.5  # straight (no L-shaped route)
    moves = [a for a in push.actions(ctx, unit) if a["type"] == "PUSH"]
    assert len(moves) == 1 and moves[0]["dx"] > 0.1 and moves[0]["dy"] > 0.1, moves


def test_a_sideways_push_turns_the_fingers_along_the_push() -> None:
    push, ctx = _corner_push()
    yaws = {}
    for sideways in (0.0, 1.0):
        unit = np.full(push.dim, 0.5)
        unit[push.names.index("sideways")] = sideways
        actions = push.actions(ctx, unit)
        turn = sum(a.get("dyaw", 0.0) for a in actions if a["type"] == "ROTATE")
        (move,) = [a for a in actions if a["type"] == "PUSH"]
        heading = np.arctan2(move["dy"], move["dx"])
        yaws[sideways] = np.mod(ctx.tcp.yaw + turn - heading, np.pi)  # opening axis relative to the push
    assert yaws[0.0] == pytest.approx(np.pi / 2, abs=1e-6)
    assert min(yaws[1.0], np.pi - yaws[1.0]) == pytest.approx(0.0, abs=1e-6)


def test_a_branch_rollout_refuses_a_snapshot_its_plan_does_not_reach(tmp_path: Path) -> None:
    task = _tiny(tmp_path)
    world = MujocoWorld(task.scene(1))
    plan = Plan.from_actions(
        [{"type": "LIFT", "dz": 0.02}, {"type": "MOVE", "dx": 0.02, "dy": 0.0, "dz": 0.0}]
    )
    with pytest.raises(ValueError, match="not reached"):
        world.rollout(plan, snapshot=world.initial_snapshot, prefix=1)
    with pytest.raises(ValueError, match="must leave"):
        world.rollout(plan, prefix=2)


def test_an_object_that_must_stay_on_the_table_is_slid_held_not_picked() -> None:
    """avoid_obstacle's can may never be lifted: the suggestions slide it (grasped, pressed down, a finger
    leading along each leg of the detour around the mug) instead of picking it up; the palm stays above it."""
    prims, ctx = _root("avoid_obstacle", 1)
    kinds = [p.kind for p in prims]
    assert "pick" not in kinds and kinds.index("slide") < kinds.index("push")  # caged before pushed loose
    (slide,) = [p for p in prims if p.kind == "slide"]
    path = slide.build(ctx, slide.values(np.full(slide.dim, 0.0)))  # the lowest grasp it may choose
    z, yaw = ctx.tcp.position[2], ctx.tcp.yaw
    legs = []
    for a in path.actions:
        z += a.get("dz", 0.0) * (-1 if a["type"] == "DESCEND" else 1 if a["type"] in ("LIFT", "MOVE") else 0)
        yaw += a.get("dyaw", 0.0)
        if a["type"] == "PUSH":
            heading = np.arctan2(a["dy"], a["dx"])
            legs.append(min(np.mod(yaw - heading, np.pi), np.pi - np.mod(yaw - heading, np.pi)))
            assert z >= ctx.boxes["can"].top - 0.0321
    assert len(legs) == 2 and np.allclose(legs, 0.0, atol=1e-6)  # around the mug, opening axis leading


def test_the_tree_turns_a_cube_about_the_vertical(tmp_path: Path) -> None:
    """A ``turned`` goal suggests the ``turn`` primitive (grasp, turn in place, let go), which the tree tunes
    to a clean success with a small budget."""
    goal = [{"turned": {"object": "cube", "min_deg": 40, "direction": "ccw", "max_tilt_deg": 15}}]
    task = _tiny(tmp_path, goal=goal)
    scene = task.scene(2)
    result = plan_tree(task, scene, MujocoWorld(scene), 2, population=6, iterations=2, max_rollouts=40)
    assert result.success, tree_markdown([n.to_dict() for n in result.nodes])
    chosen = result.proposals[result.best]
    assert chosen.success and not chosen.notes.get("audit")
    assert any(a.type == "ROTATE" and a.params["dyaw"] > 0 for a in chosen.plan.actions)


def test_the_tree_plans_rope_tasks_and_mpm_tasks_with_a_skeleton_get_the_skeleton_planner() -> None:
    """``offline_method``: the tree branches on a PD rope's scene (its rollouts are cheap); a scene with MPM
    objects keeps the tree only when its task has no skeleton to fall back on."""
    from simpact.planner.session import offline_method

    for name, expected in (("shape_rope", "tree"), ("shape_dough", "tree"), ("sweeping_sand", "skeleton")):
        task = load_task(name)
        assert offline_method(task, task.scene(1), "tree") == expected, name
    sand = load_task("sweeping_sand")
    assert offline_method(sand, sand.scene(1), "template") == "template"


def test_the_wall_clock_budget_stops_before_a_population_that_would_end_past_it() -> None:
    """A population is started only if, at the search's pace so far, it ends within the budget."""
    from simpact.planner.tree import overruns

    assert not overruns(elapsed=40.0, done=40, more=12, budget=60.0)  # ends at 52 s
    assert overruns(elapsed=50.0, done=40, more=12, budget=60.0)  # would end at 65 s
    assert not overruns(elapsed=0.5, done=0, more=12, budget=60.0)  # no pace yet: the first one runs
    assert overruns(elapsed=61.0, done=0, more=1, budget=60.0)
