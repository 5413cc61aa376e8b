"""Two regions that are one object seen on both sides of something in front of it.

A bar the gripper's fingers reach down to (the brush of the sweeping tasks) is seen as two regions, one each
side of the fingers: the fingers hide its middle, and their shadow and the depth camera's noise cut the
little left between. :func:`join_across_occluders` joins two regions when the photo cannot tell them from one
object so occluded: they are of one hue (:func:`real2sim.plateaus.one_hue`), their tops within
:data:`TOP_M` of each other, most of the pixels between them (:data:`GAP_PX` from both) measured at least
:data:`NEARER_M` nearer the camera than they are (:data:`MIN_NEARER`: something stands in front of the gap),
and together they make one bar: their top views' union fits a rectangle no wider than the wider of the two
(:data:`WIDTH_GROWTH`). Two objects side by side make a wider rectangle; two that merely touch have nothing
in front of the seam between them.
"""

from __future__ import annotations

import numpy as np

from real2sim.outline import fit_rectangle
from real2sim.plateaus import one_hue, top_view
from real2sim.types import TablePlane

__all__ = [
    "GAP_PX",
    "MIN_GAP_PIXELS",
    "MIN_NEARER",
    "NEARER_M",
    "TOP_M",
    "WIDTH_GROWTH",
    "join_across_occluders",
]

GAP_PX = 15
"""Pixels from both regions within which the pixels between them are looked at."""
NEARER_M = 0.01
"""How much nearer the camera (m) than the two regions a pixel between them must be measured to hide them."""
MIN_NEARER = 0.5
"""Share of the pixels between the two regions that must be so hidden."""
TOP_M = 0.005
"""Largest difference (m) of the two regions' top heights."""
WIDTH_GROWTH = 1.2
"""How much wider than the wider of the two their union's rectangle may be."""
MIN_GAP_PIXELS = 20
"""Fewest pixels between the two regions for the test (fewer: they touch, or are far apart)."""


def join_across_occluders(
    regions: list[tuple[np.ndarray, float]],
    pts: np.ndarray,
    valid: np.ndarray,
    depth: np.ndarray,
    table: TablePlane,
    lab: np.ndarray,
) -> list[tuple[np.ndarray, float]]:
    """``regions`` (``(mask (H, W) bool, top m)``) with each pair that is one object seen on both sides of an
    occluder (the module docstring) joined. ``pts``: the camera points (H, W, 3, m), ``valid`` where measured,
    ``depth`` (H, W, m, 0 where none), ``lab`` the frame's colour in Lab (OpenCV's 8-bit scale)."""
    out = list(regions)
    joined = True
    while joined:
        joined = False
        for i, j in [(a, b) for a in range(len(out)) for b in range(a + 1, len(out))]:
            (a, top_a), (b, top_b) = out[i], out[j]
            if abs(top_a - top_b) <= TOP_M and _one_bar(a, b, pts, valid, depth, table, lab):
                out[i] = (a | b, max(top_a, top_b))
                del out[j]
                joined = True
                break
    return out


def _one_bar(
    a: np.ndarray,
    b: np.ndarray,
    pts: np.ndarray,
    valid: np.ndarray,
    depth: np.ndarray,
    table: TablePlane,
    lab: np.ndarray,
) -> bool:
    """Whether masks ``a`` and ``b`` are one bar hidden in its middle (see :func:`join_across_occluders`)."""
    import cv2

    if not one_hue(lab, a, b):  # cheap: before the dilations
        return False
    kernel = np.ones((2 * GAP_PX + 1,) * 2, np.uint8)
    near_a, near_b = (cv2.dilate(m.astype(np.uint8), kernel) > 0 for m in (a, b))
    gap = near_a & near_b & ~a & ~b
    if gap.sum() < MIN_GAP_PIXELS:
        return False
    facing = [m & near_a & near_b & valid for m in (a, b)]  # each region's pixels near the other
    own = min(float(np.median(depth[f if f.any() else m & valid])) for f, m in zip(facing, (a, b)))
    hidden = (depth > 0) & (depth < own - NEARER_M)
    if float(hidden[gap].mean()) < MIN_NEARER:
        return False
    xy_a, xy_b = top_view(pts, a & valid, table), top_view(pts, b & valid, table)
    if len(xy_a) < 10 or len(xy_b) < 10:
        return False
    widths = [float(fit_rectangle(xy)[2][1]) for xy in (xy_a, xy_b, np.vstack([xy_a, xy_b]))]
    return widths[2] <= WIDTH_GROWTH * max(widths[:2])
