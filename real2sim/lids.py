"""A can's lid seen inside its rim, cut off by the rim's missing depth, joined back to the can.

A depth camera measures little on a metal rim seen edge on: the lid of a standing can, seen from above,
reads as an island of depth cut from the can's side by a band without depth. The island does not rest on
the table (nothing under it but that band), so it is dropped as floating, and the can's region stops at its
front rim: short by the rim's height and the lid's depth beyond it (PoseCNN 000001: a 306 px island at 10.3
cm over a 10.1 cm soup can whose region topped out at 9.5 cm). :func:`join_lids` gives such an island
to the region under it when, straight down the image from most of its lower border and within
:data:`LID_GAP_M` at its depth, only pixels of no region lie between the two, some without depth and the
rest at the island's height, and its heights are that region's top: its 5th percentile no more than
:data:`LID_BELOW_M` under it, its top no more than :data:`LID_ABOVE_M` over it. An object
standing behind another, its bottom hidden by it, shows lower than the nearer object's top (the line of
sight over that top falls with range): it is not taken. What it would take wrongly: the top of a second
object of the same height standing close behind, seen across a band without depth (none in the 38 real
frames of the bench and its held-out sets; the rule fired on PoseCNN 000001's can alone).
"""

from __future__ import annotations

import numpy as np

__all__ = ["LID_ABOVE_M", "LID_BELOW_M", "LID_GAP_M", "LID_MIN_BORDER", "join_lids"]

LID_GAP_M = 0.015
"""Widest gap (m, at the island's depth) between an island and the region under it, partly without depth."""
LID_MIN_BORDER = 0.5
"""Share of an island's lower border columns that must meet the region under it across that gap."""
LID_BELOW_M = 0.01
"""How far (m) an island's lowest heights (5th percentile) may lie under the top of the region under it."""
LID_ABOVE_M = 0.02
"""How far (m) an island's top may rise over the top of the region under it."""

Region = tuple[np.ndarray, float]
"""A region's (H, W) bool mask and its top (m above the table)."""


def join_lids(
    floating: list[Region], kept: list[Region], depth: np.ndarray, height: np.ndarray, focal_px: float
) -> list[Region]:
    """``kept`` with each of the ``floating`` regions (they do not rest on the table) that is a lid of one of
    them joined to it (see the module docstring). ``depth`` (H, W) m, 0 where none was measured; ``height``
    (H, W) m above the table; ``focal_px`` converts :data:`LID_GAP_M` to pixels."""
    out = list(kept)
    if not out:
        return out
    owner = np.full(depth.shape, -1, np.int64)
    for i, (m, _) in enumerate(out):
        owner[m] = i
    unmeasured = depth <= 0
    for island, top in floating:
        z = float(np.median(depth[island]))
        gap_px = max(1, int(round(LID_GAP_M * focal_px / max(z, 0.1))))
        low = float(np.percentile(height[island], 5))
        under = _region_under(island, owner, unmeasured, height, low - LID_BELOW_M, gap_px)
        if under < 0:
            continue
        host, host_top = out[under]
        if low >= host_top - LID_BELOW_M and top <= host_top + LID_ABOVE_M:
            out[under] = (host | island, max(top, host_top))
            owner[island] = under
    return out


def _region_under(
    island: np.ndarray,
    owner: np.ndarray,
    unmeasured: np.ndarray,
    height: np.ndarray,
    floor_m: float,
    gap_px: int,
) -> int:
    """The index (``owner``: (H, W) region index, -1 none) of the region met straight down from at least
    :data:`LID_MIN_BORDER` of ``island``'s lower border columns within ``gap_px`` rows, across pixels of no
    region that have no depth (at least one: ``unmeasured``) or stand ``floor_m`` or higher (``height``, m;
    a region's outline is cut a few pixels inside the object), or -1."""
    h, w = island.shape
    rows, cols = np.nonzero(island)
    lowest = np.full(w, -1, np.int64)
    np.maximum.at(lowest, cols, rows)
    border = np.nonzero(lowest >= 0)[0]
    met: list[int] = []
    for c in border.tolist():
        r = int(lowest[c]) + 1
        end = min(r + gap_px, h)
        gap = False
        while r < end and owner[r, c] < 0 and (unmeasured[r, c] or height[r, c] >= floor_m):
            gap |= bool(unmeasured[r, c])
            r += 1
        if gap and r < h and owner[r, c] >= 0:
            met.append(int(owner[r, c]))
    if not met:
        return -1
    values, counts = np.unique(met, return_counts=True)
    best = int(np.argmax(counts))
    return int(values[best]) if counts[best] >= LID_MIN_BORDER * len(border) else -1
