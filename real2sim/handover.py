"""A piece of one object seen over another's rim, given back to the silhouette of the object it belongs to.

A depth camera that smooths its edges joins a near object's rim and what stands behind it in one sheet of
depth: UOIS 0008's mint mug took 20 rows of the cyan bottle's foot seen over its rim, in the mug's region
from the first depth cut on, and the colour split gave them to the mug (they do not reach the table, so they
are no object of their own). :func:`borrowed_pieces` finds such a piece and the neighbouring region it
belongs to: the pixels of a region nearer in colour to a touching neighbour than to the rest of their own
region, close to the neighbour's colour, touching it, not resting on the table, and seen behind the rest of
their region beside them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from real2sim.masks import padded_box
from real2sim.split_context import SplitContext

__all__ = ["Borrowed", "borrowed_pieces", "owner_index"]

Borrowed = tuple[np.ndarray, np.ndarray]
"""A borrowed piece ((H, W) bool) and its owner's mask as it was when the piece was found ((H, W) bool)."""

#: Width (px) of the band on each side of a border whose colours stand for the two regions there.
BAND_PX = 10


@dataclasses.dataclass(frozen=True)
class _Pixels:
    """What the rule reads per pixel, (H, W) each or a crop of them: the Lab colour with the lightness halved
    (as the colour split weighs it), which have depth, the height above the table (m) and the depth (m)."""

    lab: np.ndarray
    valid: np.ndarray
    height: np.ndarray
    z: np.ndarray

    def __getitem__(self, box: tuple[slice, slice]) -> _Pixels:
        return _Pixels(self.lab[box], self.valid[box], self.height[box], self.z[box])


@dataclasses.dataclass(frozen=True)
class _Rule:
    """The thresholds of :func:`borrowed_pieces`."""

    max_colour: float
    min_behind_m: float
    min_pixels: int
    touch_m: float


def borrowed_pieces(
    regions: list[tuple[np.ndarray, float]],
    ctx: SplitContext,
    *,
    max_colour: float = 12.0,
    min_behind_m: float = 0.02,
    min_pixels: int = 80,
    touch_px: int = 2,
) -> list[Borrowed]:
    """The pieces the ``regions`` ((mask, top (m)) each) borrowed from a neighbour, each with the neighbour's
    mask. A borrowed piece is the connected pixels of a region (at least ``min_pixels``, touching the
    neighbour within ``touch_px``) whose Lab colour (lightness halved) lies within ``max_colour`` of the
    neighbour's colour along their border and nearer it than to the colour of the rest of their region
    (``BAND_PX`` or more from the neighbour), whose lowest points stand above the table's touch height
    (``ctx.touch_m``), and whose median depth lies ``min_behind_m`` (m) or more behind that of their
    region's other pixels beside them. The piece belongs to the neighbour's silhouette, the object as the
    photo shows it (:func:`owner_index`); the regions are left as they are, the points their shapes are
    fitted to (taken out of them, the piece changed which shape explained a bowl's depth best on a held-out
    UOIS frame, and the bowl's fit went from good to poor)."""
    import cv2

    borrowed: list[Borrowed] = []
    touch = np.ones((2 * touch_px + 1, 2 * touch_px + 1), np.uint8)
    pixels = _Pixels(ctx.lab * np.array([0.5, 1.0, 1.0]), ctx.valid, ctx.height, ctx.z)
    rule = _Rule(max_colour, min_behind_m, min_pixels, ctx.touch_m)
    masks = [m for m, _ in regions]
    boxes = [padded_box(m, BAND_PX + touch_px) for m in masks]
    for i, j in ((i, j) for i in range(len(masks)) for j in range(len(masks)) if i != j):
        box = boxes[i]
        if box is None:
            continue
        own, owner = masks[i][box], masks[j][box]
        near_owner = cv2.dilate(owner.astype(np.uint8), touch) > 0
        if not (near_owner & own).any():
            continue
        piece = _borrowed(own, owner, near_owner, pixels[box], rule)
        if piece is not None:
            full = np.zeros_like(masks[i])
            full[box] = piece
            borrowed.append((full, masks[j]))
    return borrowed


def owner_index(owner_mask: np.ndarray, masks: list[np.ndarray]) -> int | None:
    """The index of the mask in ``masks`` that holds most of ``owner_mask`` (a borrowed piece's owner, as it
    was before later steps merged or split regions), or None when none holds any of it."""
    overlap = [int((owner_mask & m).sum()) for m in masks]
    return int(np.argmax(overlap)) if overlap and max(overlap) > 0 else None


def _borrowed(
    own: np.ndarray, owner: np.ndarray, near_owner: np.ndarray, px: _Pixels, rule: _Rule
) -> np.ndarray | None:
    """The pixels of region ``own`` that belong to its neighbour ``owner`` (``near_owner``: within touch of
    it), all of them crops of one box, or None (see :func:`borrowed_pieces`)."""
    import cv2

    band = np.ones((2 * BAND_PX + 1, 2 * BAND_PX + 1), np.uint8)
    owner_band = owner & (cv2.dilate(own.astype(np.uint8), band) > 0) & px.valid
    rest = own & ~(cv2.dilate(owner.astype(np.uint8), band) > 0) & px.valid
    if owner_band.sum() < 10 or rest.sum() < rule.min_pixels:
        return None
    to_owner = np.linalg.norm(px.lab - np.median(px.lab[owner_band], axis=0), axis=2)
    to_rest = np.linalg.norm(px.lab - np.median(px.lab[rest], axis=0), axis=2)
    like_owner = own & (to_owner <= rule.max_colour) & (to_owner < to_rest)
    like_owner = (cv2.medianBlur(like_owner.astype(np.uint8), 5) > 0) & own
    _, parts = cv2.connectedComponents(like_owner.astype(np.uint8), connectivity=4)
    touching = np.unique(parts[near_owner & (parts > 0)])
    piece = np.isin(parts, touching[touching > 0])
    measured = piece & px.valid
    if measured.sum() < rule.min_pixels:
        return None
    if float(np.percentile(px.height[measured], 2)) <= rule.touch_m:  # it rests on the table: an object
        return None
    beside = own & ~piece & px.valid & (cv2.dilate(piece.astype(np.uint8), band) > 0)
    if beside.sum() < 10:
        return None
    behind = float(np.median(px.z[measured])) - float(np.median(px.z[beside]))
    return piece if behind >= rule.min_behind_m else None
