"""The MuJoCo World: exact snapshots, deterministic and parallel rollouts, grasps that hold."""

import mujoco
import numpy as np
import pytest

from simpact.core.actions import Plan
from simpact.core.scene import RobotStart, Scene, SceneObject
from solvers.mujoco.world import MujocoWorld

BOX = SceneObject("box", "box", (0.05, 0.05, 0.05), (0.55, 0.0, 0.025), mass=0.2, friction=0.5)
SCENE = Scene((BOX,), RobotStart((0.45, 0.0, 0.2), 0.0, 0.08))


def push(dx: float) -> Plan:
    return Plan.from_actions(
        [
            {"type": "DESCEND", "dz": 0.175},
            {"type": "PUSH", "dx": dx, "dy": 0.0},
            {"type": "LIFT", "dz": 0.1},
        ]
    )


@pytest.fixture(scope="module")
def world() -> MujocoWorld:
    return MujocoWorld(SCENE)


def test_snapshot_restore_is_bit_exact(world):
    m, d = world.model, mujoco.MjData(world.model)
    world.restore(world.initial_snapshot, d)
    d.ctrl[:7] += 0.05  # move the arm so the warm start and contacts matter
    mujoco.mj_step(m, d, 200)
    snap = world.snapshot(d)
    mujoco.mj_step(m, d, 300)
    first = world.snapshot(d)
    world.restore(snap, d)
    mujoco.mj_step(m, d, 300)
    assert np.array_equal(world.snapshot(d), first)


def test_rollout_equals_a_plain_mj_step_loop(world):
    rollout = world.rollout(push(0.1))
    _, ctrl, _, _ = world.controls(push(0.1), world.initial_snapshot)
    d = mujoco.MjData(world.model)
    world.restore(world.initial_snapshot, d)
    qpos = np.empty((len(ctrl), world.model.nq))
    for i, u in enumerate(ctrl):
        d.ctrl[:] = u
        mujoco.mj_step(world.model, d)
        qpos[i] = d.qpos
    assert np.array_equal(rollout.trace.qpos, qpos)


def test_parallel_rollouts_equal_serial_bitwise(world):
    plans = [push(dx) for dx in (0.02, 0.06, 0.1, 0.14)]
    serial = [world.rollout(p) for p in plans]
    parallel = world.rollouts(plans, nthread=2)
    for a, b in zip(serial, parallel):
        assert np.array_equal(a.trace.qpos, b.trace.qpos)
        assert np.array_equal(a.trace.qvel, b.trace.qvel)
        assert np.array_equal(a.trace.ctrl, b.trace.ctrl)
    assert not np.array_equal(serial[0].trace.qpos[-1], serial[-1].trace.qpos[-1])


def test_rollouts_leave_the_world_and_snapshot_untouched(world):
    before = world.snapshot()
    world.rollout(push(0.1))
    assert np.array_equal(world.snapshot(), before)


def test_same_scene_built_twice_gives_identical_rollouts(world):
    other = MujocoWorld(SCENE)
    assert np.array_equal(other.initial_snapshot, world.initial_snapshot)
    a, b = world.rollout(push(0.08)), other.rollout(push(0.08))
    assert np.array_equal(a.trace.qpos, b.trace.qpos)


def test_rollout_reports_the_state_at_the_end_of_each_action(world):
    plan = push(0.1)
    rollout = world.rollout(plan, tail_s=0.5)
    assert len(rollout.states) == len(plan.actions)
    start = np.asarray(rollout.plan.start_pose.position)
    tcp = [s.robot.tcp_position for s in rollout.states]
    np.testing.assert_allclose(tcp[0], start + [0, 0, -0.175], atol=3e-3)
    np.testing.assert_allclose(tcp[1], start + [0.1, 0, -0.175], atol=5e-3)
    np.testing.assert_allclose(tcp[2], start + [0.1, 0, -0.075], atol=3e-3)
    box = rollout.final.objects["box"]
    assert box.position[0] > BOX.position[0] + 0.03  # the box was pushed
    assert rollout.final.time == pytest.approx(rollout.trace.time[-1])
    assert rollout.nsteps == len(rollout.trace)
    assert rollout.ik_residual_max < 1e-4


