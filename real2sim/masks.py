"""Boolean image masks: a mask's padded bounding box, and its holes filled, each faster on a whole frame than
``np.nonzero`` and ``scipy.ndimage.binary_fill_holes``."""

from __future__ import annotations

import numpy as np

__all__ = ["fill_holes", "padded_box"]


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


def padded_box(mask: np.ndarray, pad_px: int) -> tuple[slice, slice] | None:
    """The rows and columns of ``mask``'s ((H, W) bool) bounding box grown by ``pad_px`` on each side, within
    the image; None for an empty mask. Read from the rows and columns that hold any pixel of it (a 1280 x 720
    frame: well under a millisecond, where ``np.nonzero`` takes several)."""
    rows = np.flatnonzero(np.any(mask, axis=1))
    if len(rows) == 0:
        return None
    cols = np.flatnonzero(np.any(mask, axis=0))
    h, w = mask.shape
    return (
        slice(max(int(rows[0]) - pad_px, 0), min(int(rows[-1]) + pad_px + 1, h)),
        slice(max(int(cols[0]) - pad_px, 0), min(int(cols[-1]) + pad_px + 1, w)),
    )
