"""Split a region that holds several touching objects of different colours.

Depth cuts, creases and colour edges (:mod:`real2sim.clutter`) separate objects only where the cut closes
all the way around one of them; where it leaks (a depth camera that smooths its edges, two objects meeting
without a crease) one region holds several objects. :func:`split_by_colour` takes such a region apart by
region, not by edge:

1. its pixels are clustered in two by colour (k-means in Lab; first with the lightness weighted down, as
   shading changes lightness more than hue, then, for objects told apart by lightness alone, in full), the
   label image smoothed, and each colour's connected parts taken, without their parts narrower than
   ``min_width_m`` (a seam, a rim, a reflection);
2. a part is an object of its own only when it is large (``min_area_m2``) and rests on the table (its lowest
   points within ``touch_m`` of it): the print on a box, the lid of a tub, the head of a toy stand on another
   part, not on the table. Every pixel of the region goes to the nearest such part. The exception is a part
   lying on a level surface of the rest (:func:`real2sim.stacked.stacked_on`: an eraser on a tub): it is an
   object of its own, keeps only its own pixels and outline (:func:`real2sim.stacked.keep_to_itself`) and is
   recorded in ``SplitContext.stacked`` with the height it lies at;
3. two parts stay apart only where their shared border shows a depth step, a concave crease or missing
   depth on ``min_break`` of it, or where they meet in a neck (border length under ``min_neck`` times the
   smaller part's square-root area). The print on a flat face or a can's colour band has neither; a part
   lying on another joins nothing;
4. each part so found is split again, a few levels deep.

:func:`split_by_gap` then takes apart what one colour holds and only a narrow gap in 3D separates (a white
marker standing beside a white toy; the depth step between them below the segmenter's threshold): the
region's points are linked within a few pixels' width in 3D (Euclidean cluster extraction, as in PCL), and
every cluster that is large (``min_gap_area_m2``), rests on the table and stands ``min_gap_height_m`` tall is
an object (a fold of a cloth is none, however its points part); the other points go to the nearest such
cluster in 3D, pixels without depth to the nearest in the image.

:func:`split_at_corner` last takes apart two slabs that meet in an L (two walls at a corner, rails): a region
whose top view fills at most ``corner_max_fill`` of its minimum-area rectangle is cut along a line parallel
to one of the rectangle's sides, at the place where both sides come out as long (``corner_min_aspect``),
well-filled (``corner_min_fill``) rectangles that each rest on the table. One L-shaped object (a bracket)
comes out as its two arms; a drill's handle is too short to be an arm, a banana's halves too curved.

:func:`split_off_lying_arms` takes off what lies flat on the table against a taller object (a marker against
a box): the parts of the region narrower than ``arm_width_m`` (what a morphological opening removes) that
reach ``arm_min_reach_m`` out from the rest and stay under ``arm_max_height_m``, under half the rest's top.
A mug's handle is as thin, but held up; the skirt of mixed depth along an object's foot does not reach out.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.cluster.vq import kmeans2
from scipy.ndimage import distance_transform_edt
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from real2sim.masks import padded_box
from real2sim.split_context import SplitContext, SplitParams, make_context
from real2sim.stacked import FLAT_M, keep_to_itself, stacked_on

__all__ = [
    "SplitContext",
    "SplitParams",
    "make_context",
    "split_at_corner",
    "split_by_colour",
    "split_by_gap",
    "split_off_lying_arms",
    "split_regions",
]

DEFAULT_PARAMS = SplitParams()
"""The thresholds every split uses unless given others."""


def split_regions(
    regions: list[tuple[np.ndarray, float]], ctx: SplitContext, params: SplitParams = DEFAULT_PARAMS
) -> list[tuple[np.ndarray, float]]:
    """``(mask, top (m))`` of every region, or of each of its parts (:func:`split_by_colour`, then
    :func:`split_by_gap`, :func:`split_at_corner` and :func:`split_off_lying_arms`); a part's top is its 98th
    percentile height."""
    out = []
    for mask, top in regions:
        parts = [
            piece
            for part in split_by_colour(mask, ctx, params)
            for gapped in split_by_gap(part, ctx, params)
            for arm in split_at_corner(gapped, ctx, params)
            for piece in split_off_lying_arms(arm, ctx, params)
        ]
        if len(parts) == 1:
            out.append((mask, top))
            continue
        for part in parts:
            h = ctx.height[part & ctx.valid]
            out.append((part, float(np.percentile(h, 98)) if len(h) else top))
    return out


def split_by_colour(
    mask: np.ndarray, ctx: SplitContext, params: SplitParams = DEFAULT_PARAMS, levels: int | None = None
) -> list[np.ndarray]:
    """The objects in the region ``mask`` (H, W) bool: the region itself, or its parts (see the module
    docstring), each split again ``levels`` (default ``params.levels``) deep. Every pixel of the region is in
    exactly one returned mask."""
    levels = params.levels if levels is None else levels
    parts = [mask]
    for weight in params.lightness_weights:
        parts = _split_once(mask, ctx, params, weight)
        if len(parts) > 1:
            break
    if len(parts) < 2 or levels <= 1:
        return parts
    return [piece for part in parts for piece in split_by_colour(part, ctx, params, levels - 1)]


def split_by_gap(
    mask: np.ndarray, ctx: SplitContext, params: SplitParams = DEFAULT_PARAMS
) -> list[np.ndarray]:
    """The objects in the region ``mask`` (H, W) that gaps in 3D separate (see the module docstring): the
    region itself, or its parts; every pixel of the region is in exactly one returned mask."""
    measured = mask & ctx.valid
    points = ctx.points[measured]
    if len(points) < 2 * params.min_pixels:
        return [mask]
    px_m = float(np.median(points[:, 2])) / ctx.focal_px
    tree = cKDTree(points)
    pairs = tree.query_pairs(max(params.gap_px * px_m, params.min_gap_m), output_type="ndarray")
    graph = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(points),) * 2)
    _, cluster = connected_components(graph, directed=False)
    least = max(params.min_pixels, int(params.min_gap_area_m2 / px_m**2))
    heights = ctx.height[measured]
    sizes = np.bincount(cluster)
    standing = []
    for k in np.flatnonzero(sizes >= least):
        low, top = np.percentile(heights[cluster == k], [2, 98])
        if low <= ctx.touch_m and top >= params.min_gap_height_m:
            standing.append(k)
    if len(standing) < 2:
        return [mask]
    seeds = np.isin(cluster, standing)
    _, nearest = cKDTree(points[seeds]).query(points)
    owner = np.zeros(mask.shape, np.int32)
    owner[measured] = 1 + np.searchsorted(standing, cluster[seeds][nearest])
    owner = _nearest_seed(owner, mask)  # pixels without depth: the nearest in the image
    return [owner == 1 + i for i in range(len(standing))]


def split_at_corner(
    mask: np.ndarray, ctx: SplitContext, params: SplitParams = DEFAULT_PARAMS
) -> list[np.ndarray]:
    """The two arms of a region ``mask`` (H, W) whose top view is an L (see the module docstring), or the
    region itself; every pixel of the region is in exactly one returned mask."""
    measured = mask & ctx.valid
    if int(measured.sum()) < 2 * params.min_pixels:
        return [mask]
    heights = ctx.height[measured]
    feet = _plan_view(ctx.points[measured] - heights[:, None] * ctx.up, ctx.up)
    cell = params.corner_cell_m
    corner = np.floor(feet / cell) * cell  # each point's top-view cell (its corner, m)
    cells = np.unique(corner, axis=0)  # the occupied cells
    fill, _, rect = _rectangle(cells, cell)
    if fill > params.corner_max_fill:
        return [mask]
    turn = np.radians(rect[2])
    R = np.array([[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]])  # rows @ R: along its sides
    uv = cells @ R
    best: tuple[float, int, float] | None = None  # the lesser fill of the two arms, the axis and the cut
    least = max(2, params.min_pixels // 10)
    for axis in (0, 1):
        for cut in np.arange(uv[:, axis].min(), uv[:, axis].max(), cell)[1:]:  # between every two cells
            first = uv[:, axis] < cut
            if min(int(first.sum()), int((~first).sum())) < least:
                continue
            arms = [_rectangle(cells[side], cell) for side in (first, ~first)]
            score = min(f for f, _, _ in arms)
            if min(a for _, a, _ in arms) >= params.corner_min_aspect and (best is None or score > best[0]):
                best = (score, axis, float(cut))
    if best is None or best[0] < params.corner_min_fill:
        return [mask]
    first = (corner @ R)[:, best[1]] < best[2]
    if max(float(np.percentile(heights[side], 2)) for side in (first, ~first)) > ctx.touch_m:
        return [mask]  # an arm held up off the table (a drill's body over its handle) is no slab
    owner = np.zeros(mask.shape, np.int32)
    owner[measured] = np.where(first, 1, 2)
    owner = _nearest_seed(owner, mask)  # pixels without depth: the nearest in the image
    return [owner == 1, owner == 2]


def split_off_lying_arms(
    mask: np.ndarray, ctx: SplitContext, params: SplitParams = DEFAULT_PARAMS
) -> list[np.ndarray]:
    """The region ``mask`` (H, W) without the thin parts lying flat on the table that reach out from it (see
    the module docstring), then each such part; or the region itself. Every pixel of the region is in
    exactly one returned mask."""
    import cv2

    measured = mask & ctx.valid
    if int(measured.sum()) < 2 * params.min_pixels:
        return [mask]
    px_m = float(np.median(ctx.z[measured])) / ctx.focal_px
    width = max(3, round(params.arm_width_m / px_m)) | 1
    # On the region's box padded by the opening's width: the same as on the whole frame, and faster.
    box = padded_box(mask, width)
    assert box is not None  # the region has measured pixels
    sub, valid, height = mask[box], ctx.valid[box], ctx.height[box]
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (width, width))
    body = cv2.morphologyEx(sub.astype(np.uint8), cv2.MORPH_OPEN, disc) > 0
    if int((body & valid).sum()) < params.min_pixels:
        return [mask]  # all thin (a rope): nothing to take parts off
    body_top = float(np.percentile(height[body & valid], 98))
    count, thin = cv2.connectedComponents((sub & ~body).astype(np.uint8), connectivity=8)
    reach = distance_transform_edt(~body) * px_m
    tall = valid & (height > params.arm_max_height_m)  # the corners opened off the body
    arms = []
    for k in range(1, count):
        part = thin == k
        h = height[part & valid]
        if len(h) < params.min_pixels // 10 or reach[part].max() < params.arm_min_reach_m:
            continue
        top = float(np.percentile(h, 98))
        if top <= params.arm_max_height_m and top < 0.5 * body_top:
            arm = np.zeros_like(mask)
            arm[box] = part & ~tall
            arms.append(arm)
    if not arms:
        return [mask]
    return [mask & ~np.logical_or.reduce(arms), *arms]


def _plan_view(points: np.ndarray, up: np.ndarray) -> np.ndarray:
    """(N, 2) coordinates (m) of ``points`` (N, 3) in a plane perpendicular to the unit vector ``up``."""
    ref = np.array([1.0, 0.0, 0.0]) if abs(up[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(up, ref)
    e1 /= np.linalg.norm(e1)
    return np.column_stack([points @ e1, points @ np.cross(up, e1)])


def _rectangle(cells: np.ndarray, cell_m: float) -> tuple[float, float, tuple[Any, ...]]:
    """How much of their minimum-area rectangle the occupied top-view ``cells`` (M, 2; corners, m, each
    ``cell_m`` wide) fill, that rectangle's length over its width, and the rectangle (OpenCV's ((cx, cy),
    (w, h), degrees))."""
    import cv2

    rect = cv2.minAreaRect(cells.astype(np.float32))
    w, h = rect[1][0] + cell_m, rect[1][1] + cell_m
    return len(cells) * cell_m**2 / (w * h), max(w, h) / min(w, h), rect


def _split_once(mask: np.ndarray, ctx: SplitContext, params: SplitParams, weight: float) -> list[np.ndarray]:
    """One level of :func:`split_by_colour` with the lightness weighted by ``weight``."""
    count = int(np.count_nonzero(mask))
    box = padded_box(mask, 0)
    if box is None or count < 2 * params.min_pixels:
        return [mask]
    sub = mask[box]
    measured = sub & ctx.valid[box]
    z_mid = float(np.median(ctx.z[box][measured])) if measured.any() else 1.0
    px_m = z_mid / ctx.focal_px  # one pixel's width (m) at the region's depth
    least = max(params.min_pixels, int(params.min_area_m2 / px_m**2))
    if count < 2 * least:
        return [mask]
    colours = _two_colours(ctx.lab[box], sub, weight, params.min_colour)
    if colours is None:
        return [mask]
    seeds, stacked = _standing_parts(
        colours, ctx, box, measured, least, max(3, round(params.min_width_m / px_m))
    )
    n = int(seeds.max())
    if n < 2 or len(stacked) == n:  # none on the table: nothing under what lies on another to give to
        return [mask]
    owner = _rest_on_seeds(_nearest_seed(seeds, sub), seeds, sub, ctx, box)
    if stacked:  # the rest of what lies around an object on another is the object under it
        others = _nearest_seed(np.where(np.isin(seeds, list(stacked)), 0, seeds), sub)
        keep_to_itself(owner, seeds, stacked, others, measured, ctx.height[box])
    out = []
    for members in _join_unbroken(owner, n, ctx, box, params, stacked):
        m = np.zeros_like(mask)
        m[box] = np.isin(owner, members) & sub
        out.append(m)
    return out


def _two_colours(lab: np.ndarray, sub: np.ndarray, weight: float, min_colour: float) -> np.ndarray | None:
    """(h, w) uint8: 1 or 2, the nearer of two k-means colour centres of the ``sub`` pixels of ``lab`` (the
    lightness weighted by ``weight``), median-smoothed; 0 outside ``sub``. None when the centres lie less
    than ``min_colour`` apart (one colour)."""
    import cv2

    feats = lab[sub] * np.array([weight, 1.0, 1.0])
    if np.linalg.norm(np.ptp(feats, axis=0)) < min_colour:  # no two centres so far apart (one flat colour)
        return None
    centres, _ = kmeans2(feats[:: max(1, len(feats) // 4000)], 2, minit="++", seed=0)
    if np.linalg.norm(centres[0] - centres[1]) < min_colour:
        return None
    near = np.argmin(np.linalg.norm(feats[:, None, :] - centres[None], axis=2), axis=1)
    img = np.zeros(sub.shape, np.uint8)
    img[sub] = near + 1
    smooth = np.asarray(cv2.medianBlur(img, 5))
    smooth[~sub] = 0
    return smooth


def _standing_parts(
    colours: np.ndarray,
    ctx: SplitContext,
    box: tuple[slice, slice],
    measured: np.ndarray,
    least: int,
    width: int,
) -> tuple[np.ndarray, dict[int, float]]:
    """(h, w) int32 labels 1..n of the connected parts of each colour of ``colours`` (the crop ``box``) that
    keep ``least`` px once opened by a ``width`` px square and whose lowest ``measured`` points (2nd
    percentile of the height, m) are within ``ctx.touch_m`` of the table, or that lie on a level surface of
    the rest of the region (:func:`real2sim.stacked.stacked_on`: an eraser on a tub; returned with the
    height (m) below which their pixels belong to what they lie on); 0 elsewhere."""
    import cv2

    seeds = np.zeros(colours.shape, np.int32)
    kernel = np.ones((width, width), np.uint8)
    height = ctx.height[box]
    n, stacked = 0, {}
    for colour in (1, 2):
        core = cv2.morphologyEx((colours == colour).astype(np.uint8), cv2.MORPH_OPEN, kernel)
        count, comp, stats, _ = cv2.connectedComponentsWithStats(core, connectivity=4)
        for k in range(1, count):
            if stats[k, cv2.CC_STAT_AREA] < least:
                continue
            part = comp == k
            h = height[part & measured]
            if len(h) < least // 2:
                continue
            on_table = float(np.percentile(h, 2)) <= ctx.touch_m
            if not on_table:  # the print, a lid, a toy's head; or an object on another
                support = stacked_on(part, (colours > 0) & ~part, ctx.points[box], measured, height, ctx.up)
                if support is None:
                    continue
                stacked[n + 1] = support - FLAT_M
                full = np.zeros(ctx.valid.shape, bool)
                full[box] = part
                ctx.stacked.append((full, support))
            n += 1
            seeds[part] = n
    return seeds, stacked


def _rest_on_seeds(
    owner: np.ndarray,
    seeds: np.ndarray,
    sub: np.ndarray,
    ctx: SplitContext,
    box: tuple[slice, slice],
    reach_m: float = 0.01,
) -> np.ndarray:
    """``owner`` with each connected part of the ``sub`` pixels outside every seed given to the seed it lies
    on: the one whose points' feet on the table (top view) come within ``reach_m`` (m) of most of the part's
    feet (a lid to the box under it, not to the brick beside both). A part over no seed keeps its owners."""
    import cv2

    valid = ctx.valid[box]
    feet = ctx.points[box] - ctx.height[box][..., None] * ctx.up
    trees = [cKDTree(feet[(seeds == k) & valid]) for k in range(1, int(seeds.max()) + 1)]
    count, parts = cv2.connectedComponents((sub & (seeds == 0)).astype(np.uint8), connectivity=4)
    out = owner.copy()
    for c in range(1, count):
        part = parts == c
        p = feet[part & valid]
        if len(p) < 20 or not all(t.n for t in trees):
            continue
        p = p[:: max(1, len(p) // 500)]
        under = [int((t.query(p, distance_upper_bound=reach_m)[0] < reach_m).sum()) for t in trees]
        best = int(np.argmax(under))
        if under[best] >= 0.05 * len(p):
            out[part] = best + 1
    return out


def _nearest_seed(seeds: np.ndarray, sub: np.ndarray) -> np.ndarray:
    """Every ``sub`` pixel labelled with its nearest seed's label (image distance); 0 outside ``sub``."""
    _, idx = distance_transform_edt(seeds == 0, return_indices=True)
    owner = seeds[idx[0], idx[1]]
    owner[~sub] = 0
    return owner


