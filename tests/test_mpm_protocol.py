"""The MPM object behind the composite World's deformable-solver contract: built from a scene object,
batched copies, colliders from MuJoCo's boxes, the shared grasp rule, exact snapshots."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("warp")

from simpact.core.scene import Scene, SceneError, SceneObject  # noqa: E402
from solvers.deformable import Colliders, DeformableSolver, Grip  # noqa: E402
from solvers.mpm.solver import mpm_solver  # noqa: E402

DOUGH = SceneObject(
    name="dough",
    shape="box",
    size=(0.03, 0.03, 0.02),
    position=(0.5, 0.0, 0.01),
    kind="mpm",
    material={"model": "plasticine", "youngs_modulus": 5.0e4, "density": 1200.0, "grid_dx": 0.005},
)


def _colliders(batch: int, plate_z: np.ndarray, opening: float = 0.08) -> Colliders:
    """One 4 x 4 x 1 cm plate per member (its bottom at ``plate_z``), moving down at 10 cm/s."""
    centre = np.zeros((batch, 1, 3))
    centre[:, 0] = (0.5, 0.0, 0.0)
    centre[:, 0, 2] = plate_z + 0.005
    grip = Grip(
        centre=np.tile([[0.5, 0.0, 0.012]], (batch, 1)),
        rotation=np.tile(np.eye(3), (batch, 1, 1)),
        half=np.array([0.01, 0.01]),
        opening=np.full(batch, opening),
        velocity=np.zeros((batch, 3)),
        angular_velocity=np.zeros((batch, 3)),
    )
    return Colliders(
        table_z=0.0,
        table_friction=0.5,
        centre=centre,
        rotation=np.tile(np.eye(3), (batch, 1, 1, 1)),
        half=np.array([[0.02, 0.02, 0.005]]),
        velocity=np.tile([[[0.0, 0.0, -0.1]]], (batch, 1, 1)),
        angular_velocity=np.zeros((batch, 1, 3)),
        friction=np.array([0.5]),
        owner=("plate",),
        grip=grip,
    )


def test_mpm_object_meets_the_contract_batched_and_exact():
    solver = mpm_solver(DOUGH, Scene(objects=(DOUGH,)))
    assert isinstance(solver, DeformableSolver) and solver.batch == 1
    top = solver.positions()[0, :, 2].max()
    pair = solver.replicate(2)
    snap = pair.snapshot()
    heights = np.array([top + 0.03, top + 0.002])  # member 0's plate stays above, member 1's presses
    for _ in range(12):
        heights -= 0.001
        pair.step(0.01, _colliders(2, heights))
    after = pair.positions()
    assert after.shape == (2, solver.positions().shape[1], 3) and after.dtype == np.float64
    assert after[1, :, 2].max() < after[0, :, 2].max() - 0.003, "only the pressed member is squashed"
    pair.restore(snap)
    heights = np.array([top + 0.03, top + 0.002])
    for _ in range(12):
        heights -= 0.001
        pair.step(0.01, _colliders(2, heights))
    assert np.array_equal(pair.positions(), after)


def test_closed_pads_hold_particles_and_release_them():
    solver = mpm_solver(DOUGH, Scene(objects=(DOUGH,)))
    far = np.array([1.0])  # the plate far above
    solver.step(0.01, _colliders(1, far, opening=0.005))
    held = solver.snapshot().held[0]
    assert held.any() and not held.all()
    solver.step(0.01, _colliders(1, far, opening=0.08))
    assert not solver.snapshot().held.any()


def test_bad_material_is_one_line():
    bad = DOUGH.moved(material={"model": "plasticine", "grid_dx": 2.0})
    with pytest.raises(SceneError, match="grid_dx"):
        mpm_solver(bad, Scene(objects=(bad,)))
