"""The task suite: configs load, seeds randomise, expressions follow the scene, config typos are caught.
(Reference plans succeeding and wrong plans failing: ``test_checks.py``.)"""

import numpy as np
import pytest
import yaml

from simpact.tasks import Task, TaskError, list_tasks, load_task, tasks_dir
from solvers.mujoco.world import MujocoWorld

RIGID_TASKS = ["non_toppling_push", "bowl_stacking", "pivoting", "avoid_obstacle", "sweeping"]


def test_the_rigid_suite_ships():
    assert set(RIGID_TASKS) <= set(list_tasks())


@pytest.mark.parametrize("name", RIGID_TASKS)
def test_seeds_randomise_the_scene_reproducibly(name):
    task = load_task(name)
    nominal, a, b, again = task.scene(0), task.scene(1), task.scene(2), task.scene(1)
    assert a == again
    assert a != nominal and a != b


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
        "goal": [{"at_rest": {"object": "bean_*"}}],
        "reference": [{"type": "RELEASE"}],
        "objects": [
            {"name": f"bean_{i}", "shape": "box", "size": [0.01] * 3, "position": [0.5, 0.02 * i, 0.005]}
            for i in range(3)
        ],
        "randomize": randomize,
    }


def test_glob_randomisation_draws_per_object_or_shared():
    each = Task(_config({"bean_*.position": {"low": [-0.01, 0, 0], "high": [0.01, 0, 0]}})).scene(5)
    xs = [o.position[0] for o in each.objects]
    assert len(set(xs)) == 3
    shared = {"low": [-0.01, 0, 0], "high": [0.01, 0, 0], "shared": True}
    both = Task(_config({"bean_*.position": [shared, {"low": [0, 0, 0], "high": [0, 0, 0]}]})).scene(5)
    assert len({o.position[0] for o in both.objects}) == 1 and both.objects[0].position[0] != 0.5


def test_config_typos_are_caught():
    with pytest.raises(TaskError, match="unknown fields \\['randomise'\\]"):
        Task({**_config({}), "randomise": {}})
    with pytest.raises(TaskError, match="randomize key 'cup.position' names no object"):
        Task(_config({"cup.position": {"low": [0, 0, 0], "high": [0, 0, 0]}})).scene(1)


@pytest.mark.parametrize(
    "randomize, fragment",
    [
        ({"": None}, "needs 'low' and 'high'"),
        ({"carton.position": {"low": "a", "high": [1]}}, "malformed"),
        ({"carton.position": {"low": [0, 0, 0], "high": [0.1, 0.1]}}, "malformed"),
        ({"carton.nofield": {"low": 0, "high": 1}}, "malformed"),
    ],
)
def test_a_malformed_randomize_entry_is_a_task_error(tmp_path, randomize, fragment):
    """Found by the Hypothesis parser test: a bad randomisation spec failed with a TypeError at seed 1."""
    raw = yaml.safe_load((tasks_dir() / "non_toppling_push.yaml").read_text())
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump({**raw, "randomize": randomize}))
    task = load_task(path)
    with pytest.raises(TaskError, match=fragment):
        task.scene(1)


def test_a_task_whose_objects_are_not_a_list_is_a_task_error(tmp_path):
    """Found by the Hypothesis parser test: ``objects: null`` was a TypeError."""
    raw = yaml.safe_load((tasks_dir() / "non_toppling_push.yaml").read_text())
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump({**raw, "objects": None}))
    with pytest.raises(TaskError, match="'objects' must be a list"):
        load_task(path)
