"""A box given the neck its points show beyond it: a square bottle's, standing or lying; not a carton."""

from __future__ import annotations

import types

import numpy as np
import trimesh

from real2sim.necks import add_neck
from real2sim.overlays import look_at
from real2sim.types import ObjectGeometry

from ._render import seen_on_table

K = np.array([[600.0, 0.0, 160.0], [0.0, 600.0, 120.0], [0.0, 0.0, 1.0]])
H, W = 240, 320
T_WORLD_CAM = look_at(np.array([-0.5, -0.2, 0.4]), np.array([0.0, 0.0, 0.08]))
BODY = np.array([0.055, 0.055, 0.13])  # a square bottle's body, standing
NECK_R, NECK_H = 0.013, 0.03


def _seen(obj: trimesh.Trimesh) -> tuple[types.SimpleNamespace, np.ndarray, np.ndarray]:
    """The frame of ``obj`` on a table, its mask and its points in the world (m)."""
    return seen_on_table(obj, T_WORLD_CAM, K, H, W)


def _standing(extent: np.ndarray, points: np.ndarray) -> ObjectGeometry:
    position = np.array([0.0, 0.0, extent[2] / 2])
    box = trimesh.creation.box(extents=extent)
    return ObjectGeometry("object_0", box, position, np.eye(4)[0], extent.copy(), points)


def test_a_standing_square_bottle_gets_its_neck_and_a_carton_does_not() -> None:
    body = trimesh.creation.box(extents=BODY)
    body.apply_translation((0.0, 0.0, BODY[2] / 2))
    neck = trimesh.creation.cylinder(radius=NECK_R, height=NECK_H, sections=48)
    neck.apply_translation((0.0, 0.0, BODY[2] + NECK_H / 2))
    frame, mask, points = _seen(trimesh.util.concatenate([body, neck]))
    fitted = add_neck(_standing(BODY, points), frame, T_WORLD_CAM, mask, mask)  # type: ignore[arg-type]
    assert len(fitted.mesh.vertices) > 8
    assert abs(fitted.extent[2] - (BODY[2] + NECK_H)) < 0.003 and np.allclose(fitted.extent[:2], BODY[:2])
    top = fitted.mesh.vertices[fitted.mesh.vertices[:, 2] > fitted.mesh.bounds[1, 2] - 1e-6]
    assert abs(np.ptp(top[:, 0]) / 2 - NECK_R) < 0.003  # the neck's radius, its top where the bottle's is
    assert abs(fitted.position[2] - (BODY[2] + NECK_H) / 2) < 0.002  # still centred on its bounding box
    assert fitted.neck_m is not None and abs(fitted.neck_m[1] - NECK_H) < 0.003  # said in scene.json

    carton = np.array([0.05, 0.08, 0.16])
    box = trimesh.creation.box(extents=carton)
    box.apply_translation((0.0, 0.0, carton[2] / 2))
    frame, mask, points = _seen(box)
    short = carton - [0.0, 0.0, 0.008]  # fitted 8 mm short: its points above it span the whole top
    kept = add_neck(_standing(short, points), frame, T_WORLD_CAM, mask, mask)  # type: ignore[arg-type]
    assert len(kept.mesh.vertices) == 8 and np.allclose(kept.extent, short)


def test_a_lying_square_bottle_gets_its_neck_at_the_end_it_has_one() -> None:
    length = BODY[2]
    body = trimesh.creation.box(extents=(length, BODY[0], BODY[1]))
    body.apply_translation((0.0, 0.0, BODY[1] / 2))
    neck = trimesh.creation.cylinder(radius=NECK_R, height=NECK_H, sections=48)
    neck.apply_transform(trimesh.geometry.align_vectors([0.0, 0.0, 1.0], [1.0, 0.0, 0.0]))
    neck.apply_translation((-(length + NECK_H) / 2, 0.0, BODY[1] / 2))  # at the end away from +x
    frame, mask, points = _seen(trimesh.util.concatenate([body, neck]))
    box = np.array([length, BODY[0], BODY[1]])
    fitted = add_neck(_standing(box, points), frame, T_WORLD_CAM, mask, mask)  # type: ignore[arg-type]
    assert abs(fitted.extent[0] - (length + NECK_H)) < 0.004 and np.allclose(fitted.extent[1:], box[1:])
    assert abs(fitted.position[0] + NECK_H / 2) < 0.002  # grown towards -x, where the neck is


def test_no_neck_is_read_along_the_view() -> None:
    from real2sim.necks import find_neck

    rng = np.random.default_rng(0)
    neck = np.column_stack([rng.uniform(-0.01, 0.01, (200, 2)), rng.uniform(0.065, 0.09, 200)])
    body = np.column_stack([rng.uniform(-0.027, 0.027, (400, 2)), rng.uniform(-0.065, 0.065, 400)])
    points = np.vstack([body, neck])
    assert find_neck(points, 2, 0.065, 0.055, np.array([1.0, 0.0, -0.5])) is not None  # seen from the side
    assert find_neck(points, 2, 0.065, 0.055, np.array([0.05, 0.0, -1.0])) is None  # from straight above
