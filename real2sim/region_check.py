"""Whether a region of pixels above the table may be an object standing on it (:class:`RegionCheck`, the
tests of :func:`real2sim.regions.find_clusters`): not too tall (the robot arm), surrounded by table, on the
table's extent (not a chair behind it), standing clear of the table's own roughness (:func:`table_roughness`),
not a bump of the table, not the depth a nearer region smears over the table behind it
(:meth:`RegionCheck.is_halo`), and how much of its lower silhouette rests on the table
(:func:`support_fraction`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.ndimage import distance_transform_edt

from real2sim.clutter import table_extent_share
from real2sim.masks import fill_holes, padded_box
from real2sim.types import TablePlane

__all__ = [
    "BUMP_COLOUR",
    "BUMP_SLOPE",
    "BUMP_TOP_M",
    "HALO_FRONT",
    "HALO_SUPPORT",
    "HALO_TOP_M",
    "RAMP_FALL",
    "RAMP_GAP_PX",
    "RAMP_MAX_WIDTH_PX",
    "ROUGHNESS_PX",
    "RegionCheck",
    "STRAIGHT_DOWN",
    "ramp_beside",
    "support_fraction",
    "table_roughness",
]

BUMP_TOP_M = 0.025
"""A region lower than this (m) and of the table's colour is a bump of the table, not an object on it."""
BUMP_SLOPE = 1.0
"""A low region of the table's colour that rises from the table more steeply than this (rise over run) is an
object, not a bump."""
BUMP_COLOUR = 12.0
"""Lab distance (OpenCV's 8-bit scale) from the table's median colour within which a region has its colour."""
HALO_TOP_M = 0.05
"""A region of the table's colour lower than this (m) may be a halo (:meth:`RegionCheck.is_halo`) ..."""
HALO_SUPPORT = 0.25
"""... if less than this share of its lower silhouette rests on the table ..."""
HALO_FRONT = 0.25
"""... and at least this share of it has a region twice its height right in front of it (up to 6 px below)."""
STRAIGHT_DOWN = 0.25
"""Largest ratio of the horizontal to the vertical gap (plus 5 mm) between a region's outline and the table
pixel under it for the table to lie straight below it (:func:`support_fraction`; a camera at 76° elevation
or more)."""
RAMP_MAX_WIDTH_PX = 10.0
"""A strip at most this wide (px, twice its largest distance to its border) ..."""
RAMP_GAP_PX = 5
"""... within this (px) of a region at least twice its height ..."""
RAMP_FALL = 0.5
"""... whose heights fall away from that region (the median over the quarter of its pixels farthest from it
at most this share of the nearest quarter's) is the smoothed depth's ramp beside it (:func:`ramp_beside`)."""


