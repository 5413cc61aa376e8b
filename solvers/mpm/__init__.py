"""MPM on Warp: an explicit MLS-MPM solver for the five materials of the SIMPACT paper (jelly, metal, sand,
foam, plasticine) with the table and kinematic boxes as colliders. Warp is imported only when a solver is
built (the kernels live in :mod:`solvers.mpm.kernels`)."""

from solvers.mpm.materials import MODELS, Material
from solvers.mpm.mls import Body, Boxes, GridSpec, MPMSnapshot, MPMSolver
from solvers.mpm.shapes import sample_box, sample_cylinder

__all__ = [
    "MODELS",
    "Body",
    "Boxes",
    "GridSpec",
    "MPMSnapshot",
    "MPMSolver",
    "Material",
    "sample_box",
    "sample_cylinder",
]
