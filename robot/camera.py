"""Cameras that produce :class:`simpact.core.frame.Frame` values: a RealSense D4xx, or a player of recorded
bundles.

Both implement :class:`Camera`: ``capture() -> Frame`` (colour, depth in metres aligned to the colour image,
intrinsics ``K`` of the colour stream, and ``T_base_cam`` when a calibration was given), ``close()``, and the
context-manager protocol. :func:`capture_bundle` writes one capture as the frame bundle real2sim reads.

:class:`RealSenseCamera` needs ``pyrealsense2`` (``pip install -e '.[robot]'``) and a device on USB 3; it is
imported when a camera is opened, never at module import. :class:`BundlePlayer` replays bundles written by
:func:`capture_bundle` or ``simpact render``, for use without a camera.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from simpact.core.errors import SimpactError
from simpact.core.frame import META_FILE, Frame, FrameError, read_frame_bundle, write_frame_bundle
from simpact.core.rotations import rigid_transform_problem

__all__ = [
    "BundlePlayer",
    "Camera",
    "CameraError",
    "RealSenseCamera",
    "capture_bundle",
    "open_camera",
]


class CameraError(SimpactError, RuntimeError):
    """A camera cannot be opened or read (no device, wrong serial, no frames, player exhausted)."""


@runtime_checkable
class Camera(Protocol):
    """A source of RGB-D frames."""

    def capture(self) -> Frame:
        """The next frame: rgb (H, W, 3) uint8, depth (H, W) float32 m aligned to rgb, K, T_base_cam."""
        ...

    def close(self) -> None:
        """Release the device (idempotent)."""
        ...


class _CameraBase:
    """Context-manager plumbing shared by the cameras."""

    def close(self) -> None:  # pragma: no cover - overridden
        pass

    def __enter__(self) -> _CameraBase:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _extrinsics(T_base_cam: Any) -> np.ndarray | None:
    if T_base_cam is None:
        return None
    T = np.array(T_base_cam, dtype=np.float64)
    problem = rigid_transform_problem(T, 1e-5)
    if problem:
        raise CameraError(f"T_base_cam {problem}")
    return T


def capture_bundle(camera: Camera, directory: str | os.PathLike[str]) -> Path:
    """Capture one frame from ``camera`` and write it as a frame bundle into ``directory``."""
    return write_frame_bundle(camera.capture(), directory)


# --- RealSense --------------------------------------------------------------------------------------------


class RealSenseCamera(_CameraBase):
    """An Intel RealSense D4xx (the paper's D435i) through ``pyrealsense2``.

    Streams colour (RGB8) and depth (Z16) at ``width`` x ``height`` and ``fps``; depth is aligned to the
    colour image, so ``K`` is the colour intrinsics read from the device and ``depth`` holds metres along the
    colour camera's optical axis (the device's depth scale, read from the sensor, converts Z16 units to m).
    The first ``warmup`` frames are dropped while auto-exposure settles (they still feed the temporal filter).
    Optional post-processing on the aligned depth: ``temporal`` (librealsense's temporal filter, which
    smooths static scenes over frames) and ``hole_filling`` (fills holes from neighbours; it invents depth, so
    it is off by default). The colour stream's distortion model and coefficients are kept in
    ``Frame.metadata["distortion"]`` (D4xx colour: inverse Brown-Conrady, near zero).

    Opening fails with :class:`CameraError` when no device is connected or ``serial`` names none of them.
    """

    def __init__(
        self,
        serial: str | None = None,
        width: int = 640,
        height: int = 480,
        fps: int = 30,
        warmup: int = 30,
        temporal: bool = True,
        hole_filling: bool = False,
        T_base_cam: Any = None,
        timeout_s: float = 5.0,
    ) -> None:
        if width <= 0 or height <= 0 or fps <= 0:
            raise CameraError(f"width, height and fps must be positive, got {width}x{height} at {fps} Hz")
        if warmup < 0:
            raise CameraError(f"warmup must be >= 0 frames, got {warmup}")
        self.T_base_cam = _extrinsics(T_base_cam)
        """4x4 camera-to-base transform (m, OpenCV axes) attached to every frame, or ``None``."""
        self.width, self.height, self.fps = int(width), int(height), int(fps)
        self.timeout_ms = int(timeout_s * 1000)
        rs = _import_realsense()
        self.serial = _pick_device(rs, serial)
        config = rs.config()
        config.enable_device(self.serial)
        config.enable_stream(rs.stream.color, self.width, self.height, rs.format.rgb8, self.fps)
        config.enable_stream(rs.stream.depth, self.width, self.height, rs.format.z16, self.fps)
        self._pipeline = rs.pipeline()
        try:
            profile = self._pipeline.start(config)
        except RuntimeError as exc:
            raise CameraError(
                f"RealSense {self.serial}: cannot start {self.width}x{self.height} at {self.fps} Hz ({exc})"
            ) from None
        self._running = True
        try:
            self.depth_scale = float(profile.get_device().first_depth_sensor().get_depth_scale())
            """Metres per Z16 depth unit, read from the device (D4xx default 0.001)."""
            self._align = rs.align(rs.stream.color)
            self._filters: list[Any] = []
            if temporal:
                self._filters.append(rs.temporal_filter())
            if hole_filling:
                self._filters.append(rs.hole_filling_filter())
            color = profile.get_stream(rs.stream.color).as_video_stream_profile().get_intrinsics()
            self.K = np.array([[color.fx, 0.0, color.ppx], [0.0, color.fy, color.ppy], [0.0, 0.0, 1.0]])
            """Colour intrinsics (pixels), which the aligned depth shares."""
            self.distortion = {"model": str(color.model), "coeffs": [float(c) for c in color.coeffs]}
            for _ in range(warmup):
                self._next()
        except BaseException:
            self.close()
            raise

    def _next(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Wait for a frameset; rgb (H, W, 3) uint8, depth (H, W) float32 m, device timestamp (ms)."""
        try:
            frames = self._pipeline.wait_for_frames(self.timeout_ms)
        except RuntimeError as exc:
            raise CameraError(
                f"RealSense {self.serial}: no frames within {self.timeout_ms} ms ({exc})"
            ) from None
        aligned = self._align.process(frames)
        color, depth = aligned.get_color_frame(), aligned.get_depth_frame()
        if not color or not depth:
            raise CameraError(f"RealSense {self.serial}: a frameset came without colour or depth")
        for block in self._filters:
            depth = block.process(depth)
        rgb = np.array(color.get_data(), dtype=np.uint8, copy=True)
        z16 = np.asarray(depth.get_data())
        metres = (z16.astype(np.float64) * self.depth_scale).astype(np.float32)
        return rgb, metres, float(aligned.get_timestamp())

    def capture(self) -> Frame:
        """A frame taken after this call (framesets already queued are dropped, so a robot that just stopped
        is not seen mid-motion), aligned and filtered; :class:`CameraError` if none arrives in time."""
        if not self._running:
            raise CameraError(f"RealSense {self.serial}: camera is closed")
        while self._pipeline.poll_for_frames():
            pass
        rgb, depth, stamp = self._next()
        return Frame(
            rgb=rgb,
            depth=depth,
            K=self.K.copy(),
            T_base_cam=None if self.T_base_cam is None else self.T_base_cam.copy(),
            metadata={
                "camera": {"model": "realsense", "serial": self.serial},
                "device_timestamp_ms": stamp,
                "captured_unix_s": time.time(),
                "sensor_depth_scale_m": self.depth_scale,
                "distortion": self.distortion,
            },
        )

    def close(self) -> None:
        if getattr(self, "_running", False):
            self._running = False
            self._pipeline.stop()


