"""Perception: one RGB-D frame and the object labels -> the table, each object's mask, shape and pose.

``perceive(frame, labels)`` runs table fit -> segmentation -> shape completion -> pose estimation, each
stage's back-end chosen by name (see :mod:`real2sim.segment`, :mod:`real2sim.shape`, :mod:`real2sim.pose`).

Frames and positions: every :class:`~real2sim.types.ObjectGeometry` is in the world frame of
``Perception.table.T_world_cam``, whose table top is at z = 0. With ``frame.T_base_cam`` that is the robot
base frame shifted down by ``table.table_height_m`` (base z = world z + table_height_m); without it, the
frame the table plane defines (z up along its normal). ``position`` is the world position of the mesh's
bounding-box centre (the object frame's origin), ``extent`` the mesh's edge lengths along the object axes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import trimesh

from real2sim.pose import estimate_pose
from real2sim.refine import refine_box, refine_cylinder, refine_hull
from real2sim.segment import AssignFn, segment
from real2sim.shape import ShapeBackendError, ShapeError, complete_shape
from real2sim.table import fit_table
from real2sim.types import ObjectGeometry, Segment, TablePlane
from simpact.core.frame import Frame
from simpact.core.rotations import matrix_to_quat

__all__ = ["MIN_REFINE_SIZE_M", "Perception", "object_points", "perceive"]

MIN_REFINE_SIZE_M = 0.04
"""Objects whose longest edge is shorter (m) are not refined against the depth."""


@dataclasses.dataclass(eq=False)
class Perception:
    """What :func:`perceive` found; ``segments[i]`` and ``objects[i]`` are the same object."""

    table: TablePlane
    segments: list[Segment]
    objects: list[ObjectGeometry]
    timings_s: dict[str, float]
    """Wall time per stage (s): ``table``, ``segment``, ``shape``, ``pose``, ``total``."""
    warnings: list[str]
    unlabelled: list[np.ndarray] = dataclasses.field(default_factory=list)
    """Masks of regions standing on the table that no label matched (geometric segmenter with labels)."""


def object_points(
    frame: Frame,
    table: TablePlane,
    mask: np.ndarray,
    *,
    max_points: int = 3000,
    erode_px: int = 1,
    min_height_m: float = -0.003,
    seed: int = 0,
) -> np.ndarray:
    """World points (N, 3) of the masked pixels (m), at most ``max_points`` (uniformly subsampled).

    The mask is eroded by ``erode_px`` pixels (mixed depth at silhouettes) unless that empties it; pixels at
    or below ``min_height_m`` above the table are dropped.
    """
    import cv2

    m = mask.astype(bool) & (frame.depth > 0)
    if erode_px > 0:
        eroded = cv2.erode(m.astype(np.uint8), np.ones((2 * erode_px + 1,) * 2, np.uint8)) > 0
        if eroded.sum() >= 0.3 * m.sum() and eroded.sum() >= 20:
            m = eroded
    rows, cols = np.nonzero(m)
    if len(rows) > max_points:
        pick = np.random.default_rng(seed).choice(len(rows), max_points, replace=False)
        rows, cols = rows[np.sort(pick)], cols[np.sort(pick)]
    z = frame.depth[rows, cols].astype(np.float64)
    K = frame.K
    y = (rows - K[1, 2]) / K[1, 1] * z
    x = (cols - K[0, 2] - K[0, 1] * (rows - K[1, 2]) / K[1, 1]) / K[0, 0] * z
    p_cam = np.column_stack([x, y, z])
    T = table.T_world_cam
    p = p_cam @ T[:3, :3].T + T[:3, 3]
    return p[p[:, 2] > min_height_m]


def perceive(
    frame: Frame,
    labels: Sequence[str],
    *,
    segmenter: str = "geometric",
    shape: str = "geometric",
    pose: str = "icp",
    assign: AssignFn | None = None,
    max_points: int = 3000,
    erode_px: int = 1,
    refine: bool = True,
) -> Perception:
    """Find the table and reconstruct the objects named by ``labels`` in ``frame``.

    Objects that are not found, or whose shape cannot be completed, are left out with a warning; the
    returned segments and objects are in the order of ``labels``. ``assign`` maps geometric regions to
    labels (see :func:`real2sim.segment.segment`). At most ``max_points`` points per object are used, from
    masks eroded by ``erode_px`` pixels (depth at silhouettes mixes object and background). With ``refine``,
    each upright box is then refined against the depth (:mod:`real2sim.refine`).
    """
    timings = {"table": 0.0, "segment": 0.0, "shape": 0.0, "pose": 0.0}
    warnings: list[str] = []
    t_start = time.perf_counter()
    table = fit_table(frame)
    timings["table"] = time.perf_counter() - t_start

    t0 = time.perf_counter()
    unlabelled: list[np.ndarray] = []
    extra = {"unlabelled": unlabelled} if segmenter == "geometric" else {}
    segments = segment(frame, table, labels, segmenter, assign=assign, **extra)
    timings["segment"] = time.perf_counter() - t0
    found = {s.label for s in segments}
    for label in labels:
        if label not in found:
            warnings.append(f"{label!r}: not found by segmenter {segmenter!r}")

    # The horizontal viewing direction (world), for the mirror completion.
    cam_world = table.T_world_cam[:3, 3]
    kept_segments: list[Segment] = []
    objects: list[ObjectGeometry] = []
    for seg in segments:
        pts = object_points(frame, table, seg.mask, max_points=max_points, erode_px=erode_px)
        if len(pts) < 20:
            warnings.append(f"{seg.label!r}: only {len(pts)} points above the table; left out")
            continue
        t0 = time.perf_counter()
        view = pts[:, :2].mean(axis=0) - cam_world[:2]
        # The silhouette lost to erosion, half a pixel more for the pixel's own footprint (m).
        z_med = float(np.median(frame.depth[seg.mask & (frame.depth > 0)]))
        pad = (erode_px + 0.5) * z_med / float(frame.K[0, 0])
        options: dict[str, object] = {"view_dir_xy": view, "pad_m": pad}
        if shape == "hunyuan3d":
            options = {"rgb": frame.rgb, "mask": seg.mask}
        try:
            shp = complete_shape(pts, seg.label, shape, **options)
        except ShapeBackendError:  # the back-end the user chose cannot run: say so, for the whole frame
            raise
        except ShapeError as err:
            warnings.append(f"{seg.label!r}: {err}; left out")
            continue
        timings["shape"] += time.perf_counter() - t0

        t0 = time.perf_counter()
        if pose == "foundationpose":
            est = estimate_pose(
                shp.mesh, pts, pose, frame=frame, mask=seg.mask, T_world_cam=table.T_world_cam
            )
        else:
            est = estimate_pose(shp.mesh, pts, pose, init=shp.T_world_obj, symmetry=shp.symmetry)
        timings["pose"] += time.perf_counter() - t0
        T = est.T_world_obj
        kept_segments.append(seg)
        objects.append(
            ObjectGeometry(
                label=seg.label,
                mesh=shp.mesh,
                position=T[:3, 3].copy(),
                quaternion=matrix_to_quat(T[:3, :3]),
                extent=np.asarray(shp.mesh.extents, dtype=np.float64),
                points_world=pts,
                symmetry=shp.symmetry,
                concave=shp.concave,
                fit_rmse_m=est.rmse_m,
                shape_source=shp.source,
                pose_source=est.source,
            )
        )
    if refine:
        t0 = time.perf_counter()
        objects = _refine_boxes(frame, table, kept_segments, objects, unlabelled)
        timings["refine"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    return Perception(table, kept_segments, objects, timings, warnings, unlabelled)


def _refine_boxes(
    frame: Frame,
    table: TablePlane,
    segments: Sequence[Segment],
    objects: list[ObjectGeometry],
    unlabelled: Sequence[np.ndarray],
) -> list[ObjectGeometry]:
    """Each upright box moved and resized to explain the depth around its mask (:func:`refine_box`)."""

    out = list(objects)
    for i, (seg, g) in enumerate(zip(segments, objects)):
        if g.shape_source != "geometric" or float(np.max(g.extent)) < MIN_REFINE_SIZE_M:
            continue  # small objects (beans): a few pixels wide, their masks often cut from a touching group
        if g.symmetry == "rotational" and not g.concave:
            out[i] = _refine_scaled(refine_cylinder, g, frame, table, seg.mask)
            continue
        if g.symmetry == "mirror":  # a mirror-completed hull (a bottle): scaled per axis
            out[i] = _refine_scaled(refine_hull, g, frame, table, seg.mask)
            continue
        if g.symmetry != "box" or len(g.mesh.vertices) != 8:
            continue  # boxes only (a can lying on its side is box-symmetric too)
        found = refine_box(g, frame, table.T_world_cam, seg.mask)
        if found is None:
            continue
        centre, yaw, extent, _, _ = found
        T = np.eye(4)
        T[:3, :3] = [[np.cos(yaw), -np.sin(yaw), 0.0], [np.sin(yaw), np.cos(yaw), 0.0], [0.0, 0.0, 1.0]]
        out[i] = dataclasses.replace(
            g,
            mesh=trimesh.creation.box(extents=extent),
            position=centre,
            quaternion=matrix_to_quat(T[:3, :3]),
            extent=np.asarray(extent, dtype=np.float64),
            pose_source=f"{g.pose_source}+depth_refine",
        )
    return out


def _refine_scaled(
    refine: Callable[..., Any], g: ObjectGeometry, frame: Frame, table: TablePlane, mask: np.ndarray
) -> ObjectGeometry:
    """An upright object moved and its mesh scaled to explain the depth: ``refine`` is
    :func:`refine_cylinder` (a solid of revolution, a can) or :func:`refine_hull` (a convex hull scaled per
    axis, a bottle); ``g`` unchanged when it finds nothing."""
    found = refine(g, frame, table.T_world_cam, mask)
    if found is None:
        return g
    position, scale, _, _ = found
    mesh = g.mesh.copy()
    mesh.apply_scale(scale)
    return dataclasses.replace(
        g,
        mesh=mesh,
        position=position,
        extent=np.asarray(mesh.extents, dtype=np.float64),
        pose_source=f"{g.pose_source}+depth_refine",
    )
