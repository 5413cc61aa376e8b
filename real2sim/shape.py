"""Shape completion back-ends, chosen by name: ``geometric`` (default) and ``hunyuan3d``.

Both take an object's observed surface points in the world frame (z up, table top at z = 0) and return a
closed, watertight :class:`Shape` whose mesh is in the object frame, centred on its bounding-box centre.

``geometric`` completes the hidden side from the table plane and a symmetry assumption:

- ``box`` (boxes, cartons, blocks, books): an oriented box whose bottom is on the table; its footprint is the
  minimum-area rectangle of the points seen from above, its height the highest point;
- ``revolution`` (cans, cups, mugs, bowls, jars): a surface of revolution about the vertical axis; the axis is
  a circle fit to the outline of the points seen from above (for solids, to the side wall's arc itself when
  that is larger: an occluder hides part of the arc), the profile the outermost radius per height; open
  containers (bowls, mugs, cups) get a wall and a floor and are marked ``concave``; a solid whose surface
  normals sweep through oblique tilts and that a horizontal cylinder fits is a cylinder lying on its side
  (``upright``: the standing solid, whatever the normals say);
- ``mirror`` (anything else: bottles, tools, fruit): the convex hull of the points, their reflection through
  the vertical plane of the visible silhouette (perpendicular to the viewing direction), or through the
  plane of a narrower top (a bottle's neck) when that lies farther, and their footprint on the table: the
  lowest of them (:data:`FOOT_BAND_M`) dropped onto it (a standing object's foot; for one lying on its side,
  or with a rounded bottom, the lowest line seen, not its widest, which it curves in under).

The kind comes from words in the label when it has one of them, otherwise from whichever of the box and
the circle fits the outline better.

``hunyuan3d`` generates a mesh from the object's image crop (Hunyuan3D 2.x, local weights) and scales and
centres it as the SIMPACT paper does: ``M = α (M̂ − β)``, ``α`` the ratio of bounding-box diagonals (observed
over generated), ``β`` the generated mesh's centroid. Its pose is left to the pose back-end.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import trimesh
from PIL import Image

from real2sim.masks import padded_box
from real2sim.outline import fit_circle_arc, fit_circle_outline, fit_rectangle, outline_kind
from real2sim.types import label_words
from real2sim.weights import load_local
from simpact.core.errors import SimpactError

__all__ = [
    "BOX_WORDS",
    "CONCAVE_WORDS",
    "REVOLUTION_WORDS",
    "SHAPE_BACKENDS",
    "Shape",
    "ShapeBackendError",
    "ShapeError",
    "complete_shape",
    "frustum",
    "hunyuan3d_package",
    "hunyuan3d_path",
    "kind_from_label",
    "scale_and_centre",
    "shape_backend",
]

BOX_WORDS = frozenset(
    "box carton block cube brick book crate wall case package pack cereal cracker cheezit board tray "
    "brush square slab plank dustpan area sponge domino sugar jello spam meat".split()
)
REVOLUTION_WORDS = frozenset("can cylinder jar cup mug glass tin bowl pot puck soup coffee pitcher".split())
#: Open containers: revolution shapes with a cavity (convex decomposition for contact).
CONCAVE_WORDS = frozenset("bowl cup mug pot pitcher basket".split())


FOOT_BAND_M = 0.01
"""A mirror-completed hull's footprint is its points within this height (m) of its lowest seen ones, dropped
onto the table (``mirror`` above)."""


class ShapeError(SimpactError, ValueError):
    """Shape completion cannot run (bad points, missing model or package); the message says which."""


class ShapeBackendError(ShapeError):
    """The chosen shape back-end cannot run at all (its package, weights or inputs are missing): an error for
    the whole frame, not one object left out."""


@dataclasses.dataclass(eq=False)
class Shape:
    """A completed object shape, optionally with the pose its fit implies."""

    mesh: trimesh.Trimesh
    """Watertight mesh in the object frame (m), centred on its bounding-box centre, z up."""
    T_world_obj: np.ndarray | None
    """(4, 4) object-to-world pose from the fit, or ``None`` when the pose back-end must find it."""
    symmetry: str
    """``box``, ``rotational``, ``mirror`` or ``none``."""
    concave: bool
    kind: str
    """``box``, ``revolution``, ``mirror`` or ``generated``."""
    source: str


# --- helpers -----------------------------------------------------------------------------------------------


def _pose(yaw: float, centre: Sequence[float]) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    T = np.eye(4)
    T[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    T[:3, 3] = centre
    return T


def _clean(points: np.ndarray, voxel_m: float) -> np.ndarray:
    """Voxel-downsample and drop statistical outliers (open3d)."""
    import open3d as o3d

    pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, dtype=np.float64)))
    pcd = pcd.voxel_down_sample(voxel_m)
    if len(pcd.points) > 30:
        pcd, _ = pcd.remove_statistical_outlier(nb_neighbors=16, std_ratio=2.0)
    return np.asarray(pcd.points)


# --- geometric back-end ------------------------------------------------------------------------------------


def _box(points: np.ndarray, pad_m: float) -> Shape:
    yaw, centre, size, _ = fit_rectangle(points[:, :2])
    size = size + 2 * pad_m
    top = max(float(np.percentile(points[:, 2], 99.5)), 0.001)
    mesh = trimesh.creation.box(extents=[size[0], size[1], top])
    return Shape(mesh, _pose(yaw, [centre[0], centre[1], top / 2]), "box", False, "box", "geometric")


def _revolution(
    points: np.ndarray, concave: bool | None, pad_m: float, bins: int = 10, may_lie: bool = True
) -> Shape:
    """A solid (or, ``concave``, an open vessel) of revolution standing on the table, or, when ``may_lie``
    and the points' surface normals say so, a cylinder lying on its side."""
    centre, radius, _ = fit_circle_outline(points[:, :2])
    spread = float(np.max(np.ptp(points[:, :2], axis=0)))
    if radius > spread:  # a nearly straight sliver: an arc of under 60 degrees says little about the radius
        radius = spread / 2
        centre = points[:, :2].mean(axis=0)
    radius += pad_m
    top = float(np.percentile(points[:, 2], 99.5))
    z = points[:, 2]
    arc = None
    side = points[(z > 0.1 * top) & (z < 0.9 * top)]
    if concave is not True and len(side) >= 30:
        # A solid's side wall is an arc of the circle: where an occluder hides part of it, the outline
        # circle (through the visible chord) comes out too small, the arc's curvature does not.
        c_arc, r_arc, span = fit_circle_arc(side[:, :2], centre, radius - pad_m)
        if span >= np.deg2rad(60.0) and radius - pad_m < r_arc <= spread:
            arc = (c_arc, r_arc)
        # It may also lie on its side (a can knocked over): a standing cylinder shows a vertical wall and a
        # flat top, a lying one a surface whose normals sweep through every tilt. Decided before the test
        # for an open top, which a lying can's curved top fools.
        if may_lie and _oblique_share(points) > 0.3:
            c_s, r_s = arc or (centre, radius)
            standing = _cylinder_distance(np.linalg.norm(points[:, :2] - c_s, axis=1), z, r_s, 0.0, top)
            lying, lying_res = _lying_cylinder(points, pad_m)
            if lying_res < 1.5 * float(np.median(standing)):
                return lying
    r = np.linalg.norm(points[:, :2] - centre, axis=1)
    inner = r < 0.5 * radius
    if inner.sum() > 10:  # seen from above: an open top shows points near the axis well below the rim
        concave = bool(np.median(z[inner]) < 0.6 * top)
    elif concave is None:
        concave = False
    if not concave and arc is not None:
        centre, radius = arc
        r = np.linalg.norm(points[:, :2] - centre, axis=1)
    edges = np.linspace(0.0, top, bins + 1)
    prof = np.full(bins + 1, np.nan)
    for i in range(bins):
        sel = (z >= edges[i]) & (z <= edges[i + 1]) & (r > 0.5 * radius)
        if sel.sum() >= 3:
            prof[i + 1 if i == bins - 1 else i] = np.percentile(r[sel], 95)
    known = np.isfinite(prof)
    if known.sum() == 0:
        prof[:] = radius
    else:
        prof = np.interp(np.arange(bins + 1), np.flatnonzero(known), prof[known])
    prof = np.clip(prof, 0.3 * radius, radius)
    if not concave:  # solids (cans, jars): a straight wall at the fitted radius is the better guess
        prof[:] = radius
    outer = [(float(prof[i]), float(edges[i])) for i in range(bins + 1)]
    path = [(0.0, 0.0), *outer]
    if concave:
        wall = max(0.003, 0.06 * radius)
        near_axis = z[r < 0.4 * radius]
        floor = float(np.clip(np.percentile(near_axis, 5) if len(near_axis) > 5 else wall, wall, 0.5 * top))
        inner_pts = [
            (max(float(p) - wall, 0.2 * float(p)), float(e)) for p, e in zip(prof, edges) if e >= floor
        ]
        path += inner_pts[::-1] + [(inner_pts[0][0] if inner_pts else 0.0, floor), (0.0, floor)]
    else:
        path += [(0.0, top)]
    mesh = trimesh.creation.revolve(np.asarray(path), sections=48)
    if mesh.volume < 0:
        mesh.invert()
    mesh.apply_translation(-mesh.bounds.mean(axis=0))
    T = _pose(0.0, [centre[0], centre[1], top / 2])
    return Shape(mesh, T, "rotational", concave, "revolution", "geometric")


