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
from collections.abc import Sequence

import numpy as np
import trimesh

from real2sim.heightfield import add_heightfield
from real2sim.masks import padded_box
from real2sim.necks import add_neck
from real2sim.no_depth import fit_silhouette, unseen_by_depth
from real2sim.outline import outline_kind
from real2sim.pose import estimate_pose
from real2sim.prisms import add_prism
from real2sim.refine import mesh_cost, refine_box, refine_frustum, refine_hull, refine_vessel
from real2sim.rounding import round_box
from real2sim.segment import AssignFn, segment
from real2sim.shape import (
    ShapeBackendError,
    ShapeError,
    complete_shape,
    frustum,
    kind_from_label,
)
from real2sim.table import fit_table
from real2sim.types import ObjectGeometry, Segment, TablePlane
from real2sim.workers import process_pool, run_all
from simpact.core.frame import Frame
from simpact.core.rotations import matrix_to_quat

__all__ = ["CANDIDATE_KINDS", "MIN_REFINE_SIZE_M", "SELECT_MARGIN", "Perception", "object_points", "perceive"]

MIN_REFINE_SIZE_M = 0.04
"""Objects whose longest edge is shorter (m) are not refined against the depth."""
THIN_M = 0.03
"""An object whose mask rows are narrower than this (m, median) is thin (:func:`_front_of_thin`)."""
THIN_DEPTH = 1.5
"""A thin object's pixels lie at most this many times its row's width behind the row's nearest ..."""
THIN_FLOOR_M = 0.015
"""... or this far (m), whichever is more."""


@dataclasses.dataclass(eq=False)
class Perception:
    """What :func:`perceive` found; ``segments[i]`` and ``objects[i]`` are the same object."""

    table: TablePlane
    segments: list[Segment]
    objects: list[ObjectGeometry]
    timings_s: dict[str, float]
    """Wall time per stage (s): ``table``, ``segment``, ``objects`` (fitting them all), ``total``; the
    stages of an object's fit (``shape``, ``pose``, ``refine`` ...) summed over the objects, which
    :mod:`real2sim.workers` fits side by side."""
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
    denoise: bool = False,
) -> np.ndarray:
    """World points (N, 3) of the masked pixels (m), at most ``max_points`` (uniformly subsampled).

    The mask is eroded by ``erode_px`` pixels (mixed depth at silhouettes) unless that empties it; pixels at
    or below ``min_height_m`` above the table are dropped, and so are, for an object thinner across the view
    than :data:`THIN_M`, the pixels far behind the nearest of their row (:func:`_front_of_thin`). With
    ``denoise``, each pixel's depth is the median of the mask's measured depths in the 3 x 3 pixels around it
    (:func:`_masked_median`).
    """
    import cv2

    m = mask.astype(bool) & (frame.depth > 0)
    depth = _masked_median(frame.depth, m) if denoise and m.any() else frame.depth
    if erode_px > 0:
        eroded = cv2.erode(m.astype(np.uint8), np.ones((2 * erode_px + 1,) * 2, np.uint8)) > 0
        if eroded.sum() >= 0.3 * m.sum() and eroded.sum() >= 20:
            m = eroded
    m = _front_of_thin(m, depth, float(frame.K[0, 0]))
    rows, cols = np.nonzero(m)
    if len(rows) > max_points:
        pick = np.random.default_rng(seed).choice(len(rows), max_points, replace=False)
        rows, cols = rows[np.sort(pick)], cols[np.sort(pick)]
    z = depth[rows, cols].astype(np.float64)
    K = frame.K
    y = (rows - K[1, 2]) / K[1, 1] * z
    x = (cols - K[0, 2] - K[0, 1] * (rows - K[1, 2]) / K[1, 1]) / K[0, 0] * z
    p_cam = np.column_stack([x, y, z])
    T = table.T_world_cam
    p = p_cam @ T[:3, :3].T + T[:3, 3]
    return p[p[:, 2] > min_height_m]


