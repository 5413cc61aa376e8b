"""What real2sim is asked (:class:`Real2SimConfig`: the back-ends and settings) and what it returns
(:class:`Real2SimResult`: everything it computed, ``result.json`` from :meth:`Real2SimResult.to_dict`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from real2sim.labels import Labels
from real2sim.particles import DEFAULT_SPACING_M, Particles
from real2sim.physics import PhysicsEstimate
from real2sim.types import ObjectGeometry, PhysicalParameters
from solvers.world import World

__all__ = ["Real2SimConfig", "Real2SimResult"]


@dataclasses.dataclass(frozen=True)
class Real2SimConfig:
    """Choices of back-ends and settings."""

    segmenter: str = "geometric"
    """``geometric``, ``masks`` (the frame's own masks) or ``grounded_sam2``."""
    shape: str = "geometric"
    pose: str = "icp"
    particle_spacing_m: float = DEFAULT_SPACING_M
    """Lattice pitch of deformables' particles (m)."""
    settle_s: float = 1.0
    """Settle run length (s); 0 skips it."""
    render: bool = True
    """Render the scene from the camera next to the photo (needs an OpenGL context)."""
    overlays: bool = True
    kinds: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Object name → solver, overriding the estimate (source ``user``)."""


@dataclasses.dataclass
class Real2SimResult:
    """Everything real2sim computed; :meth:`to_dict` is ``result.json``."""

    scene: Any
    """:class:`simpact.core.scene.Scene` of the rigid objects (what MuJoCo simulates)."""
    objects: list[dict[str, Any]]
    """``scene.json`` ``objects`` entries (file paths relative to the output folder)."""
    geometries: dict[str, ObjectGeometry]
    """Object name → its reconstruction after placement (world frame)."""
    parameters: dict[str, PhysicalParameters]
    particles: dict[str, Particles]
    labels: Labels
    physics: PhysicsEstimate
    perception: Any
    frame_info: dict[str, Any]
    table: dict[str, Any]
    placement: dict[str, dict[str, Any]]
    """Per object: how far placement moved it (``lift_m``, ``push_m``) and where it was cut against a
    neighbour (``cuts``, :func:`real2sim.separate.trim_overlaps`)."""
    settle: Any = None
    """:class:`simpact.guard.settle.SettleReport`, or None when skipped."""
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    world: World | None = None
    """The World built from ``scene`` (None when it has no objects)."""
    fit: dict[str, Any] = dataclasses.field(default_factory=dict)
    """How well the scene explains the measured depth (:mod:`real2sim.fitscore`): per object ``iou``,
    ``depth_residual_m``, ``verdict`` ...; ``table``."""
    renders: dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)
    """The ray-cast render from the photo's camera (``depth``, ``index``, ``normals``), for the overlays."""

    @property
    def names(self) -> list[str]:
        return [o["name"] for o in self.objects]

    def segmentation(self) -> dict[str, Any]:
        """``matches`` (object name → the confidence of its label's match to its region), ``not_found``
        (labels no region matched) and ``unlabelled`` (regions on the table no label matched: pixel count
        and bounding box ``[row0, col0, row1, col1]``)."""
        segments = list(getattr(self.perception, "segments", []))
        by_label = {s.label: s for s in segments}
        matches = {
            n: round(float(by_label[g.label].score), 3)
            for n, g in self.geometries.items()
            if g.label in by_label
        }
        regions = []
        for mask in getattr(self.perception, "unlabelled", []):
            rows, cols = np.nonzero(mask)
            if len(rows):
                box = [int(rows.min()), int(cols.min()), int(rows.max()), int(cols.max())]
                regions.append({"pixels": int(len(rows)), "bbox_px": box})
        found = {g.label for g in self.geometries.values()}
        return {
            "matches": matches,
            "not_found": [lab for lab in self.labels.labels if lab not in found],
            "unlabelled": regions,
        }

    def to_dict(self) -> dict[str, Any]:
        settle = self.settle.to_dict() if self.settle is not None else None
        return {
            "objects": [o["name"] for o in self.objects],
            "kinds": {o["name"]: o["kind"] for o in self.objects},
            "labels": self.labels.to_dict(),
            "physics": self.physics.to_dict(),
            "placement": self.placement,
            "frame": self.frame_info,
            "settle": settle,
            "clean": None if settle is None else settle["clean"],
            "fit": self.fit,
            **self.segmentation(),
            "timings_s": {k: round(v, 4) for k, v in self.timings_s.items()},
            "warnings": list(self.warnings),
            "files": dict(self.files),
        }


# --- the pipeline -------------------------------------------------------------------------------------------
