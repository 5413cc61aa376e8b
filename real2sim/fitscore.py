"""How well a reconstructed scene explains the depth it came from, with no ground truth.

:func:`render_depth` casts one ray per pixel of the photo's camera into the posed object meshes (Open3D's
Embree ray caster on the CPU: no OpenGL context needed, and the same hits in every run) and returns the
depth (m, along the optical axis, as the sensor measures it) and which object each pixel sees.

:func:`fit_scores` compares that render with the measured depth and the segmentation, per object:

- ``depth_residual_m``: the median absolute difference between rendered and measured depth over the pixels
  that both the object's mask and its render cover (m);
- ``coverage``: the share of the mask's pixels the render covers; ``spill``: the share of the render outside
  the mask (``spill_px`` pixels, ``spill_unmeasured_px`` of them where the camera measured no depth: a stereo
  or projector shadow beside the object, or its own rim or lid the sensor dropped, depending on the sensor;
  the score counts them as spill either way); ``iou``: intersection over union of the rendered and observed
  silhouettes. Pixels outside the object's mask where the measured surface lies clearly in front of its render
  (``OCCLUSION_M``) are something hiding the object (a neighbour, or something not in the scene) and are left
  out of both its silhouettes: the photo cannot say whether the object continues behind it (a neighbour's
  render that falls short of its mask is that neighbour's error, counted in its coverage). Pixels measured
  within ``TABLE_BAND_M`` of the table (given the table) are left out too: depth cannot tell an object's foot
  from the table;
- ``table_nearby_residual_m`` (given the table): the median absolute difference between the fitted table
  plane and the measured depth on the table in a ring around the mask (:data:`NEARBY_PX`): how far the
  depth itself strays beside the object (noise grows with distance; the plane's own error adds); a depth
  residual not far above it is about as good as that depth allows;
- ``image_edge_px`` (only where it is not 0): the mask's pixels on the photo's outermost rows and columns.
  An object that runs off the photo is checked on its part inside it only; the rest of its shape is a
  guess the score cannot see, so from :data:`IMAGE_EDGE_MIN_PX` such pixels on it is ``check`` at best;
- ``verdict``: ``good`` (IoU ≥ 0.85 and residual ≤ 5 mm, the issue-16 targets), ``check`` (IoU ≥ 0.6 and
  residual ≤ 15 mm) or ``poor``; an object the depth camera did not measure (glass), fitted to its
  silhouette alone (:mod:`real2sim.no_depth`), is ``check`` at best, from its IoU.

And for the table: the median absolute residual of the fitted plane over table pixels no object covers.
What it does not show: the hidden side of an object (nothing measured there), and a mask that is wrong in
the same way as the shape fitted to it (the render then agrees with a wrong mask).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "GOOD",
    "IMAGE_EDGE_MIN_PX",
    "OCCLUSION_M",
    "fit_scores",
    "fit_warnings",
    "render_depth",
    "score_geometries",
    "verdict",
]

#: Thresholds of a ``good`` fit: silhouette IoU at least, median depth residual (m) at most.
GOOD = (0.85, 0.005)
#: Thresholds of ``check``: below them the fit is ``poor``.
CHECK = (0.6, 0.015)
#: A measured surface this far (m) in front of the render, outside every mask, is an unmodelled occluder.
OCCLUSION_M = 0.02
#: The ring of table pixels around a mask (px from it: from, to) whose plane residual is the depth noise
#: beside the object (``table_nearby_residual_m``).
NEARBY_PX = (5, 30)
#: Fewest table pixels in that ring for a value.
NEARBY_MIN_PX = 50
#: The ``note`` of an object fitted to its silhouette alone.
NO_DEPTH_NOTE = "no depth measured on it (glass?): fitted to its silhouette; the residual says nothing"
#: Mask pixels on the photo's border from which an object runs off the photo (``image_edge_px``).
IMAGE_EDGE_MIN_PX = 5
#: Pixels whose measured point lies less than this (m) above the table are left out of both silhouettes: the
#: segmentation cannot tell an object's bottom edge from the table there (its lowest candidate height).
TABLE_BAND_M = 0.008


def verdict(iou: float, residual_m: float | None) -> str:
    """``good``, ``check`` or ``poor`` from the silhouette IoU and the median depth residual (m)."""
    if residual_m is None:
        return "poor"
    if iou >= GOOD[0] and residual_m <= GOOD[1]:
        return "good"
    if iou >= CHECK[0] and residual_m <= CHECK[1]:
        return "check"
    return "poor"


def _pixel_rays(K: np.ndarray, height: int, width: int) -> np.ndarray:
    """(H, W, 3) camera-frame ray directions with z = 1 (so a hit's ray parameter is its depth)."""
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    y = (v - K[1, 2]) / K[1, 1]
    x = (u - K[0, 2] - K[0, 1] * y) / K[0, 0]
    return np.stack([x, y, np.ones_like(x)], axis=-1)


def render_depth(
    meshes: Sequence[tuple[np.ndarray, np.ndarray]],
    T_world_cam: np.ndarray,
    K: np.ndarray,
    height: int,
    width: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Depth (H, W) float64 m (0 where no mesh is hit), the index into ``meshes`` each pixel sees (-1: none)
    and the unit surface normal (H, W, 3, camera frame) there. ``meshes``: (world vertices (N, 3) m, faces
    (M, 3)) per object; ``T_world_cam``: camera-to-world (4x4)."""
    import open3d

    o3d: Any = open3d  # its stubs type Tensor's constructor without numpy arrays
    T_cam_world = np.linalg.inv(np.asarray(T_world_cam, dtype=np.float64))
    scene = o3d.t.geometry.RaycastingScene()
    ids = []
    for verts, faces in meshes:
        if len(faces) == 0:
            ids.append(-2)
            continue
        cam = np.asarray(verts, dtype=np.float64) @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]
        ids.append(
            scene.add_triangles(
                o3d.core.Tensor(cam.astype(np.float32)),
                o3d.core.Tensor(np.asarray(faces, dtype=np.uint32)),
            )
        )
    dirs = _pixel_rays(np.asarray(K, dtype=np.float64), height, width)
    rays = np.concatenate([np.zeros_like(dirs), dirs], axis=-1).astype(np.float32)
    hit = scene.cast_rays(o3d.core.Tensor(rays))
    t = hit["t_hit"].numpy().astype(np.float64)
    geom = hit["geometry_ids"].numpy().astype(np.int64)
    normals = hit["primitive_normals"].numpy().astype(np.float64)
    index = np.full((height, width), -1, dtype=np.int64)
    for i, gid in enumerate(ids):
        if gid >= 0:
            index[geom == gid] = i
    depth = np.where(np.isfinite(t) & (index >= 0), t, 0.0)
    return depth, index, normals


def _object_score(
    rendered: np.ndarray, observed: np.ndarray, depth_r: np.ndarray, depth_m: np.ndarray, depth_seen: bool
) -> dict[str, Any]:
    both = rendered & observed
    union = int((rendered | observed).sum())
    n_obs, n_ren, n_both = int(observed.sum()), int(rendered.sum()), int(both.sum())
    valid = both & (depth_m > 0)
    residual = float(np.median(np.abs(depth_r[valid] - depth_m[valid]))) if valid.any() else None
    iou = n_both / union if union else 0.0
    return {
        "iou": round(iou, 4),
        "coverage": round(n_both / n_obs, 4) if n_obs else 0.0,
        "spill": round(1.0 - n_both / n_ren, 4) if n_ren else 0.0,
        "spill_px": n_ren - n_both,
        "spill_unmeasured_px": int((rendered & ~observed & (depth_m <= 0)).sum()),
        "depth_residual_m": None if residual is None else round(residual, 5),
        "mask_px": n_obs,
        "render_px": n_ren,
        "verdict": verdict(iou, residual) if depth_seen else _silhouette_verdict(iou),
        **({} if depth_seen else {"note": NO_DEPTH_NOTE}),
    }


def _silhouette_verdict(iou: float) -> str:
    """The verdict of an object fitted to its silhouette alone: ``check`` at best (its depth says nothing)."""
    return "check" if iou >= CHECK[0] else "poor"


def fit_scores(
    names: Sequence[str],
    meshes: Sequence[tuple[np.ndarray, np.ndarray]],
    masks: Mapping[str, np.ndarray],
    depth_m: np.ndarray,
    T_world_cam: np.ndarray,
    K: np.ndarray,
    table: Any = None,
    silhouette_only: Collection[str] = (),
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Per object name: the scores of the module docstring, plus ``table`` (the plane's residual over
    table pixels no object covers) when ``table`` (a :class:`~real2sim.types.TablePlane`) is given.
    Objects named in ``silhouette_only`` were fitted to their silhouettes, their depth not measured (glass,
    :mod:`real2sim.no_depth`): their residual is reported but their verdict is ``check`` at best, from the
    IoU, with a ``note``. Also returns the renders (``depth``, ``index``, ``normals``) for the overlays."""
    h, w = depth_m.shape
    depth_r, index, normals = render_depth(meshes, T_world_cam, K, h, w)
    depth_m = np.asarray(depth_m, dtype=np.float64)
    any_mask = np.zeros((h, w), bool)
    for m in masks.values():
        any_mask |= m
    in_front = (depth_m > 0) & (depth_r > 0) & (depth_m < depth_r - OCCLUSION_M)  # something hides the render
    occluded = in_front & ~any_mask
    plane_residual = None
    if table is not None:  # the band just above the table: depth cannot tell an object from the table there
        rays = _pixel_rays(np.asarray(K, dtype=np.float64), h, w)
        height = (rays * depth_m[..., None]) @ np.asarray(table.normal_cam, dtype=np.float64) + float(
            table.offset_m
        )
        occluded |= (depth_m > 0) & (height < TABLE_BAND_M)
        plane_residual = _plane_residual(table, depth_m, rays, any_mask | (index >= 0))
    scores: dict[str, Any] = {"objects": {}}
    for i, name in enumerate(names):
        mask = masks.get(name)
        if mask is None:
            scores["objects"][name] = {
                "verdict": "poor",
                "iou": 0.0,
                "depth_residual_m": None,
                "note": "no mask",
            }
            continue
        seen = name not in silhouette_only
        hidden = occluded | (in_front & ~mask)  # a neighbour in front of it hides it too
        rendered = (index == i) & ~hidden
        score = scores["objects"][name] = _object_score(rendered, mask & ~hidden, depth_r, depth_m, seen)
        edge_px = _image_edge_px(mask)
        if edge_px:
            score["image_edge_px"] = edge_px
            if edge_px >= IMAGE_EDGE_MIN_PX and score["verdict"] == "good":
                score["verdict"] = "check"
        if plane_residual is not None:
            score["table_nearby_residual_m"] = _nearby(plane_residual, mask)
    if plane_residual is not None and np.isfinite(plane_residual).any():
        res = float(np.nanmedian(plane_residual))
        scores["table"] = {"depth_residual_m": round(res, 5), "px": int(np.isfinite(plane_residual).sum())}
    renders = {"depth": depth_r, "index": index, "normals": normals, "occluded": occluded}
    return scores, renders


def _image_edge_px(mask: np.ndarray) -> int:
    """How many of ``mask``'s pixels lie on the image's outermost rows and columns."""
    m = np.asarray(mask, bool)
    return int(m[0].sum() + m[-1].sum() + m[1:-1, 0].sum() + m[1:-1, -1].sum())


def _plane_residual(table: Any, depth_m: np.ndarray, rays: np.ndarray, covered: np.ndarray) -> np.ndarray:
    """Absolute difference (m; NaN elsewhere) between the fitted table plane's and the measured depth on the
    table's inlier pixels that no object's mask or render covers; ``rays``: the pixels' (H, W, 3) camera
    rays with z = 1."""
    on_table = np.asarray(table.inliers, bool) & ~covered & (depth_m > 0)
    denom = rays[on_table] @ np.asarray(table.normal_cam, dtype=np.float64)
    plane = -float(table.offset_m) / np.where(np.abs(denom) > 1e-9, denom, 1e-9)
    out = np.full(depth_m.shape, np.nan)
    out[on_table] = np.abs(plane - depth_m[on_table])
    return out


def _nearby(plane_residual: np.ndarray, mask: np.ndarray) -> float | None:
    """Median of ``plane_residual`` (m) over the table in a ring :data:`NEARBY_PX` pixels around ``mask``:
    the depth's noise and the plane's error beside the object; None where no table shows there."""
    import cv2

    inner, outer = NEARBY_PX
    m = mask.astype(np.uint8)
    ring = (cv2.dilate(m, np.ones((2 * outer + 1,) * 2, np.uint8)) > 0) & ~(
        cv2.dilate(m, np.ones((2 * inner + 1,) * 2, np.uint8)) > 0
    )
    values = plane_residual[ring]
    values = values[np.isfinite(values)]
    return round(float(np.median(values)), 5) if len(values) >= NEARBY_MIN_PX else None


def score_geometries(
    geometries: Mapping[str, Any],
    masks: Mapping[str, np.ndarray],
    depth_m: np.ndarray,
    T_world_cam: np.ndarray,
    K: np.ndarray,
    table: Any = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """:func:`fit_scores` of posed :class:`~real2sim.types.ObjectGeometry` objects (name → geometry; their
    meshes in the object frame) against the masks by object name."""

    meshes = [(g.world_vertices(), np.asarray(g.mesh.faces)) for g in geometries.values()]
    silhouette_only = [n for n, g in geometries.items() if g.shape_source == "silhouette"]
    return fit_scores(list(geometries), meshes, masks, depth_m, T_world_cam, K, table, silhouette_only)


def fit_warnings(scores: Mapping[str, Any]) -> list[str]:
    """One warning per object whose fit is ``poor``: what the planner passes on."""
    out = []
    for name, s in scores.get("objects", {}).items():
        if s.get("verdict") == "poor":
            res = s.get("depth_residual_m")
            res_txt = "no depth" if res is None else f"median depth residual {1000 * res:.1f} mm"
            if s.get("image_edge_px", 0) >= IMAGE_EDGE_MIN_PX:
                res_txt += "; it runs off the photo's edge"
            out.append(
                f"fit of '{name}' is poor (silhouette IoU {s.get('iou', 0.0):.2f}, {res_txt}): its shape or "
                "pose may be wrong; see overlay.png"
            )
    return out
