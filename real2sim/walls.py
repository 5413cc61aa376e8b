"""Walls rising from the table: the large vertical planes among a region's points (a wall, a cabinet's side)
that the objects standing against them join in depth. :func:`peel_vertical_planes` takes them away from a
region :func:`real2sim.regions.find_clusters` dropped, and :func:`in_wall` tells a piece of such a wall,
cut off by the objects in front of it, from an object.
"""

from __future__ import annotations

import numpy as np

from real2sim.table import plane_through, ransac_plane

__all__ = ["PEEL_MIN_PIXELS", "WALL_BAND_M", "WALL_SHARE", "in_wall", "peel_vertical_planes"]

WALL_BAND_M = 0.015
"""Half-width (m) of a wall's plane: the pixels within it are the wall's (:func:`peel_vertical_planes`)."""
WALL_SHARE = 0.8
"""Share of a region's points in a wall's plane that makes it a piece of that wall."""


def in_wall(
    mask: np.ndarray,
    pts: np.ndarray,
    valid: np.ndarray,
    T_world_cam: np.ndarray,
    walls: list[tuple[np.ndarray, float]],
    band_m: float = WALL_BAND_M,
) -> bool:
    """Whether :data:`WALL_SHARE` of the region's measured points lie within ``band_m`` (m) of one of the
    ``walls`` (world-frame planes that :func:`peel_vertical_planes` took)."""
    if not walls:
        return False
    world = pts[mask & valid] @ T_world_cam[:3, :3].T + T_world_cam[:3, 3]
    if not len(world):
        return False
    return any(float(np.mean(np.abs(world @ n + d) <= band_m)) >= WALL_SHARE for n, d in walls)


PEEL_MIN_PIXELS = 4000
"""A dropped region this large (px) is searched for a wall to take away (:func:`peel_vertical_planes`)."""


def peel_vertical_planes(
    mask: np.ndarray,
    pts: np.ndarray,
    T_world_cam: np.ndarray,
    min_pixels: int,
    rng: np.random.Generator,
    *,
    band_m: float = WALL_BAND_M,
    min_share: float = 0.25,
    max_tilt: float = 0.3,
    min_span_m: float = 0.3,
    max_planes: int = 2,
    walls: list[tuple[np.ndarray, float]] | None = None,
) -> list[np.ndarray]:
    """The parts (masks of at least ``min_pixels``) of a region left when the large vertical planes among its
    points are taken away: a wall or a cabinet's side rising from the table, which the objects standing
    against it join in depth. A plane is taken (its pixels within ``band_m`` (m)) when its normal is within
    ``max_tilt`` (sine) of horizontal, it holds ``min_share`` of the region's points and spans ``min_span_m``
    (m) horizontally (an object's flat face does not); none taken: no parts. Each plane taken is appended to
    ``walls`` as ``(unit normal, offset)`` (world frame, m: ``normal @ x + offset = 0`` on it)."""
    import cv2

    rows, cols = np.nonzero(mask)
    world = pts[rows, cols] @ T_world_cam[:3, :3].T + T_world_cam[:3, 3]
    sample = world[rng.choice(len(world), min(len(world), 4000), replace=False)]
    keep = np.ones(len(world), bool)
    total = len(sample)
    for _ in range(max_planes):
        if len(sample) < 100:
            break
        n, d, idx = ransac_plane(sample, band_m / 2, 300, rng)
        along = np.cross(n, [0.0, 0.0, 1.0])  # horizontal, in the plane
        span = np.ptp(sample[idx] @ along) if len(idx) else 0.0
        if abs(float(n[2])) > max_tilt or len(idx) < min_share * total or span < min_span_m:
            break
        if walls is not None:  # the plane refitted to its inliers (three points set it only roughly)
            walls.append(plane_through(sample[idx], n))
        keep &= np.abs(world @ n + d) > band_m
        sample = sample[np.abs(sample @ n + d) > band_m]
    if keep.all():
        return []
    left = np.zeros(mask.shape, np.uint8)
    left[rows[keep], cols[keep]] = 1
    opened = cv2.morphologyEx(left, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    count, parts, stats, _ = cv2.connectedComponentsWithStats(opened, connectivity=4)
    return [parts == k for k in range(1, count) if stats[k, cv2.CC_STAT_AREA] >= min_pixels]
