"""Top-view tests of the regions :func:`real2sim.regions.find_clusters` finds: a region seen within a larger
one's outline is part of it (:func:`merge_nested`), and so is a region of its hue within a round one's
completed circle (:func:`merge_into_round`: a bowl's front wall cut off at its rim) and a small region over a
nearer one that makes a round whole with it (:func:`join_insides`: a bowl's inside over its near rim); a
region whose top view is two plateaus is two objects side by side (:func:`split_at_height_step`), a region
whose top view is two humps of one height is two objects lying side by side (:func:`split_at_saddle`), and
one whose top view is a solid top in a moat within a rim is an object standing in a vessel
(:func:`split_in_vessel`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.ndimage import binary_dilation, distance_transform_edt
from scipy.spatial import ConvexHull, QhullError

from real2sim.outline import fit_circle_outline
from real2sim.types import TablePlane

__all__ = [
    "MAX_STEP_CELLS",
    "join_insides",
    "merge_into_round",
    "merge_nested",
    "one_hue",
    "split_at_height_step",
    "split_at_saddle",
    "split_in_vessel",
    "top_view",
]


def merge_nested(
    regions: list[tuple[np.ndarray, float]], pts: np.ndarray, table: TablePlane, share: float = 0.6
) -> list[tuple[np.ndarray, float]]:
    """Merge each region into a larger one when ``share`` of its top-view points lie in that one's outline."""

    T = table.T_world_cam
    rng = np.random.default_rng(0)
    out: list[list[Any]] = []  # mask, top, hull half-planes (m, 3) or None
    for mask, top in sorted(regions, key=lambda r: -int(r[0].sum())):
        p = pts[mask]
        if len(p) > 1000:
            p = p[rng.choice(len(p), 1000, replace=False)]
        xy = (p @ T[:3, :3].T + T[:3, 3])[:, :2]
        for host in out:
            if (
                host[2] is not None
                and np.mean(np.all(xy @ host[2][:, :2].T + host[2][:, 2] <= 0, axis=1)) >= share
            ):
                host[0] = host[0] | mask
                host[1] = max(host[1], top)
                break
        else:
            try:
                planes = np.asarray(ConvexHull(xy).equations)
            except QhullError:
                planes = None
            out.append([mask, top, planes])
    return [(m, t) for m, t, _ in out]


ROUND_MAX_RESIDUAL = 0.05
"""Largest residual of a circle through a region's top-view outline, relative to its radius, for it to be
round (:func:`merge_into_round`)."""
ROUND_MARGIN = 0.1
"""How far (a share of the radius) past a round region's circle a part of it may reach."""
MIN_CHROMA = 10.0
"""Smallest chroma (distance from grey in Lab's a, b, OpenCV's 8-bit scale) of a colour whose hue angle is
compared."""
HUE_ANGLE_DEG = 15.0
"""Largest difference of two coloured regions' hue angles (degrees) for them to be of one hue."""
INSIDE_MAX_RESIDUAL = 0.08
"""Largest residual of a circle through the top-view outline of a vessel's front wall and its inside, relative
to its radius (:func:`join_insides`): the outline is the outer wall's near arc and the inner wall's far one, a
wall's thickness apart, and the depth camera's noise is a larger share of a small radius (bowl_stacking's
green bowl, 36 mm, through the camera model: 4.7-5.4 %); two discs side by side, touching or up to half a
radius apart, leave 8.5-14 %."""
ROUND_SHARE = 0.9
"""Share of a region's top-view points within that circle for it to be part of the round region."""
ROUND_RISE_M = 0.015
"""How far (m) a region's top may rise over a round one's to be its wall (:func:`merge_into_round`); what
rises higher stands in it (a can in a bowl, :func:`split_in_vessel`)."""
ROUND_HUE = 12.0
"""Largest distance of two regions' median colours in Lab's a, b (OpenCV's 8-bit scale): of one hue,
whatever their shading (lightness is left out: a bowl's lit inside and shaded outside differ most in it)."""


