"""Safety limits: refusals name the action, the simulated collision check, the plan hash."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from robot.base import PlanRefused
from robot.execute import execute_plan
from robot.franka import FrankaRobot
from robot.safety import (
    HOME_TCP_QUATERNION,
    SafetyLimits,
    check_plan,
    plan_sha256,
    start_yaw,
    validate_plan,
)
from simpact.core.actions import Plan, PlanError, StartPose
from simpact.core.rotations import quat_about_z, quat_mul
from simpact.core.scene import Scene, SceneObject
from simpact.core.trajectory import MotionLimits
from simpact.tasks import list_tasks, load_task

START = {"position": [0.42, 0.0, 0.3], "quaternion": list(HOME_TCP_QUATERNION), "gripper_width": 0.08}


def plan_of(*actions: dict, start: dict = START) -> Plan:
    return Plan.from_actions(list(actions), start_pose=start)


def task_start(scene: Scene) -> StartPose:
    """The start pose a task's robot start describes (what the simulator's IK places the tool at)."""
    rs = scene.robot
    quat = quat_mul(quat_about_z(rs.yaw), np.asarray(HOME_TCP_QUATERNION))
    return StartPose(tuple(rs.position), tuple(quat.tolist()), rs.gripper_width)  # type: ignore[arg-type]


def test_limits_from_yaml_set_some_fields_and_name_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text("max_speed: 0.1\nworkspace_max: [0.7, 0.3, 0.5]\n")
    limits = SafetyLimits.from_yaml(path)
    assert limits.max_speed == 0.1 and limits.workspace_max == (0.7, 0.3, 0.5)
    assert limits.max_step == SafetyLimits().max_step
    path.write_text("max_sped: 0.1\n")
    with pytest.raises(ValueError, match=r"limits.yaml: unknown fields \['max_sped'\]"):
        SafetyLimits.from_yaml(path)
    with pytest.raises(ValueError, match="workspace_min .* must be below"):
        SafetyLimits(workspace_min=(0.5, 0.0, 0.0), workspace_max=(0.4, 1.0, 1.0))


@pytest.mark.parametrize("name", list_tasks())
def test_reference_plans_pass_every_check(name: str) -> None:
    task = load_task(name)
    scene = task.scene(0)
    plan = task.reference_plan(scene, task_start(scene), 0)
    validation = validate_plan(plan, SafetyLimits(), scene)
    assert validation.ok, validation.reason
    assert validation.simulation is not None
    contacts = validation.simulation["contacts"]
    if any(o.kind == "rigid" and not o.fixed and o.collides for o in scene.objects):  # rigid contacts only
        assert contacts, "every reference plan touches an object"
    assert all(c["intended"] for c in contacts)
    assert validation.simulation["ik_residual_max_m"] < 0.005


def test_workspace_violation_names_the_action() -> None:
    plan = plan_of({"type": "LIFT", "dz": 0.05}, {"type": "MOVE", "dx": 0.45, "dy": 0.0, "dz": 0.0})
    violations = check_plan(plan, SafetyLimits())
    assert [(v.action, v.type, v.check) for v in violations] == [(1, "MOVE", "workspace")]
    assert "x = 0.870 m, outside the workspace [0.200, 0.800]" in str(violations[0])
    assert str(violations[0]).startswith("action 1 (MOVE):")


def test_table_speed_step_and_start_violations() -> None:
    low = check_plan(plan_of({"type": "DESCEND", "dz": 0.299}), SafetyLimits())
    assert [(v.action, v.check) for v in low] == [(0, "table")]
    assert "below the table clearance" in low[0].message

    fast = check_plan(
        plan_of({"type": "PUSH", "dx": 0.2, "dy": 0.0}), SafetyLimits(), MotionLimits(max_speed=0.4)
    )
    assert [(v.action, v.type, v.check) for v in fast] == [(0, "PUSH", "speed")]

    long = check_plan(
        plan_of({"type": "LIFT", "dz": 0.05}, {"type": "PUSH", "dx": 0.2, "dy": 0.1}),
        SafetyLimits(max_step=0.15),
    )
    assert [(v.action, v.check) for v in long] == [(1, "step")]

    outside = {**START, "position": [0.1, 0.0, 0.3]}
    start = check_plan(plan_of({"type": "LIFT", "dz": 0.05}, start=outside), SafetyLimits())
    assert start[0].action is None and start[0].check == "workspace"
    assert str(start[0]).startswith("start pose: it is at x = 0.100 m")

    assert (
        check_plan(Plan.from_actions([{"type": "LIFT", "dz": 0.05}]), SafetyLimits())[0].check == "start_pose"
    )


def test_start_orientation_is_a_turn_about_z() -> None:
    turned = quat_mul(quat_about_z(0.7), np.asarray(HOME_TCP_QUATERNION))
    assert start_yaw(StartPose((0.4, 0.0, 0.2), tuple(turned), 0.08)) == pytest.approx(0.7)
    tilted = quat_mul(np.array([np.cos(0.1), np.sin(0.1), 0.0, 0.0]), np.asarray(HOME_TCP_QUATERNION))
    with pytest.raises(PlanError, match="tilted 11.5 deg"):
        start_yaw(StartPose((0.4, 0.0, 0.2), tuple(tilted), 0.08))


def test_an_arm_link_hitting_a_fixed_pillar_is_refused_naming_the_action() -> None:
    pillar = SceneObject("pillar", "box", (0.06, 0.06, 0.7), (0.42, 0.22, 0.35), fixed=True)
    plan = plan_of({"type": "LIFT", "dz": 0.02}, {"type": "MOVE", "dx": 0.0, "dy": 0.25, "dz": 0.0})
    assert validate_plan(plan, SafetyLimits()).ok  # nothing in the way on the bare table
    validation = validate_plan(plan, SafetyLimits(), Scene((pillar,)))
    assert not validation.ok
    first = validation.violations[0]
    assert (first.action, first.type, first.check) == (1, "MOVE", "collision")
    assert "fr3_link" in first.message and "'pillar'" in first.message


def test_hash_identifies_the_plan_and_execution_refuses_a_changed_one() -> None:
    plan = plan_of({"type": "LIFT", "dz": 0.05})
    same = Plan.from_dict(plan.to_dict())
    changed = plan_of({"type": "LIFT", "dz": 0.051})
    assert plan_sha256(plan) == plan_sha256(same) != plan_sha256(changed)
    validation = validate_plan(plan, SafetyLimits(), simulate=False)
    assert validation.ok
    robot = FrankaRobot("127.0.0.1", SafetyLimits(), realtime=False)  # never connected: refusals come first
    with pytest.raises(PlanRefused, match="it changed after validation"):
        execute_plan(robot, dataclasses.replace(validation, plan=changed))
    bad = validate_plan(plan_of({"type": "DESCEND", "dz": 0.299}), SafetyLimits(), simulate=False)
    with pytest.raises(PlanRefused, match=r"action 0 \(DESCEND\): .* table"):
        execute_plan(robot, bad)
    assert not robot.connected