def _import_realsense() -> Any:
    try:
        import pyrealsense2 as rs
    except ImportError as exc:
        raise CameraError(
            f"the RealSense camera needs pyrealsense2: pip install -e '.[robot]' ({exc}); "
            "on Linux it also needs libusb-1.0-0"
        ) from None
    return rs


def _pick_device(rs: Any, serial: str | None) -> str:
    """The serial of the device to open: ``serial`` if connected, else the only/first connected one."""
    serials = [d.get_info(rs.camera_info.serial_number) for d in rs.context().query_devices()]
    if not serials:
        raise CameraError("no RealSense device connected (check the USB 3 cable and `rs-enumerate-devices`)")
    if serial is None:
        return str(serials[0])
    if serial not in serials:
        raise CameraError(f"no RealSense device with serial {serial}; connected: {', '.join(serials)}")
    return serial


# --- recorded bundles -------------------------------------------------------------------------------------


class BundlePlayer(_CameraBase):
    """Replays recorded frame bundles in order, one per :meth:`capture`, as a camera would deliver them.

    ``dirs`` is a sequence of bundle directories, or one directory that is either a bundle itself or holds
    bundles as sub-directories (replayed in sorted name order). With ``loop`` the sequence restarts after the
    last bundle; otherwise a capture past the end raises :class:`CameraError`. ``T_base_cam``, when given,
    replaces the recorded camera pose (a newer calibration); else the bundle's own is kept.
    """

    def __init__(
        self,
        dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        loop: bool = False,
        T_base_cam: Any = None,
    ) -> None:
        self.paths = _bundle_dirs(dirs)
        self.loop = loop
        self.T_base_cam = _extrinsics(T_base_cam)
        self.index = 0
        """Index of the next bundle to play."""

    def __len__(self) -> int:
        return len(self.paths)

    def capture(self) -> Frame:
        """The next bundle as a frame; :class:`simpact.core.frame.FrameError` if it is malformed."""
        if self.index >= len(self.paths):
            if not self.loop:
                raise CameraError(
                    f"bundle player exhausted: all {len(self.paths)} recorded frame(s) were played "
                    f"(first: {self.paths[0]})"
                )
            self.index = 0
        path = self.paths[self.index]
        self.index += 1
        frame = read_frame_bundle(path)
        if self.T_base_cam is not None:
            frame.T_base_cam = self.T_base_cam.copy()
        frame.metadata.setdefault("source_bundle", str(path))
        return frame

    def close(self) -> None:
        pass


