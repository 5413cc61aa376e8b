"""Geometric object regions: the pixels standing on the table, split into one region per object.

:func:`find_clusters` finds the candidate pixels above the table plane, cuts them at depth discontinuities,
concave creases and colour edges (:mod:`real2sim.clutter`), keeps the regions that rest on the table, merges
regions seen within another's top-view outline, splits a region whose top view is two plateaus, that holds
touching objects of different colours (:mod:`real2sim.split`) or a vessel and what stands in it. Matching
regions to labels is :mod:`real2sim.segment`'s job.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from real2sim.clutter import colour_edges, concave_creases, merge_appendages, regrow
from real2sim.handover import Borrowed, borrowed_pieces, owner_index
from real2sim.holes import fill_depth_holes, fill_enclosed, round_floors
from real2sim.lids import join_lids
from real2sim.occluded import join_across_occluders
from real2sim.outline import outline_kind
from real2sim.plateaus import (
    join_insides,
    merge_into_round,
    merge_nested,
    split_at_height_step,
    split_at_saddle,
    split_in_vessel,
)
from real2sim.region_check import ROUGHNESS_PX, RegionCheck, table_roughness
from real2sim.silhouette import snap_to_colour
from real2sim.split import make_context, split_regions
from real2sim.table import camera_points, faces_image_up, heights_above_table
from real2sim.types import TablePlane
from real2sim.walls import PEEL_MIN_PIXELS, in_wall, peel_vertical_planes
from simpact.core.frame import Frame

__all__ = [
    "ROUGHNESS_PX",
    "Cluster",
    "find_clusters",
    "table_roughness",
]


@dataclasses.dataclass(eq=False)
class Cluster:
    """A candidate object region found by the geometric segmenter."""

    mask: np.ndarray
    """(H, W) bool."""
    pixels: int
    height_m: float
    """Highest point above the table (m, 98th percentile)."""
    footprint_m: tuple[float, float]
    """Extent along the two principal horizontal directions (m, large first)."""
    colour_rgb: tuple[int, int, int]
    """Median colour of the region."""
    outline: str = "unknown"
    """Top-view outline of its points: ``round`` (a circle fits better) or ``rectangular``."""
    silhouette: np.ndarray | None = None
    """(H, W) bool: ``mask`` snapped to the photo's colour edges (:mod:`real2sim.silhouette`)."""
    support_m: float = 0.0
    """Height (m above the table) of the surface it lies on: more than 0 on another object's top."""

    @property
    def seen(self) -> np.ndarray:
        """The region's pixels in the photo: its silhouette where there is one, else its mask."""
        return self.mask if self.silhouette is None else self.silhouette

    @property
    def size_m3(self) -> float:
        """Bounding volume (m^3), the size used to rank regions."""
        return float(self.footprint_m[0] * self.footprint_m[1] * self.height_m)


