"""Top-view outline fits of an object's points (world frame, z up): circles and minimum-area rectangles
through the outline seen from above, a circle through a visible arc, and which of the two shapes the
outline is (:func:`outline_kind`)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares
from scipy.spatial import ConvexHull, QhullError

__all__ = [
    "circle_fit",
    "convex_outline",
    "fit_circle_arc",
    "fit_circle_outline",
    "fit_rectangle",
    "outline_kind",
]


def circle_fit(xy: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Least-squares circle through 2-D points: centre, radius, RMS residual (m)."""
    A = np.column_stack([2 * xy, np.ones(len(xy))])
    b = (xy**2).sum(axis=1)
    sol, *_ = np.linalg.lstsq(A, b, rcond=None)
    centre = sol[:2]
    r = float(np.sqrt(max(sol[2] + centre @ centre, 1e-12)))
    res = np.linalg.norm(xy - centre, axis=1) - r
    return centre, r, float(np.sqrt(np.mean(res**2)))


def convex_outline(xy: np.ndarray) -> np.ndarray:
    """Vertices of the 2-D convex hull of ``xy``."""

    try:
        return np.asarray(xy[ConvexHull(xy).vertices])
    except QhullError:  # collinear or too few points (a sliver seen past an occluder)
        return np.asarray(xy[ConvexHull(xy, qhull_options="QJ").vertices]) if len(xy) >= 3 else np.asarray(xy)


def fit_circle_outline(xy: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Circle through the outline of the top view (trimmed once): centre, radius, relative residual."""
    hull = convex_outline(xy)
    centre, r, rms = circle_fit(hull)
    res = np.abs(np.linalg.norm(hull - centre, axis=1) - r)
    keep = res < max(2.5 * rms, 1e-3)
    if keep.sum() >= 5:
        centre, r, rms = circle_fit(hull[keep])
    return centre, r, rms / max(r, 1e-6)


def fit_circle_arc(
    xy: np.ndarray, centre: np.ndarray, radius: float, loss_scale_m: float = 0.002
) -> tuple[np.ndarray, float, float]:
    """Circle fitted to the points themselves (geometric distance, robust loss), started from
    ``centre``/``radius``: centre, radius and the angle (rad) of the arc the points cover. Unlike the outline
    fit it uses the curvature of the whole visible arc, so a cylinder half hidden by an occluder keeps its
    diameter."""

    def residual(x: np.ndarray) -> np.ndarray:
        return np.asarray(np.linalg.norm(xy - x[:2], axis=1) - x[2])

    sol = least_squares(
        residual, [centre[0], centre[1], max(radius, 1e-3)], loss="soft_l1", f_scale=loss_scale_m
    )
    c, r = np.asarray(sol.x[:2]), abs(float(sol.x[2]))
    ang = np.sort(np.arctan2(xy[:, 1] - c[1], xy[:, 0] - c[0]))
    gap = float(np.max(np.diff(np.r_[ang, ang[0] + 2 * np.pi]))) if len(ang) > 1 else 2 * np.pi
    return c, r, 2 * np.pi - gap


def fit_rectangle(xy: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, float]:
    """Minimum-area rectangle of the outline (robust extents): yaw, centre, (long, short) size, relative
    residual of the outline to the rectangle's edges."""
    import cv2

    (cx, cy), (w, h), angle = cv2.minAreaRect(convex_outline(xy).astype(np.float32))
    yaw = np.deg2rad(angle) + (0.0 if w >= h else np.pi / 2)
    R = np.array([[np.cos(yaw), np.sin(yaw)], [-np.sin(yaw), np.cos(yaw)]])
    local = (xy - [cx, cy]) @ R.T
    lo, hi = np.percentile(local, 0.5, axis=0), np.percentile(local, 99.5, axis=0)
    size = hi - lo
    centre = np.array([cx, cy]) + ((lo + hi) / 2) @ R
    hull_local = (convex_outline(xy) - centre) @ R.T
    edge = np.min(np.abs(np.abs(hull_local) - size / 2), axis=1)
    yaw = float((yaw + np.pi / 2) % np.pi - np.pi / 2)
    return yaw, centre, size, float(np.sqrt(np.mean(edge**2)) / max(float(size.max()), 1e-6))


def outline_kind(points_world: np.ndarray) -> str:
    """``round`` if a circle fits the top-view outline of the points better than a rectangle, else
    ``rectangular``."""
    xy = np.asarray(points_world)[:, :2]
    if len(xy) < 10:
        return "unknown"
    _, _, circle_res = fit_circle_outline(xy)
    _, _, size, rect_res = fit_rectangle(xy)
    return "round" if circle_res < rect_res and size[1] > 0.6 * size[0] else "rectangular"
