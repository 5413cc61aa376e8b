"""A neck for a fitted box: a square bottle's neck and cap, which a box stops short of.

A box refined against the depth (:func:`real2sim.refine.refine_box`) ends at a square bottle's shoulder: a
box as wide as the body up to the cap would cover table on either side of the neck. The neck is left out:
on ClearGrasp's hand-marked bottles, much of what the render misses. :func:`add_neck` reads the object's
points beyond the box along its long axis (up when it stands taller than wide, else along its longer side
on the table, at either end) in slices of :data:`SLICE_M` from the farthest in: the slices narrower across
the view than :data:`NECK_SHARE` of the box's narrower side are the neck. It adds a cylinder on the box's end
there (as wide as those points across the view, its axis a radius behind their front), out to their farthest
point or up to :data:`CAP_STEPS` slices farther (a cap's end often reads no depth), and keeps the length
under which the outline matches the object's silhouette in the photo best, by the rounding's rule
(:func:`real2sim.rounding.best_by_outline`: better than the box alone by 0.02 IoU or more, at no more than
10 % more depth cost). The mesh is the box and the cylinder together (not their hull: the shoulders stay
square); physics takes its convex hull.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import trimesh

from real2sim.rounding import best_by_outline
from real2sim.types import ObjectGeometry
from simpact.core.frame import Frame
from simpact.core.rotations import quat_to_matrix

__all__ = ["NECK_SHARE", "SLICE_M", "add_neck", "find_neck"]

SLICE_M = 0.005
"""Thickness (m) of the slices along the box's axis that the points are read in."""
NECK_SHARE = 0.7
"""A slice narrower across the view than this share of the box's narrower side is neck."""
MIN_NECK_POINTS = 20
"""Points a neck needs."""
CAP_STEPS = 6
"""Slices the neck may reach beyond its farthest point, for the outline to decide (a cap's end reads none)."""


def find_neck(
    local: np.ndarray, axis: int, end: float, width: float, view: np.ndarray
) -> tuple[np.ndarray, float, float] | None:
    """The neck of a box from its points in the box's frame (N, 3; m, centred on the box) along its ``axis``
    (0, 1, 2; negate the points for the other end) beyond ``end`` (half its length), the box ``width`` (m)
    across its narrower side, seen along ``view`` (3,; the box's frame): its axis's place across the box's
    (the two other coordinates, m), radius and how far it reaches along the axis (m); None when the points
    beyond the box form none (module docstring)."""
    t = local[:, axis]
    across_axes = [i for i in range(3) if i != axis]
    sideways = float(np.linalg.norm(view[across_axes]))
    if sideways < 0.2 * float(np.linalg.norm(view)):
        return None  # seen along its axis: no width across the view to read
    seen = view[across_axes] / sideways  # the view, across the axis
    across = np.array([-seen[1], seen[0]])
    flat = local[:, across_axes]
    reach = float(np.percentile(t, 99.5))
    start = reach
    for lower in np.arange(reach - SLICE_M, end - SLICE_M, -SLICE_M):
        part = flat[(t >= lower) & (t < lower + SLICE_M)] @ across
        if len(part) >= 3 and np.ptp(part) >= NECK_SHARE * width:
            break  # the shoulder
        start = lower
    neck = (t >= start) & (t <= reach)
    if np.count_nonzero(neck) < MIN_NECK_POINTS or reach <= end:
        return None
    lo, hi = np.percentile(flat[neck] @ across, [2.5, 97.5])
    radius = float(hi - lo) / 2
    if not 0.0 < 2 * radius < NECK_SHARE * width:
        return None  # as wide as the box: the box is short, not necked
    front = float(np.percentile(flat[neck] @ seen, 2.5))  # the nearest points: the neck's front
    return across * (lo + hi) / 2 + seen * (front + radius), radius, reach


def add_neck(
    g: ObjectGeometry,
    frame: Frame,
    T_world_cam: np.ndarray,
    mask: np.ndarray,
    silhouette: np.ndarray,
) -> ObjectGeometry:
    """The box ``g`` with the neck of the module docstring, or ``g`` itself: ``mask`` is the object's depth
    region (the depth cost's), ``silhouette`` its outline in the photo (the IoU's)."""
    if g.points_world is None:
        return g
    ext = np.asarray(g.extent, dtype=np.float64)
    R = quat_to_matrix(g.quaternion)
    local = (np.asarray(g.points_world, dtype=np.float64) - g.position) @ R  # the box's frame
    # Its long axis: up when it stands taller than wide, else its longer side on the table (either end).
    axis = 2 if ext[2] > float(np.max(ext[:2])) else int(np.argmax(ext[:2]))
    view = R.T @ (np.asarray(g.position, dtype=np.float64) - T_world_cam[:3, 3])  # camera to box, box frame
    width = float(np.min(np.delete(ext, axis)))
    necked = []
    for sign in (1.0,) if axis == 2 else (1.0, -1.0):
        found = find_neck(sign * local, axis, ext[axis] / 2, width, sign * view)
        if found is not None:
            centre, radius, reach = found
            # A cap's end often reads no depth: its length from the outline too.
            necked += [(sign * centre, sign, radius, reach + k * SLICE_M) for k in range(CAP_STEPS + 1)]
    if not necked:
        return g
    variants = (_with_neck(g, axis, *n) for n in necked)
    return best_by_outline(g, variants, frame, T_world_cam, mask, silhouette)


def _with_neck(
    g: ObjectGeometry, axis: int, centre: np.ndarray, sign: float, radius: float, reach: float
) -> ObjectGeometry:
    """``g`` with a cylinder of ``radius`` along its ``axis``, through ``centre`` (its two other coordinates
    in the box's frame, m), from the box's end on the ``sign`` side out to ``reach`` from its centre (m)."""
    end = float(g.extent[axis]) / 2
    cylinder = trimesh.creation.cylinder(radius=radius, height=reach - end, sections=24)
    if axis != 2:
        cylinder.apply_transform(trimesh.geometry.align_vectors([0.0, 0.0, 1.0], np.eye(3)[axis]))
    place = np.insert(np.asarray(centre, dtype=np.float64), axis, sign * (end + reach) / 2)
    cylinder.apply_translation(place)
    mesh = trimesh.util.concatenate([g.mesh, cylinder])
    shift = mesh.bounds.mean(axis=0)  # the mesh is centred on its bounding box
    mesh.apply_translation(-shift)
    R = quat_to_matrix(g.quaternion)
    return dataclasses.replace(
        g,
        mesh=mesh,
        extent=mesh.extents.copy(),
        position=g.position + R @ shift,
        neck_m=(radius, reach - end),
    )
