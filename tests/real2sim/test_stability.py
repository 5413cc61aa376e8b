"""A shape real2sim weighs against an object's outline must stand: the photographed object was at rest."""

from __future__ import annotations

import numpy as np
import trimesh

from real2sim.stability import STAND_MARGIN_M, stands
from real2sim.types import ObjectGeometry


def _posed(
    mesh: trimesh.Trimesh, quaternion: tuple[float, float, float, float] = (1.0, 0, 0, 0)
) -> ObjectGeometry:
    """``mesh`` at 0.5 m in front of the robot, turned by ``quaternion`` (w, x, y, z)."""
    q = np.asarray(quaternion, dtype=np.float64)
    return ObjectGeometry(
        "object_0", mesh, np.array([0.5, 0.0, 0.1]), q, mesh.extents.copy(), np.zeros((0, 3))
    )


def _leaning(offset_m: float) -> trimesh.Trimesh:
    """A 2 x 2 cm column 10 cm tall whose top is shifted ``offset_m`` along x: a slab leaning that far."""
    base = np.array([[-0.01, -0.01], [0.01, -0.01], [0.01, 0.01], [-0.01, 0.01]])
    bottom = np.column_stack([base, np.zeros(4)])
    top = np.column_stack([base + [offset_m, 0.0], np.full(4, 0.1)])
    return trimesh.convex.convex_hull(np.vstack([bottom, top]))


def test_a_box_on_a_face_stands_however_it_is_turned_about_the_vertical() -> None:
    box = trimesh.creation.box(extents=(0.05, 0.1, 0.2))
    quarter = (np.cos(np.pi / 8), 0.0, 0.0, np.sin(np.pi / 8))  # 45 degrees about z
    assert stands(_posed(box)) and stands(_posed(box, quarter))


def test_a_column_leaning_past_its_foot_does_not_stand() -> None:
    # The centre of mass lies half the top's offset over: 0.5 cm inside the 1 cm half-width, then over it.
    assert stands(_posed(_leaning(0.01)))
    assert not stands(_posed(_leaning(0.04)))
    # On the foot's edge within the margin: the settling contacts would tip it over.
    assert not stands(_posed(_leaning(2 * (0.01 - STAND_MARGIN_M / 2))))


def test_a_shape_on_an_edge_does_not_stand() -> None:
    on_edge = trimesh.creation.box(extents=(0.05, 0.05, 0.1))
    tilt = np.radians(45) / 2  # 45 degrees about x: it rests on one edge
    assert not stands(_posed(on_edge, (np.cos(tilt), np.sin(tilt), 0.0, 0.0)))
