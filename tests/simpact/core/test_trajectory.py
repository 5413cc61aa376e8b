import numpy as np

from simpact.core.actions import Plan, StartPose
from simpact.core.rotations import quat_to_rpy
from simpact.core.trajectory import GRIPPER_MAX_WIDTH, MotionLimits, expand_plan

START = StartPose((0.4, 0.0, 0.3), (0.0, 1.0, 0.0, 0.0), 0.02)


def test_waypoints_reach_each_displacement_with_bounded_speed():
    plan = Plan.from_actions(
        [
            {"type": "MOVE", "dx": 0.2, "dy": -0.1, "dz": -0.05},
            {"type": "PUSH", "dx": -0.05, "dy": 0.1},
            {"type": "DESCEND", "dz": 0.1},
            {"type": "LIFT", "dz": 0.03},
        ]
    )
    limits = MotionLimits()
    wp = expand_plan(plan, START, limits)
    expected = np.cumsum([[0.2, -0.1, -0.05], [-0.05, 0.1, 0.0], [0.0, 0.0, -0.1], [0.0, 0.0, 0.03]], axis=0)
    np.testing.assert_allclose(wp.position[wp.action_end], np.asarray(START.position) + expected, atol=1e-12)
    speed = np.linalg.norm(np.diff(wp.position, axis=0), axis=1) / wp.dt
    assert speed.max() <= limits.max_speed * 1.001
    assert np.all(np.diff(wp.action_end) > 0)


def test_rotate_turns_about_the_vertical_and_keeps_the_gripper_down():
    plan = Plan.from_actions([{"type": "ROTATE", "dyaw": 0.7}])
    wp = expand_plan(plan, START)
    rpy0, rpy1 = quat_to_rpy(np.asarray(START.quaternion)), quat_to_rpy(wp.quaternion[-1])
    assert np.isclose((rpy1[2] - rpy0[2] + np.pi) % (2 * np.pi) - np.pi, 0.7)
    np.testing.assert_allclose(wp.position[-1], START.position)
    rate = np.abs(np.diff(wp.yaw)) / wp.dt
    assert rate.max() <= MotionLimits().max_yaw_rate * 1.001


def test_gripper_widths_are_clamped_to_the_franka_hand():
    plan = Plan.from_actions([{"type": "GRASP", "d": 0.1}, {"type": "GRASP", "d": 0.0}, {"type": "RELEASE"}])
    wp = expand_plan(plan, START)
    assert wp.gripper.max() == GRIPPER_MAX_WIDTH
    assert list(wp.gripper[wp.action_end]) == [GRIPPER_MAX_WIDTH, 0.0, GRIPPER_MAX_WIDTH]
    np.testing.assert_allclose(wp.position, np.tile(START.position, (len(wp), 1)))
