"""real2sim.masks against what it replaces, on random masks (Hypothesis): ``fill_holes`` against scipy's
``binary_fill_holes``, ``padded_box`` against the bounding box of ``np.nonzero``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import ndimage

from real2sim.masks import fill_holes

masks = st.tuples(st.integers(1, 24), st.integers(1, 24)).flatmap(
    lambda shape: arrays(bool, shape, elements=st.booleans())
)


@settings(max_examples=300, deadline=None)
@given(masks)
def test_fill_holes_equals_scipy_on_any_mask(mask: np.ndarray) -> None:
    assert np.array_equal(fill_holes(mask), ndimage.binary_fill_holes(mask))


def test_a_ring_is_filled_and_a_gap_to_the_border_is_not() -> None:
    ring = np.zeros((7, 7), bool)
    ring[1:6, 1:6] = True
    ring[2:5, 2:5] = False  # a hole
    assert fill_holes(ring)[1:6, 1:6].all()
    cup = ring.copy()
    cup[2:5, 1] = False  # its left wall opened to the border: no longer a hole
    assert not fill_holes(cup)[3, 3]
    diagonal = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], bool)  # the middle touches the border diagonally
    assert fill_holes(diagonal)[1, 1]  # 4-neighbours: still a hole, as scipy says
    assert ndimage.binary_fill_holes(diagonal)[1, 1]


def test_fill_holes_takes_only_image_masks() -> None:
    with pytest.raises(ValueError, match=r"\(H, W\) mask"):
        fill_holes(np.zeros((2, 2, 2), bool))


@settings(max_examples=200, deadline=None)
@given(masks, st.integers(0, 30))
def test_padded_box_is_the_bounding_box_grown_within_the_image(mask: np.ndarray, pad: int) -> None:
    from real2sim.masks import padded_box

    box = padded_box(mask, pad)
    if not mask.any():
        assert box is None
        return
    assert box is not None
    rows, cols = np.nonzero(mask)
    h, w = mask.shape
    assert (box[0].start, box[0].stop) == (max(rows.min() - pad, 0), min(rows.max() + pad + 1, h))
    assert (box[1].start, box[1].stop) == (max(cols.min() - pad, 0), min(cols.max() + pad + 1, w))
