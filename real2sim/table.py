"""The table plane and the world frame it defines.

:func:`fit_table` finds the support plane by seeded RANSAC (numpy: the same plane in every run) on a
subsampled point cloud, refines it by least squares on its inliers and returns a
:class:`~real2sim.types.TablePlane`. Its inliers are the work table only (:func:`work_table`): another table
at the same height across the room, seen beyond the floor, is not where the objects stand.

World frame (``TablePlane.T_world_cam``), table top always at world z = 0:

- with ``frame.T_base_cam``: the robot base frame shifted down by the measured table height, so
  ``p_base = p_world + (0, 0, table_height_m)``; x, y and the axes are the base frame's;
- without it: z along the table normal (up), origin where the optical axis meets the table (the foot of the
  camera's perpendicular if it does not), x along the optical axis projected onto the table (away from the
  camera), y = z × x. ``table_height_m`` is 0.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from real2sim.types import TablePlane
from simpact.core.errors import SimpactError
from simpact.core.frame import Frame

__all__ = [
    "IMAGE_UP_DEG",
    "TableError",
    "camera_points",
    "faces_image_up",
    "fit_table",
    "heights_above_table",
    "plane_through",
    "ransac_plane",
    "work_table",
]


class TableError(SimpactError, ValueError):
    """No table plane could be found in the frame."""


def camera_points(frame: Frame, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Back-project every ``stride``-th pixel: (h, w, 3) camera-frame points (m) and (h, w) validity."""
    depth = frame.depth[::stride, ::stride].astype(np.float64)
    h, w = depth.shape
    v, u = np.mgrid[0:h, 0:w].astype(np.float64) * stride
    fx, fy, cx, cy, s = frame.K[0, 0], frame.K[1, 1], frame.K[0, 2], frame.K[1, 2], frame.K[0, 1]
    y = (v - cy) / fy * depth
    x = (u - cx - s * (v - cy) / fy) / fx * depth
    return np.stack([x, y, depth], axis=-1), depth > 0


def heights_above_table(table: TablePlane, points_cam: np.ndarray) -> np.ndarray:
    """Signed distance (m) of camera-frame points (..., 3) above the table plane (positive: camera side)."""
    return np.asarray(points_cam @ table.normal_cam + table.offset_m)


RANSAC_ITERATIONS = 1000
"""Planes hypothesised per RANSAC round (each from three sampled points)."""
IMAGE_UP_DEG = 80.0
"""Without calibration the table's normal is within this angle (degrees) of image up (the camera's -y): a
camera looking down at the table from the front (:func:`faces_image_up`)."""


def faces_image_up(normal_cam: np.ndarray) -> bool:
    """Whether a plane of unit normal ``normal_cam`` (camera frame) faces image up within
    :data:`IMAGE_UP_DEG`: the camera looks at it from the front, so the image's top is away from it and up,
    not beside it (a camera looking straight down)."""
    return bool(-float(normal_cam[1]) >= np.cos(np.deg2rad(IMAGE_UP_DEG)))


def ransac_plane(
    points: np.ndarray, threshold_m: float, iterations: int, rng: np.random.Generator
) -> tuple[np.ndarray, float, np.ndarray]:
    """The plane ``n · p + d = 0`` (unit ``n``) through three of ``points`` (N, 3) with the most points within
    ``threshold_m`` (m), and those points' indices. Seeded and vectorised, so a frame gives the same plane in
    every run (open3d's ``segment_plane`` samples in parallel threads and does not)."""
    triples = points[rng.integers(0, len(points), size=(iterations, 3))]
    normals = np.cross(triples[:, 1] - triples[:, 0], triples[:, 2] - triples[:, 0])
    lengths = np.linalg.norm(normals, axis=1)
    ok = lengths > 1e-12
    normals = normals[ok] / lengths[ok, None]
    offsets = -np.einsum("ij,ij->i", normals, triples[ok, 0])
    counts = np.zeros(len(normals), dtype=np.int64)
    for start in range(0, len(points), 4096):  # (chunk, planes) distances, bounded memory, in place
        dist = points[start : start + 4096] @ normals.T
        dist += offsets
        counts += np.count_nonzero(np.abs(dist, out=dist) < threshold_m, axis=0)
    best = int(np.argmax(counts))
    n, d = normals[best], float(offsets[best])
    return n, d, np.flatnonzero(np.abs(points @ n + d) < threshold_m)


