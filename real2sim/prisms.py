"""An object's own outline, extruded: a prism back from the face it shows the camera, or up from the table.

A mirror-completed hull is convex: a flower-shaped holder, a star, a letter, a banana, a lying tool come out
filled in between their lobes or inside their curve. :func:`add_prism` tries two prisms as their shape. When
at least :data:`MIN_FACE_SHARE` of an object's points lie on one plane (within :data:`FACE_TOL_M`), that
face's outline extruded straight back (away from the camera) through a depth D; and, for any, its outline
seen from above extruded up from the table to a height D (the table is then the face, its normal down).

The outline comes from the photo, not from the face's points (their edges are eroded and noisy). Seen from
the camera, such a prism's silhouette is its front face's outline swept along the image of the extrusion
(the back face is the front one shifted by the projection of -D n); so the front face's outline is the
silhouette eroded by that sweep (:func:`eroded_by_sweep`), cast back onto the face's plane
(:func:`face_outline`), grown by half a pixel (the traced outline runs through the edge pixels' centres); a
prism that stops just above the table, where the segmenter leaves a band out of the silhouette, has its
lowest band carried down to it (:data:`MAX_FOOT_M`), and a standing outline rests level on its feet
(:func:`levelled`). D ranges over :data:`DEPTH_STEPS` values from the points' own depth behind the face to
the fitted shape's depth along its normal (from above: :data:`FOOTPRINT_PERCENTILES` of the points'
heights), and the rounding's rule decides (:func:`real2sim.rounding.best_by_outline`): a prism is kept when
its outline matches the silhouette better by 0.02 IoU or more at no more than 10 % more depth cost. That
cost is taken over the depth region's pixels inside the silhouette: a prism's outline is the silhouette's by
construction, and the depth region's edges outside it (a stereo camera's fattened edges) would count against
what it was built to match. The mesh is concave: physics takes its convex decomposition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from itertools import chain
from typing import Any

import numpy as np
import trimesh
from scipy.spatial import ConvexHull

from real2sim.masks import padded_box
from real2sim.overlays import project_points
from real2sim.rounding import best_by_outline
from real2sim.table import ransac_plane
from real2sim.types import ObjectGeometry
from simpact.core.frame import Frame
from simpact.core.rotations import quat_to_matrix

__all__ = [
    "DEPTH_STEPS",
    "FACE_TOL_M",
    "MIN_FACE_SHARE",
    "add_prism",
    "eroded_by_sweep",
    "face_outline",
    "levelled",
    "with_solid",
]

MIN_FACE_SHARE = 0.5
"""Share of an object's points one plane must hold for the object to be tried as a prism."""
FACE_TOL_M = 0.002
"""Distance (m) from the plane within which a point is on the face."""
DEPTH_STEPS = 8
"""Extrusion depths tried."""
MIN_DEPTH_M = 0.01
"""Shallowest extrusion tried (m)."""
FOOTPRINT_PERCENTILES = (80.0, 90.0, 95.0, 99.0)
"""Heights tried for an outline extruded up from the table: these percentiles of the points' heights."""
MIN_POINTS = 50
"""Points an object needs to be tried as a prism."""
MAX_FOOT_M = 0.015
"""A prism whose lowest point is this close (m) above the table is drawn down to it, its outline's lowest
part carried down (the segmenter leaves the band just above the table out of an object's silhouette)."""
LEVEL_BAND_M = 0.01
"""Height (m) above the line a standing outline rests on within which its points are lowered to level it."""
FOOT_BAND_M = 0.002
"""Height (m) of the prism's lowest band that is carried down to the table."""
OUTLINE_TOL_M = 0.001
"""Largest distance (m) of the simplified outline from the silhouette's traced one."""


def eroded_by_sweep(mask: np.ndarray, shift_px: np.ndarray) -> np.ndarray:
    """The pixels ``p`` of ``mask`` (H, W bool) for which ``p + s * shift_px`` lies in ``mask`` for every
    ``s`` in [0, 1] (``shift_px``: (dx, dy) pixels): what is left of a silhouette once the sweep that made
    it is taken away (a morphological erosion by the swept segment, in one-pixel steps)."""
    steps = int(np.ceil(np.max(np.abs(shift_px))))
    box = padded_box(mask, 0)
    if box is None:
        return mask.copy()
    # On the mask's bounding box: a pixel moved out of it leaves the mask there as on the whole frame.
    sub = mask[box]
    kept = sub.copy()
    h, w = sub.shape
    for k in range(1, steps + 1):
        dx, dy = (int(v) for v in np.round(np.asarray(shift_px) * k / steps))
        if abs(dx) >= w or abs(dy) >= h:  # moved off the box altogether: nothing is left
            kept[:] = False
            break
        moved = np.zeros_like(sub)  # moved[y, x] = sub[y + dy, x + dx]
        moved[max(-dy, 0) : h - max(dy, 0), max(-dx, 0) : w - max(dx, 0)] = sub[
            max(dy, 0) : h - max(-dy, 0), max(dx, 0) : w - max(-dx, 0)
        ]
        kept &= moved
    out = np.zeros_like(mask)
    out[box] = kept
    return out