def merge_into_round(
    regions: list[tuple[np.ndarray, float]],
    pts: np.ndarray,
    valid: np.ndarray,
    table: TablePlane,
    lab: np.ndarray,
    near_px: int = 11,
) -> list[tuple[np.ndarray, float]]:
    """Merge each region into a larger round one (a bowl, a cup) it touches in the image (within ``near_px``
    px) when :data:`ROUND_SHARE` of its top-view points lie within that one's circle (fitted to its top-view
    outline, :data:`ROUND_MARGIN` larger) and the two are of one hue (:func:`one_hue`; ``lab``: the frame's
    colour in Lab; ``pts`` the camera points (H, W, 3, m), ``valid`` where they were measured). Two objects
    cannot stand in one footprint: a part in it is the vessel's wall that the depth camera's shadow along the
    rim cut off, unless it stands in the vessel (its top :data:`ROUND_RISE_M` over the vessel's, or of
    another hue)."""
    import cv2

    out = sorted(regions, key=lambda r: -int(r[0].sum()))
    merged = True
    while merged:
        merged = False
        for i, j in [(a, b) for a in range(len(out)) for b in range(a + 1, len(out))]:
            host, part = out[i][0], out[j][0]
            if out[j][1] > out[i][1] + ROUND_RISE_M:  # stands out of it: an object in it, not its wall
                continue
            near = cv2.dilate(part.astype(np.uint8), np.ones((near_px, near_px), np.uint8)) > 0
            if not (near & host).any() or not one_hue(lab, host, part):
                continue
            xy_host, xy_part = top_view(pts, host & valid, table), top_view(pts, part & valid, table)
            if len(xy_host) < 10 or len(xy_part) == 0:
                continue
            centre, radius, residual = fit_circle_outline(xy_host)
            within = np.linalg.norm(xy_part - centre, axis=1) <= (1 + ROUND_MARGIN) * radius
            if residual <= ROUND_MAX_RESIDUAL and np.mean(within) >= ROUND_SHARE:
                out[i] = (host | part, max(out[i][1], out[j][1]))
                del out[j]
                merged = True
                break
    return out


def join_insides(
    insides: list[tuple[np.ndarray, float]],
    regions: list[tuple[np.ndarray, float]],
    pts: np.ndarray,
    valid: np.ndarray,
    table: TablePlane,
    lab: np.ndarray,
    near_px: int = 11,
) -> list[tuple[np.ndarray, float]]:
    """``regions`` with each of ``insides`` joined to the one it touches (within ``near_px`` px) when the two
    are of one hue (:func:`one_hue`) and their union's top-view outline is round (a circle within
    :data:`INSIDE_MAX_RESIDUAL`); the others dropped. ``insides``: regions that do not rest on the table,
    their bottom hidden by a nearer region, too small to stand alone (:func:`real2sim.regions.find_clusters`).
    A small bowl's inside is such a region: the depth steps at its near rim, from the rim to the floor
    behind it, and the inside stands on the floor, not on the table. A sliver of an object seen between two
    nearer ones makes no round whole with either. ``pts``, ``valid``, ``lab``: as :func:`merge_into_round`."""
    import cv2

    out = list(regions)
    for inside, top in insides:
        near = cv2.dilate(inside.astype(np.uint8), np.ones((near_px, near_px), np.uint8)) > 0
        for i, (host, host_top) in enumerate(out):
            if not (near & host).any() or not one_hue(lab, host, inside):
                continue
            union = (host | inside) & valid
            if union.sum() < 10:
                continue
            _, _, residual = fit_circle_outline(top_view(pts, union, table))
            if residual <= INSIDE_MAX_RESIDUAL:
                out[i] = (host | inside, max(top, host_top))
                break
    return out


def top_view(pts: np.ndarray, mask: np.ndarray, table: TablePlane) -> np.ndarray:
    """The table-frame (x, y) (N, 2; m) of the camera points ``pts`` (H, W, 3) under ``mask``."""
    T = table.T_world_cam
    return np.asarray((pts[mask] @ T[:3, :3].T + T[:3, 3])[:, :2])