def _bundle_dirs(dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(dirs, (str, os.PathLike)):
        root = Path(dirs)
        if not root.is_dir():
            raise FrameError(f"{root}: frame bundle directory does not exist")
        if (root / META_FILE).exists():
            paths = [root]
        else:
            paths = sorted(p for p in root.iterdir() if (p / META_FILE).is_file())
            if not paths:
                raise FrameError(f"{root}: neither a frame bundle nor a folder of bundles (no {META_FILE})")
    else:
        paths = [Path(p) for p in dirs]
        if not paths:
            raise CameraError("bundle player needs at least one bundle directory")
        for path in paths:
            if not path.is_dir():
                raise FrameError(f"{path}: frame bundle directory does not exist")
    return paths


def open_camera(
    bundles: Sequence[str] | None = None,
    *,
    serial: str | None = None,
    T_base_cam: Any = None,
    warmup: int = 30,
    temporal: bool = True,
    hole_filling: bool = False,
) -> Camera:
    """A :class:`BundlePlayer` of ``bundles`` (one bundle or a folder of them, or several bundles in order)
    when given, else the :class:`RealSenseCamera` ``serial`` (the first device when None) with its
    ``warmup``, ``temporal`` and ``hole_filling`` settings; ``T_base_cam`` (4x4, m) is attached to every
    frame."""
    if bundles:
        return BundlePlayer(bundles[0] if len(bundles) == 1 else bundles, T_base_cam=T_base_cam)
    return RealSenseCamera(
        serial=serial, warmup=warmup, temporal=temporal, hole_filling=hole_filling, T_base_cam=T_base_cam
    )
