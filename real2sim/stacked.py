"""An object lying on top of another (a whiteboard eraser on a tub), told from what else stands on another
part of a region without being an object: the print on a box, a tub's lid, a bottle's cap, a toy's head.

:func:`stacked_on` says whether a part lies on a level surface of the rest and at what height: the rest's
pixels in a ring around the part (:data:`RING_PX`) stand at one height (interquartile range at most
:data:`FLAT_M`: not a wall or a slope, whose heights spread), the part rises :data:`RISE_M` above that
height (median), and that surface reaches beyond the part in the top view (:data:`MIN_BESIDE` of it, within
:data:`SURFACE_PX`, beside the part's top view, not under it: the rim of a tub around its lid lies under
the lid's edge). A print lies in its face (no rise); a cap, a head or a label round a can has a sloped or
vertical surface around it.

The geometric segmenter (:mod:`real2sim.split`) keeps such a part as an object of its own; perception
(:mod:`real2sim.perception`) fits it standing on that surface instead of the table.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "FLAT_M",
    "GROW_PX",
    "MIN_BESIDE",
    "RING_PX",
    "RISE_M",
    "keep_to_itself",
    "stacked_on",
]

RING_PX = (2, 7)
"""The ring of the rest's pixels around the part (px from it: from, to) that it lies on."""
FLAT_M = 0.01
"""Largest interquartile range (m) of the ring's heights."""
RISE_M = 0.015
"""How far (m) the part's median height must rise above the surface."""
SURFACE_PX = 30
"""How far (px) from the part the surface it lies on is looked for, at its height (within :data:`FLAT_M`)."""
MIN_BESIDE = 0.5
"""Least share of the surface around the part that lies beside it in the top view, not under it."""
CELL_M = 0.005
"""Top-view cell (m) of the test of what lies beside the part."""
MIN_RING_PX = 30
"""Fewest measured ring pixels for a verdict."""
GROW_PX = 3
"""Pixels beyond its own colour part an object lying on another keeps (its outline)."""


def stacked_on(
    part: np.ndarray,
    rest: np.ndarray,
    points: np.ndarray,
    valid: np.ndarray,
    height: np.ndarray,
    up: np.ndarray,
) -> float | None:
    """The height (m above the table) of the level surface of ``rest`` that ``part`` lies on, or None when it
    does not lie on one (see the module docstring). ``part``, ``rest``, ``valid``: (H, W) bool of one image
    (or the same crop of each); ``points``: (H, W, 3) camera-frame points (m); ``height``: (H, W) m above
    the table; ``up``: the table's unit normal (camera frame)."""
    import cv2

    near, far = (
        cv2.dilate(part.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1,) * 2)) > 0
        for r in RING_PX
    )
    ring = far & ~near & rest & valid
    if ring.sum() < MIN_RING_PX:
        return None
    q1, support, q3 = np.percentile(height[ring], [25, 50, 75])
    own = height[part & valid]
    if q3 - q1 > FLAT_M or len(own) < MIN_RING_PX or np.median(own) < support + RISE_M:
        return None
    reach = cv2.dilate(part.astype(np.uint8), np.ones((2 * SURFACE_PX + 1,) * 2, np.uint8)) > 0
    surface = reach & rest & valid & (np.abs(height - support) <= FLAT_M)
    if _beside(part & valid, surface, points, height, up) < MIN_BESIDE:
        return None
    return float(support)


def _beside(
    part: np.ndarray, surface: np.ndarray, points: np.ndarray, height: np.ndarray, up: np.ndarray
) -> float:
    """The share of the ``surface`` pixels whose points' feet on the table fall outside the top view of
    ``part``'s (its :data:`CELL_M` cells and their neighbours)."""
    feet = points - height[..., None] * np.asarray(up, dtype=np.float64)  # on the table plane, camera frame
    a = np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0])
    a /= np.linalg.norm(a)
    b = np.cross(up, a)

    def cells(mask: np.ndarray) -> np.ndarray:
        f = feet[mask]
        return np.floor(np.column_stack([f @ a, f @ b]) / CELL_M).astype(np.int64)

    own = {(i + di, j + dj) for i, j in cells(part).tolist() for di in (-1, 0, 1) for dj in (-1, 0, 1)}
    around = cells(surface).tolist()
    return sum((i, j) not in own for i, j in around) / max(len(around), 1)


def keep_to_itself(
    owner: np.ndarray,
    seeds: np.ndarray,
    stacked: dict[int, float],
    others: np.ndarray,
    measured: np.ndarray,
    height: np.ndarray,
) -> None:
    """Give the pixels ``owner`` (labels, changed in place) assigned to an object lying on another
    (``stacked``: its label -> the height (m) of the surface it lies on, less that surface's spread) that lie
    farther than :data:`GROW_PX` from its own part (``seeds == label``), or lower than that surface, to
    ``others`` (each pixel's nearest part not lying on another): the top and sides of the object under it,
    and what stands behind both."""
    import cv2

    kernel = np.ones((2 * GROW_PX + 1,) * 2, np.uint8)
    for label, floor in stacked.items():
        near = cv2.dilate((seeds == label).astype(np.uint8), kernel) > 0
        lost = (owner == label) & (~near | (measured & (height < floor)))
        owner[lost] = others[lost]
