"""Particles for deformable objects (SIMPACT §3.1, Fig. 2): the object's observed surface points, and a
uniform lattice filling the volume between that surface and the table.

The camera sees an object from above, so its surface is a height field over the table: the points are binned
into square cells of ``spacing`` (m) in the world xy plane, each cell keeps its highest point, cells inside
the footprint that no point fell into (holes, self-occlusion) are closed and get their height from the
nearest observed cell, and every cell is filled with lattice points at ``spacing`` from the table (z = 0)
up to its height. The lattice is anchored to the world origin, so the result is deterministic.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import ndimage

from real2sim.masks import fill_holes
from simpact.core.errors import SimpactError

__all__ = ["DEFAULT_SPACING_M", "ParticleError", "Particles", "fill_particles"]

DEFAULT_SPACING_M = 0.005
"""Particle spacing (m): 5 mm gives ~8000 particles for a 10 cm cube."""
MAX_PARTICLES = 2_000_000
"""Refuse a fill that would need more particles than this (spacing too fine for the object)."""


class ParticleError(SimpactError, ValueError):
    """The points cannot be filled (none above the table, a bad spacing, too many particles)."""


@dataclasses.dataclass(eq=False)
class Particles:
    """An object's particle set in the world frame (m)."""

    points: np.ndarray
    """(N, 3) float32 lattice points, world frame (m)."""
    spacing_m: float
    surface_points: int
    """Observed surface points the fill started from."""
    cells: int
    """Occupied xy cells of the footprint."""
    holes_filled: int
    """Footprint cells without an observed point, closed and given their nearest neighbour's height."""

    @property
    def volume_m3(self) -> float:
        """Volume the particles represent: one ``spacing``³ cube each (m³)."""
        return float(len(self.points) * self.spacing_m**3)


def fill_particles(
    surface_world: np.ndarray,
    spacing: float = DEFAULT_SPACING_M,
    *,
    table_z: float = 0.0,
    close_cells: int = 1,
) -> Particles:
    """Fill the volume under the observed surface (``(N, 3)`` world points, m) down to the table at
    ``table_z`` (m) with a uniform lattice of pitch ``spacing`` (m). ``close_cells``: footprint holes up to
    about twice this many cells wide are closed."""
    if not (isinstance(spacing, (int, float)) and np.isfinite(spacing) and spacing > 0):
        raise ParticleError(f"particle spacing must be a positive length in metres, got {spacing!r}")
    pts = np.asarray(surface_world, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ParticleError(f"surface points must have shape (N, 3), got {pts.shape}")
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    above = pts[pts[:, 2] > table_z + 0.5 * spacing]
    if len(above) == 0:
        raise ParticleError(
            f"none of the {len(pts)} surface points lies above the table "
            f"(z > {table_z + 0.5 * spacing:.4f} m): nothing to fill"
        )
    # Cell indices on a lattice anchored at the world origin.
    ij = np.floor(above[:, :2] / spacing).astype(np.int64)
    lo = ij.min(axis=0) - close_cells
    grid_shape = tuple(int(v) for v in ij.max(axis=0) - lo + 1 + close_cells)
    cells = grid_shape[0] * grid_shape[1]
    if cells > MAX_PARTICLES:
        raise ParticleError(f"the footprint spans {cells} cells at {spacing} m: use a coarser spacing")
    height = np.full(grid_shape, -np.inf)
    local = ij - lo
    np.maximum.at(height, (local[:, 0], local[:, 1]), above[:, 2])
    observed = np.isfinite(height)
    footprint = _close(observed, close_cells)
    holes = footprint & ~observed
    if holes.any():
        height = _nearest_fill(height, observed, holes)
    top = np.where(footprint, height, table_z) - table_z
    layers = np.where(footprint, np.floor(top / spacing + 0.5).astype(np.int64), 0)
    layers = np.maximum(layers, np.where(footprint, 1, 0))
    total = int(layers.sum())
    if total > MAX_PARTICLES:
        raise ParticleError(f"filling needs {total} particles at {spacing} m: use a coarser spacing")
    ci, cj = np.nonzero(footprint)
    counts = layers[ci, cj]
    ci, cj = np.repeat(ci, counts), np.repeat(cj, counts)
    k = np.concatenate([np.arange(n) for n in counts]) if len(counts) else np.zeros(0, np.int64)
    points = np.stack(
        [
            (ci + lo[0] + 0.5) * spacing,
            (cj + lo[1] + 0.5) * spacing,
            table_z + (k + 0.5) * spacing,
        ],
        axis=1,
    ).astype(np.float32)
    return Particles(points, float(spacing), len(above), int(footprint.sum()), int(holes.sum()))


def _close(mask: np.ndarray, radius: int) -> np.ndarray:
    """Binary closing (dilate, then erode) with a square of side ``2 * radius + 1``; keeps ``mask``."""
    if radius <= 0:
        return mask

    structure = np.ones((2 * radius + 1, 2 * radius + 1), dtype=bool)
    padded = np.pad(mask, radius + 1)
    closed = ndimage.binary_closing(padded, structure=structure)[
        radius + 1 : -radius - 1, radius + 1 : -radius - 1
    ]
    closed = fill_holes(closed)
    return np.asarray(closed | mask, dtype=bool)


def _nearest_fill(height: np.ndarray, observed: np.ndarray, holes: np.ndarray) -> np.ndarray:

    _, (ii, jj) = ndimage.distance_transform_edt(~observed, return_indices=True)
    out = height.copy()
    out[holes] = height[ii[holes], jj[holes]]
    return out
