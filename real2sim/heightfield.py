"""An object as the surface the camera sees of it from above, filled down to the table: a height field.

A mirror-completed hull is convex and its top is the plane through its highest points' hull: a power drill
lying on its side came out as a slab as high as its motor over its whole length, 14.7 mm from the measured
depth at the median (PoseCNN frame 000001). :func:`add_heightfield` tries the object as columns standing on
the table, one per :data:`CELL_M` cell of its top view that its points cover (gaps closed and holes filled),
each as high as the highest point over it (cells with none: the nearest cell's height), the heights smoothed
by a 3 x 3 median and rounded to :data:`LEVEL_M`. That is the classic 2.5D completion of a depth view: exact
for what is seen from above, filled down under overhangs, missing what the camera did not see from above.
The columns' union is one closed mesh (manifold3d); it is concave, so physics takes its convex parts. It
is a variant like the prisms (:mod:`real2sim.prisms`), kept by the same rule
(:func:`real2sim.rounding.best_by_outline`). Given the silhouette, the columns are cut to its cone
(:mod:`real2sim.carve`): filled down to the table, a column along the near edge stands over the table in
front of the object, and the top view's closing fills the holes the photo shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from real2sim.carve import carve
from real2sim.masks import fill_holes
from real2sim.prisms import with_solid
from real2sim.stability import stands
from real2sim.types import ObjectGeometry

__all__ = [
    "BRIDGE_M",
    "CELL_M",
    "FEET_M",
    "LEVEL_M",
    "MIN_CELLS",
    "MIN_HEIGHT_M",
    "add_heightfield",
    "height_field",
]

CELL_M = 0.004
"""Side (m) of a top-view cell: a column's width."""
MIN_HEIGHT_M = 0.003
"""Points this close (m) to the table are left out: the table's own, mixed into the object's edge."""
BRIDGE_M = 1e-5
"""Each level's outline is grown by this much (m) more than the one above it: cells touching at a corner
only would make a pinched edge, and nested solids' side faces in one plane a seam."""
LEVEL_M = 0.002
"""Column heights are rounded to a multiple of this (m): one extruded outline per level."""
MIN_CELLS = 20
"""Fewest covered cells for a height field: smaller objects keep their shape."""
FEET_M = 0.008
"""A cut height field that cannot stand gets its columns back up to this height (m) under its own top view:
the lowest 8 mm of an object are in no region the segmenter finds (:func:`real2sim.regions.find_clusters`'
``min_height_m``), so its silhouette's cone can cut the feet away."""


def height_field(points: np.ndarray, cell_m: float = CELL_M) -> tuple[np.ndarray, np.ndarray] | None:
    """The top view of world ``points`` (N, 3; m, z up from the table) as a grid of column heights (m, 0
    outside the object), and the world (x, y) of the grid's first cell's corner; None when fewer than
    :data:`MIN_CELLS` cells hold points."""
    points = points[points[:, 2] > MIN_HEIGHT_M]
    if len(points) == 0:
        return None
    low, span = points[:, :2].min(axis=0), np.ptp(points[:, :2], axis=0)
    spill = (np.floor(span / cell_m) + 1) * cell_m - span  # the cells reach this much past the points
    corner = low - spill / 2 - cell_m  # centred on them, a free cell around (closing needs the margin)
    ij = np.floor((points[:, :2] - corner) / cell_m).astype(np.intp)
    top = np.full(tuple(ij.max(axis=0) + 2), -np.inf)
    np.maximum.at(top, (ij[:, 0], ij[:, 1]), points[:, 2])
    seen = np.isfinite(top)
    if seen.sum() < MIN_CELLS:
        return None
    covered = fill_holes(seen | ndimage.binary_closing(seen, np.ones((3, 3), bool)))
    nearest = ndimage.distance_transform_edt(~seen, return_distances=False, return_indices=True)
    heights = ndimage.median_filter(top[nearest[0], nearest[1]], size=3)
    return np.where(covered, heights, 0.0), corner


def _columns(heights: np.ndarray, corner: np.ndarray, cell_m: float) -> Any:
    """The union (a ``manifold3d.Manifold``) of the columns of ``heights`` (m, a grid of ``cell_m`` cells
    from ``corner``, world x, y): per level of :data:`LEVEL_M`, from the top down, the outline of the cells
    at least that high, grown by :data:`BRIDGE_M` more than the one above, extruded as a slab from half a
    level under the next level down (the table for the lowest) up to its own. Each slab's outline holds the
    one above it, so the union is the solid whose section at any height is the outline of the cells that
    high; the slabs overlap, for a union of solids that only touch keeps them apart. Slabs rather than
    solids each standing on the table: the same solid, whose union takes a half to a third of the time
    (their side walls no longer run alongside each other down to the table)."""
    import manifold3d

    levels = np.round(heights / LEVEL_M) * LEVEL_M
    tops = np.unique(levels[levels > 0.0])[::-1]
    solids, outline = [], manifold3d.CrossSection()
    for rank, level in enumerate(tops):
        cells = [
            manifold3d.CrossSection.square((cell_m, cell_m)).translate((i * cell_m, j * cell_m))
            for i, j in zip(*np.nonzero(levels == level))
        ]
        outline = manifold3d.CrossSection.batch_boolean([outline, *cells], manifold3d.OpType.Add)
        grown = outline.offset((rank + 1) * BRIDGE_M, manifold3d.JoinType.Miter)
        bottom = float(tops[rank + 1]) - LEVEL_M / 2 if rank + 1 < len(tops) else 0.0
        solids.append(grown.extrude(float(level) - bottom).translate((0.0, 0.0, bottom)))
    return manifold3d.Manifold.batch_boolean(solids, manifold3d.OpType.Add).translate(
        (float(corner[0]), float(corner[1]), 0.0)
    )


def add_heightfield(
    g: ObjectGeometry,
    cell_m: float = CELL_M,
    carve_to: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> ObjectGeometry | None:
    """``g`` drawn as its points' :func:`height_field`, its columns' union meshed in its own frame (pose
    kept, the mesh centred on its bounding box), or None when its points give no height field. With
    ``carve_to`` (the object's silhouette (H, W), the camera's K and T_world_cam), the columns are cut to the
    silhouette's cone (:func:`real2sim.carve.carve`); when that leaves them unable to stand
    (:func:`real2sim.stability.stands`), they get back their feet up to :data:`FEET_M` under their own top
    view (UOIS 0008's standing marker: it tipped over in simulation)."""
    field = height_field(np.asarray(g.points_world, dtype=np.float64), cell_m)
    if field is None:
        return None
    heights, corner = field
    solid = _columns(heights, corner, cell_m)
    if carve_to is None:
        return with_solid(g, solid, heightfield_cell_m=cell_m)
    carved = carve(solid, *carve_to)
    shape = with_solid(g, carved, heightfield_cell_m=cell_m)
    if shape is None or stands(shape):
        return shape
    return with_solid(g, carved + (solid ^ carved.project().extrude(FEET_M)), heightfield_cell_m=cell_m)
