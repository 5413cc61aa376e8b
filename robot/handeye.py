"""The hand-eye solve of the camera-to-robot calibration (:mod:`robot.calibration` describes the frames and
the two set-ups): :func:`solve_hand_eye` solves ``A_i Y = X B_i`` in closed form and refines it;
:func:`calibrate_views` detects the ChArUco board in each image and solves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from robot.charuco import BoardObservation, CalibrationError, CharucoBoardSpec, detect_board, rigid_transform
from simpact.core.rotations import (
    invert_transform,
    make_transform,
    mean_transform,
    nearest_rotation,
    rotation_exp,
    rotation_log,
    transform_error,
)

__all__ = ["MODES", "HandEyeResult", "calibrate_views", "pose_error", "result_key", "solve_hand_eye"]

MODES = ("eye_to_hand", "eye_in_hand")
_MIN_PAIR_ANGLE = math.radians(2.0)
"""Relative motions that rotate less than this carry no rotation information and are skipped."""
_ROTATION_LENGTH_M = 0.1
"""Length that weighs 1 rad of rotation against metres in the pose-residual refinement."""


def pose_error(T_a: np.ndarray, T_b: np.ndarray) -> tuple[float, float]:
    """Translation (mm) and rotation (deg) between two poses."""
    distance, angle = transform_error(T_a, T_b)
    return distance * 1000.0, float(np.degrees(angle))


def result_key(mode: str) -> str:
    """The calibration's name in ``mode``: ``T_base_cam`` or ``T_ee_cam``."""
    return "T_base_cam" if mode == "eye_to_hand" else "T_ee_cam"


@dataclass
class HandEyeResult:
    """A solved calibration and how well it explains the views."""

    mode: str
    T: np.ndarray
    """The calibration: ``T_base_cam`` (eye-to-hand) or ``T_ee_cam`` (eye-in-hand), 4x4, m."""
    T_target: np.ndarray
    """The other unknown: ``T_ee_board`` (eye-to-hand) or ``T_base_board`` (eye-in-hand), 4x4, m."""
    translation_mm: np.ndarray
    """Per view: distance between the board position seen by the camera and predicted by the robot, mm."""
    rotation_deg: np.ndarray
    """Per view: angle between the seen and predicted board orientations, degrees."""
    reprojection_px: np.ndarray | None = None
    """Per view: RMS reprojection of the board corners through the robot chain, pixels (with detections)."""
    refined_on: str = "poses"
    """What the non-linear refinement minimised: ``reprojection`` or ``poses``."""
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return result_key(self.mode)

    def residuals(self) -> dict[str, Any]:
        """Mean, RMS and max of the per-view residuals (mm, degrees, pixels), JSON-ready."""

        def stats(x: np.ndarray) -> dict[str, float]:
            return {
                "mean": round(float(np.mean(x)), 4),
                "rms": round(float(np.sqrt(np.mean(np.square(x)))), 4),
                "max": round(float(np.max(x)), 4),
            }

        out: dict[str, Any] = {
            "translation_mm": stats(self.translation_mm),
            "rotation_deg": stats(self.rotation_deg),
        }
        if self.reprojection_px is not None:
            out["reprojection_px"] = stats(self.reprojection_px)
        return out

    def to_dict(self) -> dict[str, Any]:
        other = "T_ee_board" if self.mode == "eye_to_hand" else "T_base_board"
        out: dict[str, Any] = {
            "mode": self.mode,
            self.key: self.T.tolist(),
            other: self.T_target.tolist(),
            "residuals": self.residuals(),
            "per_view": {
                "translation_mm": np.round(self.translation_mm, 4).tolist(),
                "rotation_deg": np.round(self.rotation_deg, 4).tolist(),
            },
            "refined_on": self.refined_on,
            **self.notes,
        }
        if self.reprojection_px is not None:
            out["per_view"]["reprojection_px"] = np.round(self.reprojection_px, 4).tolist()
        return out


