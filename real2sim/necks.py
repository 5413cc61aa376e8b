"""A neck for a standing box: a square bottle's neck and cap, which a box stops short of.

A box refined against the depth (:func:`real2sim.refine.refine_box`) ends at a square bottle's shoulder: a
box as wide as the body up to the cap would cover table on either side of the neck. The neck is left out:
on ClearGrasp's hand-marked standing bottles, much of what the render misses. :func:`add_neck` reads the
object's points above the box in slices of :data:`SLICE_M` from the highest down: the slices narrower than
:data:`NECK_SHARE` of the box's shorter side are the neck. It adds a cylinder standing on the box's top
there (as wide as the points across the view, its axis a radius behind their front), up to their highest
point or up to :data:`CAP_STEPS` slices above it (a cap's top often reads no depth), and keeps the height
under which the outline matches the object's silhouette in the photo best, by the rule of
:mod:`real2sim.rounding`: better than the box alone by :data:`~real2sim.rounding.MIN_GAIN`, at no more than
:data:`~real2sim.rounding.MAX_WORSE` more depth cost. The mesh is the box and the cylinder together (not
their hull: the shoulders stay square); physics takes its convex hull.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import trimesh

from real2sim.refine import pixels_around
from real2sim.rounding import MAX_WORSE, MIN_GAIN, depth_cost, outline_iou
from real2sim.types import ObjectGeometry
from simpact.core.frame import Frame
from simpact.core.rotations import quat_to_matrix

__all__ = ["NECK_SHARE", "SLICE_M", "add_neck", "find_neck"]

SLICE_M = 0.005
"""Height (m) of the slices the points are read in."""
NECK_SHARE = 0.7
"""A slice narrower than this share of the box's shorter side is neck."""
MIN_NECK_POINTS = 20
"""Points a neck needs."""
CAP_STEPS = 6
"""Slices the neck may rise above its highest point, for the outline to decide (a cap's top reads none)."""


def find_neck(
    points: np.ndarray, top_m: float, width_m: float, view_xy: np.ndarray
) -> tuple[np.ndarray, float, float] | None:
    """The neck (its axis's (x, y), radius and top, m) of an object whose box reaches ``top_m`` and is
    ``width_m`` across its shorter side, from its world points (N, 3) seen along ``view_xy`` (horizontal,
    unit); None when the points above the box form none."""
    z = points[:, 2]
    highest = float(np.percentile(z, 99.5))
    across = np.array([-view_xy[1], view_xy[0]])
    start = highest
    for lower in np.arange(highest - SLICE_M, top_m - SLICE_M, -SLICE_M):
        part = points[(z >= lower) & (z < lower + SLICE_M)]
        if len(part) >= 3 and np.ptp(part[:, :2] @ across) >= NECK_SHARE * width_m:
            break  # the shoulder
        start = lower
    neck = points[(z >= start) & (z <= highest)]
    if len(neck) < MIN_NECK_POINTS or highest <= top_m:
        return None
    side = neck[:, :2] @ across
    lo, hi = np.percentile(side, [2.5, 97.5])
    radius = float(hi - lo) / 2
    front = float(np.percentile(neck[:, :2] @ view_xy, 2.5))  # the nearest points: the neck's front
    centre = across * (lo + hi) / 2 + view_xy * (front + radius)
    return centre, radius, highest


def add_neck(
    g: ObjectGeometry,
    frame: Frame,
    T_world_cam: np.ndarray,
    mask: np.ndarray,
    silhouette: np.ndarray,
) -> ObjectGeometry:
    """The standing box ``g`` with the neck of the module docstring, or ``g`` itself: ``mask`` is the
    object's depth region (the depth cost's), ``silhouette`` its outline in the photo (the IoU's)."""
    ext = np.asarray(g.extent, dtype=np.float64)
    if g.points_world is None or ext[2] <= float(np.max(ext[:2])):
        return g  # lying, or no taller than wide: no neck to look for
    view = np.asarray(g.position[:2], dtype=np.float64) - T_world_cam[:2, 3]
    top = float(g.position[2] + ext[2] / 2)
    found = find_neck(g.points_world, top, float(np.min(ext[:2])), view / np.linalg.norm(view))
    depth_px = pixels_around(frame, T_world_cam, mask)
    outline_px = pixels_around(frame, T_world_cam, silhouette)
    if found is None or depth_px is None or outline_px is None:
        return g
    centre, radius, highest = found
    best, best_iou = g, outline_iou(g, outline_px) + MIN_GAIN
    worst_cost = (1.0 + MAX_WORSE) * depth_cost(g, depth_px)
    for k in range(CAP_STEPS + 1):  # a cap's top often reads no depth: its height from the outline too
        necked = _with_neck(g, centre, radius, top, highest + k * SLICE_M)
        iou = outline_iou(necked, outline_px)
        if iou > best_iou and depth_cost(necked, depth_px) <= worst_cost:
            best, best_iou = necked, iou
    return best


def _with_neck(
    g: ObjectGeometry, centre: np.ndarray, radius: float, bottom: float, top: float
) -> ObjectGeometry:
    """``g`` with a cylinder of ``radius`` about ``centre`` (x, y) from ``bottom`` to ``top`` (world, m)."""
    cylinder = trimesh.creation.cylinder(radius=radius, height=top - bottom, sections=24)
    R = quat_to_matrix(g.quaternion)
    cylinder.apply_translation(R.T @ (np.array([*centre, (bottom + top) / 2]) - g.position))
    mesh = trimesh.util.concatenate([g.mesh, cylinder])
    shift = mesh.bounds.mean(axis=0)  # the mesh is centred on its bounding box
    mesh.apply_translation(-shift)
    return dataclasses.replace(g, mesh=mesh, extent=mesh.extents.copy(), position=g.position + R @ shift)
