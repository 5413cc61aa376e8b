"""Refine an upright box's pose and size so that, seen from the photo's camera, it explains the depth.

A box fitted to its visible points alone (minimum-area rectangle and highest point) is thickened when two of
its faces are seen at a slant and shortened where the silhouette's depth is lost. :func:`refine_box` moves
its centre, yaw and three edge lengths (bottom kept on the table, z = 0) to minimise, over the pixels around
its mask, a robust cost computed by casting the pixels' rays at the box analytically (slab test).
:func:`refine_frustum` does the same for an upright solid of revolution (a can, or a cup narrower at its
foot) with its centre, bottom and top radii and height, the rays cast at the frustum. :func:`refine_hull`
does it for any other upright convex shape (a mirror-completed bottle, a can lying on its side): its centre
and the scales of its three local axes (about its bottom centre, so it stays on the table), the rays cast at
the hull (Open3D, :class:`ScaledMesh`); :func:`refine_vessel` for an open vessel (a cup, a bowl), its
measured profile scaled across and in height, the rays cast at its mesh. The cost:

- inside its own mask: the absolute difference between the box's and the measured depth, capped at
  :data:`CAP_M`; a mask pixel the box misses costs the cap (whether or not its depth was measured);
- outside its mask: a pixel where the box would be seen in front of a measured surface that lies farther
  than :data:`FREE_M` behind it costs the cap: the camera sees through where the box would be, so the hidden
  extent is bounded by the depth shadow (the table seen behind the object) and the box does not grow into a
  neighbour it would hide. Pixels where the measured surface is in front of the box (an occluder, say a
  neighbour standing before it) cost nothing: the box may continue behind it.

Scipy's Nelder-Mead minimises the cost from the fit, restarted once (deterministic: no random starts); the
refinement is kept only when it lowers the cost and no edge changes by more than :data:`MAX_CHANGE`.

:func:`mesh_cost` is the same cost for any posed mesh (its rays cast with Open3D), per pixel: what
perception compares shapes of different kinds by.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import trimesh
from scipy.optimize import minimize

from real2sim.masks import padded_box
from real2sim.types import ObjectGeometry
from simpact.core.rotations import quat_to_matrix

__all__ = [
    "CAP_M",
    "FREE_M",
    "ScaledMesh",
    "box_depth",
    "cast_at",
    "frustum_depth",
    "mesh_cost",
    "pixel_cost",
    "pixel_grid",
    "pixels_around",
    "refine_box",
    "refine_frustum",
    "refine_hull",
    "refine_vessel",
]

CAP_M = 0.02
"""Largest cost of one pixel (m)."""
FREE_M = 0.01
"""A measured surface this far (m) behind the box is free space the box must not fill."""
HIDDEN_M = 0.05 * CAP_M
"""Cost (m) of a pixel outside the mask where a refined hull would be hidden (:func:`refine_hull`)."""
TAPER_GAIN = 0.1
"""Share of a cylinder's cost a frustum must save to be kept (:func:`refine_frustum`)."""
HULL_GRID_M = 0.004
"""A convex hull is taken of the mesh's vertices snapped to this grid (m)."""
MAX_CHANGE = 0.35
"""Largest relative change of an edge the refinement may make."""
MARGIN_PX = 12
"""Pixels around the mask's bounding box that enter the cost."""
MAX_PIXELS = 2500
"""At most about this many pixels (evenly strided) enter the cost."""


def box_depth(params: np.ndarray, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
    """Depth (along the optical axis; the rays have camera z = 1) at which each ray enters the upright box
    ``params`` = (cx, cy, yaw, length, width, height) standing on z = 0; inf where it misses."""
    cx, cy, yaw, lx, ly, lz = params
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])  # world -> box
    o = R @ (origin - np.array([cx, cy, lz / 2]))
    d = dirs @ R.T
    half = np.abs(np.array([lx, ly, lz])) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / np.where(np.abs(d) < 1e-12, 1e-12, d)
        t1 = (-half - o) * inv
        t2 = (half - o) * inv
    t_near = np.max(np.minimum(t1, t2), axis=1)
    t_far = np.min(np.maximum(t1, t2), axis=1)
    hit = (t_far >= t_near) & (t_near > 0)
    return np.where(hit, t_near, np.inf)


