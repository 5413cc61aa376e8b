"""Success checks: each rigid task's reference plan succeeds and clearly wrong plans fail (for the reason the
goal states); the instructions name what the goals check; a task file names a Python check by name,
``module:function`` or a file of its own."""

from __future__ import annotations

import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import solvers.mujoco.robot
from simpact.core import robot_names
from simpact.core.actions import Plan
from simpact.tasks import Evaluation, Task, TaskError, list_tasks, load_check, load_task
from solvers.mujoco.world import MujocoWorld

Actions = list[dict[str, Any]]
Edit = Callable[[Actions], Actions]


def _nothing(actions: Actions) -> Actions:
    """An empty-ish plan: lift the hand a little and touch nothing."""
    return [{"type": "LIFT", "dz": 0.05}]


def _shift(index: int, **delta: float) -> Edit:
    """The reference with action ``index``'s fields changed by ``delta`` (m)."""

    def edit(actions: Actions) -> Actions:
        for key, value in delta.items():
            actions[index][key] += value
        return actions

    return edit


def _keep(*indices: int) -> Edit:
    """Only the reference actions at ``indices``."""
    return lambda actions: [actions[i] for i in indices]


def _set(index: int, **values: float) -> Edit:
    """The reference with action ``index``'s fields set to ``values``."""

    def edit(actions: Actions) -> Actions:
        actions[index].update(values)
        return actions

    return edit


def _then(edit: Edit, *extra: dict[str, Any]) -> Edit:
    """``edit``, then the ``extra`` actions."""
    return lambda actions: edit(actions) + list(extra)


def _insert(index: int, *extra: dict[str, Any]) -> Edit:
    """The reference with ``extra`` actions inserted before action ``index``."""
    return lambda actions: actions[:index] + list(extra) + actions[index:]


# Per task: (label, how the reference plan is spoilt, why the check must say no: details -> bool). Details
# are the goal's, ``PREDICATE:OBJECT.quantity`` (simpact.goals).
WRONG_PLANS: dict[str, list[tuple[str, Edit, Callable[[dict[str, Any]], bool]]]] = {
    "non_toppling_push": [
        ("does nothing", _nothing, lambda d: d["at:carton.error_m"] > 0.15),
        (
            "pushes near the top and topples it",
            _shift(1, dz=-0.13),
            lambda d: d["upright:carton.tilt_deg"] > 60,
        ),
        ("pushes 8 cm too far", _shift(2, dx=0.08), lambda d: d["at:carton.error_m"] > 0.05),
        (
            "stays pressed against the carton",
            _keep(0, 1, 2),
            lambda d: d["not_touched:carton.carton.robot_contact_at_end"] and d["at:carton.ok"],
        ),
    ],
    "bowl_stacking": [
        ("does nothing", _nothing, lambda d: not d["nested_in:green_bowl.ok"]),
        (
            "sets the bowl down beside the other",
            _shift(4, dy=-0.12),
            lambda d: not d["nested_in:green_bowl.ok"],
        ),
        (
            "lifts the bowl and puts it back",
            _then(_keep(0, 1, 2, 3), {"type": "DESCEND", "dz": 0.08}, {"type": "RELEASE"}),
            lambda d: not d["nested_in:green_bowl.ok"] and d["nested_in:green_bowl.xy_error_m"] > 0.1,
        ),
    ],
    "pivoting": [
        ("does nothing", _nothing, lambda d: d["standing_on:box.tilt_final_deg"] > 80),
        (
            "pushes it to the wall and leaves",
            _then(_keep(0, 1), {"type": "LIFT", "dz": 0.1}),
            lambda d: d["standing_on:box.tilt_final_deg"] > 80,
        ),
        (
            "stops rising at 35 deg",
            _keep(0, 1, 2, 3, 7, 8, 9),
            lambda d: d["standing_on:box.tilt_final_deg"] > 80,
        ),
        (
            "stands it up but keeps holding it",
            _keep(0, 1, 2, 3, 4, 5, 6),
            lambda d: d["not_touched:box.box.robot_contact_at_end"],
        ),
    ],
    "avoid_obstacle": [
        ("does nothing", _nothing, lambda d: not d["in_region:can.ok"]),
        (
            "pushes the can straight through the mug",
            _then(_keep(0, 1, 2, 3), {"type": "PUSH", "dx": 0.26, "dy": 0.0}, {"type": "RELEASE"}),
            lambda d: d["not_touched:mug.mug.moved_m"] > 0.01,
        ),
        (
            "slides it past the mug too closely",
            lambda a: _set(8, dy=-0.06)(_set(4, dy=0.06)(a)),
            lambda d: d["not_touched:mug.mug.clearance_to_can_m"] < 0.001,
        ),
        (
            "lifts the can 3 cm and carries it around the mug",
            lambda a: _insert(4, {"type": "LIFT", "dz": 0.03})(
                _insert(9, {"type": "DESCEND", "dz": 0.03})(a)
            ),
            lambda d: d["stays_on_table:can.max_lift_m"] > 0.02 and d["not_touched:mug.ok"],
        ),
        ("sets the can down 12 cm short", _shift(6, dx=-0.12), lambda d: not d["in_region:can.ok"]),
    ],
    "sweeping": [
        ("does nothing", _nothing, lambda d: d["in_region:bean_*.inside"] == 0),
        ("sweeps only 3 cm", _set(4, dx=0.03), lambda d: d["in_region:bean_*.inside"] == 0),
    ],
}


