"""Rounded edges for a fitted box: a bottle with a square section, a carton's soft corners.

A box refined against the depth (:func:`real2sim.refine.refine_box`) keeps sharp edges where the object's
are rounded. Seen from the camera its corners and its edge along the table stand out of the object's
outline, mostly over pixels where the camera measured no depth (a rounded edge turns away from it), where
the depth cost is silent. :func:`round_box` therefore tries rounding the four edges along the box's longest
side and its other eight, each with a radius that is a share of half the box's shortest edge
(:data:`ALONG_SHARES`, :data:`END_SHARES`), and keeps the rounding under which the box's outline best
matches the object's silhouette in the photo (its mask snapped to colour edges, :mod:`real2sim.silhouette`),
when that raises their IoU by :data:`MIN_GAIN` or more at no more than :data:`MAX_WORSE` more depth cost
(:func:`real2sim.refine.pixel_cost`). The extent stays: rounding shaves the corners within the box.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable

import numpy as np
import trimesh

from real2sim.refine import FREE_M, cast_at, pixel_cost, pixels_around
from real2sim.stability import stands
from real2sim.types import ObjectGeometry
from simpact.core.frame import Frame

__all__ = [
    "ALONG_SHARES",
    "END_SHARES",
    "MAX_WORSE",
    "MIN_GAIN",
    "best_by_outline",
    "round_box",
    "rounded_box",
]

ALONG_SHARES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Radii tried for the four edges along the box's longest side, as shares of half its shortest edge."""
END_SHARES = (0.0, 0.2, 0.4)
"""Radii tried for its other eight edges, likewise (the two together at most the whole half)."""
MIN_GAIN = 0.02
"""The silhouette IoU a rounding must add to be kept: a sharp box (a sugar box) gains 0.01-0.017 by any."""
MAX_WORSE = 0.10
"""The share by which a rounding may raise the depth cost."""


def rounded_box(extent: np.ndarray, along: float, ends: float = 0.0) -> trimesh.Trimesh:
    """A box of ``extent`` (3,) m, centred on the origin, whose four edges along its longest side are rounded
    with radius ``along`` (m) and its other eight with radius ``ends`` (m): the convex hull of the inner box
    grown by a circle across the long side and a ball."""
    extent = np.asarray(extent, dtype=np.float64)
    if along <= 0 and ends <= 0:
        return trimesh.creation.box(extents=extent)
    long = int(np.argmax(extent))
    a, b = (i for i in range(3) if i != long)
    angle = np.linspace(0.0, 2 * np.pi, 16, endpoint=False)
    circle = np.zeros((16, 3))
    circle[:, a], circle[:, b] = along * np.cos(angle), along * np.sin(angle)
    ball = trimesh.creation.icosphere(subdivisions=1, radius=max(ends, 1e-6)).vertices
    inner = extent / 2 - ends
    inner[[a, b]] -= along
    corners = np.array(list(itertools.product((-1.0, 1.0), repeat=3))) * inner
    points = corners[:, None, None] + circle[None, :, None] + ball[None, None, :]
    return trimesh.convex.convex_hull(points.reshape(-1, 3))


def round_box(
    g: ObjectGeometry, frame: Frame, T_world_cam: np.ndarray, mask: np.ndarray, silhouette: np.ndarray
) -> ObjectGeometry:
    """The fitted box ``g`` with the rounding of the module docstring, or ``g`` itself: ``mask`` is the
    object's depth region (the depth cost's), ``silhouette`` its outline in the photo (the IoU's)."""
    half = float(np.min(g.extent)) / 2 * 0.999  # a radius of the whole half leaves no flat face to build
    radii = [
        (along * half, ends * half)
        for along, ends in itertools.product(ALONG_SHARES, END_SHARES)
        if 0.0 < along + ends <= 1.0
    ]
    rounded = (dataclasses.replace(g, mesh=rounded_box(g.extent, *r), edge_radii_m=r) for r in radii)
    return best_by_outline(g, rounded, frame, T_world_cam, mask, silhouette)


def best_by_outline(
    g: ObjectGeometry,
    variants: Iterable[ObjectGeometry],
    frame: Frame,
    T_world_cam: np.ndarray,
    mask: np.ndarray,
    silhouette: np.ndarray,
) -> ObjectGeometry:
    """Of ``g`` and its ``variants``, the one whose outline matches ``silhouette`` (the object's outline in
    the photo) best, a variant only when that raises the IoU by :data:`MIN_GAIN` or more at no more than
    :data:`MAX_WORSE` more depth cost over ``mask`` (its depth region) than ``g``'s, and when it would stand
    (:func:`real2sim.stability.stands`: the photographed object was at rest)."""
    depth_px = pixels_around(frame, T_world_cam, mask)
    outline_px = pixels_around(frame, T_world_cam, silhouette)
    if depth_px is None or outline_px is None:
        return g
    worst_cost = (1.0 + MAX_WORSE) * _depth_cost(g, depth_px)
    best, best_iou = g, _outline_iou(g, outline_px) + MIN_GAIN
    for variant in variants:
        iou = _outline_iou(variant, outline_px)
        if iou > best_iou and _depth_cost(variant, depth_px) <= worst_cost and stands(variant):
            best, best_iou = variant, iou
    return best


def _depth_cost(g: ObjectGeometry, px: tuple[np.ndarray, ...]) -> float:
    """:func:`real2sim.refine.pixel_cost` (m) of the posed mesh over ``px`` (:func:`pixels_around`)."""
    origin, dirs, depth, own = px
    return pixel_cost(cast_at(g, origin, dirs), depth, own)


def _outline_iou(g: ObjectGeometry, px: tuple[np.ndarray, ...]) -> float:
    """IoU of the pixels the posed mesh covers with the outline's (``px``: :func:`pixels_around` of it),
    leaving out the pixels where something measured in front of the mesh hides it."""
    origin, dirs, depth, own = px
    t = cast_at(g, origin, dirs)
    hit = np.isfinite(t)
    hidden = hit & ~own & (depth > 0) & (depth < t - FREE_M)
    union = int(np.count_nonzero((hit | own) & ~hidden))
    return float(np.count_nonzero(hit & own)) / max(union, 1)
