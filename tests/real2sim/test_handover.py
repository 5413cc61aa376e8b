"""A piece of one object seen over another's rim goes back to its owner (issue 16): UOIS 0008's mug held the
bottle's foot behind it. Synthetic regions isolate the rule; the real frame is in ``test_split``."""

from __future__ import annotations

import numpy as np
import pytest

from real2sim.handover import borrowed_pieces, owner_index
from real2sim.split import make_context

UP = np.array([0.0, -1.0, 0.0])  # the table's normal: image up
MINT, CYAN = (190, 225, 200), (30, 170, 200)


def _mug_and_bottle(
    band_depth_m: float = 1.10, band_height_m: float = 0.12, band_colour: tuple[int, int, int] = CYAN
) -> tuple[list[tuple[np.ndarray, float]], np.ndarray, object]:
    """At 1 m, focal 100 px (1 cm a pixel): a mint mug (rows 60-99, columns 40-79) whose region also holds a
    band of rows 50-59 (``band_colour``, ``band_depth_m`` away, ``band_height_m`` above the table), and a cyan
    bottle behind it (rows 10-49, 1.15 m away). Returns the regions, the band and the split context."""
    h, w = 120, 160
    mug = np.zeros((h, w), bool)
    mug[50:100, 40:80] = True
    band = np.zeros((h, w), bool)
    band[50:60, 40:80] = True
    bottle = np.zeros((h, w), bool)
    bottle[10:50, 40:80] = True
    rgb = np.full((h, w, 3), 120, np.uint8)
    rgb[mug] = MINT
    rgb[bottle] = CYAN
    rgb[band] = band_colour
    z = np.full((h, w), 1.3)
    z[mug] = 1.0
    z[band] = band_depth_m
    z[bottle] = 1.15
    rows = np.arange(h, dtype=float)[:, None].repeat(w, axis=1)
    height = np.where(mug | bottle, (99 - rows) * 0.002, 0.0)
    height[band] = band_height_m
    v, u = np.mgrid[0:h, 0:w].astype(float)
    pts = np.stack([(u - w / 2) / 100.0 * z, (v - h / 2) / 100.0 * z, z], axis=-1)
    ctx = make_context(rgb, pts, np.ones((h, w), bool), height, np.zeros((h, w), bool), 100.0, UP)
    return [(mug, 0.1), (bottle, 0.2)], band, ctx


def test_the_bottle_s_foot_seen_over_the_mug_s_rim_goes_back_to_the_bottle() -> None:
    regions, band, ctx = _mug_and_bottle()
    before = [m.copy() for m, _ in regions]
    borrowed = borrowed_pieces(regions, ctx)
    assert len(borrowed) == 1
    piece, owner = borrowed[0]
    assert not (piece & ~band).any() and piece.sum() >= 0.95 * band.sum()  # the median filter rounds corners
    assert owner_index(owner, [m for m, _ in regions]) == 1
    assert all((m == b).all() for (m, _), b in zip(regions, before))  # the regions shapes are fitted to stay


@pytest.mark.parametrize(
    "change",
    [
        {"band_depth_m": 1.005},  # at the mug's depth: the mug's own print, not what stands behind it
        {"band_height_m": 0.01},  # resting on the table: an object of its own, for the colour split
        {"band_colour": (200, 40, 40)},  # red: not the bottle's colour
    ],
)
def test_a_band_that_is_not_the_neighbour_s_stays(change: dict[str, object]) -> None:
    regions, _, ctx = _mug_and_bottle(**change)  # type: ignore[arg-type]
    assert borrowed_pieces(regions, ctx) == []


def test_an_empty_region_borrows_nothing_and_lends_nothing() -> None:
    regions, band, ctx = _mug_and_bottle()
    empty = np.zeros_like(band)
    borrowed = borrowed_pieces([(empty, 0.0), *regions], ctx)
    assert len(borrowed) == 1 and (borrowed[0][0] & band).any()


def test_the_owner_is_the_mask_that_holds_most_of_it_now() -> None:
    owner = np.zeros((4, 4), bool)
    owner[:2] = True
    later = [np.eye(4, dtype=bool), owner | np.eye(4, dtype=bool)]
    assert owner_index(owner, later) == 1
    assert owner_index(owner, [~owner]) is None