def face_outline(
    silhouette: np.ndarray,
    frame: Frame,
    T_world_cam: np.ndarray,
    face: tuple[np.ndarray, np.ndarray, np.ndarray],
    depth_m: float,
) -> np.ndarray | None:
    """The front face's outline (M, 2; m, in the plane's axes ``u``, ``v`` from ``centre``) of a prism of
    ``depth_m`` whose front face lies in the plane ``face`` = (centre, normal towards the camera, u) and
    whose silhouette in the photo is ``silhouette``; None when nothing is left of it."""
    import cv2

    centre, normal, u = face
    v = np.cross(normal, u)
    ends, _ = project_points(np.array([centre, centre - depth_m * normal]), T_world_cam, frame.K)
    back = ends[1] - ends[0]  # the image of the extrusion (px)
    front = eroded_by_sweep(silhouette.astype(bool), back)
    contours, _ = cv2.findContours(front.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    if not contours:
        return None
    traced = max(contours, key=cv2.contourArea)[:, 0, :].astype(np.float64)  # (x, y) pixel centres
    K, R, camera = frame.K, T_world_cam[:3, :3], T_world_cam[:3, 3]
    y = (traced[:, 1] - K[1, 2]) / K[1, 1]
    x = (traced[:, 0] - K[0, 2] - K[0, 1] * y) / K[0, 0]
    rays = np.column_stack([x, y, np.ones(len(x))]) @ R.T
    points = camera + rays * (((centre - camera) @ normal) / (rays @ normal))[:, None]
    flat = ((points - centre) @ np.column_stack([u, v])).astype(np.float32)
    polygon = cv2.approxPolyDP(flat[:, None, :], OUTLINE_TOL_M, True)[:, 0, :].astype(np.float64)
    x, y = polygon[:, 0], polygon[:, 1]
    area2 = float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))  # twice the signed area
    if len(polygon) < 3 or area2 == 0.0:
        return None
    return polygon if area2 > 0 else polygon[::-1]  # counter-clockwise


def add_prism(
    g: ObjectGeometry,
    frame: Frame,
    T_world_cam: np.ndarray,
    mask: np.ndarray,
    silhouette: np.ndarray,
    others: Iterable[ObjectGeometry] = (),
) -> ObjectGeometry:
    """``g`` as the prism of the module docstring, or one of ``others`` (more variants, decided by the same
    rule), or ``g`` itself: ``mask`` is the object's depth region, ``silhouette`` its outline in the photo."""
    points = np.asarray(g.points_world, dtype=np.float64)
    if len(points) < MIN_POINTS:
        return g
    tries: list[tuple[tuple[np.ndarray, np.ndarray, np.ndarray], float]] = []
    face = _front_face(points, T_world_cam[:3, 3])
    if face is not None:
        centre, normal, _ = face
        behind = float(np.percentile((centre - points) @ normal, 98))  # the points' depth behind the face
        deepest = float(np.max((centre - g.world_vertices()) @ normal))  # the fitted shape's
        low = max(behind, MIN_DEPTH_M)
        tries += [(face, float(d)) for d in np.unique(np.linspace(low, max(deepest, low), DEPTH_STEPS))]
    # Its outline seen from above, extruded up from the table: a banana, a lying tool.
    ground = (
        np.append(points[:, :2].mean(axis=0), 0.0),
        np.array([0.0, 0.0, -1.0]),
        np.array([1.0, 0.0, 0.0]),
    )
    tries += [(ground, float(h)) for h in np.percentile(points[:, 2], FOOTPRINT_PERCENTILES)]
    prisms = (_prism(g, frame, T_world_cam, silhouette, f, d) for f, d in tries)
    built = (p for p in prisms if p is not None)
    return best_by_outline(g, chain(built, others), frame, T_world_cam, mask & silhouette, silhouette)


