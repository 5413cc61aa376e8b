"""Whether a shape could rest as photographed: an object at rest has its centre of mass over what it stands
on. A height field cut to its silhouette's cone (:mod:`real2sim.carve`) can lose the feet of its columns
where the silhouette misses the object's foot (smoothed depth, the lowest few millimetres left out of every
mask, a neighbour in front), and a prism extruded back from a leaning face can lean over its edge; either
tips over as soon as the simulation starts (UOIS 0008's standing marker: 8 cm, 100° in the settle run).
:func:`stands` tells such a shape from one that rests; the variants real2sim weighs against an object's
outline (:func:`real2sim.rounding.best_by_outline`) must stand.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from real2sim.types import ObjectGeometry
from simpact.core.rotations import quat_to_matrix

__all__ = ["STAND_MARGIN_M", "SUPPORT_BAND_M", "stands"]

SUPPORT_BAND_M = 0.002
"""A shape rests on its vertices within this height (m) of its lowest one."""
STAND_MARGIN_M = 0.001
"""How far (m) inside the convex hull of those vertices, seen from above, its centre of mass must lie: on
the hull's edge it tips over at the slightest push (the settling contacts give one)."""


def stands(g: ObjectGeometry) -> bool:
    """Whether ``g``, set down on its lowest vertices, would stand: its centre of mass (uniform density; the
    vertices' mean for a mesh that encloses no volume) lies :data:`STAND_MARGIN_M` inside the convex hull of
    its vertices within :data:`SUPPORT_BAND_M` of its lowest, seen from above. A shape resting on a point or
    a line does not."""
    vertices = g.world_vertices()
    mesh = g.mesh
    local = mesh.center_mass if mesh.is_volume else np.asarray(mesh.vertices).mean(axis=0)
    centre = quat_to_matrix(g.quaternion) @ np.asarray(local, dtype=np.float64) + g.position
    base = vertices[vertices[:, 2] <= vertices[:, 2].min() + SUPPORT_BAND_M, :2]
    try:
        hull = ConvexHull(base)
    except (QhullError, ValueError):  # fewer than three points, or all on a line
        return False
    inside = -(hull.equations[:, :2] @ centre[:2] + hull.equations[:, 2])  # distance to each edge's line
    return float(inside.min()) >= STAND_MARGIN_M
