"""The task suite: configs load, seeds randomise, reference plans succeed, wrong plans fail."""

import numpy as np
import pytest

from simpact.core.actions import Plan
from simpact.tasks import TaskError, list_tasks, load_task
from solvers.mujoco.world import MujocoWorld

RIGID_TASKS = ["non_toppling_push", "bowl_stacking", "pivoting", "avoid_obstacle", "sweeping"]


def test_the_rigid_suite_ships():
    assert set(RIGID_TASKS) <= set(list_tasks())


@pytest.mark.parametrize("name", RIGID_TASKS)
def test_reference_plan_succeeds_on_the_default_seed(name):
    task = load_task(name)
    scene = task.scene(0)
    world = MujocoWorld(scene)
    rollout = world.rollout(task.reference_plan(scene, world.start_pose()), tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene)
    assert evaluation.success, evaluation.details
    assert 0.5 < evaluation.score <= 1.0
    assert task.instruction


@pytest.mark.parametrize("name", RIGID_TASKS)
def test_seeds_randomise_the_scene_reproducibly(name):
    task = load_task(name)
    nominal, a, b, again = task.scene(0), task.scene(1), task.scene(2), task.scene(1)
    assert a == again
    assert a != nominal and a != b


def _push_at(height: float) -> tuple[bool, float]:
    task = load_task("non_toppling_push")
    scene = task.scene(0)
    world = MujocoWorld(scene)
    start = world.start_pose()
    reference = task.reference_plan(scene, start)
    actions = [a.to_dict() for a in reference.actions]
    actions[1]["dz"] = start.position[2] - height  # DESCEND to the push height
    rollout = world.rollout(Plan.from_actions(actions), tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene)
    return evaluation.success, evaluation.details["max_tilt_deg"]


def test_pushing_the_carton_near_its_top_topples_it():
    success, tilt = _push_at(0.15)
    assert not success
    assert tilt > 60


def test_pushing_the_carton_near_its_base_slides_it_upright():
    success, tilt = _push_at(0.02)
    assert success and tilt < 5


def test_unknown_task_and_bad_config(tmp_path):
    with pytest.raises(TaskError, match="unknown task 'nope'"):
        load_task("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ninstruction: x\n")
    with pytest.raises(TaskError, match="missing fields"):
        load_task(bad)


def test_reference_expressions_follow_the_randomised_scene():
    task = load_task("non_toppling_push")
    shifted = task.scene(4)
    world = MujocoWorld(shifted)
    plan = task.reference_plan(shifted, world.start_pose(), seed=4)
    start = np.asarray(world.start_pose().position)
    carton = shifted.object("carton")
    np.testing.assert_allclose(start[1] + plan.actions[0].params["dy"], carton.position[1])


def _config(randomize):
    return {
        "name": "toy",
        "instruction": "x",
        "success": {"check": "non_toppling_push"},
        "reference": [{"type": "RELEASE"}],
        "objects": [
            {"name": f"bean_{i}", "shape": "box", "size": [0.01] * 3, "position": [0.5, 0.02 * i, 0.005]}
            for i in range(3)
        ],
        "randomize": randomize,
    }


def test_glob_randomisation_draws_per_object_or_shared():
    from simpact.tasks import Task

    each = Task(_config({"bean_*.position": {"low": [-0.01, 0, 0], "high": [0.01, 0, 0]}})).scene(5)
    xs = [o.position[0] for o in each.objects]
    assert len(set(xs)) == 3
    shared = {"low": [-0.01, 0, 0], "high": [0.01, 0, 0], "shared": True}
    both = Task(_config({"bean_*.position": [shared, {"low": [0, 0, 0], "high": [0, 0, 0]}]})).scene(5)
    assert len({o.position[0] for o in both.objects}) == 1 and both.objects[0].position[0] != 0.5


def test_config_typos_are_caught():
    from simpact.tasks import Task

    with pytest.raises(TaskError, match="unknown fields \\['randomise'\\]"):
        Task({**_config({}), "randomise": {}})
    with pytest.raises(TaskError, match="randomize key 'cup.position' names no object"):
        Task(_config({"cup.position": {"low": [0, 0, 0], "high": [0, 0, 0]}})).scene(1)
