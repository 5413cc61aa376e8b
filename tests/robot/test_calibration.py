"""Calibration without hardware: the extrinsics file, exact hand-eye math in both set-ups, and the full path
from synthetic ChArUco images (rendered at known poses) to T_base_cam."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from scipy.spatial.transform import Rotation

from robot.calibration import (
    VIEWS_FILE,
    calibration_poses,
    collect_views,
    collect_with_robot,
    load_T_base_cam,
    read_extrinsics,
    solve_from_dir,
    write_extrinsics,
)
from robot.charuco import CalibrationError, CharucoBoardSpec, detect_board, render_board
from robot.handeye import calibrate_views, solve_hand_eye
from simpact.core.frame import Frame

K = np.array([[615.0, 0.0, 319.5], [0.0, 615.0, 239.5], [0.0, 0.0, 1.0]])  # D435i colour at 640x480
SPEC = CharucoBoardSpec()


def make(rotvec: np.ndarray | list[float], t: np.ndarray | list[float]) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = t
    return T


def inv(T: np.ndarray) -> np.ndarray:
    return np.linalg.inv(T)


def errors(T_a: np.ndarray, T_b: np.ndarray) -> tuple[float, float]:
    """Translation (mm) and rotation (deg) between two poses."""
    dt = np.linalg.norm(T_a[:3, 3] - T_b[:3, 3]) * 1000
    dr = np.degrees(Rotation.from_matrix(T_a[:3, :3].T @ T_b[:3, :3]).magnitude())
    return float(dt), float(dr)


def look_at(eye: list[float], target: list[float]) -> np.ndarray:
    """A camera at ``eye`` looking at ``target`` (OpenCV axes, image up = world up)."""
    z = np.subtract(target, eye)
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, np.cross(z, x), z])
    T[:3, 3] = eye
    return T


# The paper's set-up: a D435i in front of the robot looking back at the table; the board on the gripper.
T_BASE_CAM = look_at([1.2, 0.3, 0.6], [0.5, 0.0, 0.25])
T_EE_BOARD = make([0.0, 0.0, 0.3], [-0.1, -0.07, 0.06])


def board_views(n: int, seed: int) -> list[np.ndarray]:
    """``n`` board poses in the camera frame that a camera sees well: 0.45-0.7 m away, tilted up to 30
    degrees, turned up to 25 degrees in plane."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        tilt = make([*np.radians(rng.uniform(-30, 30, 2)), 0.0], [0, 0, 0])
        spin = make([0.0, 0.0, np.radians(rng.uniform(-25, 25))], [0, 0, 0])
        T = tilt @ spin
        T[:3, 3] = [rng.uniform(-0.12, 0.02), rng.uniform(-0.1, 0.0), rng.uniform(0.45, 0.7)]
        out.append(T)
    return out