def frustum(r_bottom: float, r_top: float, height: float, sections: int = 48) -> trimesh.Trimesh:
    """A closed upright frustum (m; a cylinder for equal radii), centred on its bounding-box centre, z up."""
    path = np.array([(0.0, 0.0), (r_bottom, 0.0), (r_top, height), (0.0, height)])
    mesh = trimesh.creation.revolve(path, sections=sections)
    if mesh.volume < 0:
        mesh.invert()
    mesh.apply_translation(-mesh.bounds.mean(axis=0))
    return mesh


def _cylinder_distance(
    radial: np.ndarray, axial: np.ndarray, radius: float, lo: float, hi: float
) -> np.ndarray:
    """Distance (m) of points to the surface of a closed cylinder, from their distance to its axis and their
    coordinate along it (the cylinder spans ``lo`` to ``hi``)."""
    dr = radial - radius
    da = np.abs(axial - (lo + hi) / 2) - (hi - lo) / 2
    inside = (dr <= 0) & (da <= 0)
    return np.where(inside, np.minimum(-dr, -da), np.hypot(np.maximum(dr, 0), np.maximum(da, 0)))


def _oblique_share(points: np.ndarray, radius_m: float = 0.01) -> float:
    """Share of the points whose surface normal (open3d, from neighbours within ``radius_m``) is neither
    about horizontal nor about vertical (tilted 17-72 degrees from the vertical)."""
    import open3d as o3d

    pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    pcd.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=radius_m, max_nn=30))
    nz = np.abs(np.asarray(pcd.normals)[:, 2])
    return float(np.mean((nz > 0.3) & (nz < 0.95)))