class _Bench:
    """One world per task (built once), rolling out variants of the task's seed-0 reference plan."""

    def __init__(self) -> None:
        self._worlds: dict[str, tuple[Task, MujocoWorld]] = {}
        self._reference: dict[str, Evaluation] = {}

    def reference(self, name: str) -> Evaluation:
        """The reference plan's evaluation (rolled out once)."""
        if name not in self._reference:
            self._reference[name] = self.evaluate(name)
        return self._reference[name]

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


@pytest.mark.parametrize("name", list(WRONG_PLANS))
def test_reference_plan_succeeds_on_the_default_seed(bench: _Bench, name: str) -> None:
    evaluation = bench.reference(name)
    assert evaluation.success, evaluation.details
    assert evaluation.score == 1.0


@pytest.mark.parametrize(
    ("name", "label", "edit", "why"),
    [(name, label, edit, why) for name, plans in WRONG_PLANS.items() for label, edit, why in plans],
    ids=[f"{name}: {label}" for name, plans in WRONG_PLANS.items() for label, _, _ in plans],
)
def test_a_wrong_plan_fails(bench: _Bench, name: str, label: str, edit: Edit, why: Callable) -> None:
    evaluation = bench.evaluate(name, edit)
    assert not evaluation.success, (label, evaluation.details)
    assert why(evaluation.details), (label, evaluation.details)
    reference = bench.reference(name).score
    assert evaluation.score < reference, (label, evaluation.score, reference)


def test_every_rigid_task_has_at_least_two_failing_plans() -> None:
    assert set(WRONG_PLANS) <= set(list_tasks())
    assert all(len(plans) >= 2 for plans in WRONG_PLANS.values())


def test_the_carton_lines_up_with_the_blue_box_where_it_stands(bench: _Bench) -> None:
    """No hidden line: the reference plan computed for the nominal scene fails once the blue box stands
    4 cm further along x, and the same plan recomputed for the moved box succeeds."""
    task = load_task("non_toppling_push")
    nominal = task.scene(0)
    blue = nominal.object("blue_box")
    moved = nominal.replace_object(blue.moved(position=(blue.position[0] + 0.04, *blue.position[1:])))
    world = MujocoWorld(moved)
    start = world.start_pose()
    stale = task.reference_plan(nominal, start)
    failed = task.evaluate(world.rollout(stale, tail_s=task.tail_s), moved, 0)
    assert not failed.success and failed.details["at:carton.error_m"] == pytest.approx(0.04, abs=0.015)
    fresh = task.evaluate(world.rollout(task.reference_plan(moved, start), tail_s=task.tail_s), moved, 0)
    assert fresh.success, fresh.details


