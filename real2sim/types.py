"""The values passed between real2sim's stages: table plane → segments → reconstructed objects → parameters.

Frames: the camera frame is OpenCV's (x right, y down, z forward, metres). The world frame is the robot base
when the frame carries ``T_base_cam``; otherwise it is defined by the table plane (z up along its normal,
z = 0 on the table surface). Either way the table top is at world z = 0 in the scene that real2sim builds.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError
from simpact.core.rotations import quat_to_matrix
from simpact.core.vocab import PARAMETER_SOURCES  # noqa: F401  (named in the docstrings below)

__all__ = [
    "ObjectGeometry",
    "PhysicalParameters",
    "Real2SimError",
    "Segment",
    "SegmentationError",
    "TablePlane",
    "label_words",
]


class Real2SimError(SimpactError, ValueError):
    """real2sim cannot build a scene from this input; the message says what is wrong."""


class SegmentationError(SimpactError, ValueError):
    """A segmentation back-end cannot run or its input is wrong; the message names the setting or input."""


@dataclasses.dataclass(eq=False)
class TablePlane:
    """The support plane and the world frame it (or the calibration) defines."""

    normal_cam: np.ndarray
    """(3,) unit normal of the table in the camera frame, pointing towards the camera (up)."""
    offset_m: float
    """Plane ``normal_cam · p + offset_m = 0`` for camera-frame points ``p`` (m)."""
    T_world_cam: np.ndarray
    """(4, 4) camera-to-world transform (m)."""
    inliers: np.ndarray
    """(H, W) bool: pixels whose point lies on the table."""
    world_frame: str
    """``"T_base_cam"`` (robot base, from calibration) or ``"table_plane"`` (z up along the table normal)."""
    table_height_m: float = 0.0
    """World z of the table surface (0 for ``table_plane``; measured when the base frame is calibrated)."""


@dataclasses.dataclass(eq=False)
class Segment:
    """One object's pixels in the frame."""

    label: str
    mask: np.ndarray
    """(H, W) bool."""
    score: float = 1.0
    """Detector confidence in [0, 1] (1 for given masks)."""
    source: str = "geometric"
    """Back-end that produced it: ``geometric``, ``masks`` or ``grounded_sam2``."""
    silhouette: np.ndarray | None = None
    """(H, W) bool: the object's outline as the photo shows it, snapped to its colour edges (the geometric
    segmenter's :func:`real2sim.silhouette.snap_to_colour`); None where the mask is that outline already."""
    support_m: float = 0.0
    """Height (m above the table) of the surface it lies on: 0 on the table, more on another object's top
    (:mod:`real2sim.stacked`)."""

    @property
    def seen(self) -> np.ndarray:
        """The object's pixels in the photo: the silhouette where there is one, else the mask. The mask, cut
        from the depth, is what shapes are fitted to; this is what the scene is checked against and shown."""
        return self.mask if self.silhouette is None else self.silhouette


@dataclasses.dataclass(eq=False)
class ObjectGeometry:
    """An object's completed shape and its 6-DoF pose in the world frame (table top at z = 0)."""

    label: str
    mesh: Any
    """``trimesh.Trimesh`` in the object frame (m), watertight, centred on its bounding-box centre."""
    position: np.ndarray
    """(3,) world position of the object frame's origin (m)."""
    quaternion: np.ndarray
    """(4,) world orientation (w, x, y, z)."""
    extent: np.ndarray
    """(3,) edge lengths of the oriented bounding box, object-frame axes (m)."""
    points_world: np.ndarray
    """(N, 3) the observed surface points of the object (m)."""
    symmetry: str = "none"
    """``"rotational"`` (about object z), ``"mirror"``, ``"box"`` or ``"none"``: used for completion and for
    symmetry-aware rotation errors."""
    concave: bool = False
    """True for bowls, mugs and other shapes that need convex decomposition for contact."""
    fit_rmse_m: float = 0.0
    """RMS distance of the observed points to the posed mesh surface (m)."""
    shape_source: str = "geometric"
    pose_source: str = "icp"
    edge_radii_m: tuple[float, float] | None = None
    """A box with rounded edges: the radius (m) of its four edges along its longest side and of its other
    eight (:mod:`real2sim.rounding`); None for any other shape."""
    neck_m: tuple[float, float] | None = None
    """A box with a bottle's neck on one end: the neck's radius and length (m) (:mod:`real2sim.necks`)."""
    prism_depth_m: float | None = None
    """A prism, the outline of the face it shows the camera extruded straight back, or its outline from
    above extruded up from the table: that depth or height (m) (:mod:`real2sim.prisms`)."""
    heightfield_cell_m: float | None = None
    """A height field, columns standing on the table as high as the surface seen over them: their width (m)
    (:mod:`real2sim.heightfield`)."""
    support_m: float = 0.0
    """Height (m above the table) of the surface it was fitted standing on: another object's top, a vessel's
    floor (:mod:`real2sim.stacked`, :func:`real2sim.plateaus.split_in_vessel`); 0 on the table."""

    def world_vertices(self) -> np.ndarray:
        """The posed mesh's vertices (N, 3) in the world frame (m)."""
        R = quat_to_matrix(self.quaternion)
        return np.asarray(self.mesh.vertices, dtype=np.float64) @ R.T + np.asarray(
            self.position, dtype=np.float64
        )


@dataclasses.dataclass
class PhysicalParameters:
    """An object's simulation parameters, SI units; ``sources`` says where each value came from."""

    kind: str = "rigid"
    """``rigid`` (MuJoCo), ``pd`` (projective dynamics) or ``mpm`` (Warp MPM)."""
    mass_kg: float = 0.1
    friction: float = 0.5
    """Coulomb coefficient against the table and the fingers."""
    young_modulus_pa: float | None = None
    poisson_ratio: float | None = None
    density_kg_m3: float | None = None
    material: str | None = None
    """MPM material: one of jelly, metal, sand, foam, plasticine."""
    friction_angle_deg: float | None = None
    yield_stress_pa: float | None = None
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    """Field name → one of :data:`PARAMETER_SOURCES`."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def label_words(label: str) -> list[str]:
    """Lower-case words of a label (``"green_bowl"`` -> ``["green", "bowl"]``)."""
    return [w for w in re.split(r"[^a-z0-9]+", label.lower()) if w]