def _best_offset(
    offsets: np.ndarray, t: np.ndarray, a: np.ndarray, z: np.ndarray, radius: float, lo: float, hi: float
) -> tuple[float, float]:
    """Of a lying cylinder's axis offsets across the view (m), the lowest median distance of the points
    (``t`` across, ``a`` along the axis, ``z`` up; m) to it, and that offset."""
    radial = np.hypot(t - offsets[:, None], z - radius)
    dist = np.median(_cylinder_distance(radial, a, radius, lo, hi), axis=1)
    k = int(np.argmin(dist))
    return float(dist[k]), float(offsets[k])


def _lying_cylinder(points: np.ndarray, pad_m: float) -> tuple[Shape, float]:
    """A cylinder lying on the table (horizontal axis): its diameter the height of its top, its axis along
    one side of the top view's rectangle or within 15 degrees of one (whichever fits best), its axis line the
    best fit of the cross-section circle to the points. Returns the shape and the median distance of the
    points to it."""
    top = max(float(np.percentile(points[:, 2], 99.5)), 0.002)
    radius = top / 2
    yaw0, _, _, _ = fit_rectangle(points[:, :2])
    best: tuple[float, float, float, float, float] | None = None  # residual, yaw, t0, lo, hi
    # The top view's rectangle of a partial view can be turned a few degrees from the axis (one side seen):
    # axes within 15 degrees of either side are tried.
    turns = np.deg2rad(np.arange(-15.0, 15.1, 2.5))
    sample = points[:: max(1, len(points) // 1000)]  # the search on at most about 1000 points
    for yaw in np.concatenate([yaw0 + turns, yaw0 + np.pi / 2 + turns]):
        u = np.array([np.cos(yaw), np.sin(yaw)])
        a, t = sample[:, :2] @ u, sample[:, :2] @ [-u[1], u[0]]
        lo, hi = float(np.percentile(a, 0.5)) - pad_m, float(np.percentile(a, 99.5)) + pad_m
        # The axis every 4 mm across the view, then every 1 mm around the best.
        across = (t, a, sample[:, 2], radius, lo, hi)
        _, coarse = _best_offset(np.arange(t.min() - radius, t.max() + radius, 0.004), *across)
        res, t0 = _best_offset(np.arange(coarse - 0.004, coarse + 0.0041, 0.001), *across)
        if best is None or res < best[0]:
            best = (res, float(yaw), t0, lo, hi)
    assert best is not None
    _, yaw, t0, lo, hi = best
    u, v = np.array([np.cos(yaw), np.sin(yaw)]), np.array([-np.sin(yaw), np.cos(yaw)])
    radial = np.hypot(points[:, :2] @ v - t0, points[:, 2] - radius)
    res = float(np.median(_cylinder_distance(radial, points[:, :2] @ u, radius, lo, hi)))
    centre = u * (lo + hi) / 2 + v * t0
    mesh = trimesh.creation.cylinder(radius=radius, height=hi - lo, sections=48)
    mesh.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))  # axis along x
    T = _pose(yaw, [centre[0], centre[1], radius])
    return Shape(mesh, T, "box", False, "revolution", "geometric"), res