def test_every_instruction_names_what_its_goal_checks() -> None:
    """The instruction shown to a VLM names each object the goal reads and each tolerance it applies."""
    for name in WRONG_PLANS:
        task = load_task(name)
        assert task.goal is not None, name
        for leaf in task.goal.leaves():
            for key in ("object", "onto", "relative_to", "region"):
                if key in leaf.params:
                    word = str(leaf.params[key]).split("_")[0].rstrip("*")
                    assert word in task.instruction.lower(), (name, leaf.label, key, word)


# --- naming a check in a task file -----------------------------------------------------------------------

_CHECK = """
from simpact.tasks import Evaluation

def judge(rollout, scene, targets, params):
    box = rollout.final.objects["box"]
    details = {"checked_by": __name__, "marker": params["marker"], "z": float(box.position[2])}
    return Evaluation(True, 0.42, details)
"""

_TASK = """
name: own_check
instruction: "Leave the box alone."
robot: {position: [0.4, 0.0, 0.2], yaw: 0.0, gripper_width: 0.0}
objects:
  - {name: box, shape: box, size: [0.04, 0.04, 0.04], position: [0.55, 0.0, 0.02], mass: 0.1}
success: {check: "CHECK", marker: 7}
reference:
  - {type: LIFT, dz: 0.02}
"""


def _write_task(folder: Path, check: str) -> Path:
    path = folder / "own_check.yaml"
    path.write_text(_TASK.replace("CHECK", check))
    return path


def test_a_task_outside_the_package_brings_its_own_check(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "task" / "checks").mkdir(parents=True)
    (tmp_path / "task" / "checks" / "lifted.py").write_text(textwrap.dedent(_CHECK))
    path = _write_task(tmp_path / "task", "checks/lifted.py:judge")
    monkeypatch.chdir(tmp_path)  # the check's path is relative to the task file, not the working folder
    task = load_task(path)
    world = MujocoWorld(task.scene(0))
    plan = task.reference_plan(world.scene, world.start_pose())
    evaluation = task.evaluate(world.rollout(plan, tail_s=0.1), world.scene)
    assert evaluation.success and evaluation.score == 0.42
    assert evaluation.details["marker"] == 7 and evaluation.details["checked_by"].startswith(
        "_simpact_task_check"
    )
    assert evaluation.details["z"] == pytest.approx(0.02, abs=0.003)


def test_a_check_file_without_a_function_name_uses_check(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(textwrap.dedent(_CHECK).replace("def judge", "def check"))
    task = load_task(_write_task(tmp_path, str(tmp_path / "mine.py")))
    check: Any = task._check
    assert check.__name__ == "check" and check.__module__.startswith("_simpact_task_check_mine")


def test_short_and_module_forms_name_the_same_check(monkeypatch) -> None:
    module = types.ModuleType("simpact.checks.toy_check")
    module.check = lambda rollout, scene, targets, params: Evaluation(True, 1.0)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "simpact.checks.toy_check", module)
    check = module.check
    assert load_check("toy_check", Path.cwd()) is check
    assert load_check("simpact.checks.toy_check:check", Path.cwd()) is check
    assert load_check("simpact.checks.toy_check", Path.cwd()) is check


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ("no_such_check", "no success check named 'no_such_check'"),
        ("no_such_pkg.mod:check", "no module named 'no_such_pkg.mod'"),
        ("simpact.checks.common:judge", "simpact.checks.common has no function 'judge'"),
        ("checks/missing.py:judge", "file .*missing.py does not exist"),
        ("broken.py", "importing .*broken.py failed: No module named 'no_such_dependency'"),
        ("simpact.checks.common:", "must be NAME, module:function or path/to/check.py:function"),
    ],
)
def test_a_bad_check_is_one_clear_task_error(tmp_path: Path, check: str, message: str) -> None:
    (tmp_path / "broken.py").write_text("import no_such_dependency\n")
    with pytest.raises(TaskError, match=message) as caught:
        load_task(_write_task(tmp_path, check))
    assert "\n" not in str(caught.value) and str(caught.value).startswith("task own_check: ")


def test_checks_and_the_simulator_agree_on_the_robot_link_names() -> None:
    assert robot_names.ROBOT_PREFIX == solvers.mujoco.robot.ROBOT_PREFIX
    assert robot_names.is_robot_link("fr3_link3") and not robot_names.is_robot_link("carton")
