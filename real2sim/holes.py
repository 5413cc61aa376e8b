"""An object's pixels where the sensor measured no depth, given back to its mask by colour.

A depth-based region stops where the depth stops: at an object's grazing-angle sides and rims, and along
its silhouette where the depth and colour images disagree, a depth camera returns nothing, so the region
is short of the object seen in the photo (on ClearGrasp's real frames by 15-20 % of the annotated object,
most of it pixels with no depth). :func:`fill_depth_holes` extends a region into the pixels without depth
that touch it, within ``reach_m`` of its silhouette (pixels at the object's depth), keeping those whose
colour is nearer the region's own colour close by than the colour of the measured background (table,
wall) close by. Pixels of a depth shadow on the table keep the table's colour and stay out.

:func:`fill_enclosed` then gives each mask the holes it encloses, except where the table shows through (a
mug's handle): print, a glint, a lying cup's dark opening inside one silhouette are that object, with or
without depth there (on ClearGrasp's opaque frames this raised every annotated object's mask IoU, by 0.01
to 0.05).

:func:`round_floors` finds, for a round region (a bowl, a cup), the pixels read at the table's height within
its rim: the table inside an object's footprint cannot be seen, so what is seen there of the object's
colour is its own floor, or its wall read short (a bowl's floor and front wall in PoseCNN's frame 000003
read within 2 mm of the table, and its mask was its far wall and rim).

The masks then show the object's silhouette in the photo more fully; a pixel without depth adds no point to
the shape fit, but the refinement (:mod:`real2sim.refine`) and the fit score
(:mod:`real2sim.fitscore`) see the fuller silhouette.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from real2sim.masks import fill_holes, padded_box
from real2sim.outline import fit_circle_outline, outline_kind
from real2sim.plateaus import ROUND_MAX_RESIDUAL

__all__ = [
    "REACH_M",
    "fill_depth_holes",
    "fill_enclosed",
    "rim_image",
    "round_floors",
]

REACH_M = 0.02
"""How far (m, at the region's median depth) beyond a region's silhouette it may grow into missing depth."""
DIST_WEIGHT = 0.5
"""Lab units a pixel's distance (px) from a mask adds to its colour distance when two masks contend for it."""


def _local_mean(lab: np.ndarray, weight: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean Lab colour (H, W, 3) of the ``weight`` pixels in a ``size`` window around each pixel, and their
    count share there (H, W) (0: none, the mean is then undefined)."""
    import cv2

    w = weight.astype(np.float32)
    share = cv2.blur(w, (size, size))
    total = cv2.blur(lab * w[..., None], (size, size))
    return total / np.maximum(share, 1e-6)[..., None], share


def fill_depth_holes(
    masks: Sequence[np.ndarray],
    rgb: np.ndarray,
    depth: np.ndarray,
    background: np.ndarray,
    focal_px: float,
    *,
    reach_m: float = REACH_M,
    margin: float = 0.8,
) -> list[np.ndarray]:
    """The ``masks`` (H, W) bool, each grown into the pixels without depth (``depth`` (H, W) m, 0: none)
    that touch it, within ``reach_m`` of it, whose Lab colour lies nearer its own pixels' local mean colour
    than ``margin`` times the distance to the local mean of ``background`` (H, W) bool: the measured pixels
    that are not an object (table, wall). ``focal_px`` converts ``reach_m`` to pixels. A pixel two masks
    could take goes to the one whose colour is nearer (ties: the nearer mask); masks never take each other's
    pixels."""
    import cv2

    lab = cv2.cvtColor(np.ascontiguousarray(rgb, dtype=np.uint8), cv2.COLOR_RGB2LAB).astype(np.float32)
    hole = depth <= 0
    taken = np.zeros(hole.shape, bool)
    for m in masks:
        taken |= m
    h, w = hole.shape
    best = np.full((h, w), np.inf, dtype=np.float32)
    owner = np.full((h, w), -1, dtype=np.int64)
    for i, mask in enumerate(masks):
        if not mask.any() or not (hole & ~taken).any():
            continue
        z = float(np.median(depth[mask & ~hole])) if (mask & ~hole).any() else 1.0
        reach = max(2, int(round(reach_m * focal_px / max(z, 0.1))))
        box = padded_box(mask, reach)
        assert box is not None  # the mask is not empty
        free = hole[box] & ~taken[box]
        # Pixels without depth reachable from the mask through pixels without depth, ``reach`` steps at most.
        grown = mask[box].astype(np.uint8)
        allowed = (free | mask[box]).astype(np.uint8)
        kernel = np.ones((3, 3), np.uint8)
        for _ in range(reach):
            nxt = cv2.dilate(grown, kernel) & allowed
            if np.array_equal(nxt, grown):
                break
            grown = nxt
        reached = (grown > 0) & free
        if not reached.any():
            continue
        size = 2 * reach + 1
        own_mean, own_share = _local_mean(lab[box], mask[box], size)
        bg_mean, bg_share = _local_mean(lab[box], background[box], size)
        d_own = np.linalg.norm(lab[box] - own_mean, axis=-1)
        d_bg = np.where(bg_share > 0, np.linalg.norm(lab[box] - bg_mean, axis=-1), np.inf)
        keep = reached & (own_share > 0) & (d_own < margin * d_bg)
        # Between two masks of like colour, the nearer one takes the pixel (Lab units + pixels).
        dist = cv2.distanceTransform((~mask[box]).astype(np.uint8), cv2.DIST_L2, 3)
        score = d_own + DIST_WEIGHT * dist
        sub_best, sub_owner = best[box], owner[box]
        better = keep & (score < sub_best)
        sub_best[better] = score[better]
        sub_owner[better] = i
    out = []
    for i, mask in enumerate(masks):
        grown_mask = mask | (owner == i)
        # Only the parts connected to the mask itself (a pixel taken next to a pixel another mask won is not).
        count, comp = cv2.connectedComponents(grown_mask.astype(np.uint8), connectivity=8)
        if count > 2:
            linked = np.unique(comp[mask])
            grown_mask = np.isin(comp, linked[linked > 0])
        out.append(grown_mask)
    return out


def fill_enclosed(masks: Sequence[np.ndarray], table: np.ndarray) -> list[np.ndarray]:
    """The ``masks`` (H, W) bool, each with the holes it encloses filled, except the ``table`` pixels ((H, W)
    bool, measured on the table: seen through the object) and the pixels another mask holds."""
    taken = np.zeros(table.shape, bool)
    for m in masks:
        taken |= m
    return [m | (fill_holes(m) & ~taken & ~table) for m in masks]


def rim_image(
    centre: np.ndarray,
    radius: float,
    height: float,
    K: np.ndarray,
    T_world_cam: np.ndarray,
    shape: tuple[int, int],
) -> np.ndarray:
    """The (H, W) bool pixels within the image of a horizontal circle (``centre`` (2,), ``radius`` and
    ``height``, m, in the table's frame) seen by a camera of intrinsics ``K`` at pose ``T_world_cam``: what
    is seen through a vessel's opening."""
    import cv2

    angle = np.linspace(0.0, 2 * np.pi, 72, endpoint=False)
    rim = np.column_stack(
        [centre[0] + radius * np.cos(angle), centre[1] + radius * np.sin(angle), np.full(72, height)]
    )
    cam = (rim - T_world_cam[:3, 3]) @ T_world_cam[:3, :3]
    inside = np.zeros(shape, np.uint8)
    if np.all(cam[:, 2] > 0):
        px = cam @ np.asarray(K, dtype=np.float64).T
        cv2.fillPoly(inside, [np.rint(px[:, :2] / px[:, 2:]).astype(np.int32)], 1)
    return inside > 0


def round_floors(
    regions: Sequence[tuple[np.ndarray, float]],
    xy: np.ndarray,
    low: np.ndarray,
    lab: np.ndarray,
    table_lab: np.ndarray,
    K: np.ndarray,
    T_world_cam: np.ndarray,
    min_pixels: int,
) -> list[np.ndarray]:
    """Per region of ``regions`` (``(mask (H, W) bool, top m)``), the (H, W) bool pixels that are its floor
    when its top-view outline is round (a circle fits it within :data:`real2sim.plateaus.ROUND_MAX_RESIDUAL`
    and better than a rectangle, :func:`real2sim.outline.outline_kind`), else none.

    A floor pixel is ``low`` ((H, W) bool: measured at the table's height), in no region, seen through the
    rim (the circle through the region's top-view points, ``xy`` (H, W, 2), m, in the table's frame, NaN
    where not measured, at its ``top``; :func:`rim_image`, the camera: ``K``, ``T_world_cam``), and its
    colour (``lab`` (H, W, 3), Lab) nearer the region's median a, b than the table's (``table_lab``); the
    connected parts of at least ``min_pixels`` touching the region are kept, with the holes they enclose
    there (a bowl's speckles)."""
    import cv2

    free = low.copy()
    for m, _ in regions:
        free &= ~m
    out = [np.zeros_like(low) for _ in regions]
    ab = lab[..., 1:]
    to_table = np.linalg.norm(ab - table_lab[1:], axis=-1)
    for floor_of, (mask, top) in zip(out, regions):
        seen = xy[mask & ~low]
        seen = seen[np.isfinite(seen).all(axis=1)]
        if len(seen) < 10:
            continue
        centre, radius, residual = fit_circle_outline(seen)
        if residual > ROUND_MAX_RESIDUAL or outline_kind(seen) != "round":
            continue
        within = rim_image(centre, radius, top, K, T_world_cam, mask.shape)
        own = np.median(ab[mask], axis=0)
        floor = free & within & (np.linalg.norm(ab - own, axis=-1) < to_table)
        _, comp, stats, _ = cv2.connectedComponentsWithStats(floor.astype(np.uint8), connectivity=8)
        touching = cv2.dilate(mask.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
        parts = np.unique(comp[touching & floor])
        parts = parts[(parts > 0) & (stats[parts, cv2.CC_STAT_AREA] >= min_pixels)]
        if not len(parts):
            continue
        parts_in = np.isin(comp, parts)
        floor_of |= (parts_in | fill_holes(mask | parts_in) & within) & free
        free &= ~floor_of
    return out
