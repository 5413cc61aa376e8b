"""Checked by mypy (tests/solvers/test_world_protocol.py): a MujocoWorld is a World, member by member."""

from simpact.core.scene import Scene
from solvers.mujoco.world import MujocoWorld
from solvers.world import World


def as_world(scene: Scene) -> World:
    world: World = MujocoWorld(scene)
    return world