def _front_of_thin(mask: np.ndarray, depth: np.ndarray, focal_px: float) -> np.ndarray:
    """``mask`` without, for an object thinner across the view than :data:`THIN_M` (the median width of its
    rows, m), the pixels of each row measured more than :data:`THIN_DEPTH` times the row's width (at least
    :data:`THIN_FLOOR_M`) behind the row's nearest: a marker a few pixels wide in smoothed depth (UOIS)
    is mostly pixels that mix it with what stands behind it, and they spread it 13 cm along the view."""
    rows, cols = np.nonzero(mask)
    if len(rows) < 20:
        return mask
    z = depth[rows, cols].astype(np.float64)
    h = mask.shape[0]
    near = np.full(h, np.inf)
    np.minimum.at(near, rows, z)
    first = np.full(h, mask.shape[1])
    np.minimum.at(first, rows, cols)
    last = np.full(h, -1)
    np.maximum.at(last, rows, cols)
    width = (last - first + 1) * near / focal_px  # m, each row's extent at its nearest depth
    if np.median(width[np.unique(rows)]) >= THIN_M:
        return mask
    keep = z <= near[rows] + np.maximum(THIN_DEPTH * width[rows], THIN_FLOOR_M)
    if keep.sum() < 20:
        return mask
    out = np.zeros_like(mask)
    out[rows[keep], cols[keep]] = True
    return out