def find_clusters(
    frame: Frame,
    table: TablePlane,
    *,
    min_height_m: float = 0.008,
    max_height_m: float = 0.45,
    touch_m: float = 0.03,
    jump_m: float = 0.015,
    min_pixels: int = 80,
    min_table_ring: float = 0.15,
    min_support: float = 0.15,
    robot_base_radius_m: float = 0.15,
    creases: bool = True,
    colour_cuts: bool = True,
    min_on_table: float = 0.5,
    min_clearance: float = 5.0,
    fill_holes: bool = True,
    colour_split: bool = True,
    snap: bool = True,
) -> list[Cluster]:
    """Regions of pixels standing on the table, largest first.

    A pixel is a candidate if its point is ``min_height_m`` to ``max_height_m`` (m) above the table; regions
    are split where neighbouring points are more than ``jump_m`` (m, at 1 m range, growing with depth) apart.
    A region is kept if it has ``min_pixels``, is no taller than ``max_height_m``, at least
    ``min_table_ring`` of the valid pixels around it are table, and it rests on the table: its lowest points
    are within ``touch_m`` of the table and at least ``min_support`` of its lower silhouette borders the
    table without a gap in depth (clutter behind the table's edge has one) — or its bottom is hidden behind
    a kept region in front of it and it hangs from nothing taller than ``max_height_m`` (the robot arm),
    unless it stands on the table under that (a brush under the gripper); one whose bottom is so hidden but
    that shows under :data:`HIDDEN_MIN_AREA_M2` joins the region hiding it only when the two make a round
    whole of one hue (a small bowl's inside over its near rim, :func:`real2sim.plateaus.join_insides`). Its
    top must stand ``min_clearance`` times the table's local roughness above it: a fold of a cloth or the
    sensor's noise on a far table rises a few times that, an object far more; and a low region of the
    table's colour must rise from it steeply, or it is a bump of the table (these tests:
    :class:`real2sim.region_check.RegionCheck`).
    A large region dropped (a wall with the objects standing against it) is searched for vertical planes:
    what is left without them is checked again (:func:`real2sim.walls.peel_vertical_planes`), and a region
    lying in such a plane (:data:`real2sim.walls.WALL_SHARE` of its points within the plane's band) is a piece
    of that wall cut off by the objects in front of it, not an object.
    Regions seen within another's top-view outline are merged, a region whose top view is two plateaus is
    split, so is, after the colour split, a vessel and the object standing in it (a can in a bowl,
    :func:`real2sim.plateaus.split_in_vessel`: that object is fitted standing on the vessel's floor), and a
    small region of a larger one's colour beside it (a mug's handle) joins it
    (:func:`real2sim.clutter.merge_appendages`), as does, last, a region of a round one's hue within its
    completed circle (a bowl's front wall the shadow along its rim cut off, :func:`merge_into_round`), and
    two regions that are one bar seen on both sides of something in front of it are joined
    (:func:`real2sim.occluded.join_across_occluders`: a brush under the gripper's fingers); a low
    region of the table's colour cut off behind a taller one is its smoothed depth's halo and is dropped
    (:meth:`~real2sim.region_check.RegionCheck.is_halo`).
    With a calibrated frame, regions within ``robot_base_radius_m`` (m) of the base origin (the robot's
    mount) are dropped. With ``colour_split``, a
    region of touching objects of different colours is split (:func:`real2sim.split.split_by_colour`). With
    ``fill_holes``, each region then takes the pixels without depth along its silhouette that have its colour
    (:func:`real2sim.holes.fill_depth_holes`) and the holes it encloses that are not table
    (:func:`real2sim.holes.fill_enclosed`). With ``snap``, each region's outline moved to the photo's colour
    edges within a few pixels is its ``silhouette`` (:func:`real2sim.silhouette.snap_to_colour`); its
    ``mask`` stays what the depth found. A piece of one object that a nearer one's region holds (seen over
    its rim) moves to the silhouette of the neighbour it belongs to
    (:func:`real2sim.handover.borrowed_pieces`). With ``fill_holes``, a round region's silhouette also takes
    the pixels of its colour seen at the table's height within its rim (:func:`real2sim.holes.round_floors`:
    a bowl's floor, whose points would make its foot as wide as its floor if fitted).
    """
    px = _frame_pixels(frame, table, min_height_m, jump_m)
    top_is_up = faces_image_up(table.normal_cam)  # not a camera looking straight down
    coarse, tall = _tall_structures(px.z, px.thr, px.candidate, px.height, max_height_m, top_is_up)
    check = RegionCheck(
        pts=px.pts,
        height=px.height,
        table=table,
        near_table=px.valid & ~px.candidate,
        table_world=_table_sample(px.pts, px.valid, table),
        coarse=coarse,
        tall=tall,
        min_height_m=min_height_m,
        max_height_m=max_height_m,
        touch_m=touch_m,
        min_table_ring=min_table_ring,
        robot_base_radius_m=robot_base_radius_m,
        min_on_table=min_on_table,
        min_clearance=min_clearance,
        lab=px.lab,
        focal_px=px.focal_px,
        table_lab=np.median(px.lab[table.inliers], axis=0) if table.inliers.any() else np.full(3, np.nan),
    )
    regions = _standing_regions(px, check, creases, colour_cuts, min_pixels)
    kept, insides, floating = _resting(regions, px.z, min_support, px.focal_px)
    kept = join_lids(floating, kept, px.z, px.height, px.focal_px)
    kept, stacked, borrowed = _one_region_per_object(
        px, kept, insides, min_pixels, colour_split, jump_m, touch_m
    )
    kept = [(m, top) for m, top in kept if not check.is_halo(m, kept)]  # the split leaves halos apart
    if fill_holes and kept:
        kept = _holes_filled(px, kept)
    clusters = _clusters(px, kept, stacked)
    if snap and clusters:
        snapped = snap_to_colour([c.mask for c in clusters], frame.rgb, px.z, px.candidate, jump_m=jump_m)
        for c, s in zip(clusters, snapped):
            c.silhouette = s
    _give_back(clusters, borrowed)
    if fill_holes and clusters:
        _take_round_floors(px, clusters, check.table_lab, min_height_m, min_pixels)
    clusters.sort(key=lambda c: -c.size_m3)
    return clusters


