"""Boolean image masks: the operations ``scipy.ndimage`` does slowly on whole frames."""

from __future__ import annotations

import numpy as np

__all__ = ["fill_holes"]


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """``mask`` ((H, W) bool) with its holes filled: every part of the background that no path of
    4-neighbours links to the image's border. The same as ``scipy.ndimage.binary_fill_holes`` with its
    default structure, found by labelling the background once (OpenCV) rather than dilating from the border
    until nothing changes: about 1 ms rather than 30 on a 1280 x 720 frame."""
    import cv2

    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2:
        raise ValueError(f"fill_holes: expected an (H, W) mask, got shape {mask.shape}")
    if mask.size == 0:
        return mask.copy()
    count, background = cv2.connectedComponents((~mask).astype(np.uint8), connectivity=4)
    border = np.concatenate([background[0], background[-1], background[:, 0], background[:, -1]])
    outside = np.zeros(count, dtype=bool)  # per background label: linked to the border
    outside[border] = True
    outside[0] = True  # label 0 is the mask itself
    return ~outside[background] | mask
