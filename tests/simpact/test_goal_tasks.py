"""Tasks written only as goals in YAML (no Python check, no skeleton): each reference plan succeeds on the
nominal scene, and plans that do something else fail for the reason the goal names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from simpact.core.actions import Plan
from simpact.tasks import Evaluation, Task, list_tasks, load_task
from solvers.mujoco.world import MujocoWorld

Actions = list[dict[str, Any]]
Edit = Callable[[Actions], Actions]


def _nothing(actions: Actions) -> Actions:
    return [{"type": "LIFT", "dz": 0.05}]


def _shift(index: int, **delta: float) -> Edit:
    def edit(actions: Actions) -> Actions:
        for key, value in delta.items():
            actions[index][key] += value
        return actions

    return edit


def _keep(*indices: int) -> Edit:
    return lambda actions: [actions[i] for i in indices]


def _then(edit: Edit, *extra: dict[str, Any]) -> Edit:
    return lambda actions: edit(actions) + list(extra)


LIFT = {"type": "LIFT", "dz": 0.1}

# Per task: (label, how the reference plan is spoilt, why the goal must say no: details -> bool).
WRONG_PLANS: dict[str, list[tuple[str, Edit, Callable[[dict[str, Any]], bool]]]] = {
    "topple_box": [
        ("does nothing", _nothing, lambda d: d["standing_on:box.tilt_deg"] > 80),
        ("pushes low and slides it", _shift(1, dz=0.12), lambda d: d["standing_on:box.tilt_deg"] > 80),
    ],
    "can_on_block": [
        ("does nothing", _nothing, lambda d: not d["on_top_of:can.ok"]),
        (
            "sets it down beside the block",
            _shift(4, dy=-0.12),
            lambda d: d["on_top_of:can.outside_footprint_m"] > 0,
        ),
        (
            "keeps holding it on the block",
            _keep(0, 1, 2, 3, 4, 5),
            lambda d: d["not_touched:can.can.robot_contact_at_end"] and d["on_top_of:can.ok"],
        ),
    ],
    "lift_mug": [
        ("does nothing", _nothing, lambda d: d["lifted:mug.lowest_m"] < 0.01),
        (
            "lifts it only 5 cm",
            lambda a: _keep(0, 1, 2, 3)(a)[:3] + [{"type": "LIFT", "dz": 0.05}],
            lambda d: 0.02 < d["lifted:mug.lowest_m"] < 0.08,
        ),
        (
            "lifts it and lets go",
            _then(_keep(0, 1, 2, 3), {"type": "RELEASE"}),
            lambda d: not d["lifted:mug.held"],
        ),
    ],
    "line_up_cubes": [
        ("does nothing", _nothing, lambda d: d["at:green_cube.error_m"] > 0.05),
        (
            "moves only the green cube",
            _then(_keep(0, 1, 2, 3, 4, 5, 6, 7), LIFT),
            lambda d: d["at:green_cube.ok"] and d["at:blue_cube.error_m"] > 0.05,
        ),
        (
            "sets the green cube 3 cm off the line",
            _shift(4, dy=0.03),
            lambda d: d["at:green_cube.error_m"] > 0.02,
        ),
    ],
    "box_to_corner": [
        ("does nothing", _nothing, lambda d: d["in_region:box.max_outside_m"] > 0.1),
        (
            "pushes it to the back wall only",
            _then(_keep(0, 1, 2, 3), LIFT),
            lambda d: d["in_region:box.max_outside_m"] > 0.05,
        ),
        (
            "stays pressed against it in the corner",
            _keep(0, 1, 2, 3, 4, 5, 6, 7),
            lambda d: d["in_region:box.ok"] and d["not_touched:box.box.robot_contact_at_end"],
        ),
    ],
}


class _Bench:
    """One world per task (built once), rolling out variants of the task's seed-0 reference plan."""

    def __init__(self) -> None:
        self._worlds: dict[str, tuple[Task, MujocoWorld]] = {}

    def evaluate(self, name: str, edit: Edit | None = None) -> Evaluation:
        if name not in self._worlds:
            task = load_task(name)
            self._worlds[name] = (task, MujocoWorld(task.scene(0)))
        task, world = self._worlds[name]
        start = world.start_pose()
        actions = [a.to_dict() for a in task.reference_plan(world.scene, start).actions]
        plan = Plan.from_actions(actions if edit is None else edit(actions), start_pose=start.to_dict())
        return task.evaluate(world.rollout(plan, tail_s=task.tail_s), world.scene, 0)


@pytest.fixture(scope="module")
def bench() -> _Bench:
    return _Bench()


def test_the_goal_tasks_ship_as_goals_only() -> None:
    assert set(WRONG_PLANS) <= set(list_tasks())
    for name in WRONG_PLANS:
        task = load_task(name)
        assert task.goal is not None and task.skeleton is None and "success" not in task.raw, name
        assert task.goal_hints(task.scene(1), seed=1), name
        assert task.scene(1) != task.scene(0) and task.scene(1) == task.scene(1), name


@pytest.mark.parametrize("name", list(WRONG_PLANS))
def test_the_reference_plan_succeeds(bench: _Bench, name: str) -> None:
    evaluation = bench.evaluate(name)
    assert evaluation.success and evaluation.score == 1.0, evaluation.details


@pytest.mark.parametrize(
    ("name", "label", "edit", "why"),
    [(name, label, edit, why) for name, plans in WRONG_PLANS.items() for label, edit, why in plans],
    ids=[f"{name}: {label}" for name, plans in WRONG_PLANS.items() for label, _, _ in plans],
)
def test_a_wrong_plan_fails(bench: _Bench, name: str, label: str, edit: Edit, why: Callable) -> None:
    evaluation = bench.evaluate(name, edit)
    assert not evaluation.success and evaluation.score < 1.0, (label, evaluation.details)
    assert why(evaluation.details), (label, evaluation.details)
