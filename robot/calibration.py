"""Camera-to-robot calibration: the extrinsics file, ChArUco board detection and hand-eye calibration.

Frames: ``base`` (robot base), ``ee`` (the end-effector pose the robot reports), ``cam`` (the colour camera,
OpenCV axes: x right, y down, z forward) and ``board`` (the ChArUco board: origin at its top-left chessboard
corner as printed, x along the squares' rows, y down the columns, z into the board). ``T_a_b`` maps points
in frame ``b`` to frame ``a``; translations are metres.

Two set-ups (``mode``):

* ``eye_to_hand`` (the paper's fixed D435i): the camera stands still, the board is fixed to the gripper.
  Unknowns ``T_base_cam`` (the result) and ``T_ee_board``; each view gives
  ``T_base_ee_i @ T_ee_board = T_base_cam @ T_cam_board_i``.
* ``eye_in_hand``: the camera rides on the hand, the board lies still on the table. Unknowns ``T_ee_cam``
  (the result) and ``T_base_board``; each view gives ``inv(T_base_ee_i) @ T_base_board = T_ee_cam @
  T_cam_board_i``.

Both are the robot-world/hand-eye problem ``A_i Y = X B_i``. :func:`solve_hand_eye` solves it in closed form
(Park & Martin's rotation fit on every pair of views, then linear least squares for the translation; the
solver OpenCV's ``calibrateHandEye`` implements as ``CALIB_HAND_EYE_PARK`` — OpenCV 5.0's Python bindings
no longer expose that function) and refines ``X`` and ``Y`` jointly by non-linear least squares on the
board corners' reprojection error when the detections are given, else on the pose residuals. Residuals are
reported per view as the disagreement, in mm and degrees, between the board pose seen by the camera and the
one predicted through the robot's kinematics.

The extrinsics file (YAML) holds ``mode`` and ``T_base_cam`` (eye-to-hand) or ``T_ee_cam`` (eye-in-hand) as
4x4 nested lists, plus optional provenance (``residuals``, ``views``, ``board``, ``camera_serial``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robot.camera import RealSenseCamera
from robot.franka import FrankaRobot
from simpact.core.errors import SimpactError
from simpact.core.rotations import (
    invert_transform,
    make_transform,
    matrix_to_quat,
    mean_transform,
    nearest_rotation,
    pose_to_transform,
    rigid_transform_problem,
    rotation_exp,
    rotation_log,
    transform_error,
)

__all__ = [
    "MODES",
    "VIEWS_FILE",
    "BoardObservation",
    "CalibrationError",
    "CharucoBoardSpec",
    "HandEyeResult",
    "calibrate_views",
    "calibration_poses",
    "collect_views",
    "collect_with_franka",
    "collect_with_robot",
    "detect_board",
    "load_T_base_cam",
    "load_board_spec",
    "read_extrinsics",
    "render_board",
    "solve_from_dir",
    "solve_hand_eye",
    "write_extrinsics",
]

MODES = ("eye_to_hand", "eye_in_hand")
VIEWS_FILE = "views.json"
"""The index of a recorded calibration set: board, intrinsics, mode and one image + robot pose per view."""
_RIGID_ATOL = 1e-6
_MIN_PAIR_ANGLE = math.radians(2.0)
"""Relative motions that rotate less than this carry no rotation information and are skipped."""
_ROTATION_LENGTH_M = 0.1
"""Length that weighs 1 rad of rotation against metres in the pose-residual refinement."""


class CalibrationError(SimpactError, ValueError):
    """Bad calibration input or an unsolvable set of views; the message says which and why."""


# --- transforms -------------------------------------------------------------------------------------------


def _rigid(T: Any, where: str) -> np.ndarray:
    try:
        a = np.array(T, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CalibrationError(f"{where}: must be a 4x4 numeric matrix ({exc})") from None
    problem = rigid_transform_problem(a, 1e-5)
    if problem:
        raise CalibrationError(f"{where} {problem}")
    return a


def _pose_error(T_a: np.ndarray, T_b: np.ndarray) -> tuple[float, float]:
    """Translation (mm) and rotation (deg) between two poses."""
    distance, angle = transform_error(T_a, T_b)
    return distance * 1000.0, float(np.degrees(angle))


# --- extrinsics file --------------------------------------------------------------------------------------


def write_extrinsics(
    path: str | os.PathLike[str], T: Any, mode: str = "eye_to_hand", **provenance: Any
) -> Path:
    """Write the calibration ``T`` (``T_base_cam`` for eye-to-hand, ``T_ee_cam`` for eye-in-hand; 4x4, m)
    and JSON-like ``provenance`` (residuals, date, serial, ...) as YAML."""
    if mode not in MODES:
        raise CalibrationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    key = _key(mode)
    T = _rigid(T, key)
    clash = {"mode", key}.intersection(provenance)
    if clash:
        raise CalibrationError(f"provenance keys {sorted(clash)} are reserved")
    doc = {"mode": mode, key: [[float(v) for v in row] for row in T], **json.loads(json.dumps(provenance))}
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# {key}: 4x4 transform, metres; camera axes are OpenCV's (x right, y down, z forward)\n"
        if mode == "eye_to_hand"
        else f"# {key}: camera pose in the end-effector frame, 4x4, metres; OpenCV camera axes\n"
    )
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    return out


def read_extrinsics(path: str | os.PathLike[str]) -> tuple[str, np.ndarray, dict[str, Any]]:
    """``(mode, T, provenance)`` from an extrinsics YAML file; ``T`` is checked to be a rigid transform."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise CalibrationError(f"{p}: cannot read extrinsics ({exc})") from None
    except yaml.YAMLError as exc:
        raise CalibrationError(f"{p}: not valid YAML ({exc})") from None
    if not isinstance(raw, Mapping):
        raise CalibrationError(f"{p}: must hold a mapping with mode and T_base_cam (or T_ee_cam)")
    mode = raw.get("mode", "eye_to_hand")
    if mode not in MODES:
        raise CalibrationError(f"{p}: mode must be one of {', '.join(MODES)}, got {mode!r}")
    key = _key(mode)
    if key not in raw:
        raise CalibrationError(f"{p}: missing {key} (4x4 nested list, m) for mode {mode}")
    T = _rigid(raw[key], f"{p}: {key}")
    return mode, T, {k: v for k, v in raw.items() if k not in ("mode", key)}