def one_hue(lab: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether masks ``a`` and ``b`` are of one hue: their median colours within :data:`ROUND_HUE` in Lab's
    a, b, or, both coloured (chroma :data:`MIN_CHROMA` or more), of hue angles within :data:`HUE_ANGLE_DEG`
    (a shaded wall's a, b are its lit inside's scaled down: the same angle, half the chroma)."""
    ab_a, ab_b = np.median(lab[a][:, 1:], axis=0) - 128.0, np.median(lab[b][:, 1:], axis=0) - 128.0
    if np.linalg.norm(ab_a - ab_b) <= ROUND_HUE:
        return True
    if min(np.linalg.norm(ab_a), np.linalg.norm(ab_b)) < MIN_CHROMA:
        return False
    turn = np.arctan2(ab_a[1], ab_a[0]) - np.arctan2(ab_b[1], ab_b[0])
    return bool(abs(np.rad2deg(np.arctan2(np.sin(turn), np.cos(turn)))) <= HUE_ANGLE_DEG)


MAX_STEP_CELLS = 40_000
"""Top-view cells (at 5 mm: a 1 m square) beyond which a region is not searched for a height step."""


def split_at_height_step(
    mask: np.ndarray,
    pts: np.ndarray,
    height: np.ndarray,
    T_world_cam: np.ndarray,
    min_pixels: int,
    *,
    cell_m: float = 0.005,
    low: float = 0.6,
    high: float = 0.75,
    band: tuple[float, float] = (0.55, 0.85),
    min_share: float = 0.25,
    min_cells: int = 20,
    max_band: float = 0.1,
    max_inside: float = 0.2,
) -> list[tuple[np.ndarray, float]]:
    """Split a region into two objects standing side by side when its top view is two plateaus.

    The top-view height field (highest point per ``cell_m`` cell) of one object rises gradually or is one
    plateau; two objects touching each other (a can lying against a taller one) show a step: cells below
    ``low`` of the region's top and cells above ``high`` of it, hardly any (``max_band`` of the cells) within
    ``band``. The lower plateau is an object of its own when its largest connected part holds ``min_share``
    of the cells (and ``min_cells``) and at most ``max_inside`` of it lies within the higher cells' outline
    (a bowl's floor lies within its rim). Returns ``[(mask, top)]``: the region, or its two parts."""
    import cv2

    field = _height_field(mask, pts, height, T_world_cam, cell_m)
    if field is None:  # wider than any object: not two touching ones
        return [(mask, float(np.percentile(height[mask], 98)))]
    rows, cols, h, top, ij, H = field
    whole = [(mask, top)]
    occupied = np.isfinite(H)
    n = int(occupied.sum())
    lower, upper = occupied & (H < low * top), occupied & (H >= high * top)
    between = occupied & (H >= band[0] * top) & (H < band[1] * top)
    if between.sum() > max_band * n or upper.sum() < min_cells:
        return whole
    count, comp = cv2.connectedComponents(lower.astype(np.uint8), connectivity=8)
    if count < 2:
        return whole
    sizes = np.bincount(comp[lower])
    k = int(np.argmax(sizes[1:])) + 1
    part = comp == k
    if sizes[k] < max(min_cells, min_share * n):
        return whole
    # Within the higher cells' outline: inside (or on) their convex hull. Its facet equations, not a Delaunay
    # triangulation's point location: the cells are a grid, which made find_simplex take up to 0.7 s.
    planes = np.asarray(ConvexHull(np.argwhere(upper)).equations)
    cells = np.argwhere(part).astype(np.float64)
    inside = np.all(cells @ planes[:, :2].T + planes[:, 2] <= 1e-9, axis=1)
    if np.mean(inside) > max_inside:
        return whole
    return _two_parts(mask, rows, cols, h, part[ij[:, 0], ij[:, 1]], min_pixels) or whole


def split_at_saddle(
    mask: np.ndarray,
    pts: np.ndarray,
    height: np.ndarray,
    T_world_cam: np.ndarray,
    min_pixels: int,
    *,
    cell_m: float = 0.005,
    level: float = 0.75,
    min_cells: int = 40,
    min_share: float = 0.3,
    min_fill: float = 0.6,
    min_seen: float = 0.5,
    min_dip_m: float = 0.006,
) -> list[tuple[np.ndarray, float]]:
    """Split a region into two objects of one height lying side by side (two pouches, two cans) when its
    top view is two humps: the cells above ``level`` of its top fall into two solid parts (each at least
    ``min_cells`` and ``min_share`` of the larger, each filling ``min_fill`` of its own convex hull) with
    lower cells between them. A bowl's or a cup's rim, broken where its thin edge lost its depth, is arcs:
    they fill little of their hulls. ``min_seen`` of the cells on the line between the humps' centres must
    have been seen, not hidden by an occluder, and dip ``min_dip_m`` (m) below the lower hump's median
    height there. Each pixel goes to the nearer hump in the top view. Returns ``[(mask, top)]``: the region,
    or its two parts."""
    import cv2

    field = _height_field(mask, pts, height, T_world_cam, cell_m)
    if field is None:
        return [(mask, float(np.percentile(height[mask], 98)))]
    rows, cols, h, top, ij, H = field
    whole = [(mask, top)]
    upper = np.isfinite(H) & (H >= level * top)
    count, comp, stats, _ = cv2.connectedComponentsWithStats(upper.astype(np.uint8), connectivity=8)
    sizes = stats[1:, cv2.CC_STAT_AREA]
    if count < 3:
        return whole
    a, b = (np.argsort(sizes)[::-1][:2] + 1).tolist()
    if stats[b, cv2.CC_STAT_AREA] < max(min_cells, min_share * stats[a, cv2.CC_STAT_AREA]):
        return whole
    for k in (a, b):
        cells = np.argwhere(comp == k)
        try:
            hull = ConvexHull(cells.astype(np.float64))
        except QhullError:
            return whole
        if len(cells) < min_fill * hull.volume:  # an arc (a rim), not a hump
            return whole
    # The dip between them must be seen: where the cells between the humps' centres are mostly unseen, the
    # humps are one object's top cut by an occluder (a gripper holding a brush).
    ends = [np.argwhere(comp == k).mean(axis=0) for k in (a, b)]
    steps = np.linspace(0.0, 1.0, 4 * int(np.ceil(np.linalg.norm(ends[1] - ends[0]))) + 2)
    line = np.unique(np.rint(ends[0] + np.outer(steps, ends[1] - ends[0])).astype(np.intp), axis=0)
    between = (comp[line[:, 0], line[:, 1]] != a) & (comp[line[:, 0], line[:, 1]] != b)
    on_line = H[line[:, 0], line[:, 1]][between]
    # Seen, and not beside an unseen cell: at the edge of an occluder's shadow the depth is its edge's.
    clear = ~binary_dilation(~np.isfinite(H), np.ones((3, 3), bool))[line[:, 0], line[:, 1]][between]
    seen = np.isfinite(on_line) & clear
    if not seen.any() or np.mean(seen) < min_seen:
        return whole
    humps = min(float(np.median(H[comp == k])) for k in (a, b))
    if float(on_line[seen].min()) > humps - min_dip_m:  # no real dip: a flat top's noise (a warped book)
        return whole
    # Each cell to the nearer hump (top-view distance), then each pixel to its cell's hump.
    dist_a = distance_transform_edt(comp != a)
    dist_b = distance_transform_edt(comp != b)
    return _two_parts(mask, rows, cols, h, (dist_a <= dist_b)[ij[:, 0], ij[:, 1]], min_pixels) or whole


IN_VESSEL_CELL_M = 0.005
"""Top-view cell (m) of :func:`split_in_vessel`."""
IN_VESSEL_LEVEL = 0.9
"""Share of a region's top above which its cells are the top of an object standing in a vessel."""
IN_VESSEL_MIN_CELLS = 40
"""Fewest such top-view cells (5 mm: 10 cm^2) for a verdict."""
IN_VESSEL_MAX_SHARE = 0.5
"""Largest share of the region's top-view cells that top may hold: the vessel is wider than what stands in
it."""
IN_VESSEL_MIN_FILL = 0.7
"""Least share of its convex hull the top fills: a solid top, not a rim's arc."""
IN_VESSEL_RING_M = 0.03
"""Width (m, top view) of the ring around the top whose heights are the moat between it and the vessel's
rim."""
IN_VESSEL_DROP_M = 0.025
"""How far (m) the moat's median height lies under the top's."""
IN_VESSEL_RIM_M = 0.02
"""How far (m) above the moat's median the vessel's rim stands, beyond the ring."""
IN_VESSEL_RIM_SECTORS = 5
"""Least number of the eight 45-degree sectors around the top in which that rim is seen."""
IN_VESSEL_GROW_M = 0.01
"""How far (m, top view) past its top the standing object's side reaches (the depth's smoothing spreads
it)."""
IN_VESSEL_FLOOR_M = 0.01
"""How far (m) above the vessel's floor the standing object's pixels begin: lower ones are the floor's."""


def split_in_vessel(
    mask: np.ndarray, pts: np.ndarray, height: np.ndarray, T_world_cam: np.ndarray, min_pixels: int
) -> tuple[list[tuple[np.ndarray, float]], float | None]:
    """Split a region into a vessel and the object standing in it (a can in a bowl): its top view is a solid
    top (the cells above :data:`IN_VESSEL_LEVEL` of the region's top, filling :data:`IN_VESSEL_MIN_FILL` of
    their hull, at most :data:`IN_VESSEL_MAX_SHARE` of the cells), a moat around it :data:`IN_VESSEL_DROP_M`
    lower, and beyond the moat a rim rising :data:`IN_VESSEL_RIM_M` above it on most sides
    (:data:`IN_VESSEL_RIM_SECTORS`). A bottle's cap has a moat (its shoulder) but no rim beyond it; a bowl's
    rim is an arc, not a solid top. The standing object keeps the pixels within :data:`IN_VESSEL_GROW_M` of
    its top in the top view and :data:`IN_VESSEL_FLOOR_M` above the vessel's floor (the moat's 10th
    percentile). Returns ``([(mask, top)], None)``: the region whole, or ``([(vessel, top), (object, top)],
    floor)`` with the height (m above the table) the object stands at."""
    import cv2

    field = _height_field(mask, pts, height, T_world_cam, IN_VESSEL_CELL_M)
    if field is None:
        return [(mask, float(np.percentile(height[mask], 98)))], None
    rows, cols, h, top, ij, H = field
    whole: tuple[list[tuple[np.ndarray, float]], float | None] = [(mask, top)], None
    occupied = np.isfinite(H)
    count, comp, stats, _ = cv2.connectedComponentsWithStats(
        (occupied & (H >= IN_VESSEL_LEVEL * top)).astype(np.uint8), connectivity=8
    )
    if count < 2:
        return whole
    summit = comp == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    cells = np.argwhere(summit).astype(np.float64)
    if not IN_VESSEL_MIN_CELLS <= len(cells) <= IN_VESSEL_MAX_SHARE * occupied.sum():
        return whole
    try:
        if len(cells) < IN_VESSEL_MIN_FILL * ConvexHull(cells).volume:
            return whole
    except QhullError:
        return whole
    away = distance_transform_edt(~summit) * IN_VESSEL_CELL_M  # m from the top, top view
    ring = occupied & ~summit & (away <= IN_VESSEL_RING_M)
    if not ring.any() or np.median(H[ring]) > np.median(H[summit]) - IN_VESSEL_DROP_M:
        return whole
    rim = occupied & (away > IN_VESSEL_RING_M) & (H >= np.median(H[ring]) + IN_VESSEL_RIM_M)
    angle = np.arctan2(*(np.argwhere(rim) - cells.mean(axis=0)).T)
    if len(np.unique(np.floor(4 * (angle + np.pi) / np.pi).astype(int) % 8)) < IN_VESSEL_RIM_SECTORS:
        return whole
    floor = float(np.percentile(H[ring], 10))
    standing = (away <= IN_VESSEL_GROW_M)[ij[:, 0], ij[:, 1]] & (h > floor + IN_VESSEL_FLOOR_M)
    parts = _two_parts(mask, rows, cols, h, ~standing, min_pixels)
    return whole if parts is None else (parts, floor)


def _two_parts(
    mask: np.ndarray, rows: np.ndarray, cols: np.ndarray, h: np.ndarray, first: np.ndarray, min_pixels: int
) -> list[tuple[np.ndarray, float]] | None:
    """``[(mask, top)]`` of the region's pixels (``rows``, ``cols``, heights ``h``) in ``first`` and of the
    others; None when either has fewer than ``min_pixels``."""
    out = []
    for sel in (first, ~first):
        if sel.sum() < min_pixels:
            return None
        m = np.zeros_like(mask)
        m[rows[sel], cols[sel]] = True
        out.append((m, float(np.percentile(h[sel], 98))))
    return out


def _height_field(
    mask: np.ndarray, pts: np.ndarray, height: np.ndarray, T_world_cam: np.ndarray, cell_m: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray, np.ndarray] | None:
    """The top view of a region: its pixels (rows, cols), their heights (m), its top (98th percentile),
    each pixel's cell (N, 2) and the highest point per ``cell_m`` (m) cell (-inf: empty); None when the grid
    would exceed :data:`MAX_STEP_CELLS`."""
    rows, cols = np.nonzero(mask)
    h = height[rows, cols]
    top = float(np.percentile(h, 98))
    xy = pts[rows, cols] @ T_world_cam[:2, :3].T + T_world_cam[:2, 3]
    # Stray points (mixed depth at silhouettes) must not stretch the grid: clip to the bulk's extent.
    xy = np.clip(xy, np.percentile(xy, 0.5, axis=0), np.percentile(xy, 99.5, axis=0))
    ij = np.floor((xy - xy.min(axis=0)) / cell_m).astype(np.intp)
    if np.prod(ij.max(axis=0) + 1) > MAX_STEP_CELLS:
        return None
    H = np.full(tuple(ij.max(axis=0) + 1), -np.inf)
    np.maximum.at(H, (ij[:, 0], ij[:, 1]), h)
    return rows, cols, h, top, ij, H
