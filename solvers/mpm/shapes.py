"""Particle sampling of simple solids on a regular lattice (the lattice spacing is the particle spacing; the
particle volume is then ``spacing ** 3``). Units: m."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["sample_box", "sample_cylinder"]


def _lattice(lo: np.ndarray, hi: np.ndarray, spacing: float) -> np.ndarray:
    axes = [np.arange(a + spacing / 2.0, b - spacing / 4.0, spacing) for a, b in zip(lo, hi)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def sample_box(center: ArrayLike, size: ArrayLike, spacing: float) -> np.ndarray:
    """(N, 3) lattice points filling the axis-aligned box of full edge lengths ``size`` at ``center``."""
    c, s = np.asarray(center, dtype=float), np.asarray(size, dtype=float)
    return _lattice(c - s / 2.0, c + s / 2.0, spacing)


def sample_cylinder(base_center: ArrayLike, radius: float, height: float, spacing: float) -> np.ndarray:
    """(N, 3) lattice points filling an upright cylinder standing on ``base_center``."""
    b = np.asarray(base_center, dtype=float)
    pts = _lattice(b - [radius, radius, 0.0], b + [radius, radius, height], spacing)
    keep = np.hypot(pts[:, 0] - b[0], pts[:, 1] - b[1]) <= radius
    return pts[keep]