def test_tracking_error_at_waypoints_is_small(world):
    plan = Plan.from_actions(
        [{"type": "MOVE", "dx": 0.1, "dy": 0.15, "dz": 0.1}, {"type": "ROTATE", "dyaw": 0.8}]
    )
    rollout = world.rollout(plan)
    target = np.asarray(rollout.plan.start_pose.position) + [0.1, 0.15, 0.1]
    np.testing.assert_allclose(rollout.states[-1].robot.tcp_position, target, atol=2e-3)
    yaw0 = rollout.initial.robot.tcp_rpy[2]
    yaw1 = rollout.states[-1].robot.tcp_rpy[2]
    assert (yaw1 - yaw0 + np.pi) % (2 * np.pi) - np.pi == pytest.approx(0.8, abs=0.01)


def test_robot_starts_exactly_where_the_scene_says():
    world = MujocoWorld(Scene((BOX,), RobotStart((0.35, -0.2, 0.3), 0.6, 0.05)))
    start = world.start_pose()
    np.testing.assert_allclose(start.position, (0.35, -0.2, 0.3), atol=1e-5)
    assert start.gripper_width == 0.05
    state = world.state().robot
    np.testing.assert_allclose(state.tcp_position, (0.35, -0.2, 0.3), atol=1e-3)
    assert state.gripper_width == pytest.approx(0.05, abs=1e-3)


def test_a_start_low_and_to_the_side_is_reached_from_home_turned_toward_it():
    """From home the IK sticks at 0.21 m from this pose (a CALVIN push left the hand here); from home with
    the base joint turned toward it, it converges."""
    world = MujocoWorld(Scene((BOX,), RobotStart((0.2864, 0.3187, 0.0273), -0.08, 0.04)))
    np.testing.assert_allclose(world.start_pose().position, (0.2864, 0.3187, 0.0273), atol=1e-5)
    np.testing.assert_allclose(world.state().robot.tcp_position, (0.2864, 0.3187, 0.0273), atol=2e-3)


def test_unreachable_start_is_a_scene_error():
    from simpact.core.scene import SceneError

    with pytest.raises(SceneError, match="out of reach"):
        MujocoWorld(Scene((BOX,), RobotStart((1.5, 0.0, 0.3))))


@pytest.mark.parametrize("holding", ["held", None])
def test_a_robot_start_holding_an_object_carries_it(holding):
    """``RobotStart.holding``: the object between the fingers is squeezed from the start (the gripper is
    commanded closed) and moves with the hand; without it the fingers only rest against it and it drops."""
    block = SceneObject("held", "box", (0.05, 0.05, 0.04), (0.45, 0.0, 0.2), mass=1.0, friction=0.7)
    world = MujocoWorld(Scene((block,), RobotStart((0.45, 0.0, 0.2), 0.0, 0.05, holding=holding)))
    assert world.start_pose().gripper_width == (0.0 if holding else 0.05)
    move = Plan.from_actions([{"type": "MOVE", "dx": 0.1, "dy": 0.05, "dz": 0.1}])
    end = world.rollout(move, tail_s=0.2).final.objects["held"].position
    if holding:
        np.testing.assert_allclose(end, (0.55, 0.05, 0.3), atol=5e-3)
    else:
        assert end[2] < 0.03  # fell to the table


def test_holding_must_name_a_movable_object_of_the_scene():
    from simpact.core.scene import SceneError

    with pytest.raises(SceneError, match="not an object"):
        Scene((BOX,), RobotStart(holding="cup"))
    wall = SceneObject("wall", "box", (0.05, 0.05, 0.05), (0.5, 0.2, 0.025), fixed=True)
    with pytest.raises(SceneError, match="movable"):
        Scene((BOX, wall), RobotStart(holding="wall"))
    scene = Scene((BOX,), RobotStart(holding="box"))
    assert Scene.from_dict(scene.to_dict()) == scene
    assert "holding" not in SCENE.to_dict()["robot"]