def _mirror(points: np.ndarray, view_dir_xy: np.ndarray | None) -> Shape:
    xy = points[:, :2]
    if view_dir_xy is None or np.linalg.norm(view_dir_xy) < 1e-6:
        view_dir_xy = xy.mean(axis=0) / max(float(np.linalg.norm(xy.mean(axis=0))), 1e-6)
    v = np.asarray(view_dir_xy, dtype=np.float64) / np.linalg.norm(view_dir_xy)
    lateral = np.array([-v[1], v[0]])
    s, t = xy @ v, xy @ lateral
    lo, hi = np.percentile(t, 5), np.percentile(t, 95)
    silhouette = (t <= lo) | (t >= hi)
    s_c = float(np.median(s[silhouette]))
    s_c = max(s_c, float(np.percentile(s, 50)))
    neck = points[:, 2] >= 0.9 * float(np.percentile(points[:, 2], 99.5))
    if neck.sum() >= 10 and np.ptp(t[neck]) < 0.8 * (hi - lo):
        # A top narrower than the body (a bottle's neck and cap) stands on the symmetry plane: seen from the
        # bottle's narrow side, the silhouette's depth is only that of its rounded front.
        s_c = max(s_c, float(np.mean(np.percentile(s[neck], [5, 95]))))
    mirrored = points.copy()
    mirrored[:, :2] += np.outer(2 * (s_c - s), v)
    both = np.vstack([points, mirrored])
    # The footprint: the lowest points (a standing object's foot, a lying one's lowest seen line) dropped
    # onto the table, not every point: a lying cup or a rounded bottom curves in under its widest line.
    low = both[:, 2] <= float(np.percentile(points[:, 2], 1)) + FOOT_BAND_M
    floor = both[low].copy()
    floor[:, 2] = 0.0
    hull = trimesh.convex.convex_hull(np.vstack([points, mirrored, floor]))
    yaw, centre, size, _ = fit_rectangle(np.asarray(hull.vertices)[:, :2])
    T = _pose(yaw, [centre[0], centre[1], 0.0])
    local = hull.copy()
    local.apply_transform(np.linalg.inv(T))
    shift = local.bounds.mean(axis=0)
    local.apply_translation(-shift)
    T[:3, 3] += T[:3, :3] @ shift
    return Shape(local, T, "mirror", False, "mirror", "geometric")