def fit_table(
    frame: Frame,
    *,
    distance_threshold_m: float = 0.006,
    max_points: int = 20000,
    max_tilt_deg: float = 30.0,
    min_share: float = 0.3,
    seed: int = 0,
) -> TablePlane:
    """Fit the table plane of ``frame``.

    The table is the largest RANSAC plane whose normal is within ``max_tilt_deg`` of "up": the base frame's z
    when calibrated, otherwise the camera's -y (image up) tilted up to 80° — a camera looking down at a table.
    Among the up-facing planes with at least ``min_share`` of the largest one's points, the one nearest to
    the camera wins (a floor seen around a small table is farther). It is refined by least squares, last on
    the largest patch of the work table (:func:`work_table`) alone; pixels within ``distance_threshold_m``
    (m) of that plane are its inliers.
    """
    stride = max(1, int(np.ceil(np.sqrt(frame.depth.size / (4 * max_points)))))
    pts, valid = camera_points(frame, stride)
    cloud = pts[valid]
    if len(cloud) < 100:
        raise TableError(f"only {len(cloud)} valid depth pixels: cannot fit a table plane")
    rng = np.random.default_rng(seed)
    if len(cloud) > max_points:
        cloud = cloud[rng.choice(len(cloud), max_points, replace=False)]

    if frame.T_base_cam is not None:
        up_cam = frame.T_base_cam[:3, :3].T @ np.array([0.0, 0.0, 1.0])
        cos_min = np.cos(np.deg2rad(max_tilt_deg))
    else:
        up_cam = np.array([0.0, -1.0, 0.0])
        cos_min = np.cos(np.deg2rad(IMAGE_UP_DEG))

    remaining = cloud
    candidates: list[tuple[np.ndarray, float, int]] = []
    for _ in range(4):
        if len(remaining) < 200:
            break
        n, d, idx = ransac_plane(remaining, distance_threshold_m, RANSAC_ITERATIONS, rng)
        if d < 0:  # orient the normal towards the camera (the camera origin is on the positive side)
            n, d = -n, -d
        if float(n @ up_cam) >= cos_min:
            candidates.append((n, d, len(idx)))
        keep = np.ones(len(remaining), bool)
        keep[np.asarray(idx, dtype=np.int64)] = False
        remaining = remaining[keep]
    if not candidates:
        raise TableError(
            "no plane facing up was found in the depth (is a table visible, and is T_base_cam right?)"
            if frame.T_base_cam is not None
            else "no plane facing up was found in the depth: without calibration the table must face image "
            "up (a camera looking down at it from the front); is a table visible? For a camera looking "
            "straight down, give its T_base_cam in a frame bundle's frame.json"
        )
    # The table is the nearest large up-facing plane: a floor seen around a small table is farther away.
    largest = max(c[2] for c in candidates)
    best = min((c for c in candidates if c[2] >= min_share * largest), key=lambda c: c[1])
    n, d, _ = best
    # Least-squares refinement on the inliers (two rounds, tightening the band).
    for band in (2.0 * distance_threshold_m, distance_threshold_m):
        n, d = plane_through(cloud[np.abs(cloud @ n + d) < band], n)

    full, full_valid = camera_points(frame, 1)
    inliers = work_table(full_valid & (np.abs(full @ n + d) < distance_threshold_m), full)
    # Once more on the work table's largest patch alone: a chair's tablet across the room, at the same height
    # within the band, had tilted the plane by 1.5° (the table 5 mm low under PoseCNN 000003's meat can).
    n, d = plane_through(full[_largest_patch(inliers)], n)
    inliers = work_table(full_valid & (np.abs(full @ n + d) < distance_threshold_m), full)
    T_world_cam, height, world_frame = _world_frame(frame, n, d, full[inliers])
    return TablePlane(
        normal_cam=n,
        offset_m=d,
        T_world_cam=T_world_cam,
        inliers=inliers,
        world_frame=world_frame,
        table_height_m=height,
    )