@dataclasses.dataclass
class RegionCheck:
    """The tests a region must pass to stand on the table (the parameters of :func:`find_clusters`)."""

    pts: np.ndarray
    height: np.ndarray
    table: TablePlane
    near_table: np.ndarray
    table_world: np.ndarray
    coarse: np.ndarray
    tall: np.ndarray
    min_height_m: float
    max_height_m: float
    touch_m: float
    min_table_ring: float
    robot_base_radius_m: float
    min_on_table: float
    min_clearance: float
    lab: np.ndarray
    """(H, W, 3) the frame's colour in Lab (OpenCV's 8-bit scale)."""
    focal_px: float
    """The camera's focal length (px)."""
    table_lab: np.ndarray
    """(3,) the table's median colour in Lab."""

    def __call__(self, mask: np.ndarray, peeled: bool) -> tuple[np.ndarray, float, float] | None:
        """(mask, top (m), support fraction) of a region that may stand on the table, else None; the
        tall-structure test is skipped for a part ``peeled`` off a wall
        (:func:`real2sim.walls.peel_vertical_planes`)."""
        import cv2

        h = self.height[mask]
        low, top = float(np.percentile(h, 2)), float(np.percentile(h, 98))
        if top > self.max_height_m:
            return None
        ring = (cv2.dilate(mask.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0) & self.near_table
        if ring.sum() and self.table.inliers[ring].mean() < self.min_table_ring:
            return None
        if not peeled and self.tall[self.coarse[mask]].mean() > 0.5 and not self._stands_below(mask, low):
            return None  # part of the robot arm or another tall structure
        if peeled and mask[:2].any():  # leaves the image at its top
            return None
        T = self.table.T_world_cam
        p_world = self.pts[mask][:: max(1, int(mask.sum()) // 500)] @ T[:3, :3].T + T[:3, 3]
        robot_base = self.table.world_frame == "T_base_cam"
        if robot_base and np.median(np.linalg.norm(p_world[:, :2], axis=1)) < self.robot_base_radius_m:
            return None
        if table_extent_share(p_world, self.table_world) < self.min_on_table:  # beyond the table (a chair)
            return None
        if top < self.min_clearance * table_roughness(mask, self.height, self.near_table, self.min_height_m):
            return None  # a fold or noise of the table, not an object
        bump = top < BUMP_TOP_M and self._table_coloured(mask, ring & ~mask & self.table.inliers)
        if bump and not self._steep_sided(mask):
            return None  # a bump of the table (its warp, mixed depth at an object's foot)
        if low <= self.touch_m:
            support = support_fraction(mask, self.pts, self.table.inliers)
        else:  # its foot unseen: seen from above, its outline drops straight to the table
            up = self.table.normal_cam
            support = support_fraction(mask, self.pts, self.table.inliers, up=up, max_drop_m=top + 0.01)
        return mask, top, support

    def is_halo(self, mask: np.ndarray, regions: list[tuple[np.ndarray, float]]) -> bool:
        """Whether ``mask``, one of ``regions`` ((mask, top (m)) each), is the halo of a nearer one, not an
        object: a depth camera that smooths its depth (UOIS's frames) raises the table just behind an object
        by 2-5 cm, and where the colour split cuts that strip off the object in front, it is left low, of the
        table's colour, hardly resting on the table, with a taller region in front of it (UOIS 0006's strip
        behind the pink cup). An object of the table's colour that low, behind a taller one and with its foot
        hidden, would be taken for one too. So is a thin strip of that ramp beside a taller region, whatever
        its colour (:func:`ramp_beside`: along a drill's handle, in its shadow)."""
        import cv2

        if ramp_beside(mask, regions, self.height):
            return True
        top = float(np.percentile(self.height[mask], 98))
        if top >= HALO_TOP_M:
            return False
        ring = (cv2.dilate(mask.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0) & self.near_table
        if not self._table_coloured(mask, ring & ~mask & self.table.inliers):
            return False
        if support_fraction(mask, self.pts, self.table.inliers) >= HALO_SUPPORT:
            return False
        rows, cols = np.nonzero(_lower_silhouette(mask))
        front = np.zeros(len(rows), bool)
        for other, other_top in regions:
            if other is mask or other_top < 2 * top:
                continue
            for k in range(1, 7):
                r = np.minimum(rows + k, mask.shape[0] - 1)
                front |= other[r, cols]
        return bool(front.mean() >= HALO_FRONT)

    def _table_coloured(self, mask: np.ndarray, table_ring: np.ndarray) -> bool:
        """Whether ``mask`` has the colour of the table around it (of the whole table where too little of it
        is seen around): a white cloth's highlights and shades differ more from each other than from it."""
        near = np.median(self.lab[table_ring], axis=0) if table_ring.sum() >= 20 else self.table_lab
        return bool(np.linalg.norm(np.median(self.lab[mask], axis=0) - near) < BUMP_COLOUR)

    def _steep_sided(self, mask: np.ndarray) -> bool:
        """Whether ``mask`` rises from the table around it more steeply than :data:`BUMP_SLOPE` (median over
        its border with the table, from the table 2-5 px outside to the region 3-6 px inside): an object of
        the table's colour (beige dough on a wooden table) has sides, a warp of the table or the mixed depth
        at an object's foot a gentle slope."""
        import cv2

        m = mask.astype(np.uint8)
        inner = (cv2.erode(m, np.ones((7, 7), np.uint8)) > 0) & ~(
            cv2.erode(m, np.ones((13, 13), np.uint8)) > 0
        )
        outer = (cv2.dilate(m, np.ones((11, 11), np.uint8)) > 0) & ~(
            cv2.dilate(m, np.ones((5, 5), np.uint8)) > 0
        )
        outer &= self.near_table
        if inner.sum() < 10 or outer.sum() < 10:
            return False
        rise = float(np.median(self.height[inner]) - np.median(self.height[outer]))
        z = float(np.median(self.pts[mask][:, 2]))
        run = 8 * z / self.focal_px  # from 3.5 px outside to 4.5 px inside (m)
        return rise / run > BUMP_SLOPE

    def _stands_below(self, mask: np.ndarray, low: float) -> bool:
        """Whether a region within a tall structure is an object on the table under it (a brush under the
        gripper): its foot on the table, half its silhouette's lower border on the table, and not leaving the
        image at its top (a wall behind the table)."""
        if low > self.touch_m or mask[:2].any():
            return False
        return support_fraction(mask, self.pts, self.table.inliers) >= 0.5


ROUGHNESS_PX = 15
"""How far (px) around a region the table's roughness is measured."""


def table_roughness(mask: np.ndarray, height: np.ndarray, near_table: np.ndarray, band_m: float) -> float:
    """The median absolute height (m) above the table plane of the ``near_table`` pixels (measured, not
    standing on it) within :data:`ROUGHNESS_PX` of ``mask`` and within ``band_m`` of the plane: how much the
    table itself (its folds, the sensor's noise at that range) departs from the plane there; 0 if none."""
    import cv2

    r = ROUGHNESS_PX
    box = padded_box(mask, r)
    assert box is not None  # a region is never empty
    ring = (
        cv2.dilate(mask[box].astype(np.uint8), np.ones((2 * r + 1, 2 * r + 1), np.uint8)) > 0
    ) & near_table[box]
    h = np.abs(height[box][ring])
    h = h[h < band_m]
    return float(np.median(h)) if len(h) else 0.0


def _lower_silhouette(mask: np.ndarray) -> np.ndarray:
    """(H, W) bool: the pixels of ``mask``, its holes filled, with no pixel of it right below them: the bottom
    of its outline, not the upper edges of the holes that missing depth leaves in it (a label's print)."""
    solid = fill_holes(mask)
    bottom = solid.copy()
    bottom[:-1] &= ~solid[1:]
    return bottom


def ramp_beside(mask: np.ndarray, regions: list[tuple[np.ndarray, float]], height: np.ndarray) -> bool:
    """Whether ``mask``, one of ``regions`` ((mask, top (m)) each), is a strip of the ramp a depth camera that
    smooths its depth (UOIS's) leaves beside a taller region: at most :data:`RAMP_MAX_WIDTH_PX` wide, beside
    (within :data:`RAMP_GAP_PX`) a region at least twice its height (``height``: per pixel, m above the
    table), its heights falling away from it (:data:`RAMP_FALL`). A marker lying beside a box is as thin,
    but level."""
    import cv2

    box = padded_box(mask, 1)
    assert box is not None  # a region is never empty
    if 2.0 * float(distance_transform_edt(mask[box]).max()) > RAMP_MAX_WIDTH_PX:
        return False
    top = float(np.percentile(height[mask], 98))
    near = cv2.dilate(mask.astype(np.uint8), np.ones((2 * RAMP_GAP_PX + 1,) * 2, np.uint8)) > 0
    touch, beside = max(
        (
            (int((near & other).sum()), other)
            for other, top_o in regions
            if other is not mask and top_o >= 2 * top
        ),
        key=lambda t: t[0],
        default=(0, None),
    )
    if touch == 0 or beside is None:
        return False
    away = distance_transform_edt(~beside)[mask]
    h = height[mask]
    fall = np.median(h[away >= np.percentile(away, 75)])
    return bool(fall <= RAMP_FALL * np.median(h[away <= np.percentile(away, 25)]))


def support_fraction(
    mask: np.ndarray,
    pts: np.ndarray,
    table_px: np.ndarray,
    reach_px: int = 6,
    max_gap_m: float = 0.05,
    up: np.ndarray | None = None,
    max_drop_m: float = 0.0,
) -> float:
    """Share of the region's lower silhouette pixels with a table pixel at most ``reach_px`` below them whose
    point is within ``max_gap_m`` (m) or, given the table's unit normal ``up`` (camera frame), straight below
    theirs (:data:`STRAIGHT_DOWN` of the drop across, the drop at most ``max_drop_m``, m): seen from above,
    an object's side is hidden and its outline drops to the table it stands on."""
    rows, cols = np.nonzero(_lower_silhouette(mask))
    if len(rows) == 0:
        return 0.0
    n_rows = mask.shape[0]
    supported = np.zeros(len(rows), bool)
    resolved = np.zeros(len(rows), bool)
    for k in range(1, reach_px + 1):
        r = np.minimum(rows + k, n_rows - 1)
        hit = ~resolved & (rows + k < n_rows) & table_px[r, cols]
        gap = pts[r, cols] - pts[rows, cols]
        near = np.linalg.norm(gap, axis=1) < max_gap_m
        if up is not None:
            drop = -(gap @ up)
            across = np.linalg.norm(gap + drop[:, None] * up, axis=1)
            near |= (drop > 0) & (drop <= max_drop_m) & (across <= STRAIGHT_DOWN * drop + 0.005)
        supported |= hit & near
        resolved |= hit
    return float(supported.mean())
