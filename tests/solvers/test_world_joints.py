"""Articulated parts in the MuJoCo world: a fixed object with a slide or hinge joint moves along (about) its
axis only, within its range; its joint position is in the world state; rollouts stay deterministic."""

import math

import numpy as np
import pytest

from simpact.core.actions import Plan
from simpact.core.scene import RobotStart, Scene, SceneError, SceneObject
from solvers.mujoco.scene_builder import part_state
from solvers.mujoco.world import MujocoWorld

DOOR = SceneObject(
    "door",
    "box",
    (0.04, 0.12, 0.08),
    (0.55, 0.0, 0.04),
    mass=0.5,
    fixed=True,
    joint={"type": "slide", "axis": [1, 0, 0], "range": [0.0, 0.06], "position": 0.01, "damping": 2.0},
)
SCENE = Scene((DOOR,), RobotStart((0.45, 0.0, 0.2), 0.0, 0.0))


def push(dx: float, dy: float) -> Plan:
    """Fingers closed, down beside the door's near face, then a push along x and across it."""
    return Plan.from_actions(
        [
            {"type": "GRASP", "d": 0.0},
            {"type": "MOVE", "dx": 0.05, "dy": 0.0, "dz": 0.0},
            {"type": "DESCEND", "dz": 0.16},
            {"type": "PUSH", "dx": dx, "dy": dy},
            {"type": "LIFT", "dz": 0.1},
        ]
    )


@pytest.fixture(scope="module")
def world() -> MujocoWorld:
    return MujocoWorld(SCENE)


def test_a_rigid_objects_dict_is_unchanged_and_a_joint_round_trips():
    box = SceneObject("b", "box", (0.05, 0.05, 0.05), (0.5, 0.0, 0.025))
    assert "joint" not in box.to_dict()
    assert SceneObject.from_dict(DOOR.to_dict()) == DOOR
    assert Scene.from_dict(SCENE.to_dict()) == SCENE


def test_a_bad_joint_is_a_scene_error():
    with pytest.raises(SceneError, match="range"):
        DOOR.moved(joint={**DOOR.joint, "range": [0.1, 0.0]})
    with pytest.raises(SceneError, match="fixed"):
        DOOR.moved(fixed=False)
    with pytest.raises(SceneError, match="unknown keys"):
        DOOR.moved(joint={**DOOR.joint, "speed": 1})


def test_the_initial_state_has_the_joint_where_the_scene_says(world):
    s = world.state()
    assert s.objects["door"].joint == pytest.approx(0.01, abs=1e-6)
    assert np.allclose(s.objects["door"].position, DOOR.position, atol=1e-6)
    assert "joint" in s.objects["door"].to_dict()


def test_a_pushed_slide_part_moves_along_its_axis_only_within_range(world):
    r = world.rollout(push(0.2, 0.04))
    door = r.final.objects["door"]
    assert 0.04 < door.joint < 0.06 + 1e-3  # pushed most of the way, never past its range
    moved = np.asarray(door.position) - np.asarray(DOOR.position)
    assert moved[0] == pytest.approx(door.joint - 0.01, abs=1e-9)
    assert abs(moved[1]) < 1e-9 and abs(moved[2]) < 1e-9
    assert np.allclose(door.quaternion, DOOR.quaternion)
    # the trace: the joint never leaves its range (MuJoCo's limit is soft: a mm at most)
    adr = world.part_qpos["door"][0]
    assert r.trace is not None
    assert r.trace.qpos[:, adr].max() < 0.06 + 1e-3 and r.trace.qpos[:, adr].min() > 0.01 - 1e-3


def test_rollouts_with_a_part_are_deterministic(world):
    a, b = world.rollouts([push(0.1, 0.0), push(0.1, 0.0)], nthread=2)
    assert a.trace is not None and b.trace is not None
    assert np.array_equal(a.trace.qpos, b.trace.qpos)
    again = MujocoWorld(SCENE).rollout(push(0.1, 0.0))
    assert again.trace is not None and np.array_equal(again.trace.qpos, a.trace.qpos)
    assert 0.01 < a.final.objects["door"].joint < 0.06


def test_a_hinge_part_turns_about_its_anchor():
    lid = SceneObject(
        "lid",
        "box",
        (0.1, 0.1, 0.01),
        (0.5, 0.0, 0.1),
        mass=0.2,
        fixed=True,
        joint={"type": "hinge", "axis": [0, -1, 0], "range": [0, 2], "anchor": [-0.05, 0, 0]},
    )
    s = part_state(lid, math.pi / 2, 0.0)
    assert np.allclose(s.position, [0.45, 0.0, 0.15])  # the centre swung up above the hinge line
    assert s.joint == pytest.approx(math.pi / 2)
