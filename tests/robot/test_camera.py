"""Cameras: the bundle player (replay in order, clear errors) and the RealSense path without a device."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from robot import camera as camera_module
from robot.camera import BundlePlayer, Camera, CameraError, RealSenseCamera, capture_bundle
from simpact.core.frame import Frame, FrameError, read_frame_bundle, write_frame_bundle

H, W = 24, 32
K = np.array([[30.0, 0.0, 15.5], [0.0, 30.0, 11.5], [0.0, 0.0, 1.0]])


def make_frame(value: int, T: np.ndarray | None = None) -> Frame:
    rgb = np.full((H, W, 3), value, np.uint8)
    depth = np.full((H, W), 0.5 + value / 1000, np.float32)
    return Frame(rgb=rgb, depth=depth, K=K, T_base_cam=T, metadata={"index": value})


def pose(x: float) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = [x, 0.1, 0.6]
    return T


@pytest.fixture
def bundles(tmp_path: Path) -> list[Path]:
    return [write_frame_bundle(make_frame(v, pose(v / 100)), tmp_path / f"b{v}") for v in (3, 1, 2)]


def test_player_replays_in_order_then_says_it_is_exhausted(bundles: list[Path]) -> None:
    player = BundlePlayer(bundles)
    assert isinstance(player, Camera) and len(player) == 3
    values = [player.capture().metadata["index"] for _ in range(3)]
    assert values == [3, 1, 2]
    with pytest.raises(CameraError, match="exhausted: all 3 recorded frame"):
        player.capture()


def test_player_of_a_folder_plays_sorted_bundles_and_loops(bundles: list[Path]) -> None:
    with BundlePlayer(bundles[0].parent, loop=True) as player:
        values = [player.capture().metadata["index"] for _ in range(4)]
    assert values == [1, 2, 3, 1]  # b1, b2, b3 by name, then again


def test_player_frames_equal_the_recording_and_take_a_new_calibration(bundles: list[Path]) -> None:
    frame = BundlePlayer(bundles[0]).capture()
    recorded = read_frame_bundle(bundles[0])
    assert np.array_equal(frame.rgb, recorded.rgb) and np.array_equal(frame.depth, recorded.depth)
    assert np.array_equal(frame.T_base_cam, pose(0.03))
    T_new = pose(0.5)
    assert np.array_equal(BundlePlayer(bundles[0], T_base_cam=T_new).capture().T_base_cam, T_new)


def test_capture_bundle_writes_what_real2sim_reads(bundles: list[Path], tmp_path: Path) -> None:
    out = capture_bundle(BundlePlayer(bundles[1]), tmp_path / "captured")
    frame = read_frame_bundle(out)
    assert frame.metadata["index"] == 1 and frame.metadata["source_bundle"] == str(bundles[1])


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda root: root / "missing", FrameError, "does not exist"),
        (lambda root: root, FrameError, "neither a frame bundle nor a folder of bundles"),
        (lambda root: [], CameraError, "at least one bundle"),
    ],
)
def test_player_rejects_bad_sources(tmp_path: Path, make: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        BundlePlayer(make(tmp_path))


def test_player_rejects_a_non_rigid_calibration(bundles: list[Path]) -> None:
    with pytest.raises(CameraError, match="T_base_cam .*rigid"):
        BundlePlayer(bundles, T_base_cam=np.diag([2.0, 1.0, 1.0, 1.0]))


# --- RealSense ------------------------------------------------------------------------------------------


def test_pyrealsense2_imports_and_no_device_is_a_clear_error() -> None:
    rs = pytest.importorskip("pyrealsense2")
    assert hasattr(rs, "pipeline") and hasattr(rs, "align") and hasattr(rs, "temporal_filter")
    if len(rs.context().query_devices()) > 0:
        pytest.skip("a RealSense device is connected")
    with pytest.raises(CameraError, match="no RealSense device connected"):
        RealSenseCamera()


class _FakeRealSense:
    """Just enough of pyrealsense2 to run RealSenseCamera's frame path without a device: Z16 depth of
    1000 units, a device depth scale of 0.00025 m per unit, counted framesets."""

    def __init__(self, serials: list[str]) -> None:
        self.serials = serials
        self.delivered = 0
        self.stale = 0
        """Framesets waiting in the queue (dropped by capture)."""
        self.stopped = False
        fake = self
        color_intr = SimpleNamespace(
            fx=600.0, fy=601.0, ppx=15.2, ppy=11.8, model="distortion.inverse_brown_conrady", coeffs=[0.0] * 5
        )

        class Frames:
            def get_color_frame(self) -> Any:
                return SimpleNamespace(get_data=lambda: np.full((H, W, 3), 7, np.uint8))

            def get_depth_frame(self) -> Any:
                return SimpleNamespace(get_data=lambda: np.full((H, W), 1000, np.uint16))

            def get_timestamp(self) -> float:
                return 12.5

        class Pipeline:
            def start(self, config: Any) -> Any:
                stream = SimpleNamespace(
                    as_video_stream_profile=lambda: SimpleNamespace(get_intrinsics=lambda: color_intr)
                )
                sensor = SimpleNamespace(get_depth_scale=lambda: 0.00025)
                return SimpleNamespace(
                    get_device=lambda: SimpleNamespace(first_depth_sensor=lambda: sensor),
                    get_stream=lambda kind: stream,
                )

            def poll_for_frames(self) -> Any:
                fake.stale -= 1
                return Frames() if fake.stale >= 0 else None

            def wait_for_frames(self, timeout_ms: int) -> Any:
                fake.delivered += 1
                return Frames()

            def stop(self) -> None:
                fake.stopped = True

        class Config:
            def enable_device(self, serial: str) -> None:
                fake.enabled = serial

            def enable_stream(self, *args: Any) -> None:
                pass

        self.pipeline, self.config = Pipeline, Config
        self.align = lambda kind: SimpleNamespace(process=lambda frames: frames)
        self.temporal_filter = lambda: SimpleNamespace(process=lambda frame: frame)
        self.hole_filling_filter = lambda: SimpleNamespace(process=lambda frame: frame)
        self.stream = SimpleNamespace(color="color", depth="depth")
        self.format = SimpleNamespace(rgb8="rgb8", z16="z16")
        self.camera_info = SimpleNamespace(serial_number="serial")
        devices = [SimpleNamespace(get_info=lambda key, s=s: s) for s in serials]
        self.context = lambda: SimpleNamespace(query_devices=lambda: devices)


def test_realsense_frame_path_scales_depth_and_reads_intrinsics(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeRealSense(["111", "222"])
    monkeypatch.setattr(camera_module, "_import_realsense", lambda: fake)
    T = pose(0.2)
    with RealSenseCamera(serial="222", warmup=5, hole_filling=True, T_base_cam=T) as cam:
        assert fake.enabled == "222" and fake.delivered == 5  # warm-up frames dropped
        fake.stale = 2
        frame = cam.capture()
        assert fake.stale < 0  # the queued framesets were drained first
    assert fake.stopped
    assert frame.depth.dtype == np.float32 and np.allclose(frame.depth, 0.25)  # 1000 units x 0.00025 m
    assert np.allclose(frame.K, [[600.0, 0, 15.2], [0, 601.0, 11.8], [0, 0, 1]])
    assert np.array_equal(frame.T_base_cam, T) and frame.metadata["camera"]["serial"] == "222"
    with pytest.raises(CameraError, match="camera is closed"):
        cam.capture()


def test_realsense_unknown_serial_names_the_connected_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(camera_module, "_import_realsense", lambda: _FakeRealSense(["111"]))
    with pytest.raises(CameraError, match="no RealSense device with serial 999; connected: 111"):
        RealSenseCamera(serial="999")


def test_capture_command_replays_a_bundle_with_a_calibration(
    bundles: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from robot.calibration import write_extrinsics
    from simpact.cli import main

    extrinsics = write_extrinsics(tmp_path / "cam.yaml", pose(0.7))
    out = tmp_path / "capture"
    assert (
        main(
            [
                "robot",
                "capture",
                "--from-bundles",
                str(bundles[2]),
                "--extrinsics",
                str(extrinsics),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert np.array_equal(read_frame_bundle(out).T_base_cam, pose(0.7))
    assert "with T_base_cam" in capsys.readouterr().out
    assert main(["robot", "capture", "--from-bundles", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
