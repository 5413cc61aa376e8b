"""A granular pile (sand, rice, beans poured out) is one object made of grains.

The geometric segmenter cuts regions at depth steps and concave creases, which between grains are
everywhere: a pile comes out as a few regions and many fragments too small to keep. For a label whose
material is granular (:func:`real2sim.materials.lookup_material`, material ``sand``), :func:`grow_pile` takes
back what the cuts split off: every pixel standing on the table, claimed by no other label, connected to
the matched region, and of the pile's chroma (its lightness changes with the grains' shadows).
"""

from __future__ import annotations

import re

import numpy as np

from real2sim.materials import lookup_material
from real2sim.table import camera_points, heights_above_table
from real2sim.types import TablePlane
from simpact.core.frame import Frame

__all__ = ["PILE_CHROMA", "grow_pile", "is_granular"]

#: A piece joins the pile when its median chroma (OpenCV's 8-bit Lab a, b) is within this of the pile's:
#: not the lightness, which the grains' shadows on each other change across a pile.
PILE_CHROMA = 12.0


def is_granular(label: str) -> bool:
    """Whether ``label`` names a pile of granular material (simulated as MPM sand): not a numbered one
    (``bean_07`` is one of the beans, each its own object)."""
    return lookup_material(label)[1].material == "sand" and not re.search(r"\d$", label.strip())


def grow_pile(
    seed: np.ndarray,
    claimed: np.ndarray,
    frame: Frame,
    table: TablePlane,
    *,
    min_height_m: float = 0.008,
    max_height_m: float = 0.45,
) -> np.ndarray:
    """``seed`` (the region matched to a granular label, (H, W) bool) with every connected piece of the
    pixels ``min_height_m`` to ``max_height_m`` (m) above the table, outside ``claimed`` (other labels'
    regions), that touches it and whose median chroma is within :data:`PILE_CHROMA` of the seed's."""
    import cv2

    pts, valid = camera_points(frame, 1)
    height = np.where(valid, heights_above_table(table, pts), 0.0)
    free = valid & (height > min_height_m) & (height < max_height_m) & ~claimed
    _, pieces = cv2.connectedComponents((free & ~seed).astype(np.uint8), connectivity=8)
    lab = cv2.cvtColor(np.ascontiguousarray(frame.rgb), cv2.COLOR_RGB2LAB).astype(np.float64)
    chroma = lab[..., 1:]
    colour = np.median(chroma[seed], axis=0)
    pile, joined, near = seed.copy(), {0}, np.ones((5, 5), np.uint8)  # 5 x 5: across a 1 px gap
    while True:  # piece by piece: one touching the pile may bring the next within reach
        touching = set(np.unique(pieces[cv2.dilate(pile.astype(np.uint8), near) > 0]).tolist()) - joined
        joined |= touching
        added = [
            k
            for k in touching
            if np.linalg.norm(np.median(chroma[pieces == k], axis=0) - colour) <= PILE_CHROMA
        ]
        if not added:
            break
        pile |= np.isin(pieces, added)
    closed = cv2.morphologyEx(pile.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8)) > 0
    return closed & ~claimed  # the gaps between grains are pile too
