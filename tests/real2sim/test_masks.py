"""real2sim.masks.fill_holes is scipy's binary_fill_holes, faster: checked on random masks by Hypothesis."""

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
