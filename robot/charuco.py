"""The ChArUco calibration board: its spec as printed (:class:`CharucoBoardSpec`, a board YAML file),
its detection and pose in a camera image (:func:`detect_board`) and a synthetic image of it
(:func:`render_board`); and :class:`CalibrationError`, the error of every calibration input. The hand-eye
solve that uses the board is :mod:`robot.calibration`, where the frames are described (``T_a_b`` maps
points in frame ``b`` to frame ``a``; metres).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simpact.core.errors import SimpactError
from simpact.core.rotations import make_transform, rigid_transform_problem, rotation_exp

__all__ = [
    "BoardObservation",
    "CalibrationError",
    "CharucoBoardSpec",
    "detect_board",
    "load_board_spec",
    "render_board",
    "rigid_transform",
]


class CalibrationError(SimpactError, ValueError):
    """Bad calibration input or an unsolvable set of views; the message says which and why."""


def rigid_transform(T: Any, where: str) -> np.ndarray:
    """``T`` as a (4, 4) float array, checked to be a rigid transform; ``where`` names it in the error."""
    try:
        a = np.array(T, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CalibrationError(f"{where}: must be a 4x4 numeric matrix ({exc})") from None
    problem = rigid_transform_problem(a, 1e-5)
    if problem:
        raise CalibrationError(f"{where} {problem}")
    return a


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

    T = rigid_transform(T_cam_board, "T_cam_board")
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
