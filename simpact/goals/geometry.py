"""Shape geometry the goal predicates need, from a scene object's shape and size and a pose: surface sample
points, the solid's signed distance, the lowest and highest points, and body axes. Core types only.

Metres; poses are positions (..., 3) and quaternions (..., 4, w x y z) in the world frame (z = 0 on the
table). Bowls and meshes are treated as their bounding cylinder / box (a bowl's body origin is its base).
"""

from __future__ import annotations

import numpy as np

from simpact.core.rotations import quat_conj, quat_rotate
from simpact.core.scene import SceneObject

__all__ = ["body_axis", "half_extents", "local_centre", "signed_distance", "surface_points", "z_range"]

_RIM = 32
"""Points around a cylinder's rim (the sampled rim lies within 0.5 % of the radius of the true one)."""


def half_extents(obj: SceneObject) -> np.ndarray:
    """Half extents (3,) of the object's bounding box in its body frame, m."""
    s = obj.size
    if obj.shape == "box" or obj.shape == "mesh":
        return np.asarray(s[:3], dtype=float) / 2
    if obj.shape == "cylinder":
        return np.array([s[0], s[0], s[1] / 2])
    if obj.shape == "bowl":
        return np.array([s[0], s[0], s[1] / 2])
    return np.array([s[0], s[0], s[0]])  # sphere


def local_centre(obj: SceneObject) -> np.ndarray:
    """The bounding box's centre in the body frame: the origin, except a bowl's (at its base)."""
    return np.array([0.0, 0.0, obj.size[1] / 2]) if obj.shape == "bowl" else np.zeros(3)


def _local_points(obj: SceneObject) -> np.ndarray:
    """Surface sample points (N, 3) in the body frame."""
    half = half_extents(obj)
    centre = local_centre(obj)
    if obj.shape in ("cylinder", "bowl"):
        angle = np.linspace(0.0, 2 * np.pi, _RIM, endpoint=False)
        ring = np.stack([half[0] * np.cos(angle), half[0] * np.sin(angle)], axis=1)
        levels = (-half[2], 0.0, half[2])
        return centre + np.vstack([np.c_[ring, np.full(_RIM, z)] for z in levels])
    if obj.shape == "sphere":
        u = np.array([[sx, sy, sz] for sx in (-1, 0, 1) for sy in (-1, 0, 1) for sz in (-1, 0, 1)], float)
        u = u[np.linalg.norm(u, axis=1) > 0]
        return centre + half[0] * u / np.linalg.norm(u, axis=1, keepdims=True)
    # box (and a mesh's bounding box): corners, edge midpoints and face centres
    grid = np.array([[sx, sy, sz] for sx in (-1, 0, 1) for sy in (-1, 0, 1) for sz in (-1, 0, 1)], float)
    grid = grid[np.abs(grid).sum(axis=1) > 0]
    return centre + grid * half


def surface_points(obj: SceneObject, position: np.ndarray, quaternion: np.ndarray) -> np.ndarray:
    """World surface sample points (T, N, 3) of ``obj`` at poses (T, 3), (T, 4)."""
    local = _local_points(obj)
    position = np.atleast_2d(position)
    quaternion = np.atleast_2d(quaternion)
    t, n = len(position), len(local)
    q = np.repeat(quaternion, n, axis=0)
    v = np.tile(local, (t, 1))
    return (quat_rotate(q, v).reshape(t, n, 3)) + position[:, None, :]


def z_range(obj: SceneObject, position: np.ndarray, quaternion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest z (T,) of the object's surface at each pose, m."""
    z = surface_points(obj, position, quaternion)[..., 2]
    return z.min(axis=1), z.max(axis=1)


def signed_distance(
    obj: SceneObject, position: np.ndarray, quaternion: np.ndarray, points: np.ndarray
) -> np.ndarray:
    """Signed distance (T, N) from world points (T, N, 3) to the solid ``obj`` at poses (T, 3), (T, 4);
    negative inside. Exact for boxes, cylinders and spheres; bowls as their bounding cylinder."""
    position = np.atleast_2d(position)
    quaternion = np.atleast_2d(quaternion)
    t, n = points.shape[:2]
    rel = (points - position[:, None, :]).reshape(-1, 3)
    local = quat_rotate(np.repeat(quat_conj(quaternion), n, axis=0), rel).reshape(t, n, 3)
    local = local - local_centre(obj)
    half = half_extents(obj)
    if obj.shape == "sphere":
        return np.linalg.norm(local, axis=-1) - half[0]
    if obj.shape in ("cylinder", "bowl"):
        d = np.stack([np.linalg.norm(local[..., :2], axis=-1) - half[0], np.abs(local[..., 2]) - half[2]], -1)
    else:
        d = np.abs(local) - half
    outside = np.linalg.norm(np.maximum(d, 0.0), axis=-1)
    inside = np.minimum(d.max(axis=-1), 0.0)
    return outside + inside


def body_axis(obj: SceneObject, which: str) -> np.ndarray:
    """A unit body-frame axis (3,): ``x``, ``y``, ``z``, or the bounding box's ``longest`` / ``shortest``
    one (the normal of the object's smallest / largest face)."""
    if which in ("x", "y", "z"):
        return np.eye(3)["xyz".index(which)]
    half = half_extents(obj)
    if which == "longest":
        return np.eye(3)[int(np.argmax(half))]
    if which == "shortest":
        return np.eye(3)[int(np.argmin(half))]
    raise ValueError(f"axis must be x, y, z, longest or shortest, got {which!r}")