def kind_from_label(label: str) -> tuple[str | None, bool | None]:
    """Shape kind (``box``, ``revolution``, ``mirror`` or None) and concavity (None: unknown) the label's
    words suggest."""
    words = set(label_words(label))
    if words & CONCAVE_WORDS:
        return "revolution", True
    if words & BOX_WORDS:  # before the round words: a "potted meat can" is a box
        return "box", None
    if words & REVOLUTION_WORDS:
        return "revolution", False
    if words & {"bottle", "drill", "banana", "scissors", "tool", "fruit", "toy"}:
        return "mirror", None
    return None, None


def _geometric(
    points_world: np.ndarray,
    label: str = "",
    *,
    kind: str | None = None,
    view_dir_xy: np.ndarray | None = None,
    voxel_m: float = 0.003,
    pad_m: float = 0.0,
    **_unused: Any,
) -> Shape:
    pts = _clean(points_world, voxel_m)
    pts = pts[pts[:, 2] > -0.003]
    if len(pts) < 10:
        raise ShapeError(
            f"object {label!r}: only {len(pts)} points above the table, too few to complete a shape"
        )
    hint, concave = kind_from_label(label)
    kind = kind or hint
    if kind is None:
        kind = "revolution" if outline_kind(pts) == "round" else "box"
    if kind == "box":
        return _box(pts, pad_m)
    if kind in ("revolution", "upright"):  # upright: standing, whatever the surface normals say
        return _revolution(pts, concave, pad_m, may_lie=kind == "revolution")
    if kind == "mirror":
        return _mirror(pts, view_dir_xy)
    raise ShapeError(
        f"object {label!r}: unknown shape kind {kind!r}; expected box, revolution, upright or mirror"
    )


# --- Hunyuan3D ---------------------------------------------------------------------------------------------

#: Environment variable naming the local Hunyuan3D model folder.
HUNYUAN3D_ENV = "SIMPACT_HUNYUAN3D_PATH"
_HY3D_CACHE: dict[tuple[str, str], Any] = {}


def scale_and_centre(mesh: trimesh.Trimesh, real_extent: Sequence[float]) -> trimesh.Trimesh:
    """``M = α (M̂ − β)``: ``β`` the mesh centroid, ``α`` the ratio of the bounding-box diagonals, real (m)
    over the mesh's; returns a new mesh."""
    diag_mesh = float(np.linalg.norm(mesh.extents))
    if diag_mesh <= 0:
        raise ShapeError("cannot scale a mesh with an empty bounding box")
    alpha = float(np.linalg.norm(np.asarray(real_extent, dtype=np.float64))) / diag_mesh
    out = mesh.copy()
    out.apply_translation(-np.asarray(mesh.centroid))
    out.apply_scale(alpha)
    return out


def hunyuan3d_path(model_path: str | None = None) -> str:
    """The local Hunyuan3D weights folder (``model_path``, else ``$SIMPACT_HUNYUAN3D_PATH``); a
    :class:`ShapeBackendError` naming the setting when it is unset or not a folder."""
    path = model_path or os.environ.get(HUNYUAN3D_ENV)
    if not path:
        raise ShapeBackendError(
            f"shape back-end 'hunyuan3d' needs its weights: set ${HUNYUAN3D_ENV} to a local folder"
        )
    if not os.path.isdir(path):
        raise ShapeBackendError(f"shape back-end 'hunyuan3d': {path!r} (${HUNYUAN3D_ENV}) is not a folder")
    return path


def hunyuan3d_package() -> str:
    """The installed Hunyuan3D package (``hy3dshape``, 2.1, or ``hy3dgen``, 2.0), found without importing it;
    a :class:`ShapeBackendError` naming both when neither is installed."""
    for name in ("hy3dshape", "hy3dgen"):
        if importlib.util.find_spec(name) is not None:
            return name
    raise ShapeBackendError(
        "shape back-end 'hunyuan3d' needs the package hy3dshape (Hunyuan3D 2.1) or hy3dgen (2.0)"
    )


