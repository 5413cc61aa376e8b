"""Rounding a fitted box's edges where the photo's outline asks for it: a bottle with a rounded square
section, not a sharp carton."""

from __future__ import annotations

import types

import numpy as np
import trimesh

from real2sim.fitscore import render_depth
from real2sim.overlays import look_at
from real2sim.rounding import round_box, rounded_box
from real2sim.types import ObjectGeometry

K = np.array([[600.0, 0.0, 160.0], [0.0, 600.0, 120.0], [0.0, 0.0, 1.0]])
H, W = 240, 320
T_WORLD_CAM = look_at(np.array([-0.45, -0.2, 0.45]), np.array([0.0, 0.0, 0.03]))
EXTENT = np.array([0.16, 0.055, 0.055])  # a bottle lying on its side


def _seen(obj: trimesh.Trimesh) -> tuple[types.SimpleNamespace, np.ndarray, np.ndarray]:
    """The frame of ``obj`` on a table (depth where the surface faces the camera within 70 degrees, as a
    structured-light camera drops a rounded edge's rim), its depth region and its full outline."""
    table = trimesh.creation.box((1.5, 1.5, 0.01))
    table.apply_translation((0, 0, -0.005))
    meshes = [(np.asarray(m.vertices), np.asarray(m.faces)) for m in (obj, table)]
    depth, index, _ = render_depth(meshes, T_WORLD_CAM, K, H, W)
    outline = index == 0
    grad = np.hypot(*np.gradient(depth.astype(np.float64)))
    grazing = outline & (grad > np.tan(np.radians(70.0)) * depth / K[0, 0])
    depth = np.where(grazing, 0.0, depth)
    return types.SimpleNamespace(K=K, depth=depth.astype(np.float32)), outline & ~grazing, outline


def _box_at(extent: np.ndarray) -> ObjectGeometry:
    position = np.array([0.0, 0.0, extent[2] / 2])
    box = trimesh.creation.box(extents=extent)
    return ObjectGeometry("bottle", box, position, np.eye(4)[0], extent.copy(), position[None])


def test_a_rounded_box_keeps_its_extent_and_rounds_the_edges_along_its_length() -> None:
    mesh = rounded_box(EXTENT, along=0.015, ends=0.005)
    assert np.allclose(mesh.extents, EXTENT) and mesh.is_convex
    # How far each point lies beyond the hull's face planes (m; > 0 outside).
    beyond = [
        float(np.max(np.einsum("ij,ij->i", p - mesh.triangles_center, mesh.face_normals)))
        for p in ([0.0, 0.0275, 0.0], [0.0, 0.0275, 0.0275])
    ]
    assert abs(beyond[0]) < 1e-3 and beyond[1] > 3e-3  # a face's middle on it, the edge along it cut off
    assert (
        np.allclose(rounded_box(EXTENT, 0.0).extents, EXTENT) and len(rounded_box(EXTENT, 0.0).vertices) == 8
    )


def test_a_box_fitted_to_a_rounded_bottle_is_rounded_and_a_sharp_box_is_not() -> None:
    bottle = rounded_box(EXTENT, along=0.015, ends=0.004)
    bottle.apply_translation((0.0, 0.0, EXTENT[2] / 2))
    frame, mask, outline = _seen(bottle)
    fitted = round_box(_box_at(EXTENT), frame, T_WORLD_CAM, mask, outline)  # type: ignore[arg-type]
    assert len(fitted.mesh.vertices) > 8 and np.allclose(fitted.extent, EXTENT)
    assert fitted.edge_radii_m is not None and fitted.edge_radii_m[0] > 0.005  # the bottle's: 15 mm
    sharp = trimesh.creation.box(extents=EXTENT)
    sharp.apply_translation((0.0, 0.0, EXTENT[2] / 2))
    frame, mask, outline = _seen(sharp)
    kept = round_box(_box_at(EXTENT), frame, T_WORLD_CAM, mask, outline)  # type: ignore[arg-type]
    assert len(kept.mesh.vertices) == 8
