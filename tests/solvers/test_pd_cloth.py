"""The projective-dynamics cloth: it drapes over a box, a corner held by the pads lifts it, it lies still on
the table, reruns and batches are exact, and pd objects pick the cloth or the rope (solvers.pd.cloth)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("torch", reason="the PD cloth needs torch (pip install -e '.[deformable]')")

from simpact.core.scene import Scene, SceneObject  # noqa: E402
from solvers.deformable import Colliders, Grip, build_solver  # noqa: E402
from solvers.pd import is_sheet  # noqa: E402
from solvers.pd.cloth import ClothSolver  # noqa: E402, TID253  (after the torch check)

DT = 0.01


def _sheet(z: float = 0.005, side: float = 0.3, **material: float) -> SceneObject:
    return SceneObject(
        name="towel",
        shape="box",
        size=(side, side, 0.003),
        position=(0.5, 0.0, z),
        mass=0.05,
        friction=0.6,
        kind="pd",
        material={"spacing": 0.03, **material},
    )


def _cloth(z: float = 0.005, **material: float) -> ClothSolver:
    solver = build_solver(_sheet(z, **material), Scene(()))
    assert isinstance(solver, ClothSolver)
    return solver


def _colliders(box_centre: np.ndarray | None, grip_centre: np.ndarray, opening: float) -> Colliders:
    """A fixed 10 cm cube at ``box_centre`` (or none) and a grip frame (finger axis x) at ``grip_centre``."""
    grip = Grip(
        centre=np.asarray(grip_centre, dtype=float)[None],
        rotation=np.eye(3)[None],
        half=np.array([0.0085, 0.0085]),
        opening=np.array([opening]),
        velocity=np.zeros((1, 3)),
        angular_velocity=np.zeros((1, 3)),
    )
    k = 0 if box_centre is None else 1
    centre = np.zeros((1, k, 3)) if box_centre is None else np.asarray(box_centre, dtype=float)[None, None]
    return Colliders(
        0.0,
        0.5,
        centre,
        np.tile(np.eye(3), (1, k, 1, 1)),
        np.full((k, 3), 0.05),
        np.zeros((1, k, 3)),
        np.zeros((1, k, 3)),
        np.full(k, 0.5),
        ("cube",) * k,
        grip,
    )


FAR = np.array([0.0, 0.8, 0.5])


def test_a_sheet_is_a_cloth_and_a_long_thin_object_a_rope() -> None:
    assert is_sheet(_sheet())
    rope = SceneObject(name="r", shape="cylinder", size=(0.0075, 0.3), position=(0.5, 0, 0.01), kind="pd")
    assert not is_sheet(rope)
    assert not is_sheet(SceneObject(name="b", shape="box", size=(0.3, 0.02, 0.02), position=(0.5, 0, 0.01)))
    assert is_sheet(SceneObject(name="c", shape="box", size=(0.3, 0.3, 0.1), position=(0.5, 0, 0.05),
                                material={"model": "cloth"}))  # fmt: skip


def test_a_cloth_drapes_over_a_box() -> None:
    cloth = _cloth(z=0.13)
    colliders = _colliders(np.array([0.5, 0.0, 0.05]), FAR, 0.08)
    for _ in range(150):
        cloth.step(DT, colliders)
    x = cloth.positions()[0]
    inner = np.abs(x[:, :2] - [0.5, 0.0]).max(axis=1) < 0.04
    n = cloth.params.nx * cloth.params.ny
    corners = [0, cloth.params.ny - 1, n - cloth.params.ny, n - 1]
    assert x[inner, 2].min() > 0.099, "the middle rests on the box's top"
    assert x[corners, 2].max() < 0.07, "the corners hang down its sides"
    assert cloth.edge_lengths().max() < 1.1, "it hardly stretches"
    # and it can fail: without the box the middle falls to the table
    bare = _cloth(z=0.13)
    for _ in range(150):
        bare.step(DT, _colliders(None, FAR, 0.08))
    assert bare.positions()[0][inner, 2].max() < 0.01


def test_a_corner_between_closed_pads_lifts_the_cloth() -> None:
    cloth = _cloth()
    corner = cloth.positions()[0][0]
    for k in range(60):
        lift = min(k, 40) * 0.005
        cloth.step(DT, _colliders(None, corner + [0.0, 0.0, lift], 0.005))
    x = cloth.positions()[0]
    assert cloth.held()[0, 0]
    assert x[0, 2] == pytest.approx(corner[2] + 0.2, abs=1e-9), "the held corner follows the grip exactly"
    assert x[:, 2].max() > 0.15 and x[-1, 2] < 0.01, "it hangs from the corner, the far corner on the table"
    cloth.step(DT, _colliders(None, corner + [0.0, 0.0, 0.2], 0.08))
    assert not cloth.held().any(), "released when the pads open"


def test_a_cloth_at_rest_on_the_table_stays_put_and_reruns_are_exact() -> None:
    cloth = _cloth(z=0.0015)  # its mid-plane half its thickness above the table
    start = cloth.positions()
    for _ in range(30):
        cloth.step(DT)
    assert np.abs(cloth.positions() - start).max() < 1e-6
    snap = cloth.snapshot()
    colliders = _colliders(np.array([0.5, 0.0, 0.03]), FAR, 0.08)  # a cube pressed into it
    for _ in range(10):
        cloth.step(DT, colliders)
    first = cloth.positions()
    cloth.restore(snap)
    for _ in range(10):
        cloth.step(DT, colliders)
    assert np.array_equal(cloth.positions(), first)


def test_a_batch_member_steps_as_a_single_cloth() -> None:
    single = _cloth(z=0.13)
    batch = single.replicate(3)
    colliders = _colliders(np.array([0.5, 0.0, 0.05]), FAR, 0.08)
    stacked = Colliders(
        0.0,
        0.5,
        np.repeat(colliders.centre, 3, axis=0),
        np.repeat(colliders.rotation, 3, axis=0),
        colliders.half,
        np.repeat(colliders.velocity, 3, axis=0),
        np.repeat(colliders.angular_velocity, 3, axis=0),
        colliders.friction,
        colliders.owner,
        Grip(*(np.repeat(getattr(colliders.grip, f), 3, axis=0) if f != "half" else colliders.grip.half
               for f in ("centre", "rotation", "half", "opening", "velocity", "angular_velocity"))),
    )  # fmt: skip
    for _ in range(20):
        single.step(DT, colliders)
        batch.step(DT, stacked)
    for b in range(3):
        assert np.array_equal(batch.positions()[b], single.positions()[0])


def test_a_robot_lifts_a_towel_by_its_corner_in_the_composite_world() -> None:
    """make_world builds the cloth next to MuJoCo's robot: the pads close on a corner and lift it, the rest
    hangs; the picture shows the towel."""
    from simpact.core.actions import Plan
    from simpact.core.scene import RobotStart
    from solvers.composite import CompositeWorld
    from solvers.world import make_world

    towel = replace(_sheet(z=0.0015), position=(0.55, 0.0, 0.0015))
    world = make_world(Scene((towel,), RobotStart((0.55 - 0.15, -0.15, 0.1), 0.0, 0.08)))
    assert isinstance(world, CompositeWorld)
    corner = world.state().deformables["towel"].particles[0]
    assert corner[:2] == pytest.approx([0.40, -0.15], abs=1e-9)
    plan = Plan.from_dict(
        {
            "actions": [
                {"type": "DESCEND", "dz": 0.1 - 0.006},
                {"type": "GRASP", "d": 0.0},
                {"type": "LIFT", "dz": 0.15},
            ]
        }  # fmt: skip
    )
    rollout = world.rollout(plan)
    end = rollout.final.deformables["towel"].particles
    assert end[0, 2] > 0.12, "the held corner went up with the hand"
    assert end[-1, 2] < 0.01, "the far corner stayed on the table"
    frame = world.render_trace(rollout.trace, -1)
    ids = {name: i for i, name in frame.mask_names.items()}
    assert (frame.masks == ids["towel"]).sum() > 100
