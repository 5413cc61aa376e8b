"""The World protocol: MujocoWorld satisfies it (at run time and to mypy), make_world picks it, and the one
MuJoCo accessor gives what auditing needs."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simpact.core.actions import Plan
from simpact.core.scene import RobotStart, Scene, SceneError, SceneObject
from solvers.mujoco.world import MujocoAccess, MujocoWorld, mujoco_access
from solvers.world import World, make_world

BOX = SceneObject("box", "box", (0.05, 0.05, 0.05), (0.55, 0.0, 0.025), mass=0.2, friction=0.5)
SCENE = Scene((BOX,), RobotStart((0.45, 0.0, 0.2), 0.0, 0.08))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def world() -> World:
    return make_world(SCENE)


def test_make_world_builds_a_mujoco_world_for_rigid_objects(world):
    assert isinstance(world, MujocoWorld) and isinstance(world, World)


def test_make_world_refuses_a_deformable_its_solver_cannot_build():
    rope = SceneObject("rope", "box", (0.3, 0.01, 0.01), (0.5, 0.0, 0.005), kind="pd")
    with pytest.raises(SceneError, match="a pd rope is a cylinder"):
        make_world(Scene((rope,)))


def test_rollout_is_rollouts_of_one(world):
    plan = Plan.from_actions([{"type": "DESCEND", "dz": 0.1}])
    one = world.rollout(plan, tail_s=0.1)
    (many,) = world.rollouts([plan], tail_s=0.1)
    assert one.trace is not None and many.trace is not None
    assert np.array_equal(one.trace.qpos, many.trace.qpos)
    with pytest.raises(TypeError):
        world.rollouts([plan], world.initial_snapshot)  # type: ignore[misc]  # snapshot is keyword-only


def test_accessor_describes_the_world(world):
    mj = mujoco_access(world)
    assert isinstance(mj, MujocoAccess)
    assert mj.objects == {"box": mj.model.body("box").id} and set(mj.object_qpos) == {"box"}
    assert np.array_equal(mj.initial_snapshot, world.initial_snapshot)
    data = mj.new_data(mj.initial_snapshot)
    assert np.array_equal(mj.snapshot(data), world.initial_snapshot)
    assert mj.world_state(float(data.time), data.qpos, data.qvel, data.sensordata).to_dict() == (
        world.state().to_dict()
    )
    with pytest.raises(SceneError, match="MuJoCo world"):
        mujoco_access(object())


def test_mujoco_world_matches_the_protocol_for_mypy():
    """mypy checks ``world: World = MujocoWorld(scene)`` (every member's signature), and fails on a
    mismatch."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "tests/solvers/world_typing.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