def load_T_base_cam(path: str | os.PathLike[str], T_base_ee: Any = None) -> np.ndarray:
    """The camera pose in the base frame from an extrinsics file; an eye-in-hand file needs the robot's
    current ``T_base_ee`` (4x4, m)."""
    mode, T, _ = read_extrinsics(path)
    if mode == "eye_to_hand":
        return T
    if T_base_ee is None:
        raise CalibrationError(f"{path}: an eye-in-hand calibration needs the robot's pose T_base_ee")
    return _rigid(T_base_ee, "T_base_ee") @ T


def _key(mode: str) -> str:
    return "T_base_cam" if mode == "eye_to_hand" else "T_ee_cam"


# --- the board --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CharucoBoardSpec:
    """A ChArUco board as printed."""

    squares_x: int = 7
    """Chessboard squares along x (columns)."""
    squares_y: int = 5
    """Chessboard squares along y (rows)."""
    square_length: float = 0.035
    """Side of a chessboard square, m (measure the print)."""
    marker_length: float = 0.026
    """Side of an ArUco marker, m."""
    dictionary: str = "DICT_5X5_100"
    """ArUco dictionary name in ``cv2.aruco``."""
    legacy_pattern: bool = False
    """Boards made with OpenCV < 4.6 and an even number of rows start with a marker, not a square."""

    def __post_init__(self) -> None:
        if self.squares_x < 2 or self.squares_y < 2:
            raise CalibrationError(f"board needs at least 2x2 squares, got {self.squares_x}x{self.squares_y}")
        if not 0 < self.marker_length < self.square_length:
            raise CalibrationError(
                f"board marker_length ({self.marker_length} m) must be positive and smaller than "
                f"square_length ({self.square_length} m)"
            )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CharucoBoardSpec:
        known = set(cls.__dataclass_fields__)
        unknown = set(raw) - known
        if unknown:
            raise CalibrationError(f"board: unknown fields {sorted(unknown)}; allowed: {sorted(known)}")
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def board(self) -> Any:
        """The ``cv2.aruco.CharucoBoard``."""
        import cv2

        ident = getattr(cv2.aruco, self.dictionary, None)
        if not isinstance(ident, int) or not self.dictionary.startswith("DICT_"):
            raise CalibrationError(f"board: unknown ArUco dictionary {self.dictionary!r} (e.g. DICT_5X5_100)")
        dictionary = cv2.aruco.getPredefinedDictionary(ident)
        board = cv2.aruco.CharucoBoard(
            (self.squares_x, self.squares_y), self.square_length, self.marker_length, dictionary
        )
        board.setLegacyPattern(self.legacy_pattern)
        return board

    def corners(self) -> np.ndarray:
        """(N, 3) chessboard corners in the board frame, m, indexed by ChArUco id."""
        return np.asarray(self.board().getChessboardCorners(), dtype=np.float64).reshape(-1, 3)


