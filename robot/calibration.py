"""Camera-to-robot calibration: the extrinsics file and the recorded and collected views; the ChArUco
board is :mod:`robot.charuco`, the hand-eye solve :mod:`robot.handeye`.

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

Both are the robot-world/hand-eye problem ``A_i Y = X B_i``. :func:`robot.handeye.solve_hand_eye` solves it in
closed form (Park & Martin's rotation fit on every pair of views, then linear least squares for the
translation; the solver OpenCV's ``calibrateHandEye`` implements as ``CALIB_HAND_EYE_PARK`` — OpenCV 5.0's
Python bindings no longer expose that function) and refines ``X`` and ``Y`` jointly by non-linear least
squares on the board corners' reprojection error when the detections are given, else on the pose residuals.
Residuals are reported per view as the disagreement, in mm and degrees, between the board pose seen by the
camera and the one predicted through the robot's kinematics.

The extrinsics file (YAML) holds ``mode`` and ``T_base_cam`` (eye-to-hand) or ``T_ee_cam`` (eye-in-hand) as
4x4 nested lists, plus optional provenance (``residuals``, ``views``, ``board``, ``camera_serial``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from PIL import Image

from robot.camera import RealSenseCamera
from robot.charuco import CalibrationError, CharucoBoardSpec, rigid_transform
from robot.franka import FrankaRobot
from robot.handeye import MODES, calibrate_views, pose_error, result_key
from simpact.core.rotations import (
    make_transform,
    matrix_to_quat,
    pose_to_transform,
    rotation_exp,
)

__all__ = [
    "VIEWS_FILE",
    "calibration_poses",
    "collect_views",
    "collect_with_franka",
    "collect_with_robot",
    "load_T_base_cam",
    "read_extrinsics",
    "solve_from_dir",
    "write_extrinsics",
]

VIEWS_FILE = "views.json"
"""The index of a recorded calibration set: board, intrinsics, mode and one image + robot pose per view."""
_RIGID_ATOL = 1e-6


# --- extrinsics file --------------------------------------------------------------------------------------


def write_extrinsics(
    path: str | os.PathLike[str], T: Any, mode: str = "eye_to_hand", **provenance: Any
) -> Path:
    """Write the calibration ``T`` (``T_base_cam`` for eye-to-hand, ``T_ee_cam`` for eye-in-hand; 4x4, m)
    and JSON-like ``provenance`` (residuals, date, serial, ...) as YAML."""
    if mode not in MODES:
        raise CalibrationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    key = result_key(mode)
    T = rigid_transform(T, key)
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
    key = result_key(mode)
    if key not in raw:
        raise CalibrationError(f"{p}: missing {key} (4x4 nested list, m) for mode {mode}")
    T = rigid_transform(raw[key], f"{p}: {key}")
    return mode, T, {k: v for k, v in raw.items() if k not in ("mode", key)}


def load_T_base_cam(path: str | os.PathLike[str], T_base_ee: Any = None) -> np.ndarray:
    """The camera pose in the base frame from an extrinsics file; an eye-in-hand file needs the robot's
    current ``T_base_ee`` (4x4, m)."""
    mode, T, _ = read_extrinsics(path)
    if mode == "eye_to_hand":
        return T
    if T_base_ee is None:
        raise CalibrationError(f"{path}: an eye-in-hand calibration needs the robot's pose T_base_ee")
    return rigid_transform(T_base_ee, "T_base_ee") @ T


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
    center = rigid_transform(T_center, "T_center")
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
        dt, dr = pose_error(last, now)
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
        poses.append(rigid_transform(view["T_base_ee"], f"{index_path}: view {i} T_base_ee"))
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
