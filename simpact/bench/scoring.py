"""How a reconstructed object is scored against its reference: the ground-truth box of a task object,
symmetry-aware pose errors, mask IoU, the oriented extents of a point set and the extent error."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from simpact.core.rotations import quat_to_matrix
from solvers.mujoco.scene_builder import object_mesh

__all__ = ["extent_error", "ground_truth_box", "mask_iou", "particles_box", "points_extent", "pose_errors"]


def ground_truth_box(obj: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """A task object's oriented bounding box: centre (3,) m, rotation (3, 3), extent (3,) m, and its
    symmetry (``box``, ``rotational`` about its z axis, ``sphere``, ``none``)."""
    R = quat_to_matrix(obj.quaternion)
    p = np.asarray(obj.position, dtype=float)
    if obj.shape == "box":
        return p, R, np.asarray(obj.size, dtype=float), "box"
    if obj.shape == "cylinder":
        r, h = obj.size
        return p, R, np.array([2 * r, 2 * r, h]), "rotational"
    if obj.shape == "bowl":
        r, h, _ = obj.size
        return p + R @ [0.0, 0.0, h / 2], R, np.array([2 * r, 2 * r, h]), "rotational"
    if obj.shape == "sphere":
        return p, R, np.full(3, 2 * obj.size[0]), "sphere"
    mesh = object_mesh(obj)
    assert mesh is not None
    lo, hi = mesh.bounds
    return p + R @ ((lo + hi) / 2), R, hi - lo, "none"


def particles_box(particles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The box a deformable's particles (N, 3) m fill, in the same form as :func:`ground_truth_box`: their
    axis-aligned bounds grown by half the median spacing between neighbours on each side (each particle
    stands for the material around it). A pile of sand slumps from the block the task gives while the
    world is built, so what a rendered frame shows is its particles, not that block."""
    p = np.asarray(particles, dtype=float)
    spacing = float(np.median(cKDTree(p).query(p, k=2)[0][:, 1])) if len(p) > 1 else 0.0
    lo, hi = p.min(axis=0), p.max(axis=0)
    return (lo + hi) / 2, np.eye(3), hi - lo + spacing, "box"


def _signed_permutations() -> list[np.ndarray]:
    """The 24 proper rotations that map the coordinate axes onto themselves."""
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            P = np.zeros((3, 3))
            for i, (j, s) in enumerate(zip(perm, signs)):
                P[j, i] = s
            if np.linalg.det(P) > 0:
                out.append(P)
    return out


_AXES = _signed_permutations()


def _angle(R: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1.0, 1.0))))


def pose_errors(
    centre: np.ndarray,
    quaternion: Sequence[float] | np.ndarray,
    extent: np.ndarray,
    gt_centre: np.ndarray,
    gt_R: np.ndarray,
    gt_extent: np.ndarray,
    symmetry: str,
) -> dict[str, float]:
    """Position error (cm), symmetry-aware rotation error (deg) and extent error (%, largest over the edges).

    The estimate's axes may be any relabelling of the truth's: each of the 24 axis relabellings ``P`` pairs
    the estimate's edges ``P``-permuted with the truth's; the relabellings whose extent error is within 2 %
    of the best are equally valid answers, and the rotation error is the smallest among them (for
    ``rotational`` symmetry: the angle between the axes that play the truth's z; ``sphere``: 0)."""
    R = quat_to_matrix(quaternion)
    est = np.asarray(extent, dtype=float)
    candidates = []
    for P in _AXES:
        ext = np.abs(P) @ est  # the estimate's edges along the truth's axes under this relabelling
        candidates.append((float(np.max(np.abs(ext - gt_extent) / gt_extent)), P))
    best = min(c[0] for c in candidates)
    rot = []
    for err, P in candidates:
        if err > best + 0.02:
            continue
        R_est = R @ P.T  # estimate's frame with its axes relabelled as the truth's
        if symmetry == "sphere":
            rot.append(0.0)
        elif symmetry == "rotational":
            cos = float(np.clip(abs(R_est[:, 2] @ gt_R[:, 2]), -1.0, 1.0))
            rot.append(float(np.degrees(np.arccos(cos))))
        else:
            rot.append(_angle(gt_R.T @ R_est))
    return {
        "position_cm": float(np.linalg.norm(np.asarray(centre, dtype=float) - gt_centre) * 100),
        "rotation_deg": min(rot),
        "extent_pct": best * 100,
    }


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = int(np.logical_or(a, b).sum())
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


def points_extent(points_world: np.ndarray) -> np.ndarray:
    """Oriented extents (m) of an object's points in the world frame (table top at z = 0): the sides of the
    minimum-area rectangle of their top view (0.5-99.5 percentiles along its axes) and the height of their
    top above the table, on which the object rests."""
    import cv2

    pts = np.asarray(points_world, dtype=np.float64)
    xy = pts[:, :2] - pts[:, :2].mean(axis=0)
    _, _, angle = cv2.minAreaRect(xy.astype(np.float32))
    a = np.deg2rad(angle)
    local = xy @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    side = np.percentile(local, 99.5, axis=0) - np.percentile(local, 0.5, axis=0)
    return np.array([side[0], side[1], max(float(np.percentile(pts[:, 2], 99.5)), 0.0)])


def extent_error(est: np.ndarray, ref: np.ndarray) -> float:
    """Largest relative error (%) over the edges, both sorted (orientation-free)."""
    est, ref = np.sort(est), np.sort(ref)
    return float(np.max(np.abs(est - ref) / ref) * 100)