def _hunyuan3d(
    points_world: np.ndarray,
    label: str = "",
    *,
    rgb: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    model_path: str | None = None,
    device: str | None = None,
    **_unused: Any,
) -> Shape:
    path = hunyuan3d_path(model_path)
    if rgb is None or mask is None:
        raise ShapeBackendError("shape back-end 'hunyuan3d' needs the image and the object's mask")
    package = hunyuan3d_package()
    try:
        import torch

        if package == "hy3dshape":  # Hunyuan3D 2.1
            from hy3dshape.pipelines import Hunyuan3DDiTFlowMatchingPipeline
        else:  # Hunyuan3D 2.0
            from hy3dgen.shapegen import Hunyuan3DDiTFlowMatchingPipeline
    except ImportError as err:
        raise ShapeBackendError(
            f"shape back-end 'hunyuan3d': {package} is installed but fails to import: {err}"
        ) from None

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    key = (path, dev)
    if key not in _HY3D_CACHE:
        _HY3D_CACHE[key] = load_local(
            lambda: Hunyuan3DDiTFlowMatchingPipeline.from_pretrained(path, device=dev),
            "shape back-end 'hunyuan3d'",
            f"${HUNYUAN3D_ENV} ({path})",
            ShapeBackendError,
        )
    pipeline = _HY3D_CACHE[key]
    box = padded_box(np.asarray(mask, bool), 10)
    if box is None:
        raise ShapeError("shape back-end 'hunyuan3d': the object's mask is empty")
    rgba = np.dstack([rgb, np.where(mask, 255, 0).astype(np.uint8)])[box]
    result = pipeline(image=Image.fromarray(rgba, "RGBA"))
    generated = result[0] if isinstance(result, (list, tuple)) else result
    if not isinstance(generated, trimesh.Trimesh):
        generated = trimesh.Trimesh(np.asarray(generated.vertices), np.asarray(generated.faces))
    generated.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0]))  # y-up -> z-up
    pts = _clean(points_world, 0.003)
    real = pts.max(axis=0) - pts.min(axis=0)
    real[2] = pts[:, 2].max()  # the object stands on the table: its height reaches down to z = 0
    mesh = scale_and_centre(generated, real)
    if not mesh.is_watertight:
        mesh = mesh.convex_hull
    mesh.apply_translation(-mesh.bounds.mean(axis=0))
    _, concave = kind_from_label(label)
    return Shape(mesh, None, "none", bool(concave), "generated", "hunyuan3d")


SHAPE_BACKENDS: dict[str, Callable[..., Shape]] = {"geometric": _geometric, "hunyuan3d": _hunyuan3d}


def shape_backend(name: str) -> Callable[..., Shape]:
    """The shape back-end called ``name``; a :class:`ShapeError` naming the known ones if there is none."""
    if name not in SHAPE_BACKENDS:
        raise ShapeError(f"unknown shape back-end {name!r}; expected one of {sorted(SHAPE_BACKENDS)}")
    return SHAPE_BACKENDS[name]


def complete_shape(
    points_world: np.ndarray, label: str = "", backend: str = "geometric", **options: Any
) -> Shape:
    """Complete the shape of an object from its observed points (N, 3) in the world frame (m, table top at
    z = 0) with the back-end ``backend``; ``options`` go to the back-end (``geometric``: ``kind``,
    ``view_dir_xy``, ``voxel_m``, ``pad_m`` (m added to each side of the outline: the silhouette pixels lost
    to mask erosion); ``hunyuan3d``: ``rgb``, ``mask``, ``model_path``, ``device``)."""
    complete = shape_backend(backend)
    pts = np.asarray(points_world, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3 or not np.isfinite(pts).all():
        raise ShapeError(f"object {label!r}: points must be a finite (N, 3) array, got shape {pts.shape}")
    return complete(pts, label, **options)