@dataclass
class BoardObservation:
    """The board as one image sees it."""

    T_cam_board: np.ndarray
    """4x4 board pose in the camera frame, m (PnP on the detected corners)."""
    ids: np.ndarray
    """(N,) ChArUco corner ids."""
    image_points: np.ndarray
    """(N, 2) detected corners, pixels."""
    object_points: np.ndarray
    """(N, 3) the same corners in the board frame, m."""
    reprojection_px: float
    """RMS reprojection error of the PnP pose, pixels."""


def detect_board(
    image: np.ndarray,
    spec: CharucoBoardSpec,
    K: Any,
    distortion: Any = None,
    min_corners: int = 6,
) -> BoardObservation | None:
    """Detect the ChArUco board in ``image`` ((H, W, 3) RGB or (H, W) grey, uint8) and estimate its pose.

    ``K`` is the 3x3 intrinsics (pixels), ``distortion`` OpenCV's coefficients (default none). Returns
    ``None`` when fewer than ``min_corners`` corners are found (no usable view)."""
    import cv2

    img = np.asarray(image)
    if img.dtype != np.uint8 or img.ndim not in (2, 3):
        raise CalibrationError(f"image must be uint8 (H, W) or (H, W, 3), got {img.dtype} {img.shape}")
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY) if img.ndim == 3 else img
    K = np.asarray(K, dtype=np.float64)
    dist = np.zeros(5) if distortion is None else np.asarray(distortion, dtype=np.float64)
    board = spec.board()
    detector = cv2.aruco.CharucoDetector(board)
    corners, ids, _, _ = detector.detectBoard(grey)
    if ids is None or len(ids) < max(min_corners, 4):
        return None
    obj, pts = board.matchImagePoints(corners, ids)
    obj = np.asarray(obj, dtype=np.float64).reshape(-1, 3)
    pts = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
    ok, rvec, tvec = cv2.solvePnP(obj, pts, K, dist, flags=cv2.SOLVEPNP_IPPE)
    if not ok:
        return None
    rvec, tvec = cv2.solvePnPRefineLM(obj, pts, K, dist, rvec, tvec)
    projected, _ = cv2.projectPoints(obj, rvec, tvec, K, dist)
    rms = float(np.sqrt(np.mean(np.sum((projected.reshape(-1, 2) - pts) ** 2, axis=1))))
    T = make_transform(
        rotation_exp(np.asarray(rvec, dtype=np.float64).ravel()), np.asarray(tvec, dtype=np.float64).ravel()
    )
    return BoardObservation(T, np.asarray(ids).ravel().astype(int), pts, obj, rms)


