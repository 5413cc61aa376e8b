"""A solid cut to the cone of its object's silhouette: nothing of it shows outside its outline in the photo.

Everything the camera sees of an object lies in the cone of rays through its silhouette, so the object lies
in that cone wherever the camera could have seen it (space carving's visual hull, from one view). A height
field (:mod:`real2sim.heightfield`) breaks this: each column is filled down to the table, so along the
object's near edge its sides stand over table pixels in front of it (a banana's round flank, seen from 30-45
degrees above, is drawn as a wall), and the top view's closing fills the holes the photo shows (a pair of
scissors' finger loops). :func:`silhouette_cone` builds the cone (manifold3d: the silhouette's outline with
its holes, in normalised image coordinates, extruded from ``near`` to ``far`` along the optical axis and
scaled with depth) and :func:`carve` intersects a solid with it.

What it cannot do: carve what the silhouette does not bound (the hidden back of the object, along the rays);
and it cuts what a neighbour in front hides, which the silhouette leaves out (a height field has little there:
the cells it filled in). Cut so, a render's outline is the silhouette's wherever it reaches it: the fit
score's IoU (:mod:`real2sim.fitscore`) then measures how much of the silhouette the solid covers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["GROW_PX", "carve", "silhouette_cone"]

GROW_PX = 0.5
"""Pixels the silhouette's outline is grown by: it runs through its border pixels' centres, and half a pixel
more puts it on their outer edges, so that every pixel of the silhouette, and none beside it, is in the
cone."""


def silhouette_cone(
    silhouette: np.ndarray, K: np.ndarray, T_world_cam: np.ndarray, near_m: float, far_m: float
) -> Any:
    """The cone (a ``manifold3d.Manifold``, world frame, m) of the camera's rays through ``silhouette``
    ((H, W) bool), from ``near_m`` to ``far_m`` (m, along the optical axis, 0 < near < far); an empty one for
    an empty silhouette."""
    import cv2
    import manifold3d

    contours, _ = cv2.findContours(silhouette.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    K = np.asarray(K, dtype=np.float64)
    paths = []
    for c in contours:
        if len(c) < 3:
            continue
        uv = c[:, 0, :].astype(np.float64)
        y = (uv[:, 1] - K[1, 2]) / K[1, 1]
        x = (uv[:, 0] - K[0, 2] - K[0, 1] * y) / K[0, 0]
        paths.append(np.column_stack([x, y]) * near_m)  # the outline at depth near_m (camera x, y)
    if not paths:
        return manifold3d.Manifold()
    section = manifold3d.CrossSection(paths, manifold3d.FillRule.EvenOdd)  # holes stay holes
    section = section.offset(GROW_PX * near_m / float(K[0, 0]), manifold3d.JoinType.Miter)
    ratio = far_m / near_m
    cone = section.extrude(far_m - near_m, scale_top=(ratio, ratio)).translate((0.0, 0.0, near_m))
    T = np.asarray(T_world_cam, dtype=np.float64)[:3, :4]
    return cone.transform(T)


def carve(solid: Any, silhouette: np.ndarray, K: np.ndarray, T_world_cam: np.ndarray) -> Any:
    """``solid`` (a ``manifold3d.Manifold``, world frame, m) less what lies outside the cone of
    ``silhouette``; the cone spans the solid's depth range from the camera, with a margin."""
    box = solid.bounding_box()
    lo, hi = box[:3], box[3:]
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    T = np.asarray(T_world_cam, dtype=np.float64)
    depth = (corners - T[:3, 3]) @ T[:3, 2]  # along the optical axis
    near = max(float(depth.min()) - 0.05, 0.01)
    far = float(depth.max()) + 0.05
    return solid ^ silhouette_cone(silhouette, K, T, near, far)
