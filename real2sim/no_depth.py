"""Objects the depth camera does not see (glass, clear plastic): shape and pose from the silhouette alone.

A depth camera measures little on a transparent object: most of its pixels have no depth, and where there
is some it is mostly the table seen through it. Fitted to those points, a glass bottle comes out as a flat
disc or a box twice its width. When less than :data:`DEPTH_SEEN_MIN` of a mask's pixels have a depth point
above the table and :data:`MISSING_MIN` or more have none (:func:`unseen_by_depth`; a flat object is
measured on the table, with no holes), :func:`fit_silhouette` ignores the depth inside the mask and
fits, to the mask itself, a cylinder standing on the table and a cylinder lying on it: each one's pixels
seen from the photo's camera (rays cast analytically) against the mask's, Nelder-Mead over its centre on
the table, its yaw (lying), radius and height or length, from a start read off the mask (its bottom edge
is where it meets the table; the lying one from a start every 15 degrees of yaw). The one whose
silhouette matches best is kept. The table plane fixes what one view cannot: how far away the object
stands, and so its size.

What it does not do: shapes other than cylinders (a glass flower box comes out as the cylinder around it),
and a mask that is wrong (cut by an occluder, or two touching objects) gives a wrong cylinder.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import trimesh
from scipy.optimize import minimize

from real2sim.refine import frustum_depth, pixel_grid, pixels_around
from real2sim.types import ObjectGeometry, TablePlane
from simpact.core.frame import Frame
from simpact.core.rotations import matrix_to_quat

__all__ = [
    "DEPTH_SEEN_MIN",
    "MISSING_MIN",
    "SEEN_ABOVE_M",
    "depth_shares",
    "fit_silhouette",
    "lying_cylinder_depth",
    "unseen_by_depth",
]

DEPTH_SEEN_MIN = 0.4
"""Below this share of its pixels with depth above the table, a mask's depth does not describe its object.
On ClearGrasp's real frames: 0.73-0.88 for the painted objects, 0.01-0.16 for the glass ones, 0.49-0.61
for three glass boxes on a dark table whose depth does show them (fitted from the depth)."""
MISSING_MIN = 0.25
"""At least this share of a mask's pixels without depth, for its depth to count as failed: a flat object (a
sheet, a mark) is measured on the table, glass leaves holes (ClearGrasp: 0.29-0.79 of the glass objects'
pixels, 0.11-0.24 of the painted copies')."""
SEEN_ABOVE_M = 0.01
"""A depth point this far (m) above the table counts as seeing the object (not the table through it)."""
MAX_PIXELS = 6000
"""About this many pixels (evenly strided) of the mask's surroundings enter the silhouette comparison."""
MAX_RANGE_M = 5.0
"""A mask whose foot meets the table farther than this from the camera (m) is not fitted."""
MAX_EVALS = 400
"""Cost evaluations of each Nelder-Mead run (two runs per search: a restart from the first's answer)."""
DepthFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""A shape's depth render: (parameters, ray origin (3,), ray directions (N, 3)) -> depth (N,), inf: missed."""

YAW_STEP_DEG = 15.0
"""The lying cylinder is searched from one start per this many degrees of yaw (its mask's principal
direction leans towards the camera, so it is not a reliable start)."""


def depth_shares(frame: Frame, table: TablePlane, mask: np.ndarray) -> tuple[float, float]:
    """The shares of ``mask``'s pixels whose measured point lies :data:`SEEN_ABOVE_M` or more above the
    table, and of those with no depth at all ((0, 0) for an empty mask)."""
    rows, cols = np.nonzero(mask)
    if not len(rows):
        return 0.0, 0.0
    z = frame.depth[rows, cols].astype(np.float64)
    rays = _rays(frame, np.eye(4), rows, cols)  # camera frame
    height = (rays * z[:, None]) @ np.asarray(table.normal_cam) + float(table.offset_m)
    seen = np.count_nonzero((z > 0) & (height >= SEEN_ABOVE_M))
    return float(seen) / len(rows), float(np.count_nonzero(z <= 0)) / len(rows)


def unseen_by_depth(frame: Frame, table: TablePlane, mask: np.ndarray) -> tuple[bool, float]:
    """Whether the depth camera failed on the object of ``mask`` (less than :data:`DEPTH_SEEN_MIN` of it
    seen above the table, at least :data:`MISSING_MIN` of it without depth: a flat object, measured on the
    table, is not), and the share seen."""
    seen, missing = depth_shares(frame, table, mask)
    return seen < DEPTH_SEEN_MIN and missing >= MISSING_MIN, seen


def lying_cylinder_depth(params: np.ndarray, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
    """Depth (along the optical axis; the rays have camera z = 1) at which each ray enters the cylinder
    ``params`` = (cx, cy, yaw, radius, length) lying on z = 0, its axis horizontal at angle ``yaw`` (rad)
    through (cx, cy, radius); inf where it misses."""
    cx, cy, yaw, radius, length = params
    axis = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    across = np.array([-np.sin(yaw), np.cos(yaw), 0.0])
    R = np.stack([axis, across, [0.0, 0.0, 1.0]])  # world -> cylinder frame (x along the axis)
    o = R @ (np.asarray(origin, dtype=float) - np.array([cx, cy, radius]))
    d = dirs @ R.T
    half = length / 2
    # The side: (o_y + t d_y)^2 + (o_z + t d_z)^2 = r^2, entered at the smaller root.
    a = d[:, 1] ** 2 + d[:, 2] ** 2
    half_b = o[1] * d[:, 1] + o[2] * d[:, 2]
    c = o[1] ** 2 + o[2] ** 2 - radius * radius
    disc = half_b * half_b - a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        t_side = (-half_b - np.sqrt(np.maximum(disc, 0.0))) / np.where(a < 1e-12, 1e-12, a)
        x_side = o[0] + t_side * d[:, 0]
        t = np.where((disc >= 0) & (t_side > 0) & (np.abs(x_side) <= half), t_side, np.inf)
        if abs(o[0]) > half:  # the end disc facing the origin
            t_cap = (np.sign(o[0]) * half - o[0]) / d[:, 0]
            y, z = o[1] + t_cap * d[:, 1], o[2] + t_cap * d[:, 2]
            on_cap = np.isfinite(t_cap) & (t_cap > 0) & (y * y + z * z <= radius * radius)
            t = np.where(on_cap & (t_cap < t), t_cap, t)
    return t


def _standing_depth(p: np.ndarray, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
    """:func:`real2sim.refine.frustum_depth` of the standing cylinder ``p`` = (cx, cy, radius, height)."""
    return frustum_depth(np.array([p[0], p[1], p[2], p[2], p[3]]), origin, dirs)


def _on_table(ray: np.ndarray, origin: np.ndarray, height: float = 0.0) -> np.ndarray:
    """Where the world ray ``origin + t ray`` meets the horizontal plane z = ``height`` (m)."""
    return origin + (height - origin[2]) / ray[2] * ray


def _rays(frame: Frame, T_world_cam: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The world directions (N, 3; camera z = 1) of the pixels (``rows``, ``cols``)."""
    K = frame.K
    y = (np.asarray(rows, dtype=float) - K[1, 2]) / K[1, 1]
    x = (np.asarray(cols, dtype=float) - K[0, 2] - K[0, 1] * y) / K[0, 0]
    return np.column_stack([x, y, np.ones_like(x)]) @ T_world_cam[:3, :3].T


def _ray(frame: Frame, T_world_cam: np.ndarray, row: float, col: float) -> np.ndarray:
    """The world direction (camera z = 1) of the pixel (``row``, ``col``)."""
    return _rays(frame, T_world_cam, np.array([row]), np.array([col]))[0]


def _standing_start(frame: Frame, T: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """(cx, cy, radius, height) of a standing cylinder read off the mask: its lowest pixel below the middle
    columns meets the table at the front of its foot, its width there gives the radius, and the ray of its
    highest pixel there passes over the far side of its top. None when that pixel's ray meets the table
    not at all or beyond :data:`MAX_RANGE_M` (a mask at or above the horizon)."""
    rows, cols = np.nonzero(mask)
    origin = T[:3, 3]
    mid = np.abs(cols - np.median(cols)) <= max(1.0, 0.25 * np.ptp(cols))
    foot = _ray(frame, T, float(rows[mid].max()), float(np.median(cols)))
    if foot[2] >= 0 or -origin[2] / foot[2] * float(np.linalg.norm(foot)) > MAX_RANGE_M:
        return None
    front = _on_table(foot, origin)
    distance = float(np.linalg.norm(front - origin))
    radius = max(0.5 * float(np.ptp(cols)) * distance / float(frame.K[0, 0]), 0.005)
    away = front[:2] - origin[:2]
    centre = front[:2] + radius * away / max(float(np.linalg.norm(away)), 1e-9)
    top = _ray(frame, T, float(rows[mid].min()), float(np.median(cols)))
    # The top ray's height where it passes over the centre's far side (its horizontal distance there).
    reach = float(np.linalg.norm(centre - origin[:2])) + radius
    t_top = reach / max(float(np.linalg.norm(top[:2])), 1e-9)
    return np.array([centre[0], centre[1], radius, max(float(origin[2] + t_top * top[2]), 0.01)])


def _lying_starts(frame: Frame, T: np.ndarray, mask: np.ndarray, radius: float) -> list[np.ndarray]:
    """(cx, cy, yaw, radius, length) of cylinders lying under the mask, one per yaw every
    :data:`YAW_STEP_DEG`: the mask's pixels put on the plane of the axis (``radius`` above the table), their
    mean the centre and their spread along the yaw the length."""
    rows, cols = np.nonzero(mask)
    pick = np.linspace(0, len(rows) - 1, min(len(rows), 2000)).astype(int)
    origin = T[:3, 3]
    rays = _rays(frame, T, rows[pick], cols[pick])
    rays = rays[rays[:, 2] < 0]  # those that go down to the plane of the axis (the mask is below the horizon)
    if len(rays) < 10:
        return []
    xy = origin[:2] + ((radius - origin[2]) / rays[:, 2])[:, None] * rays[:, :2]
    centre = xy.mean(axis=0)
    starts = []
    for yaw in np.deg2rad(np.arange(0.0, 180.0, YAW_STEP_DEG)):
        along = (xy - centre) @ np.array([np.cos(yaw), np.sin(yaw)])
        length = max(float(np.percentile(along, 98) - np.percentile(along, 2)), 2 * radius)
        starts.append(np.array([centre[0], centre[1], yaw, radius, length]))
    return starts


def _search(
    cost: Callable[[np.ndarray], float], x0: np.ndarray, scale: np.ndarray
) -> tuple[np.ndarray, float]:
    """Nelder-Mead over ``x0 + z * scale``, restarted once from its answer; the best parameters and cost."""

    def f(z: np.ndarray) -> float:
        return cost(x0 + z * scale)

    z, best = np.zeros(len(x0)), float(f(np.zeros(len(x0))))
    for _ in range(2):
        simplex = np.vstack([z, z + np.eye(len(x0))])
        res = minimize(
            f,
            z,
            method="Nelder-Mead",
            options={"maxfev": MAX_EVALS, "xatol": 0.02, "initial_simplex": simplex},
        )
        if float(res.fun) < best:
            z, best = np.asarray(res.x), float(res.fun)
    return x0 + z * scale, best


def _geometry(label: str, kind: str, p: np.ndarray) -> ObjectGeometry:
    """The fitted cylinder as an object (world frame, bottom on the table), its surface sampled as its
    points."""
    if kind == "standing":
        cx, cy, radius, height = p
        mesh = trimesh.creation.cylinder(radius=radius, height=height, sections=48)
        yaw, centre, symmetry = 0.0, np.array([cx, cy, height / 2]), "rotational"
    else:
        cx, cy, yaw, radius, length = p
        mesh = trimesh.creation.cylinder(radius=radius, height=length, sections=48)
        mesh.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))  # axis along x
        centre, symmetry = np.array([cx, cy, radius]), "box"
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    samples, _ = trimesh.sample.sample_surface(mesh, 500, seed=0)
    return ObjectGeometry(
        label=label,
        mesh=mesh,
        position=centre,
        quaternion=matrix_to_quat(R),
        extent=np.asarray(mesh.extents, dtype=np.float64),
        points_world=np.asarray(samples, dtype=np.float64) @ R.T + centre,
        symmetry=symmetry,
        shape_source="silhouette",
        pose_source="silhouette",
    )


def fit_silhouette(
    frame: Frame, table: TablePlane, mask: np.ndarray, label: str, others: np.ndarray | None = None
) -> tuple[ObjectGeometry, float] | None:
    """The cylinder, standing or lying on the table, whose silhouette from the photo's camera best matches
    ``mask`` (H, W) bool, and the share of the compared pixels where they disagree; None for a mask too
    small to fit or not on the table in view (its foot at or above the horizon). Pixels of ``others``
    (other objects' masks) are not compared: the object may continue behind them."""
    import cv2

    T = np.asarray(table.T_world_cam, dtype=float)
    rows, cols = np.nonzero(mask)
    if len(rows) < 50:
        return None
    margin = int(0.25 * max(np.ptp(rows), np.ptp(cols))) + 4  # room to grow past the mask, compared too
    px = pixels_around(frame, T, mask, max_pixels=MAX_PIXELS, margin_px=margin)
    if px is None:
        return None
    origin, dirs, _, own = px
    grid = pixel_grid(mask, MAX_PIXELS, margin)
    compared = np.ones(len(own), bool) if others is None or grid is None else ~others[grid].ravel()

    def mismatch(depth_fn: DepthFn, sizes: slice) -> Callable[[np.ndarray], float]:
        def cost(p: np.ndarray) -> float:  # the share of the compared pixels the shape gets wrong
            if np.any(p[sizes] <= 0.003):
                return 1.0
            hit = np.isfinite(depth_fn(p, origin, dirs))
            return float(np.count_nonzero((hit != own) & compared)) / max(int(compared.sum()), 1)

        return cost

    standing0 = _standing_start(frame, T, mask)
    if standing0 is None:
        return None
    standing, standing_cost = _search(
        mismatch(_standing_depth, slice(2, 4)), standing0, np.array([0.01, 0.01, 0.005, 0.01])
    )
    (_, _), (w_px, h_px), _ = cv2.minAreaRect(np.column_stack([cols, rows]).astype(np.float32))
    middle = _on_table(_ray(frame, T, float(np.mean(rows)), float(np.mean(cols))), T[:3, 3])
    radius0 = max(
        0.5 * min(w_px, h_px) * float(np.linalg.norm(middle - T[:3, 3])) / float(frame.K[0, 0]), 0.005
    )
    lying_mismatch = mismatch(lying_cylinder_depth, slice(3, 5))
    searched = [
        _search(lying_mismatch, p0, np.array([0.01, 0.01, 0.15, 0.005, 0.01]))
        for p0 in _lying_starts(frame, T, mask, radius0)
    ]
    lying, lying_cost = min(searched, key=lambda found: found[1], default=(standing, np.inf))
    if standing_cost <= lying_cost:
        return _geometry(label, "standing", standing), standing_cost
    return _geometry(label, "lying", lying), lying_cost
