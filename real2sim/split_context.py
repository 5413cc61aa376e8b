"""The frame data and thresholds the region splits of :mod:`real2sim.split` read."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["SplitContext", "SplitParams", "make_context"]


@dataclasses.dataclass
class SplitContext:
    """What :func:`split_by_colour` reads of one frame ((H, W) images)."""

    lab: np.ndarray
    """(H, W, 3) Lab colour, blurred (a paint's speckle is not colour)."""
    points: np.ndarray
    """(H, W, 3) camera-frame points (m); their z is the depth, 0 where none."""
    valid: np.ndarray
    height: np.ndarray
    """Height above the table (m)."""
    crease: np.ndarray
    """Concave creases (bool, :func:`real2sim.clutter.concave_creases`)."""
    focal_px: float
    """Focal length (px)."""
    up: np.ndarray
    """(3,) the table's unit normal in the camera frame: a point's foot on the table is ``p - height·up``."""
    jump_m: float = 0.015
    """Depth step (m, at 1 m range, growing with depth) that separates two surfaces."""
    touch_m: float = 0.03
    """A part rests on the table when its lowest points are within this height (m) of it."""
    stacked: list[tuple[np.ndarray, float]] = dataclasses.field(default_factory=list)
    """The parts found lying on another object (:func:`real2sim.stacked.stacked_on`): (H, W) mask and the
    height (m) of the surface they lie on."""

    @property
    def z(self) -> np.ndarray:
        """Depth (m), 0 where none."""
        return np.asarray(self.points[..., 2])


@dataclasses.dataclass(frozen=True)
class SplitParams:
    """The thresholds of :func:`split_by_colour` (see the module docstring)."""

    min_pixels: int = 300
    """Smallest part (px)."""
    min_area_m2: float = 0.0015
    """Smallest part (m^2, seen face on at the region's depth): a box half hidden behind another object shows
    18 cm^2 of its colour on ClearGrasp 123."""
    min_width_m: float = 0.01
    """Narrowest part (m)."""
    min_colour: float = 18.0
    """Lab distance between the two colours' centres (lightness weighted) below which a region is one."""
    lightness_weights: tuple[float, ...] = (0.5, 1.0)
    """Weights of the lightness in the colour distance, tried in turn until one splits the region."""
    min_break: float = 0.3
    """Share of a border with a depth step, crease or missing depth that keeps two parts apart."""
    min_neck: float = 0.5
    """Border length (px) per square-root pixel of the smaller part below which two parts meet in a neck."""
    levels: int = 3
    """How deep parts are split again."""
    gap_px: float = 2.5
    """Points this many pixels' width apart (at their depth, and at least ``min_gap_m``) are linked."""
    min_gap_m: float = 0.003
    """The smallest link distance (m): depth noise."""
    min_gap_area_m2: float = 0.001
    """Smallest cluster (m^2, face on) that is an object of its own."""
    min_gap_height_m: float = 0.05
    """Lowest top (m above the table) of a cluster that is an object of its own."""
    corner_cell_m: float = 0.005
    """Cell (m) of the top-view occupancy grid of :func:`split_at_corner`."""
    corner_max_fill: float = 0.5
    """A region whose top view fills more of its minimum-area rectangle than this is not an L."""
    corner_min_fill: float = 0.85
    """Each arm of an L fills at least this share of its own minimum-area rectangle."""
    corner_min_aspect: float = 3.0
    """Each arm of an L is at least this many times longer than it is wide."""
    arm_width_m: float = 0.03
    """Widest part (m) of a region that :func:`split_off_lying_arms` may take off."""
    arm_min_reach_m: float = 0.06
    """How far (m) such a part reaches out from the rest of the region, at least."""
    arm_max_height_m: float = 0.03
    """Highest top (m above the table, 98th percentile) of such a part."""


def make_context(
    rgb: np.ndarray,
    points: np.ndarray,
    valid: np.ndarray,
    height: np.ndarray,
    crease: np.ndarray,
    focal_px: float,
    up: np.ndarray,
    *,
    jump_m: float = 0.015,
    touch_m: float = 0.03,
) -> SplitContext:
    """The :class:`SplitContext` of a frame: colour ``rgb`` (uint8), camera-frame ``points`` (H, W, 3; m;
    their z is the depth), ``valid`` depth, height above the table (m), concave creases, the focal length
    (px) and the table's normal ``up`` (camera frame)."""
    import cv2

    blurred = cv2.GaussianBlur(np.ascontiguousarray(rgb, dtype=np.uint8), (5, 5), 0)
    lab = cv2.cvtColor(blurred.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab).astype(np.float64)
    up = np.asarray(up, dtype=np.float64)
    return SplitContext(
        lab, np.asarray(points, np.float64), valid, height, crease, float(focal_px), up, jump_m, touch_m
    )
