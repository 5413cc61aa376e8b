"""Cues that split touching objects in clutter, and the table's extent that what is kept must stand on.

- :func:`concave_creases`: pixels on a concave crease of the depth surface. Where two objects touch, their
  surfaces meet in an inside corner (the normals turn towards each other); a box's own edges are convex (the
  normals turn away), so a box is not cut at them. This is the convexity criterion of locally convex
  connected patches (Stein et al., CVPR 2014) on the image grid: for points ``a``, ``b`` ``step_px`` apart
  with outward normals ``n_a``, ``n_b``, the crease between them is concave when
  ``(n_b - n_a) · (b - a) / |b - a| < -concavity``.
- :func:`colour_edges`: strong colour boundaries (Lab) where the surface also bends, and not convexly: two
  objects of different colours touching, not the print on one box nor its own edges.
- :func:`regrow`: pixels cut by a crease go back to the region next to them, so masks keep their full
  silhouette.
- :func:`merge_appendages`: a small region beside a larger one of the same colour, close to it in 3D and no
  taller, is a part of it (a mug's handle, cut off at the crease where it joins the body).
- :func:`table_extent_share`: the share of a region's top-view points over the fitted table's extent (the
  convex hull of its inlier points), so a chair seat behind the table is not taken for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import ConvexHull, QhullError, cKDTree

#: Lab chroma below which a pixel counts as grey (white, black, grey objects).
GREY_CHROMA = 8.0

__all__ = [
    "colour_edges",
    "concave_creases",
    "merge_appendages",
    "regrow",
    "surface_normals",
    "table_extent_share",
]


def surface_normals(pts: np.ndarray, valid: np.ndarray, step_px: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Unit normals (H, W, 3) of an organised camera-frame point image (m), pointing towards the camera,
    from central differences ``step_px`` apart, and where they are defined (both neighbours valid)."""
    k = step_px
    dx = np.zeros_like(pts)
    dy = np.zeros_like(pts)
    dx[:, k:-k] = pts[:, 2 * k :] - pts[:, : -2 * k]
    dy[k:-k] = pts[2 * k :] - pts[: -2 * k]
    ok = np.zeros_like(valid)
    ok[k:-k, k:-k] = (
        valid[k:-k, k:-k]
        & valid[k:-k, 2 * k :]
        & valid[k:-k, : -2 * k]
        & valid[2 * k :, k:-k]
        & valid[: -2 * k, k:-k]
    )
    # -(dx × dy), written out: x right, y down, so dx × dy points away from the camera. The same numbers as
    # ``-np.cross`` and ``np.linalg.norm``, at a third of their time on a whole frame.
    (ax, ay, az), (bx, by, bz) = np.moveaxis(dx, -1, 0), np.moveaxis(dy, -1, 0)
    n = np.stack([az * by - ay * bz, ax * bz - az * bx, ay * bx - ax * by], axis=-1)
    length = _length(n)
    ok &= length > 1e-12
    n /= np.where(length > 1e-12, length, 1.0)[..., None]
    return n, ok


def _length(v: np.ndarray) -> np.ndarray:
    """The lengths of an image of 3-vectors (H, W, 3): ``np.linalg.norm(v, axis=-1)``, the same numbers (it
    sums the squares in this order) at a third of its time on a whole frame."""
    return np.sqrt(v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1] + v[..., 2] * v[..., 2])


def concave_creases(
    pts: np.ndarray,
    valid: np.ndarray,
    *,
    step_px: int = 3,
    concavity: float = 0.8,
    max_gap_m: float = 0.03,
) -> np.ndarray:
    """(H, W) bool: pixels midway between points ``2 * step_px`` apart (horizontally or vertically) whose
    surface bends inwards (see the module docstring); pairs farther apart than ``max_gap_m`` (m) are depth
    jumps, left to the depth cut."""
    n, ok = surface_normals(pts, valid, step_px)
    h, w = valid.shape
    out = np.zeros((h, w), bool)
    s = 2 * step_px
    for axis in (0, 1):
        a = (slice(None), slice(0, w - s)) if axis == 1 else (slice(0, h - s), slice(None))
        b = (slice(None), slice(s, w)) if axis == 1 else (slice(s, h), slice(None))
        d = pts[b] - pts[a]
        dist = _length(d)
        good = ok[a] & ok[b] & (dist > 1e-6) & (dist < max_gap_m)
        score = np.einsum("ijk,ijk->ij", n[b] - n[a], d) / np.where(dist > 1e-6, dist, 1.0)
        bent = good & (score < -concavity)
        mid = (
            (slice(None), slice(step_px, w - s + step_px))
            if axis == 1
            else (slice(step_px, h - s + step_px), slice(None))
        )
        out[mid] |= bent
    return out