def eye_to_hand_views(n: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Robot poses and exact board poses of an eye-to-hand collection."""
    cam_board = board_views(n, seed)
    base_ee = [T_BASE_CAM @ T @ inv(T_EE_BOARD) for T in cam_board]
    return base_ee, cam_board


# --- the extrinsics file --------------------------------------------------------------------------------


def test_extrinsics_round_trip_and_eye_in_hand_composition(tmp_path: Path) -> None:
    path = write_extrinsics(tmp_path / "cam.yaml", T_BASE_CAM, residuals={"translation_mm": {"rms": 0.4}})
    mode, T, extra = read_extrinsics(path)
    assert mode == "eye_to_hand" and np.array_equal(T, T_BASE_CAM)
    assert extra["residuals"]["translation_mm"]["rms"] == 0.4
    assert np.array_equal(load_T_base_cam(path), T_BASE_CAM)

    T_ee_cam = make([0.0, 0.0, np.pi / 2], [0.05, 0.0, 0.04])
    hand = write_extrinsics(tmp_path / "hand.yaml", T_ee_cam, mode="eye_in_hand")
    T_base_ee = make([np.pi, 0.0, 0.0], [0.4, 0.1, 0.5])
    assert np.allclose(load_T_base_cam(hand, T_base_ee), T_base_ee @ T_ee_cam, atol=1e-12)
    with pytest.raises(CalibrationError, match="needs the robot's pose"):
        load_T_base_cam(hand)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("mode: eye_to_hand\n", "missing T_base_cam"),
        ("mode: sideways\nT_base_cam: []\n", "mode must be one of"),
        ("T_base_cam: [[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\n", "not a rigid transform"),
        ("T_base_cam: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]\n", "must be a 4x4 matrix"),
        ("[unclosed\n", "not valid YAML"),
    ],
)
def test_bad_extrinsics_files_are_clear_errors(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CalibrationError, match=match):
        read_extrinsics(path)


# --- exact math -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("refine", [False, True])
def test_exact_eye_to_hand_poses_give_the_exact_calibration(refine: bool) -> None:
    base_ee, cam_board = eye_to_hand_views(8, seed=1)
    result = solve_hand_eye(base_ee, cam_board, "eye_to_hand", refine=refine)
    assert np.allclose(result.T, T_BASE_CAM, atol=1e-9)
    assert np.allclose(result.T_target, T_EE_BOARD, atol=1e-9)
    assert result.translation_mm.max() < 1e-6 and result.rotation_deg.max() < 1e-6


def test_exact_eye_in_hand_poses_give_the_exact_calibration() -> None:
    T_ee_cam = make([0.05, -0.02, np.pi / 2], [0.06, -0.01, 0.05])
    T_base_board = make([np.pi, 0.0, 0.2], [0.55, 0.05, 0.0])
    base_ee = calibration_poses(make([np.pi, 0.0, 0.0], [0.5, 0.0, 0.45]), 8, np.random.default_rng(2))
    cam_board = [inv(T_ee_cam) @ inv(T) @ T_base_board for T in base_ee]
    result = solve_hand_eye(base_ee, cam_board, "eye_in_hand")
    assert np.allclose(result.T, T_ee_cam, atol=1e-9)
    assert np.allclose(result.T_target, T_base_board, atol=1e-9)


def test_noisy_poses_still_land_within_millimetres() -> None:
    rng = np.random.default_rng(3)
    base_ee, cam_board = eye_to_hand_views(15, seed=3)
    noisy = [T @ make(rng.normal(0, np.radians(0.1), 3), rng.normal(0, 0.0005, 3)) for T in cam_board]
    result = solve_hand_eye(base_ee, noisy, "eye_to_hand")
    dt, dr = errors(result.T, T_BASE_CAM)
    assert dt < 3.0 and dr < 0.3
    assert 0.1 < result.residuals()["translation_mm"]["rms"] < 5.0  # the injected noise shows up


def test_degenerate_or_too_few_views_are_refused() -> None:
    base_ee, cam_board = eye_to_hand_views(2, seed=4)
    with pytest.raises(CalibrationError, match="at least 3 views"):
        solve_hand_eye(base_ee, cam_board)
    with pytest.raises(CalibrationError, match="one of each per view"):
        solve_hand_eye(base_ee * 2, cam_board)
    # Turning the hand about one axis only leaves the calibration undetermined.
    spins = [make([0.0, 0.0, a], [0.5, 0.0, 0.3]) for a in np.radians([0, 20, 45, 70, 90])]
    with pytest.raises(CalibrationError, match="one axis"):
        solve_hand_eye(spins, [inv(T_BASE_CAM) @ T @ T_EE_BOARD for T in spins])


# --- synthetic images -----------------------------------------------------------------------------------


def test_rendered_board_is_detected_at_its_pose() -> None:
    T = board_views(1, seed=5)[0]
    image = render_board(SPEC, T, K, 640, 480, np.random.default_rng(5))
    obs = detect_board(image, SPEC, K)
    assert obs is not None and len(obs.ids) == (SPEC.squares_x - 1) * (SPEC.squares_y - 1)
    dt, dr = errors(obs.T_cam_board, T)
    assert dt < 2.0 and dr < 0.5 and obs.reprojection_px < 0.3
    assert detect_board(np.full((480, 640, 3), 128, np.uint8), SPEC, K) is None


def test_synthetic_images_recover_T_base_cam_within_millimetres() -> None:
    base_ee, cam_board = eye_to_hand_views(12, seed=6)
    rng = np.random.default_rng(6)
    images = [render_board(SPEC, T, K, 640, 480, rng) for T in cam_board]
    images.append(np.full((480, 640, 3), 90, np.uint8))  # a view where the board is out of sight
    result = calibrate_views(images, [*base_ee, base_ee[0]], SPEC, K)
    assert result.notes["skipped_views"] == [12] and len(result.notes["used_views"]) == 12
    dt, dr = errors(result.T, T_BASE_CAM)
    assert dt < 2.0 and dr < 0.2, (dt, dr)
    residuals = result.residuals()
    assert residuals["translation_mm"]["rms"] < 2.0 and residuals["rotation_deg"]["rms"] < 0.3
    assert residuals["reprojection_px"]["rms"] < 0.5


def test_synthetic_images_recover_an_eye_in_hand_camera() -> None:
    T_ee_cam = make([0.0, 0.0, np.pi / 2], [0.06, 0.0, 0.03])
    T_base_board = make([np.pi, 0.0, 0.0], [0.3775, 0.0875, 0.0])  # on the table, z into it
    rng = np.random.default_rng(8)
    center = make([np.pi, 0.0, 0.0], [0.44, 0.0, 0.45])  # the hand 45 cm above the table, pointing down
    base_ee = calibration_poses(center, 10, rng, max_tilt_deg=15, max_shift_m=0.04)
    images = [render_board(SPEC, inv(T_ee_cam) @ inv(T) @ T_base_board, K, 640, 480, rng) for T in base_ee]
    result = calibrate_views(images, base_ee, SPEC, K, mode="eye_in_hand")
    dt, dr = errors(result.T, T_ee_cam)
    assert dt < 2.0 and dr < 0.2, (dt, dr)
    assert result.to_dict()["T_ee_cam"] == result.T.tolist()


def test_solve_from_a_recorded_directory_writes_result_and_yaml(tmp_path: Path) -> None:
    base_ee, cam_board = eye_to_hand_views(8, seed=7)
    rng = np.random.default_rng(7)
    views = []
    for i, (ee, T) in enumerate(zip(base_ee, cam_board)):
        Image.fromarray(render_board(SPEC, T, K, 640, 480, rng)).save(tmp_path / f"view_{i:03d}.png")
        views.append({"image": f"view_{i:03d}.png", "T_base_ee": ee.tolist()})
    index = {
        "mode": "eye_to_hand",
        "board": SPEC.to_dict(),
        "K": K.tolist(),
        "distortion": None,
        "views": views,
    }
    (tmp_path / VIEWS_FILE).write_text(json.dumps(index))
    result = solve_from_dir(tmp_path)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["residuals"] == result["residuals"] and saved["views"] == 8
    dt, dr = errors(load_T_base_cam(tmp_path / "camera_extrinsics.yaml"), T_BASE_CAM)
    assert dt < 3.0 and dr < 0.3
    assert np.allclose(saved["T_base_cam"], load_T_base_cam(tmp_path / "camera_extrinsics.yaml"))
    from simpact.cli import main

    assert main(["robot", "calibrate", "--from-dir", str(tmp_path), "--out", str(tmp_path / "cli")]) == 0
    assert json.loads((tmp_path / "cli" / "result.json").read_text())["T_base_cam"] == saved["T_base_cam"]
    bad = dict(index, views=[{"image": "view_000.png"}])
    (tmp_path / VIEWS_FILE).write_text(json.dumps(bad))
    with pytest.raises(CalibrationError, match="view 0 needs 'image' and 'T_base_ee'"):
        solve_from_dir(tmp_path)
    assert main(["robot", "calibrate", "--from-dir", str(tmp_path)]) == 2


class _BoardCamera:
    """A camera that renders the board on the gripper at the robot's last reached pose (eye-to-hand)."""

    def __init__(self) -> None:
        self.T_base_ee = np.eye(4)
        self.rng = np.random.default_rng(9)

    def capture(self) -> Frame:
        T_cam_board = inv(T_BASE_CAM) @ self.T_base_ee @ T_EE_BOARD
        rgb = render_board(SPEC, T_cam_board, K, 640, 480, self.rng)
        return Frame(rgb=rgb, depth=np.full((480, 640), 0.6, np.float32), K=K)

    def close(self) -> None:
        pass


def test_collected_views_are_saved_and_solved(tmp_path: Path) -> None:
    camera = _BoardCamera()
    error = make([0.0, 0.0, 0.0], [0.0005, 0.0, 0.0])  # the robot stops 0.5 mm off; the reached pose counts

    def move_to(T: np.ndarray) -> np.ndarray:
        camera.T_base_ee = T @ error
        return camera.T_base_ee

    center = T_BASE_CAM @ make([0.0, 0.0, 0.0], [-0.05, -0.05, 0.55]) @ inv(T_EE_BOARD)
    poses = calibration_poses(center, 8, np.random.default_rng(10))
    lines: list[str] = []
    collect_views(move_to, camera, poses, tmp_path, SPEC, progress=lines.append)
    assert len(lines) == 8 and len(json.loads((tmp_path / VIEWS_FILE).read_text())["views"]) == 8
    result = solve_from_dir(tmp_path)
    dt, dr = errors(np.array(result["T_base_cam"]), T_BASE_CAM)
    assert dt < 2.0 and dr < 0.2 and result["used_views"] == list(range(8))


@pytest.mark.slow
def test_collection_drives_a_simulated_franka(franky_sim: Any, tmp_path: Path) -> None:
    """The hardware path on franky-sim: the robot visits the poses, a camera that renders the board at the
    robot's measured pose records each view, and the solve finds the camera."""
    from robot.franka import FrankaRobot

    robot = FrankaRobot(franky_sim.host, realtime=False)
    with robot:
        start = make([0.0, 0.0, 0.0], robot.tcp_pose()[0])
        start[:3, :3] = Rotation.from_quat(np.roll(robot.tcp_pose()[1], -1)).as_matrix()
    # The camera looks at the board (on the gripper) from 0.55 m when the robot is at its start pose.
    T_base_cam = start @ T_EE_BOARD @ inv(make([0.0, 0.0, 0.0], [-0.12, -0.09, 0.55]))

    class RobotCamera:
        def capture(self) -> Frame:
            position, quaternion = robot.tcp_pose()
            T_base_ee = make(Rotation.from_quat(np.roll(quaternion, -1)).as_rotvec(), position)
            rgb = render_board(SPEC, inv(T_base_cam) @ T_base_ee @ T_EE_BOARD, K, 640, 480)
            return Frame(rgb=rgb, depth=np.full((480, 640), 0.55, np.float32), K=K)

    collect_with_robot(robot, RobotCamera(), tmp_path, SPEC, views=4, seed=1, speed=0.25, settle_s=0.1)
    result = solve_from_dir(tmp_path)
    dt, dr = errors(np.array(result["T_base_cam"]), T_base_cam)
    assert dt < 3.0 and dr < 0.3, (dt, dr)
    assert len(result["used_views"]) == 4


def test_board_spec_is_checked() -> None:
    with pytest.raises(CalibrationError, match="smaller than square_length"):
        CharucoBoardSpec(square_length=0.02, marker_length=0.03)
    with pytest.raises(CalibrationError, match="unknown ArUco dictionary"):
        CharucoBoardSpec(dictionary="DICT_NOPE").board()
    with pytest.raises(CalibrationError, match="unknown fields"):
        CharucoBoardSpec.from_dict({"squares": 5})


def test_views_wait_until_the_robot_is_at_rest() -> None:
    from robot.calibration import _at_rest

    readings = iter(
        [make([0, 0, 0], [0.0, 0, 0.1 * k]) for k in range(5)] + [make([0, 0, 0], [0.0, 0, 0.4])] * 3
    )
    waits: list[float] = []
    pose = _at_rest(lambda: next(readings), 0.2, waits.append)
    assert np.allclose(pose[:3, 3], [0, 0, 0.4]) and waits == [0.2] * 5  # still once two readings agree
    drifting = (make([0, 0, 0], [0.0, 0, 0.001 * k]) for k in range(100))
    with pytest.raises(CalibrationError, match="did not come to rest"):
        _at_rest(lambda: next(drifting), 0.1, lambda s: None, tries=5)
