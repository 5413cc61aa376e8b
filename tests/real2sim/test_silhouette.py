"""Silhouettes snapped to the photo's colour edges: a region cut short or spilling by a few pixels takes the
object's outline, but no pixel whose depth disagrees, no other region's pixel, nothing beyond the band."""

from __future__ import annotations

import numpy as np

from real2sim.silhouette import BAND_PX, snap_to_colour


def _scene() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A red box (rows 20-79, columns 30-69) 10 cm in front of a grey, noisy table at 1 m (120 x 120 px);
    its depth-cut region stops 3 px short on the left and top and spills 2 px onto the table on the right."""
    rng = np.random.default_rng(0)
    rgb = np.clip(rng.normal(120, 12, (120, 120, 3)), 0, 255).astype(np.uint8)
    box = np.zeros((120, 120), bool)
    box[20:80, 30:70] = True
    rgb[box] = np.clip(rng.normal((190, 40, 40), 10, (int(box.sum()), 3)), 0, 255).astype(np.uint8)
    depth = np.where(box, 0.9, 1.0).astype(np.float32)
    seed = np.zeros_like(box)
    seed[23:80, 33:72] = True
    return rgb, depth, box, seed


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / (a | b).sum())


def test_a_region_short_of_its_object_and_spilling_takes_its_outline() -> None:
    rgb, depth, box, seed = _scene()
    (snapped,) = snap_to_colour([seed], rgb, depth, may_join=box)
    assert _iou(seed, box) < 0.9
    assert _iou(snapped, box) >= 0.98, _iou(snapped, box)
    assert not (snapped & (depth == 1.0) & ~seed).any()  # no table pixel gained


def test_pixels_whose_depth_disagrees_stay_out_but_pixels_without_depth_join() -> None:
    rgb, depth, box, seed = _scene()
    depth[20:23] = 1.0  # the box's top rows measured on the table (depth and colour not registered)
    depth[:, 30:33] = 0.0  # its left columns measured nothing
    (snapped,) = snap_to_colour([seed], rgb, depth, may_join=box & (depth < 1.0))
    assert not snapped[20:23, 33:].any()
    assert snapped[25:78, 30:33].all()


def test_a_region_never_takes_another_s_pixels_nor_goes_beyond_the_band() -> None:
    rgb, depth, box, seed = _scene()
    other = np.zeros_like(box)
    other[40:60, 20:30] = True  # a neighbour of the box's colour touching its left side
    rgb[other] = (190, 40, 40)
    a, b = snap_to_colour([seed, other], rgb, depth, may_join=box | other)
    assert not (a & b).any() and not (a & other).any()
    rgb[:, :30] = (190, 40, 40)  # the whole left of the image now has the box's colour
    (wide,) = snap_to_colour([seed], rgb, np.zeros_like(depth), may_join=box)
    assert not wide[:, : 33 - BAND_PX - 1].any()


def test_snapping_is_deterministic_and_leaves_thin_regions_alone() -> None:
    rgb, depth, box, seed = _scene()
    first = snap_to_colour([seed], rgb, depth, may_join=box)[0]
    assert np.array_equal(first, snap_to_colour([seed], rgb, depth, may_join=box)[0])
    thin = np.zeros_like(box)
    thin[30:70, 50:54] = True  # 4 px wide: no interior to seed the object's colours
    assert np.array_equal(snap_to_colour([thin], rgb, depth, may_join=box)[0], thin)
