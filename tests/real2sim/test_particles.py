"""Particle filling: a box's top surface and an occluded mound fill to the table at the given spacing."""

from __future__ import annotations

import numpy as np
import pytest

from real2sim.particles import ParticleError, fill_particles


def box_top(size: tuple[float, float, float], centre: tuple[float, float], step: float = 0.002) -> np.ndarray:
    xs = np.arange(-size[0] / 2 + step / 2, size[0] / 2, step) + centre[0]
    ys = np.arange(-size[1] / 2 + step / 2, size[1] / 2, step) + centre[1]
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    return np.stack([gx.ravel(), gy.ravel(), np.full(gx.size, size[2])], axis=1)


def test_box_top_fills_its_volume_uniformly() -> None:
    size = (0.08, 0.06, 0.03)
    p = fill_particles(box_top(size, (0.5, 0.1)), spacing=0.005)
    assert p.points.dtype == np.float32 and p.points.shape[1] == 3
    assert p.volume_m3 == pytest.approx(np.prod(size), rel=0.12)
    lo, hi = p.points.min(axis=0), p.points.max(axis=0)
    assert lo[2] == pytest.approx(0.0025) and hi[2] <= size[2]
    assert np.allclose(lo[:2], [0.5 - 0.04, 0.1 - 0.03], atol=0.005)
    # A lattice: every coordinate is a half-integer multiple of the spacing.
    frac = p.points / 0.005 - 0.5
    assert np.allclose(frac, np.round(frac), atol=1e-3)
    assert len(np.unique(p.points, axis=0)) == len(p.points)


def test_holes_in_the_observed_surface_are_closed_and_the_result_is_deterministic() -> None:
    pts = box_top((0.1, 0.1, 0.04), (0.0, 0.0))
    keep = np.linalg.norm(pts[:, :2] - [0.01, 0.0], axis=1) > 0.006  # a blind spot of ~1 cm
    p = fill_particles(pts[keep], spacing=0.005)
    assert p.holes_filled > 0
    full = fill_particles(pts, spacing=0.005)
    assert len(p.points) == len(full.points)
    again = fill_particles(pts[keep][::-1], spacing=0.005)
    assert np.array_equal(np.sort(again.points, axis=0), np.sort(p.points, axis=0))


def test_spacing_scales_the_count_and_bad_input_is_refused() -> None:
    pts = box_top((0.05, 0.05, 0.05), (0.3, 0.0))
    coarse, fine = fill_particles(pts, spacing=0.01), fill_particles(pts, spacing=0.005)
    assert len(fine.points) > 4 * len(coarse.points)
    assert fine.volume_m3 == pytest.approx(0.05**3, rel=0.15)
    assert coarse.volume_m3 == pytest.approx(0.05**3, rel=0.5)
    with pytest.raises(ParticleError, match="spacing"):
        fill_particles(pts, spacing=0.0)
    with pytest.raises(ParticleError, match="above the table"):
        fill_particles(pts * [1, 1, 0], spacing=0.005)
    with pytest.raises(ParticleError, match="shape"):
        fill_particles(pts[:, :2])
    with pytest.raises(ParticleError, match="coarser"):
        fill_particles(box_top((0.3, 0.3, 0.3), (0, 0), step=0.001), spacing=0.0002)