#: Gap (m) between two patches of the table plane beyond which they are two surfaces (a table across the
#: room), not one table seen around the objects on it: on the shared real frames patches of one table lie
#: at most 0.31 m apart (a writing tablet split by a can), other surfaces at the same height 0.75 m or more.
TABLE_GAP_M = 0.5


def work_table(inliers: np.ndarray, points_cam: np.ndarray, gap_m: float = TABLE_GAP_M) -> np.ndarray:
    """The (H, W) plane inliers that are the work table: the largest connected patch of ``inliers`` in the
    image and every patch that comes within ``gap_m`` (m, in 3D) of those kept, grown until none does."""
    import cv2

    count, labels, stats, _ = cv2.connectedComponentsWithStats(inliers.astype(np.uint8), connectivity=8)
    if count <= 2:
        return inliers
    areas = stats[1:, cv2.CC_STAT_AREA]
    # Each patch's pixels in image order (what ``labels == k`` picks), grouped by one stable sort.
    flat = labels.ravel()
    pixels = np.flatnonzero(flat)
    groups = np.split(pixels[np.argsort(flat[pixels], kind="stable")], np.cumsum(areas)[:-1])
    points = points_cam.reshape(-1, 3)
    patches = {k: points[g][:: max(1, len(g) // 2000)] for k, g in enumerate(groups, start=1)}
    kept = {1 + int(np.argmax(areas))}
    grown = True
    while grown:
        tree = cKDTree(np.concatenate([patches[k] for k in kept]))
        near = {
            k
            for k in patches
            if k not in kept and tree.query(patches[k], distance_upper_bound=gap_m)[0].min() < gap_m
        }
        kept |= near
        grown = bool(near)
    return np.isin(labels, sorted(kept)) & inliers


def plane_through(points: np.ndarray, toward: np.ndarray) -> tuple[np.ndarray, float]:
    """The least-squares plane ``n · p + d = 0`` through ``points`` (N, 3, m), ``n`` towards ``toward``."""
    centroid = points.mean(axis=0)
    _, _, vt = np.linalg.svd(points - centroid, full_matrices=False)
    n = vt[2] * np.sign(vt[2] @ toward)
    return n, float(-n @ centroid)


def _largest_patch(mask: np.ndarray) -> np.ndarray:
    """The largest 8-connected patch of the (H, W) boolean ``mask``."""
    import cv2

    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if count <= 2:
        return mask
    return labels == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))


def _world_frame(
    frame: Frame, n: np.ndarray, d: float, table_points_cam: np.ndarray
) -> tuple[np.ndarray, float, str]:
    if frame.T_base_cam is not None:
        T_base_cam = frame.T_base_cam
        # The median base-frame z of the table's points (robust to a slightly tilted calibration).
        z_base = table_points_cam @ T_base_cam[2, :3] + T_base_cam[2, 3]
        height = float(np.median(z_base))
        T = T_base_cam.copy()
        T[2, 3] -= height
        return T, height, "T_base_cam"
    optical = np.array([0.0, 0.0, 1.0])
    denom = float(n @ optical)
    if denom < -0.1:  # the optical axis hits the table in front of the camera
        origin = optical * (-d / denom)
    else:
        origin = -d * n
    x_axis = optical - (optical @ n) * n
    if np.linalg.norm(x_axis) < 1e-6:  # looking straight down: use image "up" as forward
        x_axis = np.array([0.0, -1.0, 0.0]) - (-n[1]) * n
    x_axis /= np.linalg.norm(x_axis)
    y_axis = np.cross(n, x_axis)
    R_cam_world = np.stack([x_axis, y_axis, n], axis=1)  # world axes in camera coordinates
    T_cam_world = np.eye(4)
    T_cam_world[:3, :3] = R_cam_world
    T_cam_world[:3, 3] = origin
    return np.linalg.inv(T_cam_world), 0.0, "table_plane"