@dataclasses.dataclass(frozen=True)
class _FramePixels:
    """What :func:`find_clusters`' stages read of one frame, per pixel (H, W): its camera-frame points (m),
    which have depth, their height above the table (m), the candidates (high enough), the depth ``z`` (m), the
    depth jump that cuts regions apart there (m), the concave creases and the colour in Lab (OpenCV's 8-bit
    scale)."""

    frame: Frame
    table: TablePlane
    pts: np.ndarray
    valid: np.ndarray
    height: np.ndarray
    candidate: np.ndarray
    z: np.ndarray
    thr: np.ndarray
    crease: np.ndarray
    lab: np.ndarray

    @property
    def focal_px(self) -> float:
        """The camera's focal length (px)."""
        return float(self.frame.K[0, 0])

    @property
    def T(self) -> np.ndarray:
        """The camera's pose in the table's world frame (4, 4)."""
        return self.table.T_world_cam


def _frame_pixels(frame: Frame, table: TablePlane, min_height_m: float, jump_m: float) -> _FramePixels:
    """The :class:`_FramePixels` of ``frame``: candidates ``min_height_m`` (m) above ``table``, regions cut
    where neighbouring points are ``jump_m`` (m, at 1 m range, growing with depth) apart."""
    import cv2

    pts, valid = camera_points(frame, 1)
    height = np.where(valid, heights_above_table(table, pts), 0.0)
    candidate = valid & (height > min_height_m)
    z = frame.depth.astype(np.float64)
    thr = jump_m * np.maximum(z, 0.3)
    lab = cv2.cvtColor(np.ascontiguousarray(frame.rgb), cv2.COLOR_RGB2LAB).astype(np.float64)
    crease = concave_creases(pts, valid)
    return _FramePixels(frame, table, pts, valid, height, candidate, z, thr, crease, lab)