def render_board(
    spec: CharucoBoardSpec,
    T_cam_board: Any,
    K: Any,
    width: int,
    height: int,
    rng: np.random.Generator | None = None,
    noise: float = 2.0,
    background: int = 110,
) -> np.ndarray:
    """A synthetic (height, width, 3) uint8 image of the board (white paper, one square of margin) at pose
    ``T_cam_board`` seen by a pinhole camera ``K``: the printed pattern warped by the plane's homography at
    twice the resolution, area-averaged down, plus Gaussian noise of ``noise`` grey levels (``rng``)."""
    import cv2

    T = _rigid(T_cam_board, "T_cam_board")
    K = np.asarray(K, dtype=np.float64)
    ppm = 4000.0  # printed pattern pixels per metre
    margin = int(round(spec.square_length * ppm))
    size = (
        int(round(spec.squares_x * spec.square_length * ppm)) + 2 * margin,
        int(round(spec.squares_y * spec.square_length * ppm)) + 2 * margin,
    )
    flat = spec.board().generateImage(size, marginSize=margin, borderBits=1)
    # Pattern pixel (u, v) shows board point ((u + 0.5 - margin) / ppm, (v + 0.5 - margin) / ppm, 0).
    A = np.array([[1 / ppm, 0, (0.5 - margin) / ppm], [0, 1 / ppm, (0.5 - margin) / ppm], [0, 0, 1]])
    S = np.array([[2.0, 0, 0.5], [0, 2.0, 0.5], [0, 0, 1]])  # camera pixel -> supersampled pixel
    H = S @ K @ np.column_stack([T[:3, 0], T[:3, 1], T[:3, 3]]) @ A
    big = cv2.warpPerspective(
        flat, H, (2 * width, 2 * height), flags=cv2.INTER_LINEAR, borderValue=int(background)
    )
    grey = cv2.resize(big, (width, height), interpolation=cv2.INTER_AREA).astype(np.float64)
    if noise > 0:
        grey += (rng if rng is not None else np.random.default_rng(0)).normal(0.0, noise, grey.shape)
    grey = np.clip(np.round(grey), 0, 255).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


# --- hand-eye ---------------------------------------------------------------------------------------------


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
        return _key(self.mode)

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
    ee = [_rigid(T, f"T_base_ee of view {i}") for i, T in enumerate(T_base_ee)]
    board = [_rigid(T, f"T_cam_board of view {i}") for i, T in enumerate(T_cam_board)]
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
    from scipy.optimize import least_squares

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
    errors = np.array([_pose_error(Ai @ Y, X @ Bi) for Ai, Bi in zip(A, B)])
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


# --- recorded views ---------------------------------------------------------------------------------------


def calibration_poses(
    T_center: Any,
    n: int,
    rng: np.random.Generator,
    max_tilt_deg: float = 20.0,
    max_yaw_deg: float = 30.0,
    max_shift_m: float = 0.06,
) -> list[np.ndarray]:
    """``n`` end-effector poses around ``T_center`` (4x4, m) for collecting views: each shifted by up to
    ``max_shift_m`` per axis, tilted up to ``max_tilt_deg`` about the tool's x and y axes and turned up to
    ``max_yaw_deg`` about its z axis (rotations in the tool frame, so the board stays in view)."""
    center = _rigid(T_center, "T_center")
    out = []
    for _ in range(n):
        tilt = np.radians(rng.uniform(-max_tilt_deg, max_tilt_deg, 2))
        yaw = np.radians(rng.uniform(-max_yaw_deg, max_yaw_deg))
        R = (
            center[:3, :3]
            @ rotation_exp(np.array([tilt[0], tilt[1], 0.0]))
            @ rotation_exp(np.array([0.0, 0.0, yaw]))
        )
        out.append(make_transform(R, center[:3, 3] + rng.uniform(-max_shift_m, max_shift_m, 3)))
    return out


