"""Small rotation helpers: quaternions (w, x, y, z), which broadcast over leading axes, and rigid transforms
(4x4 homogeneous matrices ``T_a_b`` mapping points in frame ``b`` to frame ``a``; translations in metres)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.transform import Rotation

__all__ = [
    "invert_transform",
    "make_transform",
    "matrix_to_quat",
    "mean_transform",
    "nearest_rotation",
    "pose_to_transform",
    "quat_about_z",
    "quat_conj",
    "quat_mul",
    "quat_rotate",
    "quat_to_matrix",
    "quat_to_rpy",
    "rpy_to_quat",
    "rigid_transform_problem",
    "rotation_exp",
    "rotation_log",
    "tilt_angle",
    "transform_error",
]


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, dtype=float), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, dtype=float), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    return np.asarray(q, dtype=float) * np.array([1.0, -1.0, -1.0, -1.0])


def quat_about_z(angle: np.ndarray | float) -> np.ndarray:
    """Rotations by ``angle`` radians about z."""
    half = 0.5 * np.asarray(angle, dtype=float)
    zeros = np.zeros_like(half)
    return np.stack([np.cos(half), zeros, zeros, np.sin(half)], axis=-1)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors v (..., 3) by unit quaternions q (..., 4)."""
    q = np.asarray(q, dtype=float)
    u, w = q[..., 1:], q[..., :1]
    v = np.asarray(v, dtype=float)
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_to_matrix(q: ArrayLike) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4), normalised first."""

    wxyz = np.asarray(q, dtype=float)
    return np.asarray(Rotation.from_quat(wxyz[..., [1, 2, 3, 0]]).as_matrix())


def matrix_to_quat(R: ArrayLike) -> np.ndarray:
    """Unit quaternions (..., 4) with w >= 0 of rotation matrices (..., 3, 3)."""

    q = np.asarray(Rotation.from_matrix(np.asarray(R, dtype=float)).as_quat())[..., [3, 0, 1, 2]]
    return np.where(q[..., :1] < 0, -q, q)


def quat_to_rpy(q: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw (rad) such that R = Rz(yaw) Ry(pitch) Rx(roll)."""
    w, x, y, z = np.moveaxis(np.asarray(q, dtype=float), -1, 0)
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.stack([roll, pitch, yaw], axis=-1)


def rpy_to_quat(rpy: ArrayLike) -> np.ndarray:
    """Unit quaternions (..., 4), (w, x, y, z) with w >= 0, of roll, pitch, yaw (rad): the inverse of
    :func:`quat_to_rpy`, R = Rz(yaw) Ry(pitch) Rx(roll)."""
    q = np.asarray(Rotation.from_euler("xyz", np.asarray(rpy, dtype=float)).as_quat())[..., [3, 0, 1, 2]]
    return np.where(q[..., :1] < 0, -q, q)


def tilt_angle(q: np.ndarray) -> np.ndarray:
    """Angle (rad) between a body's z axis and the world's z axis."""
    w, x, y, _ = np.moveaxis(np.asarray(q, dtype=float), -1, 0)
    cos = 1 - 2 * (x * x + y * y)
    return np.arccos(np.clip(cos, -1.0, 1.0))


def rigid_transform_problem(T: np.ndarray, atol: float = 1e-6) -> str | None:
    """Why the 4x4 array ``T`` is not a rigid transform (rotation with det +1, last row 0 0 0 1), or None."""
    if T.shape != (4, 4):
        return f"must be a 4x4 matrix, got shape {T.shape}"
    if not np.all(np.isfinite(T)):
        return "contains NaN or inf"
    if not np.allclose(T[3], [0.0, 0.0, 0.0, 1.0], atol=atol):
        return f"last row must be [0, 0, 0, 1], got {T[3].tolist()}"
    R = T[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=atol) or np.linalg.det(R) < 0.0:
        return "is not a rigid transform: its 3x3 block is not a proper rotation (orthonormal, det +1)"
    return None


# --- rigid transforms ---------------------------------------------------------------------------------------


def make_transform(R: ArrayLike, t: ArrayLike) -> np.ndarray:
    """The 4x4 transform with rotation ``R`` (3x3) and translation ``t`` (3,), m."""
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = t
    return T


def pose_to_transform(position: ArrayLike, quaternion: ArrayLike) -> np.ndarray:
    """The 4x4 transform of a pose: ``position`` (3,), m, and a (w, x, y, z) ``quaternion``."""
    return make_transform(quat_to_matrix(quaternion), np.asarray(position, float))


def invert_transform(T: np.ndarray) -> np.ndarray:
    """The inverse of the rigid transform ``T`` (4x4): ``R.T`` and ``-R.T @ t``, exact for a rotation."""
    out = np.eye(4)
    R = T[:3, :3]
    out[:3, :3] = R.T
    out[:3, 3] = -R.T @ T[:3, 3]
    return out


def rotation_log(R: ArrayLike) -> np.ndarray:
    """The rotation vector (axis times angle, rad) of a rotation matrix (3x3)."""

    return np.asarray(Rotation.from_matrix(R).as_rotvec())


def rotation_exp(rotvec: ArrayLike) -> np.ndarray:
    """The rotation matrix (3x3) of a rotation vector (axis times angle, rad)."""

    return np.asarray(Rotation.from_rotvec(rotvec).as_matrix())


def nearest_rotation(M: np.ndarray) -> np.ndarray:
    """The rotation matrix nearest to the 3x3 matrix ``M`` in the Frobenius norm (by SVD, det +1)."""
    U, _, Vt = np.linalg.svd(M)
    D = np.diag([1.0, 1.0, np.sign(np.linalg.det(U @ Vt))])
    return np.asarray(U @ D @ Vt)


def mean_transform(Ts: Sequence[np.ndarray]) -> np.ndarray:
    """The mean of rigid transforms: the chordal mean of the rotations (the rotation nearest to their sum)
    and the arithmetic mean of the translations."""
    R = nearest_rotation(sum((T[:3, :3] for T in Ts), np.zeros((3, 3))))
    return make_transform(R, np.mean([T[:3, 3] for T in Ts], axis=0))


def transform_error(T_a: np.ndarray, T_b: np.ndarray) -> tuple[float, float]:
    """How far apart two poses are: the distance between their origins, m, and the angle of the rotation
    between them, rad."""
    distance = float(np.linalg.norm(T_a[:3, 3] - T_b[:3, 3]))
    angle = float(np.linalg.norm(rotation_log(T_a[:3, :3].T @ T_b[:3, :3])))
    return distance, angle