def colour_edges(
    rgb: np.ndarray,
    pts: np.ndarray,
    valid: np.ndarray,
    *,
    hue_deg: float = 35.0,
    min_chroma: float = 15.0,
    bend: float = 0.3,
) -> np.ndarray:
    """(H, W) bool: pixels where the hue (Lab) turns by more than ``hue_deg`` between two chromatic
    (``min_chroma``) pixels, or a chromatic pixel meets a grey one, two pixels apart, where the surface
    normal also turns by more than ``bend`` (|n_b - n_a|) and not convexly. Shading changes lightness and
    chroma, not hue: a bowl's lit inside and shaded outside are one object."""
    import cv2

    lab = cv2.cvtColor(cv2.GaussianBlur(rgb, (3, 3), 0).astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    chroma = np.hypot(lab[..., 1], lab[..., 2])
    hue = np.arctan2(lab[..., 2], lab[..., 1])
    n, ok = surface_normals(pts, valid, 2)
    out = np.zeros(valid.shape, bool)
    for axis in (0, 1):
        a = [slice(None), slice(None)]
        b = [slice(None), slice(None)]
        a[axis], b[axis] = slice(0, -2), slice(2, None)
        ca, cb = chroma[tuple(a)], chroma[tuple(b)]
        dh = np.abs(hue[tuple(b)] - hue[tuple(a)])
        dh = np.minimum(dh, 2 * np.pi - dh)
        coloured = (ca > min_chroma) & (cb > min_chroma)
        grey_meets = ((ca < GREY_CHROMA) & (cb > 2 * min_chroma)) | (
            (cb < GREY_CHROMA) & (ca > 2 * min_chroma)
        )
        differ = (coloured & (dh > np.deg2rad(hue_deg))) | grey_meets
        dn_vec = n[tuple(b)] - n[tuple(a)]
        dn = _length(dn_vec)
        d = pts[tuple(b)] - pts[tuple(a)]
        dist = np.maximum(_length(d), 1e-9)
        convex = np.einsum("ijk,ijk->ij", dn_vec, d) / dist > 0.5 * dn  # a box's own edge: not a cut
        hit = differ & (dn > bend) & ~convex & ok[tuple(a)] & ok[tuple(b)]
        mid = [slice(None), slice(None)]
        mid[axis] = slice(1, -1)
        out[tuple(mid)] |= hit
    return out


def regrow(labels_img: np.ndarray, free: np.ndarray, iterations: int = 4) -> np.ndarray:
    """``labels_img`` (int, 0 = none) with the ``free`` pixels given the largest label among their
    4-neighbours, repeated ``iterations`` times (deterministic)."""
    import cv2

    out = labels_img.astype(np.int32).copy()
    cross = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
    for _ in range(iterations):
        todo = free & (out == 0)
        if not todo.any():
            break
        grown = cv2.dilate(out.astype(np.float32), cross)
        out[todo] = grown[todo].astype(np.int32)
    return out


def table_extent_share(points_world: np.ndarray, table_world: np.ndarray, margin_m: float = 0.02) -> float:
    """Share of ``points_world`` (N, 3) whose top view lies within ``margin_m`` (m) of the convex hull of the
    table's inlier points ``table_world`` (M, 3); 1 when the hull cannot be formed."""

    if len(points_world) == 0:
        return 0.0
    try:
        hull: Any = ConvexHull(np.asarray(table_world, dtype=np.float64)[:, :2])
    except (QhullError, ValueError, IndexError):
        return 1.0
    eq = np.asarray(hull.equations)
    inside = np.all(points_world[:, :2] @ eq[:, :2].T + eq[:, 2] <= margin_m, axis=1)
    return float(inside.mean())


def merge_appendages(
    regions: list[tuple[np.ndarray, float]],
    pts: np.ndarray,
    valid: np.ndarray,
    rgb: np.ndarray,
    *,
    max_share: float = 0.2,
    max_colour: float = 30.0,
    max_gap_m: float = 0.015,
    touch_px: int = 3,
) -> list[tuple[np.ndarray, float]]:
    """Merge each region ``(mask, top (m))`` into a larger one it is part of: its pixels at most
    ``max_share`` of the larger's, within ``touch_px`` of it in the image, its median Lab colour within
    ``max_colour`` of the larger's, its top no higher, and a tenth of its points within ``max_gap_m`` (m) of
    the larger's. A mug's handle passes; an apple against the mug (another colour), a bottle beside a tub
    (taller, and not small beside it) do not."""
    import cv2

    lab = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2LAB).astype(np.float64)
    order = sorted(range(len(regions)), key=lambda i: -int(regions[i][0].sum()))
    out: list[list[Any]] = []  # mask, top, median colour, pixels
    kernel = np.ones((2 * touch_px + 1, 2 * touch_px + 1), np.uint8)
    for i in order:
        mask, top = regions[i]
        px = int(mask.sum())
        colour = np.median(lab[mask & valid], axis=0) if (mask & valid).any() else np.zeros(3)
        for host in out:
            if px > max_share * host[3] or top > host[1] or np.linalg.norm(colour - host[2]) > max_colour:
                continue
            near = cv2.dilate(host[0].astype(np.uint8), kernel) > 0
            if not (near & mask).any():
                continue
            gap = cKDTree(pts[host[0] & valid][::5]).query(pts[mask & valid][::3])[0]
            if len(gap) and float(np.percentile(gap, 10)) <= max_gap_m:
                host[0] = host[0] | mask
                break
        else:
            out.append([mask, top, colour, px])
    return [(m, t) for m, t, _, _ in out]