def collect_views(
    move_to: Callable[[np.ndarray], np.ndarray],
    camera: Any,
    poses: Sequence[np.ndarray],
    out_dir: str | os.PathLike[str],
    spec: CharucoBoardSpec,
    mode: str = "eye_to_hand",
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Move the robot through ``poses`` and record one colour image per pose into ``out_dir``.

    ``move_to(T_base_ee)`` moves the robot (blocking) and returns the pose it reached, as the robot reports
    it; ``camera`` is a :class:`robot.camera.Camera`. Writes ``view_NNN.png`` and ``views.json`` (the format
    :func:`solve_from_dir` reads), rewriting ``views.json`` after every view so that an interrupted
    collection keeps what it recorded."""
    from PIL import Image

    if mode not in MODES:
        raise CalibrationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    index: dict[str, Any] = {
        "mode": mode,
        "board": spec.to_dict(),
        "K": None,
        "distortion": None,
        "views": [],
    }
    for i, target in enumerate(poses):
        reached = np.asarray(move_to(np.asarray(target, dtype=np.float64)), dtype=np.float64)
        frame = camera.capture()
        name = f"view_{i:03d}.png"
        Image.fromarray(frame.rgb).save(out / name)
        index["K"] = frame.K.tolist()
        index["distortion"] = frame.metadata.get("distortion", {}).get("coeffs")
        index["views"].append({"image": name, "T_base_ee": reached.tolist()})
        (out / VIEWS_FILE).write_text(json.dumps(index, indent=2) + "\n")
        if progress is not None:
            progress(f"  view {i + 1}/{len(poses)} -> {out / name}")
    return out


REST_TOLERANCE = (0.1, 0.01)
"""Pose change (mm, deg) over one settling interval below which the robot counts as at rest."""


def _at_rest(
    pose: Callable[[], np.ndarray], settle_s: float, sleep: Callable[[float], None], tries: int = 20
) -> np.ndarray:
    """The robot's pose once it has stopped moving: read ``pose()`` every ``settle_s`` s until two readings
    agree within :data:`REST_TOLERANCE`, so that the image taken next matches the recorded pose."""
    last = pose()
    for _ in range(tries):
        sleep(settle_s)
        now = pose()
        dt, dr = _pose_error(last, now)
        if dt <= REST_TOLERANCE[0] and dr <= REST_TOLERANCE[1]:
            return now
        last = now
    raise CalibrationError(f"the robot did not come to rest within {tries * settle_s:.1f} s")


def collect_with_robot(
    robot: Any,
    camera: Any,
    out_dir: str | os.PathLike[str],
    spec: CharucoBoardSpec,
    views: int = 15,
    seed: int = 0,
    mode: str = "eye_to_hand",
    speed: float = 0.05,
    settle_s: float = 0.5,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Collect ``views`` views with a robot (a :class:`robot.base.RobotBase`, connected here) and a camera.

    The poses are :func:`calibration_poses` around the tool pose the robot holds when called (seeded by
    ``seed``); each move runs at ``speed`` m/s through the robot's safety limits, then the image waits until
    two pose readings ``settle_s`` s apart agree (the robot is at rest). The robot returns to its start pose
    at the end."""
    if views < 3:
        raise CalibrationError(f"hand-eye calibration needs at least 3 views, got {views}")
    with robot:
        start = pose_to_transform(*robot.tcp_pose())
        poses = calibration_poses(start, views, np.random.default_rng(seed))

        def move_to(T: np.ndarray) -> np.ndarray:
            robot.move_to(T[:3, 3], matrix_to_quat(T[:3, :3]), speed)
            return _at_rest(lambda: pose_to_transform(*robot.tcp_pose()), settle_s, time.sleep)

        try:
            return collect_views(move_to, camera, poses, out_dir, spec, mode, progress)
        finally:
            robot.move_to(start[:3, 3], matrix_to_quat(start[:3, :3]), speed)


def solve_from_dir(
    directory: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    mode: str | None = None,
) -> dict[str, Any]:
    """Solve the calibration recorded in ``directory`` (``views.json`` + images) and write
    ``OUT/result.json`` and ``OUT/camera_extrinsics.yaml`` (``OUT`` defaults to ``directory``).

    ``views.json``: ``{"mode": "eye_to_hand", "board": {CharucoBoardSpec fields}, "K": 3x3, "distortion":
    [k1, k2, p1, p2, k3] or null, "views": [{"image": "view_000.png", "T_base_ee": 4x4}, ...]}``."""
    from PIL import Image

    root = Path(directory)
    index_path = root / VIEWS_FILE
    try:
        index = json.loads(index_path.read_text())
    except OSError as exc:
        raise CalibrationError(f"{index_path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{index_path}: not valid JSON ({exc})") from None
    if not isinstance(index, Mapping) or not isinstance(index.get("views"), list):
        raise CalibrationError(f"{index_path}: must hold an object with a 'views' list")
    mode = mode or index.get("mode", "eye_to_hand")
    assert mode is not None
    spec = CharucoBoardSpec.from_dict(index.get("board", {}))
    if index.get("K") is None:
        raise CalibrationError(f"{index_path}: missing K (3x3 colour intrinsics, pixels)")
    K = np.asarray(index["K"], dtype=np.float64)
    if K.shape != (3, 3):
        raise CalibrationError(f"{index_path}: K must be 3x3, got shape {K.shape}")
    distortion = index.get("distortion")
    images, poses = [], []
    for i, view in enumerate(index["views"]):
        if not isinstance(view, Mapping) or "image" not in view or "T_base_ee" not in view:
            raise CalibrationError(f"{index_path}: view {i} needs 'image' and 'T_base_ee'")
        path = root / view["image"]
        try:
            images.append(np.asarray(Image.open(path).convert("RGB")))
        except OSError as exc:
            raise CalibrationError(f"{path}: cannot read image ({exc})") from None
        poses.append(_rigid(view["T_base_ee"], f"{index_path}: view {i} T_base_ee"))
    result = calibrate_views(images, poses, spec, K, mode, distortion)
    target = Path(out) if out is not None else root
    target.mkdir(parents=True, exist_ok=True)
    yaml_path = write_extrinsics(
        target / "camera_extrinsics.yaml",
        result.T,
        mode,
        residuals=result.residuals(),
        views=len(result.notes["used_views"]),
        board=spec.to_dict(),
        source=str(root),
    )
    payload = {**result.to_dict(), "views": len(images), "extrinsics": yaml_path.name}
    (target / "result.json").write_text(json.dumps(payload, indent=2) + "\n")
    return payload


def load_board_spec(path: str | os.PathLike[str] | None) -> CharucoBoardSpec:
    """The board of a YAML file of :class:`CharucoBoardSpec` fields; the default board when ``path`` is
    None."""
    if path is None:
        return CharucoBoardSpec()
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CalibrationError(f"{path}: cannot read the board file ({exc})") from None
    if not isinstance(raw, Mapping):
        raise CalibrationError(f"{path}: the board file must hold a mapping of CharucoBoardSpec fields")
    try:
        return CharucoBoardSpec.from_dict(raw)
    except TypeError as exc:
        raise CalibrationError(f"{path}: {exc}") from None


def collect_with_franka(
    host: str,
    out_dir: str | os.PathLike[str],
    spec: CharucoBoardSpec,
    *,
    realtime: bool = True,
    serial: str | None = None,
    views: int = 15,
    seed: int = 0,
    mode: str = "eye_to_hand",
    progress: Callable[[str], None] | None = None,
) -> Path:
    """:func:`collect_with_robot` with the Franka at ``host`` (``realtime=False`` without a real-time
    kernel) and the RealSense ``serial`` (the first device when None)."""
    robot = FrankaRobot(host, realtime=realtime)
    with RealSenseCamera(serial=serial) as camera:
        return collect_with_robot(robot, camera, out_dir, spec, views, seed, mode, progress=progress)