def _front_face(points: np.ndarray, camera: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The plane of :data:`MIN_FACE_SHARE` or more of ``points`` (N, 3; m): (centre, unit normal towards the
    ``camera``, an in-plane axis ``u``: level where the face is not), least squares on its points; None
    where no plane holds that many."""
    _, _, on = ransac_plane(points, FACE_TOL_M, 300, np.random.default_rng(0))
    if len(on) < MIN_FACE_SHARE * len(points):
        return None
    centre = points[on].mean(axis=0)
    normal = np.linalg.svd(points[on] - centre)[2][2]
    if normal @ (camera - centre) < 0:
        normal = -normal
    u = np.cross(normal, [0.0, 0.0, 1.0])
    if np.linalg.norm(u) < 0.3:  # a face looking up: any level axis
        u = np.cross(normal, [1.0, 0.0, 0.0])
    return centre, normal, u / np.linalg.norm(u)


def levelled(polygon: np.ndarray, centre_z: float, up: float) -> np.ndarray:
    """``polygon`` (M, 2; m, in a standing face's axes: level, then ``up`` m of height per m) with its feet
    on one level: the edge of its lower convex hull under its centroid is the line it would rest on; the
    points on that line are lowered onto its lower end's height, those above it less, up to
    :data:`LEVEL_BAND_M` above it not at all (a silhouette's foot cut short by a shadow rests it askew). A
    line rising that much or more is left: the outline would fold over itself."""
    x, z = polygon[:, 0], centre_z + polygon[:, 1] * up
    hull = ConvexHull(np.column_stack([x, z]))
    centroid = float(np.mean(x))
    under = [  # the hull's edges facing down (outward normal below level) that span the centroid
        (i, j)
        for (i, j), facing in zip(hull.simplices, hull.equations)
        if facing[1] < 0 and min(x[i], x[j]) <= centroid <= max(x[i], x[j])
    ]
    if not under:
        return polygon
    i, j = sorted(under[0], key=lambda k: x[k])
    (xa, za), (xb, zb) = (x[i], z[i]), (x[j], z[j])
    if xb - xa < 1e-9 or abs(zb - za) >= LEVEL_BAND_M:
        return polygon  # a foot higher than the band: the object leans, it is not cut short
    line = za + (zb - za) * (x - xa) / (xb - xa)
    weight = np.clip(1.0 - (z - line) / LEVEL_BAND_M, 0.0, 1.0)
    lowered = z - np.clip(line - min(za, zb), 0.0, abs(zb - za)) * weight
    return np.column_stack([x, (lowered - centre_z) / up])


def _prism(
    g: ObjectGeometry,
    frame: Frame,
    T_world_cam: np.ndarray,
    silhouette: np.ndarray,
    face: tuple[np.ndarray, np.ndarray, np.ndarray],
    depth_m: float,
) -> ObjectGeometry | None:
    """``g`` with the prism of ``depth_m`` (m) whose front face lies in ``face`` (:func:`face_outline`; a
    standing one :func:`levelled`), cut at the table (z = 0) or drawn down to it (:data:`MAX_FOOT_M`); None
    when the silhouette leaves no outline."""
    import manifold3d

    polygon = face_outline(silhouette, frame, T_world_cam, face, depth_m)
    if polygon is None:
        return None
    centre, normal, u = face
    axes = np.column_stack([u, np.cross(normal, u), normal])  # prism frame -> world: z along the normal
    if abs(axes[2, 1]) > 0.7:  # a face standing up: its outline's feet on one level
        polygon = levelled(polygon, float(centre[2]), float(axes[2, 1]))
    placed = np.column_stack([axes, centre - depth_m * normal])
    # The traced outline runs through the silhouette's edge pixels' centres: grown by half a pixel.
    half_px = 0.5 * float((centre - T_world_cam[:3, 3]) @ T_world_cam[:3, 2]) / float(frame.K[0, 0])
    section = manifold3d.CrossSection([polygon]).offset(half_px, manifold3d.JoinType.Miter)
    solid = section.extrude(depth_m).transform(placed)
    solid = solid.trim_by_plane((0.0, 0.0, 1.0), 0.0)  # nothing under the table
    gap = solid.bounding_box()[2]
    if 0.0 < gap <= MAX_FOOT_M:  # down to the table: the band just above it is cut from the silhouette
        top = gap + FOOT_BAND_M
        lowest = solid.trim_by_plane((0.0, 0.0, -1.0), -top)  # its lowest band, carried straight down
        solid = solid + lowest.project().extrude(top)
    return with_solid(g, solid, prism_depth_m=depth_m)


def with_solid(g: ObjectGeometry, solid: Any, **fields: Any) -> ObjectGeometry | None:
    """``g`` drawn as the concave ``solid`` (a ``manifold3d.Manifold`` in the world frame, m): its mesh in
    ``g``'s frame centred on its bounding box, its orientation kept, and ``fields`` set; None when empty."""
    m = solid.to_mesh()
    faces = np.asarray(m.tri_verts)
    if len(faces) == 0:
        return None
    R = quat_to_matrix(g.quaternion)
    mesh = trimesh.Trimesh((np.asarray(m.vert_properties)[:, :3] - g.position) @ R, faces, process=False)
    shift = mesh.bounds.mean(axis=0)  # the mesh is centred on its bounding box
    mesh.apply_translation(-shift)
    return dataclasses.replace(
        g, mesh=mesh, extent=mesh.extents.copy(), position=g.position + R @ shift, concave=True, **fields
    )
