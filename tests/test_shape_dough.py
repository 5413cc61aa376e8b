"""The shape_dough task: the squeeze_plates tool, the reference plan squeezing the dough into the target bar
(bit-identical on a rerun), plans that must fail (on a 1 cm grid, cheaply), the footprint goals' yaw and
hints, the squeeze primitive, and MPM dough that sleeps while nothing comes near."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("warp")

from simpact.core.actions import Plan  # noqa: E402
from simpact.core.rollout import DeformableState  # noqa: E402
from simpact.core.scene import Scene, SceneError, SceneObject  # noqa: E402
from simpact.goals import parse_goal  # noqa: E402
from simpact.planner.primitives import SQUEEZE_TCP_Z, Context, Tcp, geometry  # noqa: E402
from simpact.planner.suggest import primitives_for  # noqa: E402
from simpact.tasks import Task, load_task  # noqa: E402
from solvers.deformable import Colliders, Grip  # noqa: E402
from solvers.mpm import sample_box  # noqa: E402
from solvers.mpm.solver import AWAKE_S, mpm_solver  # noqa: E402
from solvers.mujoco.scene_builder import build_spec  # noqa: E402
from solvers.world import make_world  # noqa: E402

TASK = load_task("shape_dough")


def _coarse(task: Task) -> Task:
    """The task on a 1 cm grid (16 times cheaper than its 5 mm one): enough to see a plan fail."""
    raw = copy.deepcopy(dict(task.raw))
    raw["objects"][0]["material"]["grid_dx"] = 0.01
    return Task(raw, task.path)


def _edited(plan: Plan, **changes: dict[str, float]) -> Plan:
    """``plan`` with the fields of its first action of each named type replaced."""
    actions = [a.to_dict() for a in plan.actions]
    for kind, fields in changes.items():
        next(a for a in actions if a["type"] == kind).update(fields)
    assert plan.start_pose is not None
    return Plan.from_actions(actions, start_pose=plan.start_pose.to_dict())


def test_the_reference_squeezes_the_target_bar_and_reruns_bit_identically():
    scene = TASK.scene(0)
    world = make_world(scene)
    plan = TASK.reference_plan(scene, world.start_pose(), 0)
    first = world.rollout(plan, tail_s=TASK.tail_s)
    ev = TASK.evaluate(first, scene, 0)
    assert ev.success, ev.details
    assert ev.details["footprint_ratio:dough.yaw_error_deg"] < 10.0
    again = world.rollout(plan, tail_s=TASK.tail_s)
    assert first.trace is not None and again.trace is not None
    assert np.array_equal(first.trace.qpos, again.trace.qpos)
    assert np.array_equal(first.trace.particles["dough"], again.trace.particles["dough"])
    assert np.array_equal(
        first.final.deformables["dough"].particles, again.final.deformables["dough"].particles
    )


def test_plans_that_squeeze_across_the_axis_too_little_or_above_the_dough_fail():
    task = _coarse(TASK)
    scene = task.scene(0)
    world = make_world(scene)
    reference = task.reference_plan(scene, world.start_pose(), 0)
    yaw = task.targets(0)["yaw"]
    wrong = {
        "across": _edited(reference, ROTATE={"dyaw": yaw}),
        "too little": _edited(reference, GRASP={"d": 0.06}),
        "too high": _edited(reference, DESCEND={"dz": 0.03}),
    }
    rollouts = world.rollouts(list(wrong.values()), tail_s=task.tail_s)
    for name, rollout in zip(wrong, rollouts):
        ev = task.evaluate(rollout, scene, 0)
        assert not ev.success, (name, ev.details)
    across = task.evaluate(rollouts[0], scene, 0).details
    assert across["footprint_ratio:dough.yaw_error_deg"] > 45.0, "the bar lies across the target"


def test_the_tool_is_two_plates_that_only_deformables_touch():
    tooled = Scene(objects=(), robot=TASK.scene(0).robot)  # MuJoCo's part: the robot (the dough is MPM's)
    model = build_spec(tooled).compile()
    plates = [g for g in range(model.ngeom) if model.geom(g).name.endswith("_plate")]
    assert len(plates) == 2
    for g in plates:
        assert model.geom_contype[g] == 2 and model.geom_conaffinity[g] == 2 and model.geom_group[g] == 2
        assert np.allclose(model.geom_size[g], (0.05, 0.005, 0.035))
    bare = Scene(objects=())
    assert bare.robot.tool is None and "tool" not in bare.to_dict()["robot"]
    assert tooled.to_dict()["robot"]["tool"] == "squeeze_plates"
    assert build_spec(bare).compile().ngeom == model.ngeom - 2
    with pytest.raises(SceneError, match="unknown tool"):
        Scene.from_dict({"objects": [], "robot": {"tool": "spatula"}})


def test_the_goal_hints_a_squeeze_along_the_bar_axis():
    scene = TASK.scene(3)
    yaw = TASK.targets(3)["yaw"]
    hints = TASK.goal_hints(scene, 3)
    assert {h.kind for h in hints} == {"shape"}
    assert all(h.angle == pytest.approx(math.degrees(yaw)) for h in hints)
    world = make_world(scene)
    boxes = geometry(scene, world.state())
    prims = primitives_for(hints, boxes, 0)
    assert [p.kind for p in prims] == ["squeeze"], "one squeeze: both hints name the same axis"
    ctx = Context(boxes, Tcp(scene.robot.position, 0.0), 0.08, world.start_pose().to_dict())
    actions = prims[0].actions(ctx, np.array([0.5, 0.5]))
    kinds = [a["type"] for a in actions]
    assert kinds[-3:] == ["GRASP", "RELEASE", "LIFT"] and "ROTATE" in kinds
    assert actions[-3]["d"] == pytest.approx(0.03)
    turn = next(a["dyaw"] for a in actions if a["type"] == "ROTATE")
    assert math.cos(2 * (turn - yaw - math.pi / 2)) == pytest.approx(1.0), "fingers close across the axis"
    z = scene.robot.position[2] + sum(
        a.get("dz", 0.0) * (1 if a["type"] in ("MOVE", "LIFT") else -1)
        for a in actions[:-3]
        if a["type"] in ("MOVE", "LIFT", "DESCEND")
    )
    assert z == pytest.approx(SQUEEZE_TCP_Z)


def test_footprint_ratio_with_a_yaw_checks_the_long_axis():
    bar = sample_box((0.5, 0.0, 0.01), (0.03, 0.12, 0.02), 0.005)  # long along y
    scene = Scene(
        objects=(
            SceneObject(
                name="dough", shape="box", size=(0.03, 0.12, 0.02), position=(0.5, 0.0, 0.01), kind="mpm"
            ),
        )
    )
    final = SimpleNamespace(deformables={"dough": DeformableState(bar)})

    def run(yaw: float):
        goal = parse_goal([{"footprint_ratio": {"object": "dough", "ratio": 4.0, "yaw": yaw}}])
        return goal.evaluate(SimpleNamespace(final=final), scene, {})  # type: ignore[arg-type]

    along, off = run(math.pi / 2), run(0.0)
    assert along.ok and along.details["footprint_ratio:dough.yaw_error_deg"] < 1.0
    assert run(-math.pi / 2).ok, "an axis, not a direction"
    assert not off.ok and off.details["footprint_ratio:dough.yaw_error_deg"] == pytest.approx(90.0, abs=1.0)
    assert off.score < along.score


def _colliders(box_x: float) -> Colliders:
    """One 2 cm cube at ``box_x`` (m), at rest; the gripper far away and open."""
    grip = Grip(
        centre=np.array([[0.0, 0.0, 1.0]]),
        rotation=np.eye(3)[None],
        half=np.array([0.01, 0.01]),
        opening=np.array([0.08]),
        velocity=np.zeros((1, 3)),
        angular_velocity=np.zeros((1, 3)),
    )
    return Colliders(
        table_z=0.0,
        table_friction=0.5,
        centre=np.array([[[box_x, 0.0, 0.01]]]),
        rotation=np.eye(3)[None, None],
        half=np.array([[0.01, 0.01, 0.01]]),
        velocity=np.zeros((1, 1, 3)),
        angular_velocity=np.zeros((1, 1, 3)),
        friction=np.array([0.5]),
        owner=("box",),
        grip=grip,
    )


def test_dough_at_rest_sleeps_until_a_box_comes_near():
    dough = SceneObject(
        name="dough",
        shape="box",
        size=(0.03, 0.03, 0.02),
        position=(0.5, 0.0, 0.01),
        kind="mpm",
        material={"model": "plasticine", "youngs_modulus": 2.0e4, "grid_dx": 0.01, "grid_margin": 0.05},
    )
    solver = mpm_solver(dough, Scene(objects=(dough,)))
    far = _colliders(0.60)
    for _ in range(round(AWAKE_S / 0.01) + 30):  # it settles, then sleeps (its clock then stops)
        solver.step(0.01, far)
    assert AWAKE_S <= solver.engines[0].time < AWAKE_S + 0.3
    assert np.linalg.norm(solver.velocities()[0], axis=1).max() < 0.005
    rest, steps = solver.positions(), solver.engines[0].steps
    solver.step(0.01, far)
    assert solver.engines[0].steps == steps and np.array_equal(solver.positions(), rest), "asleep"
    solver.step(0.01, _colliders(0.535))  # the cube 1 cm from the dough's side wakes it
    assert solver.engines[0].steps > steps


def test_the_mpm_bench_picks_the_grid_by_the_tasks_own_metric() -> None:
    """bench mpm's ``task_convergence`` rolls the reference out at each cell and compares the IoU the goal
    reports: halving 1 cm changes it by far more than 10 %, so 1 cm is not converged."""
    from simpact.bench.mpm import task_convergence

    result = task_convergence(cells=(0.01, 0.005))
    coarse, fine = result["runs"]
    assert [coarse["dx_m"], fine["dx_m"]] == [0.01, 0.005]
    assert 0.0 < coarse["iou"] < fine["iou"] <= 1.0
    assert coarse["change_when_halved"] == pytest.approx(abs(fine["iou"] - coarse["iou"]) / fine["iou"])
    assert coarse["change_when_halved"] > 0.10 and result["converged_dx_m"] is None
    assert fine["released_iou"] >= 0.7, "the reference succeeds at the task's own 5 mm cell"