def _masked_median(depth: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``depth`` (H, W, m) with each ``mask`` pixel's value the median of the ``mask`` pixels' depths in the
    3 x 3 pixels around it: the sensor's noise (1-2 mm at 1 m, the size of a 15 mm bean's error) averaged
    down, a surface's shape and the object's outline kept."""
    box = padded_box(mask, 0)
    if box is None:
        return np.array(depth, dtype=np.float64)
    d = np.pad(np.where(mask[box], depth[box], np.nan).astype(np.float64), 1, constant_values=np.nan)
    h, w = d.shape[0] - 2, d.shape[1] - 2
    window = np.stack([d[i : i + h, j : j + w] for i in range(3) for j in range(3)])
    out = np.array(depth, dtype=np.float64)
    inside = mask[box]
    out[box][inside] = np.nanmedian(window[:, inside], axis=0)  # each has its own pixel: never all NaN
    return out


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
    each upright object is then refined against the depth (:mod:`real2sim.refine`), a box's edges rounded
    where the photo's outline asks for it (:mod:`real2sim.rounding`) and a box given the neck its points
    show beyond it (:mod:`real2sim.necks`); a mirror-completed hull is tried as its outline extruded, back
    from a face its points show or up from the table (:mod:`real2sim.prisms`), and as its height field
    (:mod:`real2sim.heightfield`). An object whose label names no shape (an unlabelled region) is fitted as
    each of :data:`CANDIDATE_KINDS`, and the fit that explains the depth around its mask best is kept. An
    object the segmenter found lying on another (``Segment.support_m``, :mod:`real2sim.stacked`) is fitted
    standing on that surface, not on the table. The objects are fitted side by side, in this process and the
    helper processes of :mod:`real2sim.workers` (with the geometric back-ends; the learned ones hold their
    models here), each exactly as alone.
    """
    timings = {"table": 0.0, "segment": 0.0, "shape": 0.0, "pose": 0.0}
    warnings: list[str] = []
    t_start = time.perf_counter()
    helpers = process_pool(_warm_up) if shape == "geometric" and pose == "icp" else None
    t0 = time.perf_counter()
    table = fit_table(frame)
    timings["table"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    unlabelled: list[np.ndarray] = []
    extra = {"unlabelled": unlabelled} if segmenter == "geometric" else {}
    segments = segment(frame, table, labels, segmenter, assign=assign, **extra)
    timings["segment"] = time.perf_counter() - t0
    found = {s.label for s in segments}
    for label in labels:
        if label not in found:
            warnings.append(f"{label!r}: not found by segmenter {segmenter!r}")

    kept_segments: list[Segment] = []
    objects: list[ObjectGeometry] = []
    fitting = _Fitting(frame, table, shape, pose, erode_px, refine, {})
    t0 = time.perf_counter()
    covered = np.sum([s.mask for s in segments], axis=0, dtype=np.int32)  # the masks holding each pixel
    jobs = [(fitting, seg, covered - seg.mask > 0, max_points) for seg in segments]
    fitted = run_all(_fit_one, jobs, helpers, costs=[float(np.count_nonzero(s.mask)) for s in segments])
    timings["objects"] = time.perf_counter() - t0
    for seg, (g, seg_warnings, seg_timings) in zip(segments, fitted):
        warnings.extend(seg_warnings)
        for stage, seconds in seg_timings.items():
            timings[stage] = timings.get(stage, 0.0) + seconds
        if g is not None:
            kept_segments.append(seg)
            objects.append(g)
    timings["total"] = time.perf_counter() - t_start
    return Perception(table, kept_segments, objects, timings, warnings, unlabelled)


def _warm_up() -> None:
    """Run by each fitting worker as it starts, before the first object arrives: finding this function
    imports this module, and this imports Open3D (1-3 s together)."""
    import open3d  # noqa: F401


_Fitted = tuple["ObjectGeometry | None", list[str], dict[str, float]]
"""One segment's object (None when left out), its warnings and its stages' times (s)."""


def _fit_one(fitting: _Fitting, seg: Segment, others: np.ndarray, max_points: int) -> _Fitted:
    """:func:`_object_of` with its own warnings and timings: the same in a worker process as here."""
    warnings: list[str] = []
    fit = dataclasses.replace(fitting, timings={})
    return _object_of(fit, seg, others, max_points, warnings), warnings, fit.timings


def _object_of(
    fit: _Fitting, seg: Segment, others: np.ndarray, max_points: int, warnings: list[str]
) -> ObjectGeometry | None:
    """The object of ``seg`` from at most ``max_points`` of its points, or from its silhouette (beside
    ``others``, the other segments' pixels) where the depth camera did not see it; None, with a warning,
    when it cannot be built."""
    frame, table, timings = fit.frame, fit.table, fit.timings
    unseen, seen = unseen_by_depth(frame, table, seg.mask)
    if unseen:  # glass, clear plastic: the depth shows the table through it, or nothing
        t0 = time.perf_counter()
        glass = _from_silhouette(frame, table, seg, others, seen, warnings)
        timings["silhouette"] = timings.get("silhouette", 0.0) + time.perf_counter() - t0
        return glass
    support = seg.support_m or None  # an object lying on another one's top: fitted on that surface
    on = table if support is None else _raised(table, support)
    pts = object_points(frame, on, seg.mask, max_points=max_points, erode_px=fit.erode_px)
    if len(pts) >= 20 and _size(pts) < MIN_REFINE_SIZE_M:  # not refined: its size is its points'
        pts = object_points(frame, on, seg.mask, max_points=max_points, erode_px=fit.erode_px, denoise=True)
    if len(pts) < 20:
        warnings.append(f"{seg.label!r}: only {len(pts)} points above the table; left out")
        return None
    try:
        g = _best_reconstruction(dataclasses.replace(fit, table=on), seg, pts)
    except ShapeBackendError:  # the back-end the user chose cannot run: say so, for the whole frame
        raise
    except ShapeError as err:
        warnings.append(f"{seg.label!r}: {err}; left out")
        return None
    if _roundable(g) and fit.refine:
        t0 = time.perf_counter()
        g = round_box(g, frame, on.T_world_cam, seg.mask, seg.seen)
        g = add_neck(g, frame, on.T_world_cam, seg.mask, seg.seen)
        timings["round"] = timings.get("round", 0.0) + time.perf_counter() - t0
    elif _extrudable(g) and fit.refine:
        t0 = time.perf_counter()
        field = add_heightfield(g, carve_to=(seg.seen, frame.K, on.T_world_cam))
        g = add_prism(g, frame, on.T_world_cam, seg.mask, seg.seen, [] if field is None else [field])
        timings["prism"] = timings.get("prism", 0.0) + time.perf_counter() - t0
    return g if support is None else _lifted(g, support)


def _roundable(g: ObjectGeometry) -> bool:
    """Whether ``g`` is a fitted box large enough to be refined, whose edges may be rounded."""
    box = g.symmetry == "box" and len(g.mesh.vertices) == 8
    return box and g.shape_source == "geometric" and float(np.max(g.extent)) >= MIN_REFINE_SIZE_M


def _extrudable(g: ObjectGeometry) -> bool:
    """Whether ``g`` is a mirror-completed hull large enough to be refined: one that may be better drawn as
    its own outline extruded (:mod:`real2sim.prisms`). Not a solid of revolution: a slim can's front arc lies
    within a few mm of a plane, and its prism would pass for a fit."""
    hull = g.symmetry == "mirror" and not g.concave
    return hull and g.shape_source == "geometric" and float(np.max(g.extent)) >= MIN_REFINE_SIZE_M


def _raised(table: TablePlane, height_m: float) -> TablePlane:
    """``table`` with its world frame and plane moved up by ``height_m`` (m): a surface an object lies on."""
    T = np.array(table.T_world_cam, dtype=np.float64)
    T[2, 3] -= height_m
    return dataclasses.replace(table, T_world_cam=T, offset_m=float(table.offset_m) - height_m)


def _lifted(g: ObjectGeometry, height_m: float) -> ObjectGeometry:
    """``g``, fitted on a :func:`_raised` table, back in the table's world frame."""
    up = np.array([0.0, 0.0, height_m])
    return dataclasses.replace(
        g, position=g.position + up, points_world=g.points_world + up, support_m=height_m
    )


def _from_silhouette(
    frame: Frame,
    table: TablePlane,
    seg: Segment,
    others: np.ndarray,
    seen: float,
    warnings: list[str],
) -> ObjectGeometry | None:
    """The object of ``seg``, whose depth the camera did not measure (``seen``: the share of its mask with
    depth above the table), fitted to its silhouette (:func:`real2sim.no_depth.fit_silhouette`) beside the
    other objects' pixels ``others``; None, with a warning, for a mask it cannot fit."""
    found = fit_silhouette(frame, table, seg.mask, seg.label, others)
    if found is None:
        warnings.append(
            f"{seg.label!r}: no depth measured on it, and its mask is too small or does not meet the table "
            "in view to be fitted to; left out"
        )
        return None
    geometry, mismatch = found
    warnings.append(
        f"{seg.label!r}: the depth camera measured {seen:.0%} of it (glass or clear plastic?): fitted as a "
        f"cylinder to its silhouette alone ({mismatch:.1%} of the pixels around it disagree)"
    )
    return geometry


#: The shape kinds tried on an object whose label names none (:func:`real2sim.shape.kind_from_label`).
CANDIDATE_KINDS = ("box", "revolution", "mirror")
#: How much lower (a share) another kind's cost must be than that of the kind the outline suggests
#: (:func:`real2sim.outline.outline_kind`) to be chosen over it: near ties go to the outline.
SELECT_MARGIN = 0.1


@dataclasses.dataclass
class _Fitting:
    """What reconstructing one object reads besides its segment and points (see :func:`perceive`)."""

    frame: Frame
    table: TablePlane
    shape: str
    pose: str
    erode_px: int
    refine: bool
    timings: dict[str, float]


def _size(pts: np.ndarray) -> float:
    """An object's size (m) from its world points (N, 3): the larger of its top view's longest side along
    the axes and its highest point."""
    return max(float(np.max(np.ptp(pts[:, :2], axis=0))), float(np.max(pts[:, 2])))


def _best_reconstruction(fit: _Fitting, seg: Segment, pts: np.ndarray) -> ObjectGeometry:
    """The object of ``seg`` reconstructed from its points (world, m): with the geometric back-end and a
    label that names no shape, each of :data:`CANDIDATE_KINDS` (and ``upright``, the standing solid, when the
    solid of revolution came out lying) is fitted and the one that explains the depth
    around the mask best (:func:`real2sim.refine.mesh_cost`, no ground truth; by :data:`SELECT_MARGIN` over
    the outline's choice) is kept; else the label's (or, for an object smaller than
    :data:`MIN_REFINE_SIZE_M`, the back-end's own choice)."""
    size = _size(pts)
    named = fit.shape != "geometric" or kind_from_label(seg.label)[0] is not None
    if named or size < MIN_REFINE_SIZE_M:  # small: a few pixels wide (beans), too few to tell shapes apart
        return _reconstruct(fit, seg, pts)
    default = "revolution" if outline_kind(pts) == "round" else "box"  # what the outline alone would say
    fits: dict[str, tuple[float, ObjectGeometry]] = {}
    error: ShapeError | None = None
    kinds = list(CANDIDATE_KINDS)
    for kind in kinds:
        try:  # the geometric back-end: no ShapeBackendError
            g = _reconstruct(fit, seg, pts, kind)
        except ShapeError as err:
            error = err
            continue
        if kind == "revolution" and g.symmetry != "rotational":
            kinds.append("upright")  # its normals said lying (noisy depth fools them): try it standing
        t0 = time.perf_counter()
        cost = mesh_cost(g, fit.frame, fit.table.T_world_cam, seg.mask)
        fit.timings["select"] = fit.timings.get("select", 0.0) + time.perf_counter() - t0
        fits[kind] = (np.inf if cost is None else cost, g)
    if not fits:
        raise error if error is not None else ShapeError(f"object {seg.label!r}: no shape could be completed")
    best = min(fits.values(), key=lambda f: f[0])
    if default in fits and not best[0] < (1.0 - SELECT_MARGIN) * fits[default][0]:
        return fits[default][1]  # another shape must explain the depth clearly better than the outline's
    return best[1]


def _reconstruct(fit: _Fitting, seg: Segment, pts: np.ndarray, kind: str | None = None) -> ObjectGeometry:
    """Shape completion (of ``kind``, None: the back-end's choice), pose and, with ``fit.refine``, the depth
    refinement of one object."""
    frame, table, shape, pose, timings = fit.frame, fit.table, fit.shape, fit.pose, fit.timings
    t0 = time.perf_counter()
    view = pts[:, :2].mean(axis=0) - table.T_world_cam[:2, 3]  # the horizontal viewing direction (world)
    # The silhouette lost to erosion, half a pixel more for the pixel's own footprint (m).
    z_med = float(np.median(frame.depth[seg.mask & (frame.depth > 0)]))
    pad = (fit.erode_px + 0.5) * z_med / float(frame.K[0, 0])
    options: dict[str, object] = {"view_dir_xy": view, "pad_m": pad}
    if kind is not None:
        options["kind"] = kind
    if shape == "hunyuan3d":
        options = {"rgb": frame.rgb, "mask": seg.mask}
    shp = complete_shape(pts, seg.label, shape, **options)
    timings["shape"] = timings.get("shape", 0.0) + time.perf_counter() - t0
    t0 = time.perf_counter()
    if pose == "foundationpose":
        est = estimate_pose(shp.mesh, pts, pose, frame=frame, mask=seg.mask, T_world_cam=table.T_world_cam)
    else:
        est = estimate_pose(shp.mesh, pts, pose, init=shp.T_world_obj, symmetry=shp.symmetry)
    timings["pose"] = timings.get("pose", 0.0) + time.perf_counter() - t0
    T = est.T_world_obj
    g = ObjectGeometry(
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
    if not fit.refine:
        return g
    t0 = time.perf_counter()
    g = _refined(frame, table, seg, g)
    timings["refine"] = timings.get("refine", 0.0) + time.perf_counter() - t0
    return g


def _refined(frame: Frame, table: TablePlane, seg: Segment, g: ObjectGeometry) -> ObjectGeometry:
    """An upright object moved and resized to explain the depth around its mask (:mod:`real2sim.refine`):
    a box (:func:`refine_box`), a solid of revolution redrawn as a frustum (:func:`refine_frustum`), an open
    vessel (:func:`refine_vessel`) or a mirror-completed hull (:func:`refine_hull`) scaled; ``g`` unchanged
    for other shapes and small objects."""
    if g.shape_source != "geometric" or float(np.max(g.extent)) < MIN_REFINE_SIZE_M:
        return g  # small objects (beans): a few pixels wide, their masks often cut from a touching group
    if g.symmetry == "rotational" and not g.concave:
        cone = refine_frustum(g, frame, table.T_world_cam, seg.mask)
        return g if cone is None else _moved(g, frustum(*cone[1:4]), cone[0])
    if g.symmetry in ("rotational", "mirror"):  # an open vessel, a mirror-completed hull (a bottle): scaled
        refine = refine_vessel if g.symmetry == "rotational" else refine_hull
        found = refine(g, frame, table.T_world_cam, seg.mask)
        if found is None:
            return g
        mesh = g.mesh.copy()
        mesh.apply_scale(found[1])
        return _moved(g, mesh, found[0])
    if g.symmetry != "box" or len(g.mesh.vertices) != 8:
        return g  # boxes only (a can lying on its side is box-symmetric too)
    box = refine_box(g, frame, table.T_world_cam, seg.mask)
    if box is None:
        return g
    centre, yaw, extent, _, _ = box
    R = np.array([[np.cos(yaw), -np.sin(yaw), 0.0], [np.sin(yaw), np.cos(yaw), 0.0], [0.0, 0.0, 1.0]])
    return _moved(g, trimesh.creation.box(extents=extent), centre, matrix_to_quat(R))


def _moved(
    g: ObjectGeometry, mesh: trimesh.Trimesh, position: np.ndarray, quaternion: np.ndarray | None = None
) -> ObjectGeometry:
    """``g`` with the refined ``mesh`` (object frame) at ``position`` (m, world), its orientation kept
    unless ``quaternion`` (w, x, y, z) is given."""
    return dataclasses.replace(
        g,
        mesh=mesh,
        position=np.asarray(position, dtype=np.float64),
        quaternion=g.quaternion if quaternion is None else quaternion,
        extent=np.asarray(mesh.extents, dtype=np.float64),
        pose_source=f"{g.pose_source}+depth_refine",
    )