def _join_unbroken(
    owner: np.ndarray,
    n: int,
    ctx: SplitContext,
    box: tuple[slice, slice],
    params: SplitParams,
    apart: Collection[int] = (),
) -> list[list[int]]:
    """Groups of the labels 1..n of ``owner`` (the crop ``box`` of the frame) that are one object: two labels
    whose border (the pixels within 4 px of the other, across a seam without depth) shows a depth step,
    crease or missing depth on less than ``params.min_break`` of it, and that meet in more than a neck; the
    labels ``apart`` (objects lying on another) join none."""
    import cv2

    z, valid = ctx.z[box], ctx.valid[box]
    thr = ctx.jump_m * np.maximum(z, 0.3)
    ring = np.ones((5, 5), np.uint8)
    broken_near = (cv2.dilate(ctx.crease[box].astype(np.uint8), ring) > 0) | (
        cv2.dilate((~valid).astype(np.uint8), ring) > 0
    )
    near, touch = np.ones((9, 9), np.uint8), cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
    parent = list(range(n + 1))

    def root(a: int) -> int:
        while parent[a] != a:
            a = parent[a]
        return a

    inside = [owner == k for k in range(n + 1)]
    z_mean = [_local_mean(z, inside[k] & valid) for k in range(n + 1)]
    for a in range(1, n + 1):
        grown = cv2.dilate(inside[a].astype(np.uint8), near) > 0
        touching = cv2.dilate(inside[a].astype(np.uint8), touch) > 0
        for b in range(a + 1, n + 1):
            if a in apart or b in apart:
                continue
            border = grown & inside[b]
            if border.sum() < 5:
                continue
            step = np.abs(z_mean[a] - z_mean[b]) > thr  # nan (no depth on one side): no step
            broken = float((step | broken_near)[border].mean())
            neck = int(touching[inside[b]].sum()) / np.sqrt(min(inside[a].sum(), inside[b].sum()))
            if broken < params.min_break and neck >= params.min_neck:
                parent[root(b)] = root(a)
    groups: dict[int, list[int]] = {}
    for k in range(1, n + 1):
        groups.setdefault(root(k), []).append(k)
    return list(groups.values())


def _local_mean(z: np.ndarray, weight: np.ndarray, size: int = 7) -> np.ndarray:
    """Mean of ``z`` over the ``weight`` pixels in a ``size`` square around each pixel (nan where none)."""
    import cv2

    w = weight.astype(np.float32)
    total = cv2.blur((z * w).astype(np.float32), (size, size))
    share = cv2.blur(w, (size, size))
    return np.where(share > 0, total / np.maximum(share, 1e-9), np.nan)
