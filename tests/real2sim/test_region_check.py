"""The tests a region must pass to stand on the table (real2sim.region_check)."""

from __future__ import annotations

import numpy as np

from real2sim.region_check import support_fraction


def test_a_region_s_support_is_read_at_its_outline_not_at_the_holes_in_it() -> None:
    """A box standing on the table whose print left a hole without depth in its mask: the hole's upper edge
    is no part of its lower silhouette, so the whole of that silhouette rests on the table (it was 21 of 27
    pixels, and a tall object so cut came out under the half that keeps it: UOIS's frame 0004)."""
    rows, cols = np.mgrid[0:60, 0:60].astype(np.float64)
    pts = np.stack([0.001 * cols, 0.001 * rows, np.ones_like(rows)], axis=-1)  # one plane, 1 mm a pixel
    table = rows >= 41
    box = (rows >= 10) & (rows <= 40) & (cols >= 20) & (cols <= 40)
    printed = box & ~((rows >= 20) & (rows <= 25) & (cols >= 25) & (cols <= 30))
    assert support_fraction(box, pts, table) == 1.0
    assert support_fraction(printed, pts, table) == 1.0
    lifted = box & (rows <= 30)  # ten pixels above the table: out of reach
    assert support_fraction(lifted, pts, table) == 0.0