def _ay_xb(T_base_ee: Sequence[Any], T_cam_board: Sequence[Any], mode: str) -> tuple[list[Any], list[Any]]:
    """The ``A_i``, ``B_i`` of ``A_i Y = X B_i`` for ``mode``."""
    if mode not in MODES:
        raise CalibrationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if len(T_base_ee) != len(T_cam_board):
        raise CalibrationError(
            f"{len(T_base_ee)} robot poses but {len(T_cam_board)} board poses; one of each per view"
        )
    if len(T_base_ee) < 3:
        raise CalibrationError(f"hand-eye calibration needs at least 3 views, got {len(T_base_ee)}")
    ee = [rigid_transform(T, f"T_base_ee of view {i}") for i, T in enumerate(T_base_ee)]
    board = [rigid_transform(T, f"T_cam_board of view {i}") for i, T in enumerate(T_cam_board)]
    A = ee if mode == "eye_to_hand" else [invert_transform(T) for T in ee]
    return A, board


def _closed_form(A: Sequence[np.ndarray], B: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Park & Martin on every pair of views: ``C X = X D`` with ``C = A_j inv(A_i)``, ``D = B_j inv(B_i)``."""
    alphas, betas, pairs = [], [], []
    n = len(A)
    for i in range(n):
        for j in range(i + 1, n):
            C = A[j] @ invert_transform(A[i])
            D = B[j] @ invert_transform(B[i])
            a, b = rotation_log(C[:3, :3]), rotation_log(D[:3, :3])
            if np.linalg.norm(a) < _MIN_PAIR_ANGLE or np.linalg.norm(b) < _MIN_PAIR_ANGLE:
                continue
            alphas.append(a)
            betas.append(b)
            pairs.append((C, D))
    if len(alphas) < 2:
        raise CalibrationError(
            "the views do not rotate the hand enough: hand-eye needs rotations about at least two "
            f"different axes (pairs rotating > {math.degrees(_MIN_PAIR_ANGLE):.0f} deg: {len(alphas)})"
        )
    M = np.einsum("ki,kj->ij", np.array(alphas), np.array(betas))  # sum of alpha beta^T
    axes = np.linalg.svd(np.array(alphas), compute_uv=False)
    if axes[1] < 1e-3 * axes[0]:
        raise CalibrationError("all relative rotations share one axis; tilt the hand about another axis too")
    R_X = nearest_rotation(M)
    # Translation: (R_C - I) t_X = R_X t_D - t_C for every pair, in the least-squares sense.
    lhs = np.vstack([C[:3, :3] - np.eye(3) for C, _ in pairs])
    rhs = np.concatenate([R_X @ D[:3, 3] - C[:3, 3] for C, D in pairs])
    t_X = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
    X = make_transform(R_X, t_X)
    Y = mean_transform([invert_transform(Ai) @ X @ Bi for Ai, Bi in zip(A, B)])
    return X, Y


def _params(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return np.concatenate([rotation_log(X[:3, :3]), X[:3, 3], rotation_log(Y[:3, :3]), Y[:3, 3]])


def _unpack(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return make_transform(rotation_exp(p[0:3]), p[3:6]), make_transform(rotation_exp(p[6:9]), p[9:12])


def _refine(
    A: Sequence[np.ndarray],
    B: Sequence[np.ndarray],
    X: np.ndarray,
    Y: np.ndarray,
    observations: Sequence[BoardObservation] | None,
    K: np.ndarray | None,
    distortion: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:

    if observations is not None and K is not None:
        import cv2

        dist = np.zeros(5) if distortion is None else distortion

        def residual(p: np.ndarray) -> np.ndarray:
            Xp, Yp = _unpack(p)
            out = []
            for Ai, obs in zip(A, observations):
                T_cam_board = invert_transform(Xp) @ Ai @ Yp  # B_i predicted through the robot
                rvec = rotation_log(T_cam_board[:3, :3])
                proj, _ = cv2.projectPoints(obs.object_points, rvec, T_cam_board[:3, 3], K, dist)
                out.append((proj.reshape(-1, 2) - obs.image_points).ravel())
            return np.concatenate(out)

    else:

        def residual(p: np.ndarray) -> np.ndarray:
            Xp, Yp = _unpack(p)
            out = []
            for Ai, Bi in zip(A, B):
                lhs, rhs = Ai @ Yp, Xp @ Bi
                out.append(lhs[:3, 3] - rhs[:3, 3])
                out.append(_ROTATION_LENGTH_M * rotation_log(lhs[:3, :3].T @ rhs[:3, :3]))
            return np.concatenate(out)

    fit = least_squares(residual, _params(X, Y), method="lm", xtol=1e-12, ftol=1e-12)
    return _unpack(fit.x)


def solve_hand_eye(
    T_base_ee: Sequence[Any],
    T_cam_board: Sequence[Any],
    mode: str = "eye_to_hand",
    *,
    observations: Sequence[BoardObservation] | None = None,
    K: Any = None,
    distortion: Any = None,
    refine: bool = True,
) -> HandEyeResult:
    """Hand-eye calibration from per-view robot poses ``T_base_ee`` and board poses ``T_cam_board`` (4x4, m).

    Closed form (Park & Martin), then, with ``refine``, joint non-linear least squares: on the corners'
    reprojection error when ``observations`` (from :func:`detect_board`, one per view) and ``K`` are given,
    else on the pose residuals. Raises :class:`CalibrationError` for too few or degenerate views."""
    A, B = _ay_xb(T_base_ee, T_cam_board, mode)
    if observations is not None and len(observations) != len(A):
        raise CalibrationError(f"{len(observations)} observations for {len(A)} views")
    X, Y = _closed_form(A, B)
    Kmat = None if K is None else np.asarray(K, dtype=np.float64)
    dist = None if distortion is None else np.asarray(distortion, dtype=np.float64)
    refined_on = "none"
    if refine:
        use_images = observations is not None and Kmat is not None
        X, Y = _refine(A, B, X, Y, observations if use_images else None, Kmat, dist)
        refined_on = "reprojection" if use_images else "poses"
    errors = np.array([pose_error(Ai @ Y, X @ Bi) for Ai, Bi in zip(A, B)])
    reproj = None
    if observations is not None and Kmat is not None:
        reproj = np.array(
            [_reprojection(invert_transform(X) @ Ai @ Y, obs, Kmat, dist) for Ai, obs in zip(A, observations)]
        )
    return HandEyeResult(mode, X, Y, errors[:, 0], errors[:, 1], reproj, refined_on)


def _reprojection(T_cam_board: np.ndarray, obs: BoardObservation, K: np.ndarray, dist: Any) -> float:
    import cv2

    proj, _ = cv2.projectPoints(
        obs.object_points,
        rotation_log(T_cam_board[:3, :3]),
        T_cam_board[:3, 3],
        K,
        np.zeros(5) if dist is None else dist,
    )
    return float(np.sqrt(np.mean(np.sum((proj.reshape(-1, 2) - obs.image_points) ** 2, axis=1))))


def calibrate_views(
    images: Sequence[np.ndarray],
    T_base_ee: Sequence[Any],
    spec: CharucoBoardSpec,
    K: Any,
    mode: str = "eye_to_hand",
    distortion: Any = None,
) -> HandEyeResult:
    """Detect the board in every image, drop views where it is not found, and solve the hand-eye problem.

    ``notes`` of the result list the ``used_views`` and ``skipped_views`` (indices into ``images``)."""
    if len(images) != len(T_base_ee):
        raise CalibrationError(f"{len(images)} images but {len(T_base_ee)} robot poses; one of each per view")
    used, skipped, observations = [], [], []
    for i, image in enumerate(images):
        obs = detect_board(image, spec, K, distortion)
        if obs is None:
            skipped.append(i)
        else:
            used.append(i)
            observations.append(obs)
    if len(used) < 3:
        raise CalibrationError(
            f"the board was found in {len(used)} of {len(images)} images; at least 3 are needed "
            "(check the board spec: squares, lengths, dictionary)"
        )
    result = solve_hand_eye(
        [T_base_ee[i] for i in used],
        [o.T_cam_board for o in observations],
        mode,
        observations=observations,
        K=K,
        distortion=distortion,
    )
    result.notes.update(
        {
            "used_views": used,
            "skipped_views": skipped,
            "pnp_reprojection_px": [round(o.reprojection_px, 4) for o in observations],
            "corners_per_view": [len(o.ids) for o in observations],
        }
    )
    return result
