"""Object meshes: procedural bowls, mesh files, convex decomposition cached on disk by content hash."""

import numpy as np
import pytest
import trimesh

from simpact.core.scene import RobotStart, Scene, SceneObject
from solvers.mujoco import meshes
from solvers.mujoco.world import MujocoWorld


def test_bowl_is_watertight_and_concave():
    bowl = meshes.bowl_mesh(0.05, 0.04, 0.005, sections=16)
    assert bowl.is_watertight and bowl.volume > 0
    np.testing.assert_allclose(bowl.bounds, [[-0.05, -0.05, 0.0], [0.05, 0.05, 0.04]], atol=1e-3)
    assert bowl.volume < 0.5 * bowl.convex_hull.volume


def test_convex_parts_are_cached_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMPACT_CACHE", str(tmp_path))
    bowl = meshes.bowl_mesh(0.05, 0.04, 0.005, sections=12)
    parts = meshes.convex_parts(bowl)
    assert len(parts) > 1
    assert len(list((tmp_path / "convex").glob("*.npz"))) == 1

    import coacd

    def fail(*args, **kwargs):
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(coacd, "run_coacd", fail)
    again = meshes.convex_parts(bowl)
    assert all(np.array_equal(a, b) for a, b in zip(parts.vertices, again.vertices))
    with pytest.raises(AssertionError, match="cache was not used"):
        meshes.convex_parts(meshes.bowl_mesh(0.05, 0.04, 0.006, sections=12))  # other content, other key


def test_mesh_file_objects_rest_on_the_table(tmp_path):
    path = tmp_path / "block.obj"
    trimesh.creation.box((0.04, 0.06, 0.03)).export(path)
    block = SceneObject(
        "block",
        "mesh",
        (1.0, 1.0, 1.0),
        (0.55, 0.1, 0.015),
        mesh=str(path),
        mass=0.1,
        convex_decomposition=False,
    )
    world = MujocoWorld(Scene((block,), RobotStart((0.45, 0.0, 0.3))))
    state = world.state().objects["block"]
    assert state.position[2] == pytest.approx(0.015, abs=1e-3)
    assert np.linalg.norm(state.linear_velocity) < 1e-3


def test_missing_mesh_file_is_a_clear_error(tmp_path):
    ghost = SceneObject("ghost", "mesh", (1.0, 1.0, 1.0), (0.5, 0.0, 0.1), mesh=str(tmp_path / "no.obj"))
    with pytest.raises(FileNotFoundError, match="no.obj does not exist"):
        MujocoWorld(Scene((ghost,)))


def test_deformable_objects_are_refused_by_the_rigid_world():
    from simpact.core.scene import SceneError

    rope = SceneObject("rope", "cylinder", (0.005, 0.4), (0.5, 0.0, 0.005), kind="pd")
    with pytest.raises(SceneError, match="object 'rope' is of kind 'pd'"):
        MujocoWorld(Scene((rope,)))