def frustum_depth(params: np.ndarray, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
    """Depth at which each ray enters the upright frustum ``params`` = (cx, cy, bottom radius, top radius,
    height) standing on z = 0 (its side, or the disc at its end that faces ``origin``); inf where it misses.
    Equal radii: a cylinder."""
    cx, cy, r0, r1, hgt = params
    ox, oy, oz = origin[0] - cx, origin[1] - cy, origin[2]
    dx, dy, dz = dirs[:, 0], dirs[:, 1], dirs[:, 2]
    k = (r1 - r0) / hgt  # the radius's change per metre of height
    rad0 = r0 + k * oz  # the cone's radius at the origin's height
    # |o_xy + t d_xy|^2 = (rad0 + k t d_z)^2, a quadratic in t; r(z) > 0 on [0, hgt], so no mirrored cone.
    a = dx * dx + dy * dy - (k * k) * (dz * dz)
    half_b = ox * dx + oy * dy - (k * rad0) * dz
    c = ox * ox + oy * oy - rad0 * rad0
    disc = half_b * half_b - a * c
    root = np.sqrt(np.maximum(disc, 0.0))
    inv_a = 1.0 / np.where(np.abs(a) < 1e-12, 1e-12, a)
    t = np.full(len(dirs), np.inf)
    for side in ((-half_b - root) * inv_a, (-half_b + root) * inv_a):
        z = oz + side * dz
        t = np.where((disc >= 0) & (side > 0) & (z >= 0) & (z <= hgt) & (side < t), side, t)
    if oz > hgt or oz < 0:  # a convex solid is entered through a face the origin lies outside of
        height, radius = (hgt, r1) if oz > hgt else (0.0, r0)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_cap = (height - oz) / dz
        x, y = ox + t_cap * dx, oy + t_cap * dy
        t = np.where(
            np.isfinite(t_cap) & (t_cap > 0) & (x * x + y * y <= radius * radius) & (t_cap < t), t_cap, t
        )
    return t


def pixel_cost(t: np.ndarray, depth: np.ndarray, own: np.ndarray, hidden_m: float = 0.0) -> float:
    """The cost of the module docstring (m summed over the pixels) of a render ``t`` (N,, inf where the shape
    is missed) against the measured ``depth`` (N,, 0 invalid) and the object's ``own`` mask (N,). With
    ``hidden_m`` > 0, each pixel outside the mask where the shape would be hidden (behind a measured surface
    in front of it, or where nothing was measured) costs that much: of the shapes that explain the mask
    equally, the one that hides least behind its neighbours wins."""
    hit = np.isfinite(t)
    valid = depth > 0
    t0 = np.where(hit, t, 0.0)
    # A mask pixel the shape misses costs the cap, measured or not (depth drops out at silhouettes and rims).
    err = np.where(hit, np.where(valid, np.minimum(np.abs(t0 - depth), CAP_M), 0.0), CAP_M)
    # Seen through: the measured surface (table, background, a neighbour) lies behind the shape.
    behind = hit & valid & ~own & (depth > t0 + FREE_M)
    cost = float(err[own].sum()) + CAP_M * float(np.count_nonzero(behind))
    if hidden_m > 0:
        cost += hidden_m * float(np.count_nonzero(hit & ~own & ~behind))
    return cost


def mesh_cost(
    geometry: ObjectGeometry, frame: Any, T_world_cam: np.ndarray, own_mask: np.ndarray
) -> float | None:
    """:func:`pixel_cost` per pixel (m) of the posed mesh of ``geometry`` (world frame) over the pixels around
    ``own_mask``: how badly it explains the depth there; None for a tiny mask."""
    px = pixels_around(frame, T_world_cam, own_mask)
    if px is None:
        return None
    origin, dirs, depth, own = px
    return pixel_cost(cast_at(geometry, origin, dirs), depth, own) / len(depth)


def cast_at(geometry: ObjectGeometry, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
    """Depth (N,; inf where missed) at which each ray from ``origin`` (3,) along ``dirs`` (N, 3; camera
    z = 1) meets the posed mesh of ``geometry`` (world frame), cast with Open3D."""
    import open3d

    o3d: Any = open3d
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(
        o3d.core.Tensor(geometry.world_vertices().astype(np.float32)),
        o3d.core.Tensor(np.asarray(geometry.mesh.faces, dtype=np.uint32)),
    )
    rays = np.column_stack([np.broadcast_to(origin, dirs.shape), dirs]).astype(np.float32)
    t = scene.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy().astype(np.float64)
    return np.where(np.isfinite(t), t, np.inf)


def pixel_grid(
    own_mask: np.ndarray, max_pixels: int = MAX_PIXELS, margin_px: int = MARGIN_PX
) -> tuple[slice, slice] | None:
    """The rows and columns (strided slices) of the mask's bounding box and ``margin_px`` around it, at most
    about ``max_pixels`` pixels; None for a tiny mask."""
    box = padded_box(own_mask, margin_px)
    if box is None or np.count_nonzero(own_mask) < 20:
        return None
    rows, cols = box
    step = max(1, int(np.ceil(np.sqrt((rows.stop - rows.start) * (cols.stop - cols.start) / max_pixels))))
    return slice(rows.start, rows.stop, step), slice(cols.start, cols.stop, step)


def pixels_around(
    frame: Any,
    T_world_cam: np.ndarray,
    own_mask: np.ndarray,
    max_pixels: int = MAX_PIXELS,
    margin_px: int = MARGIN_PX,
) -> tuple[np.ndarray, ...] | None:
    """World rays (origin (3,), directions (N, 3) with camera z = 1), measured depth (N,) and own mask (N,)
    of the pixels of :func:`pixel_grid`; None for a tiny mask."""
    grid = pixel_grid(own_mask, max_pixels, margin_px)
    if grid is None:
        return None
    v, u = np.mgrid[grid].astype(np.float64)
    K = frame.K
    y = (v - K[1, 2]) / K[1, 1]
    x = (u - K[0, 2] - K[0, 1] * y) / K[0, 0]
    dirs = np.stack([x.ravel(), y.ravel(), np.ones(x.size)], axis=1) @ T_world_cam[:3, :3].T
    depth = frame.depth[grid].astype(np.float64).ravel()
    return T_world_cam[:3, 3], dirs, depth, own_mask[grid].ravel()


def _minimise(
    cost: Any, x0: np.ndarray, scale: np.ndarray, sizes: slice, max_evals: int
) -> tuple[np.ndarray, float, float] | None:
    """Nelder-Mead over ``x0 + z * scale``; sizes (``x0[sizes]``) stay positive and within
    :data:`MAX_CHANGE`. Returns (best parameters, cost before, cost after), or None if nothing improved."""

    def f(z: np.ndarray) -> float:
        p = x0 + z * scale
        if np.any(p[sizes] <= 0.003) or np.any(np.abs(p[sizes] - x0[sizes]) > MAX_CHANGE * x0[sizes]):
            return 1e9
        return float(cost(p))

    n = len(x0)
    before = f(np.zeros(n))
    z, best = np.zeros(n), before
    for _ in range(2):  # a restart from the first answer, with a fresh simplex of one ``scale`` per axis
        simplex = np.vstack([z, z + np.eye(n)])
        res = minimize(
            f,
            z,
            method="Nelder-Mead",
            options={"maxfev": max_evals // 2, "xatol": 0.05, "fatol": 1e-5, "initial_simplex": simplex},
        )
        if float(res.fun) < best:
            z, best = np.asarray(res.x), float(res.fun)
    if not best < before:
        return None
    return x0 + z * scale, before, best


def _yaw_if_upright(geometry: Any) -> float | None:

    R = quat_to_matrix(geometry.quaternion)
    return float(np.arctan2(R[1, 0], R[0, 0])) if abs(R[2, 2]) >= 0.999 else None


def refine_box(
    geometry: Any, frame: Any, T_world_cam: np.ndarray, own_mask: np.ndarray, max_evals: int = 260
) -> tuple[np.ndarray, float, np.ndarray, float, float] | None:
    """The refined (centre (3,), yaw (rad), extent (3,), cost before, cost after) of an upright box
    ``geometry`` (:class:`~real2sim.types.ObjectGeometry`, world frame), or None when it is not upright or
    the refinement does not help."""
    yaw = _yaw_if_upright(geometry)
    px = pixels_around(frame, T_world_cam, own_mask)
    if yaw is None or px is None:
        return None
    origin, dirs, depth, own = px
    ext = np.asarray(geometry.extent, dtype=float)
    x0 = np.array([geometry.position[0], geometry.position[1], yaw, ext[0], ext[1], ext[2]], dtype=float)
    scale = np.array([0.005, 0.005, 0.05, 0.005, 0.005, 0.005])
    found = _minimise(
        lambda p: pixel_cost(box_depth(p, origin, dirs), depth, own), x0, scale, slice(3, 6), max_evals
    )
    if found is None:
        return None
    p, before, after = found
    return np.array([p[0], p[1], p[5] / 2]), float(p[2]), np.abs(p[3:6]), before, after


def refine_frustum(
    geometry: Any, frame: Any, T_world_cam: np.ndarray, own_mask: np.ndarray, max_evals: int = 360
) -> tuple[np.ndarray, float, float, float, float, float] | None:
    """The refined (centre (3,), bottom radius, top radius, height (m), cost before, cost after) of an
    upright solid of revolution ``geometry``, or None. First as a cylinder (a can); then its two radii apart
    (a cup seen without its inside, narrower at its foot), kept only when that lowers the cylinder's cost by
    :data:`TAPER_GAIN` or more: a taper the depth barely asks for is noise at the silhouette."""
    px = pixels_around(frame, T_world_cam, own_mask)
    if _yaw_if_upright(geometry) is None or px is None:
        return None
    origin, dirs, depth, own = px
    ext = np.asarray(geometry.extent, dtype=float)
    x0 = np.array([geometry.position[0], geometry.position[1], (ext[0] + ext[1]) / 4, ext[2]], dtype=float)

    def cost(p: np.ndarray) -> float:
        return pixel_cost(frustum_depth(p, origin, dirs), depth, own)

    cylinder = _minimise(
        lambda p: cost(np.insert(p, 3, p[2])), x0, np.array([0.003, 0.003, 0.003, 0.005]), slice(2, 4), 200
    )
    x1 = x0 if cylinder is None else cylinder[0]
    start = np.insert(x1, 3, x1[2])  # (cx, cy, r, r, h)
    before, best = (cost(start),) * 2 if cylinder is None else cylinder[1:]
    tapered = _minimise(
        cost, start, np.array([0.003, 0.003, 0.003, 0.003, 0.005]), slice(2, 5), max_evals - 200
    )
    if tapered is not None and tapered[2] <= (1.0 - TAPER_GAIN) * best:
        start, best = tapered[0], tapered[2]
    if not best < before:
        return None
    return (
        np.array([start[0], start[1], start[4] / 2]),
        float(start[2]),
        float(start[3]),
        float(start[4]),
        before,
        best,
    )


class ScaledMesh:
    """The depth render of an upright mesh (``geometry``'s, or its convex hull) from the photo's camera along
    ``dirs`` (N, 3; camera z = 1) from ``origin`` (3,), with its bottom centre placed at (x, y) on the table
    and its axes scaled about that point. The rays are mapped into the unscaled mesh's frame (a ray keeps
    its parameter under the map), so one Open3D ray-casting scene serves every step of a search."""

    def __init__(self, geometry: Any, origin: np.ndarray, dirs: np.ndarray, convex: bool = False) -> None:
        import open3d

        self._o3d: Any = open3d
        mesh = geometry.mesh
        if convex:  # of its vertices snapped to a grid: a few dozen faces, not hundreds
            snapped = np.round(np.asarray(mesh.vertices) / HULL_GRID_M) * HULL_GRID_M
            mesh = trimesh.convex.convex_hull(np.unique(snapped, axis=0))
        self.R = quat_to_matrix(geometry.quaternion)
        self.bottom = np.array([0.0, 0.0, float(geometry.mesh.bounds[0, 2])])  # object frame
        self.base = np.asarray(geometry.position, dtype=float) + self.R @ self.bottom  # world, on the table
        self._scene = self._o3d.t.geometry.RaycastingScene()
        self._scene.add_triangles(
            self._o3d.core.Tensor((np.asarray(mesh.vertices) - self.bottom).astype(np.float32)),
            self._o3d.core.Tensor(np.asarray(mesh.faces, dtype=np.uint32)),
        )
        self._origin = np.asarray(origin, dtype=float)
        self._dirs = np.asarray(dirs, dtype=float) @ self.R  # rows: R.T @ d

    def depth(self, x: float, y: float, scale: np.ndarray) -> np.ndarray:
        """Depth (N,; inf where missed) of the mesh, bottom centre at world (``x``, ``y``), scaled by
        ``scale`` (3,) along its axes."""
        o = self.R.T @ (self._origin - np.array([x, y, self.base[2]])) / scale
        rays = np.column_stack([np.broadcast_to(o, self._dirs.shape), self._dirs / scale])
        t = self._scene.cast_rays(self._o3d.core.Tensor(rays.astype(np.float32)))["t_hit"].numpy()
        return np.where(np.isfinite(t), t.astype(np.float64), np.inf)

    def position(self, x: float, y: float, scale: np.ndarray) -> np.ndarray:
        """World position (m) of the scaled mesh's bounding-box centre (its object frame's origin)."""
        return np.array([x, y, self.base[2]]) - self.R @ (self.bottom * scale)


def refine_vessel(
    geometry: Any, frame: Any, T_world_cam: np.ndarray, own_mask: np.ndarray, max_evals: int = 200
) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """The refined (position (3,), per-axis scale of the mesh about its bottom centre (3,), cost before, cost
    after) of an upright open vessel ``geometry`` (a cup, a bowl: its measured profile kept, scaled across
    and in height) moved on the table, the rays cast at its mesh, so that its inside seen through the
    opening counts; or None."""
    px = pixels_around(frame, T_world_cam, own_mask)
    if _yaw_if_upright(geometry) is None or px is None:
        return None
    origin, dirs, depth, own = px
    mesh = ScaledMesh(geometry, origin, dirs)

    def scale(p: np.ndarray) -> np.ndarray:  # p: the bottom centre (world x, y), the scales across, in height
        return np.array([p[2], p[2], p[3]])

    x0 = np.array([mesh.base[0], mesh.base[1], 1.0, 1.0])
    found = _minimise(
        lambda p: pixel_cost(mesh.depth(p[0], p[1], scale(p)), depth, own),
        x0,
        np.array([0.003, 0.003, 0.05, 0.05]),
        slice(2, 4),
        max_evals,
    )
    if found is None:
        return None
    p, before, after = found
    return mesh.position(p[0], p[1], scale(p)), scale(p), before, after


def refine_hull(
    geometry: Any,
    frame: Any,
    T_world_cam: np.ndarray,
    own_mask: np.ndarray,
    *,
    hidden_m: float = HIDDEN_M,
    max_evals: int = 240,
) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """The refined (position (3,), per-axis scale of the mesh about its bottom centre (3,), cost before, cost
    after) of an upright convex shape ``geometry`` (its mesh is taken as its convex hull, in the object
    frame), or None when it is not upright or the refinement does not help; the yaw is kept. Pixels where
    the hull would hide behind something outside its mask cost ``hidden_m`` each (see :func:`pixel_cost`)."""
    px = pixels_around(frame, T_world_cam, own_mask)
    if _yaw_if_upright(geometry) is None or px is None:
        return None
    origin, dirs, depth, own = px
    hull = ScaledMesh(geometry, origin, dirs, convex=True)
    size = np.asarray(geometry.mesh.extents, dtype=float)

    def cost(p: np.ndarray) -> float:  # p: the bottom centre on the table (world x, y), the three sizes (m)
        s = p[2:5] / size
        if np.any(np.abs(s - 1.0) > MAX_CHANGE):  # both stages together stay within MAX_CHANGE
            return 1e9
        return pixel_cost(hull.depth(p[0], p[1], s), depth, own, hidden_m)

    x0 = np.concatenate([hull.base[:2], size])
    scale = np.array([0.003, 0.003, 0.004, 0.004, 0.004])
    # The sizes first with the centre kept (the centre moving alone can slide a shape behind a neighbour),
    # then all together from there.
    sized = _minimise(
        lambda q: cost(np.concatenate([x0[:2], q])), x0[2:], scale[2:], slice(0, 3), max_evals // 2
    )
    x1 = x0 if sized is None else np.concatenate([x0[:2], sized[0]])
    found = _minimise(cost, x1, scale, slice(2, 5), max_evals // 2)
    if found is None:
        if sized is None:
            return None
        found = (x1, sized[1], sized[2])
    p, _, after = found
    before = float(cost(x0))
    if not after < before:
        return None
    s = p[2:5] / size
    return hull.position(p[0], p[1], s), s, before, after