def _table_sample(pts: np.ndarray, valid: np.ndarray, table: TablePlane) -> np.ndarray:
    """About 4000 of the table's inlier points in its world frame (N, 3; m)."""
    T = table.T_world_cam
    on_table = pts[table.inliers & valid]
    return on_table[:: max(1, len(on_table) // 4000)] @ T[:3, :3].T + T[:3, 3]


def _standing_regions(
    px: _FramePixels, check: RegionCheck, creases: bool, colour_cuts: bool, min_pixels: int
) -> list[tuple[np.ndarray, float, float]]:
    """``(mask, top (m), support fraction)`` of the regions of at least ``min_pixels`` that pass ``check``,
    the candidates cut at depth jumps, and with ``creases`` and ``colour_cuts`` at those too
    (:func:`_cut_regions`); a large region that fails is searched for a wall and the parts left are checked
    (:func:`real2sim.walls.peel_vertical_planes`); a region lying in such a wall is a piece of it, not an
    object."""
    import cv2

    cuts = px.crease if creases else None
    count, labels_img, stats = _cut_regions(
        px.frame.rgb, px.pts, px.valid, px.candidate, px.z, px.thr, cuts, colour_cuts
    )
    regions: list[tuple[np.ndarray, float, float]] = []
    walls: list[tuple[np.ndarray, float]] = []
    rng = np.random.default_rng(0)
    for k in range(1, count):
        if stats[k, cv2.CC_STAT_AREA] < min_pixels:
            continue
        mask = labels_img == k
        found = check(mask, peeled=False)
        if found is not None:
            regions.append(found)
        elif stats[k, cv2.CC_STAT_AREA] >= PEEL_MIN_PIXELS:  # objects standing against a wall
            for part in peel_vertical_planes(mask, px.pts, px.T, min_pixels, rng, walls=walls):
                found = check(part, peeled=True)
                if found is not None:
                    regions.append(found)
    return [r for r in regions if not in_wall(r[0], px.pts, px.valid, px.T, walls)]


def _one_region_per_object(
    px: _FramePixels,
    kept: list[tuple[np.ndarray, float]],
    insides: list[tuple[np.ndarray, float]],
    min_pixels: int,
    colour_split: bool,
    jump_m: float,
    touch_m: float,
) -> tuple[list[tuple[np.ndarray, float]], list[tuple[np.ndarray, float]], list[Borrowed]]:
    """The resting regions ``kept`` ((mask, top (m)) each) joined where one object shows as several and split
    where one region holds several (see :func:`find_clusters`), the objects found lying on another or
    standing in a vessel with the height (m above the table) they rest at, and the pieces of one object a
    neighbour's region holds (:func:`real2sim.handover.borrowed_pieces`)."""
    pts, valid, height, T, lab = px.pts, px.valid, px.height, px.T, px.lab
    kept = join_insides(insides, kept, pts, valid, px.table, lab)
    kept = merge_nested(kept, pts, px.table)
    kept = [part for m, _ in kept for part in split_at_height_step(m, pts, height, T, min_pixels)]
    kept = [part for m, _ in kept for part in split_at_saddle(m, pts, height, T, min_pixels)]
    ctx = None
    if colour_split:
        up = px.table.normal_cam
        ctx = make_context(
            px.frame.rgb, pts, valid, height, px.crease, px.focal_px, up, jump_m=jump_m, touch_m=touch_m
        )
        kept = split_regions(kept, ctx)
    stacked = [] if ctx is None else ctx.stacked
    kept = _split_vessels(kept, pts, height, T, min_pixels, stacked)  # after the split: a vessel alone
    kept = merge_appendages(kept, pts, valid, px.frame.rgb)  # after the split: a handle matches its mug alone
    kept = merge_into_round(kept, pts, valid, px.table, lab)  # last: the gap split parts a vessel's wall too
    kept = join_across_occluders(kept, pts, valid, px.z, px.table, lab)  # a brush the fingers cut in two
    borrowed = [] if ctx is None else borrowed_pieces(kept, ctx)  # last: on the regions as they are fitted
    return kept, stacked, borrowed


def _give_back(clusters: list[Cluster], borrowed: list[Borrowed]) -> None:
    """Adds each borrowed piece to its owner's silhouette and takes it out of every other cluster's."""
    for piece, owner_mask in borrowed:
        k = owner_index(owner_mask, [c.mask for c in clusters])
        if k is None:
            continue
        for i, c in enumerate(clusters):
            c.silhouette = (c.seen | piece) if i == k else (c.seen & ~piece)


def _holes_filled(px: _FramePixels, kept: list[tuple[np.ndarray, float]]) -> list[tuple[np.ndarray, float]]:
    """``kept`` ((mask, top (m)) each) with each mask grown over the pixels without depth along it that have
    its colour and the holes it encloses that are not table (:mod:`real2sim.holes`)."""
    objects = np.zeros_like(px.candidate)
    for m, _ in kept:
        objects |= m
    free = px.valid & ~objects
    grown = fill_depth_holes([m for m, _ in kept], px.frame.rgb, px.z, free, px.focal_px)
    grown = fill_enclosed(grown, px.valid & ~px.candidate)  # not the table seen through a handle
    return [(g, top) for g, (_, top) in zip(grown, kept)]


def _clusters(
    px: _FramePixels, kept: list[tuple[np.ndarray, float]], stacked: list[tuple[np.ndarray, float]]
) -> list[Cluster]:
    """The :class:`Cluster` of each region in ``kept`` ((mask, top (m)) each), resting at the height of the
    ``stacked`` object it holds half of, if any (:mod:`real2sim.stacked`, or standing in a vessel)."""
    rng = np.random.default_rng(0)
    clusters = [_cluster(mask, top, px.pts, px.valid, px.T, px.frame.rgb, rng) for mask, top in kept]
    for c in clusters:
        c.support_m = max((h for m, h in stacked if (c.mask & m).sum() >= 0.5 * m.sum()), default=0.0)
    return clusters


def _take_round_floors(
    px: _FramePixels, clusters: list[Cluster], table_lab: np.ndarray, min_height_m: float, min_pixels: int
) -> None:
    """Adds to each round cluster's silhouette the pixels of its colour seen at the table's height within its
    rim: a vessel's floor is seen, not fitted, its depth the table's (:func:`real2sim.holes.round_floors`)."""
    T = px.T
    xy = np.where(px.valid[..., None], px.pts @ T[:2, :3].T + T[:2, 3], np.nan)
    low = px.valid & (np.abs(px.height) <= min_height_m)
    seen = [(c.seen, c.height_m) for c in clusters]
    floors = round_floors(seen, xy, low, px.lab, table_lab, px.frame.K, T, min_pixels)
    for c, floor in zip(clusters, floors):
        if floor.any():
            c.silhouette = c.seen | floor


def _split_vessels(
    regions: list[tuple[np.ndarray, float]],
    pts: np.ndarray,
    height: np.ndarray,
    T_world_cam: np.ndarray,
    min_pixels: int,
    stacked: list[tuple[np.ndarray, float]],
) -> list[tuple[np.ndarray, float]]:
    """``regions`` with each that is a vessel and the objects standing in it split apart, the tallest first
    (:func:`real2sim.plateaus.split_in_vessel`, again on what is left); each object so found is added to
    ``stacked`` with the height (m above the table) it stands at."""
    out: list[tuple[np.ndarray, float]] = []
    for region in regions:
        while True:
            parts, floor = split_in_vessel(region[0], pts, height, T_world_cam, min_pixels)
            if floor is None:
                out.append(region)
                break
            region, standing = parts
            out.append(standing)
            stacked.append((standing[0], floor))
    return out


def _cut_regions(
    rgb: np.ndarray,
    pts: np.ndarray,
    valid: np.ndarray,
    candidate: np.ndarray,
    z: np.ndarray,
    thr: np.ndarray,
    crease: np.ndarray | None,
    colour_cuts: bool,
) -> tuple[int, np.ndarray, np.ndarray]:
    """The candidate pixels cut into connected regions where depth ``z`` (m) jumps over ``thr`` (m), concave
    creases and colour edges: ``(count, labels image, cv2 stats)``; crease and colour cuts are given back to
    the regions beside them (:func:`real2sim.clutter.regrow`); ``crease``: the concave creases, or None."""
    import cv2

    # Each jump cuts off its farther pixel only, so thin near surfaces (a bowl's rim) stay connected.
    edge = np.zeros_like(candidate)
    dz_x = np.diff(z, axis=1)
    dz_y = np.diff(z, axis=0)
    edge[:, 1:] |= dz_x > thr[:, 1:]
    edge[:, :-1] |= -dz_x > thr[:, 1:]
    edge[1:, :] |= dz_y > thr[1:, :]
    edge[:-1, :] |= -dz_y > thr[1:, :]
    # Touching objects meet in concave creases, and differ in colour where the surface bends.
    cut = np.zeros_like(candidate)
    if crease is not None:
        cut |= crease
    if colour_cuts:
        cut |= colour_edges(rgb, pts, valid)
    cut = (cv2.dilate(cut.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0) & candidate & ~edge
    region = (candidate & ~edge & ~cut).astype(np.uint8)
    count, labels_img, stats, _ = cv2.connectedComponentsWithStats(region, connectivity=4)
    return count, regrow(labels_img, cut), stats


def _tall_structures(
    z: np.ndarray,
    thr: np.ndarray,
    candidate: np.ndarray,
    height: np.ndarray,
    max_height_m: float,
    top_is_up: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Coarse regions (cut at 4 times the depth jump ``thr``, m) and which of them are tall structures: higher
    than ``max_height_m`` (m) or, ``top_is_up`` (the camera looks at the table from the front), leaving the
    image at its top (the robot arm, clutter). A region attached to one belongs to it. Returns ``(coarse
    labels image, tall per label)``."""
    import cv2

    loose = np.zeros_like(candidate)
    loose[:, 1:] |= np.abs(np.diff(z, axis=1)) > 4 * thr[:, 1:]
    loose[1:, :] |= np.abs(np.diff(z, axis=0)) > 4 * thr[1:, :]
    n_coarse, coarse = cv2.connectedComponents((candidate & ~loose).astype(np.uint8), connectivity=8)
    coarse_top = np.zeros(n_coarse)
    np.maximum.at(coarse_top, np.asarray(coarse[candidate], dtype=np.intp), height[candidate])
    tall = coarse_top > max_height_m
    if top_is_up:
        tall[np.unique(coarse[:2][candidate[:2]])] = True
    tall[0] = False
    return coarse, tall


HIDDEN_GAP_PX = 6
"""Rows under a region's lower border searched for the nearer region that hides its bottom: the depth camera
smears the edge between the two into mixed depths that neither region keeps."""
HIDDEN_MIN_AREA_M2 = 0.0015
"""Smallest area (m², seen face on at its depth) of a region whose bottom is hidden: a sliver seen between
two objects is none."""


def _resting(
    regions: list[tuple[np.ndarray, float, float]], z: np.ndarray, min_support: float, focal_px: float
) -> tuple[list[tuple[np.ndarray, float]], list[tuple[np.ndarray, float]], list[tuple[np.ndarray, float]]]:
    """``(mask, top)`` of the regions resting on the table: ``min_support`` of their lower silhouette on it,
    or their bottom hidden behind such a region nearer the camera (depth ``z``, m) within
    :data:`HIDDEN_GAP_PX` rows under it and :data:`HIDDEN_MIN_AREA_M2` large (``focal_px``: the camera's
    focal length, px); those whose bottom is so hidden but that are smaller (a sliver between two
    objects, or a vessel's inside seen over its near rim: :func:`real2sim.plateaus.join_insides`); and the
    others, floating (a can's lid cut off by its rim's missing depth: :func:`real2sim.lids.join_lids`)."""
    kept = [(m, top) for m, top, support in regions if support >= min_support]
    small: list[tuple[np.ndarray, float]] = []
    floating: list[tuple[np.ndarray, float]] = []
    near = np.zeros(z.shape, bool)
    for m, _ in kept:
        near |= m
    for m, top, support in regions:
        if support >= min_support:
            continue
        lowest = m.copy()  # each column's pixels with no mask pixel right under them
        lowest[:-1] &= ~m[1:]
        below = np.zeros_like(m)
        for k in range(1, HIDDEN_GAP_PX + 1):
            below[k:] |= lowest[:-k]
        below &= near & ~m
        z_own = float(np.median(z[m]))
        large = m.sum() * (z_own / focal_px) ** 2 >= HIDDEN_MIN_AREA_M2
        if below.any() and np.median(z[below]) < z_own - 0.01:
            (kept if large else small).append((m, top))
        else:
            floating.append((m, top))
    return kept, small, floating


def _cluster(
    mask: np.ndarray,
    top: float,
    pts: np.ndarray,
    valid: np.ndarray,
    T_world_cam: np.ndarray,
    rgb: np.ndarray,
    rng: np.random.Generator,
) -> Cluster:
    """The :class:`Cluster` of a region: its footprint along its top view's principal directions (m, 2nd to
    98th percentile), median colour and outline."""
    T = T_world_cam
    p_world = pts[mask & valid] @ T[:3, :3].T + T[:3, 3]
    if len(p_world) > 3000:
        p_world = p_world[rng.choice(len(p_world), 3000, replace=False)]
    xy = p_world[:, :2] - p_world[:, :2].mean(axis=0)
    _, _, vt = np.linalg.svd(xy, full_matrices=False)
    proj = xy @ vt.T
    ext = np.percentile(proj, 98, axis=0) - np.percentile(proj, 2, axis=0)
    colour = np.median(rgb[mask], axis=0)
    return Cluster(
        mask=mask,
        pixels=int(mask.sum()),
        height_m=top,
        footprint_m=(float(max(ext)), float(min(ext))),
        colour_rgb=(int(colour[0]), int(colour[1]), int(colour[2])),
        outline=outline_kind(p_world),
    )
