"""RGB-D frames and their on-disk bundle, the input format of real2sim.

A frame bundle is a directory holding:

- ``rgb.png`` — (H, W, 3) uint8 colour image;
- ``depth.npy`` — (H, W) float32 depth in metres along the optical axis, or ``depth.png`` — (H, W) uint16
  depth in units of ``depth_scale`` metres (RealSense D4xx: 0.001); 0 marks a hole (no measurement);
- optionally ``masks.npy`` — (H, W) int32 object ids (0 = no object) and ``masks.json`` —
  ``{"<id>": "name"}``;
- ``frame.json`` — ``K`` (3x3 pinhole intrinsics, pixels, OpenCV convention), ``width``, ``height``, and
  optionally ``depth_scale`` (m per depth.png unit) and ``T_base_cam`` (4x4 camera-to-robot-base transform, m,
  OpenCV camera axes: x right, y down, z forward). Any other keys are kept in :attr:`Frame.metadata`.

Every check raises :class:`FrameError` naming the file (or field) and what is wrong.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from simpact.core.errors import SimpactError
from simpact.core.rotations import rigid_transform_problem

__all__ = [
    "DEPTH_MAX_PLAUSIBLE_M",
    "Frame",
    "FrameError",
    "read_frame_bundle",
    "write_frame_bundle",
]

#: Median valid depth (m) above which a float depth map is taken to be in the wrong unit.
DEPTH_MAX_PLAUSIBLE_M = 20.0

RGB_FILE = "rgb.png"
DEPTH_NPY_FILE = "depth.npy"
DEPTH_PNG_FILE = "depth.png"
MASKS_FILE = "masks.npy"
MASK_NAMES_FILE = "masks.json"
META_FILE = "frame.json"

#: Keys of frame.json with a meaning; all others are metadata.
_RESERVED_KEYS = frozenset({"K", "T_base_cam", "depth_scale", "width", "height"})
_RIGID_ATOL = 1e-5


class FrameError(SimpactError, ValueError):
    """A frame or frame bundle is malformed; the message names the file or field and the problem."""


@dataclasses.dataclass(frozen=True)
class _Sources:
    """Labels used in error messages: a field name for in-memory frames, a file path for bundles."""

    rgb: str = "Frame.rgb"
    depth: str = "Frame.depth"
    K: str = "Frame.K"
    T_base_cam: str = "Frame.T_base_cam"
    masks: str = "Frame.masks"
    mask_names: str = "Frame.mask_names"


@dataclasses.dataclass(eq=False)
class Frame:
    """One RGB-D observation with intrinsics and (optionally) the camera pose and object masks.

    Arrays are validated and normalised on construction (depth to float32, ``K``/``T_base_cam`` to float64,
    masks to int32); an invalid frame raises :class:`FrameError`. Call :meth:`validate` again after mutating.
    """

    rgb: np.ndarray
    """(H, W, 3) uint8 colour image."""
    depth: np.ndarray
    """(H, W) float32 depth (m) along the optical axis; 0 = hole."""
    K: np.ndarray
    """3x3 pinhole intrinsics (pixels), OpenCV convention (pixel centres at integer coordinates)."""
    T_base_cam: np.ndarray | None = None
    """4x4 camera-to-robot-base transform (m), OpenCV camera axes; ``None`` if uncalibrated."""
    masks: np.ndarray | None = None
    """(H, W) int32 object ids, 0 = no object; ``None`` if not segmented."""
    mask_names: dict[int, str] = dataclasses.field(default_factory=dict)
    """Object id -> name for the ids in ``masks``."""
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Extra JSON-serialisable fields (e.g. instruction, timestamp, camera serial)."""

    def __post_init__(self) -> None:
        self._normalise(_Sources())

    @property
    def height(self) -> int:
        """Image height (pixels)."""
        return int(self.rgb.shape[0])

    @property
    def width(self) -> int:
        """Image width (pixels)."""
        return int(self.rgb.shape[1])

    def validate(self) -> None:
        """Re-run all checks (e.g. after mutating a field); raises :class:`FrameError`."""
        self._normalise(_Sources())

    @classmethod
    def _validated(cls, src: _Sources, **fields: Any) -> Frame:
        """Build a frame whose errors name ``src`` (e.g. the bundle's files) instead of the fields."""
        frame = cls.__new__(cls)
        for name, value in fields.items():
            setattr(frame, name, value)
        frame._normalise(src)
        return frame

    def _normalise(self, src: _Sources) -> None:
        self.rgb = _check_rgb(self.rgb, src.rgb)
        h, w = self.rgb.shape[:2]
        self.depth = _check_depth(self.depth, (h, w), src.depth, src.rgb)
        self.K = _check_K(self.K, (h, w), src.K)
        if self.T_base_cam is not None:
            self.T_base_cam = _check_rigid(self.T_base_cam, src.T_base_cam)
        if self.masks is not None:
            self.masks = _check_masks(self.masks, (h, w), src.masks, src.rgb)
        self.mask_names = _check_mask_names(self.mask_names, src.mask_names)
        if not isinstance(self.metadata, dict):
            raise FrameError(f"Frame.metadata must be a dict, got {type(self.metadata).__name__}")


# --- checks (each returns the normalised value or raises FrameError) ---------------------------------------


def _check_rgb(rgb: Any, where: str) -> np.ndarray:
    a = np.asarray(rgb)
    if a.ndim != 3 or a.shape[2] != 3:
        raise FrameError(f"{where}: rgb must have shape (H, W, 3), got {a.shape}")
    if a.dtype != np.uint8:
        raise FrameError(f"{where}: rgb must be uint8, got {a.dtype}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise FrameError(f"{where}: rgb is empty ({a.shape})")
    return a


def _check_depth(depth: Any, hw: tuple[int, int], where: str, rgb_where: str) -> np.ndarray:
    a = np.asarray(depth)
    if not np.issubdtype(a.dtype, np.floating):
        raise FrameError(
            f"{where}: depth must be floating point metres, got {a.dtype}; "
            f"store integer depth as {DEPTH_PNG_FILE} (uint16) with depth_scale in {META_FILE}"
        )
    if a.shape != hw:
        raise FrameError(f"{where}: depth shape {a.shape} does not match {rgb_where} (H, W) = {hw}")
    a = a.astype(np.float32, copy=False)
    finite = np.isfinite(a)
    if not finite.all():
        bad = a.size - int(finite.sum())
        raise FrameError(f"{where}: depth contains {bad} NaN/inf pixels; mark missing depth as 0")
    if (a < 0).any():
        raise FrameError(f"{where}: depth has negative values (min {float(a.min())} m)")
    valid = a[a > 0]
    if valid.size == 0:
        raise FrameError(f"{where}: depth is all zero (no valid measurement)")
    median = float(np.median(valid))
    if median > DEPTH_MAX_PLAUSIBLE_M:
        raise FrameError(
            f"{where}: median valid depth is {median:g}, implausible in metres "
            f"(> {DEPTH_MAX_PLAUSIBLE_M:g} m); "
            f"the values look like sensor units (e.g. millimetres): convert to metres, or save them as "
            f"{DEPTH_PNG_FILE} (uint16) with depth_scale (m per unit, e.g. 0.001) in {META_FILE}"
        )
    return a


def _check_K(K: Any, hw: tuple[int, int], where: str) -> np.ndarray:
    try:
        a = np.array(K, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise FrameError(f"{where}: K must be a 3x3 numeric matrix ({err})") from err
    if a.shape != (3, 3):
        raise FrameError(f"{where}: K must be 3x3, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise FrameError(f"{where}: K contains NaN or inf")
    if a[1, 0] != 0.0 or a[2, 0] != 0.0 or a[2, 1] != 0.0 or a[2, 2] != 1.0:
        raise FrameError(
            f"{where}: K must be a pinhole matrix [[fx, s, cx], [0, fy, cy], [0, 0, 1]], got {a.tolist()}"
        )
    if a[0, 0] <= 0.0 or a[1, 1] <= 0.0:
        raise FrameError(f"{where}: K focal lengths must be positive, got fx={a[0, 0]}, fy={a[1, 1]}")
    h, w = hw
    if not (-0.5 <= a[0, 2] <= w - 0.5 and -0.5 <= a[1, 2] <= h - 0.5):
        raise FrameError(
            f"{where}: K principal point ({a[0, 2]}, {a[1, 2]}) px lies outside the {w}x{h} image"
        )
    return a


def _check_rigid(T: Any, where: str) -> np.ndarray:
    try:
        a = np.array(T, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise FrameError(f"{where}: T_base_cam must be a 4x4 numeric matrix ({err})") from err
    problem = rigid_transform_problem(a, _RIGID_ATOL)
    if problem:
        raise FrameError(f"{where}: T_base_cam {problem}")
    return a


def _check_masks(masks: Any, hw: tuple[int, int], where: str, rgb_where: str) -> np.ndarray:
    a = np.asarray(masks)
    if not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise FrameError(f"{where}: masks must hold integer object ids, got {a.dtype}")
    if a.shape != hw:
        raise FrameError(f"{where}: masks shape {a.shape} does not match {rgb_where} (H, W) = {hw}")
    if a.size and (int(a.min()) < 0 or int(a.max()) > np.iinfo(np.int32).max):
        raise FrameError(f"{where}: mask ids must be in [0, 2**31), got [{int(a.min())}, {int(a.max())}]")
    return a.astype(np.int32, copy=False)


def _check_mask_names(names: Any, where: str) -> dict[int, str]:
    if not isinstance(names, Mapping):
        raise FrameError(f"{where}: mask names must be a mapping id -> name, got {type(names).__name__}")
    out: dict[int, str] = {}
    for key, name in names.items():
        try:
            obj_id = int(key)
        except (TypeError, ValueError) as err:
            raise FrameError(f"{where}: mask id {key!r} is not an integer") from err
        if obj_id <= 0:
            raise FrameError(f"{where}: mask id {obj_id} must be positive (0 means no object)")
        if not isinstance(name, str):
            raise FrameError(f"{where}: name of mask id {obj_id} must be a string, got {name!r}")
        out[obj_id] = name
    return out


# --- bundle I/O -------------------------------------------------------------------------------------------


def write_frame_bundle(frame: Frame, directory: str | os.PathLike[str]) -> Path:
    """Write ``frame`` as a bundle into ``directory`` (created if needed); returns the directory.

    Depth is stored as ``depth.npy`` (float32 metres, bit-exact); files of an earlier bundle that this frame
    does not have (``depth.png``, masks) are removed so the directory reads back as this frame.
    """
    frame.validate()
    clash = _RESERVED_KEYS.intersection(frame.metadata)
    if clash:
        raise FrameError(f"Frame.metadata: keys {sorted(clash)} are reserved for {META_FILE}")
    meta: dict[str, Any] = {
        "width": frame.width,
        "height": frame.height,
        "K": frame.K.tolist(),
    }
    if frame.T_base_cam is not None:
        meta["T_base_cam"] = frame.T_base_cam.tolist()
    meta.update(frame.metadata)
    try:
        meta_text = json.dumps(meta, indent=2, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise FrameError(f"Frame.metadata: not JSON-serialisable ({err})") from err
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)

    Image.fromarray(np.ascontiguousarray(frame.rgb)).save(out / RGB_FILE)
    np.save(out / DEPTH_NPY_FILE, frame.depth, allow_pickle=False)
    (out / DEPTH_PNG_FILE).unlink(missing_ok=True)
    if frame.masks is not None:
        np.save(out / MASKS_FILE, frame.masks, allow_pickle=False)
        names = {str(k): v for k, v in sorted(frame.mask_names.items())}
        (out / MASK_NAMES_FILE).write_text(json.dumps(names, indent=2) + "\n")
    else:
        (out / MASKS_FILE).unlink(missing_ok=True)
        (out / MASK_NAMES_FILE).unlink(missing_ok=True)
    (out / META_FILE).write_text(meta_text + "\n")
    return out


def read_frame_bundle(directory: str | os.PathLike[str]) -> Frame:
    """Read and validate the bundle in ``directory``; raises :class:`FrameError` naming the faulty file."""
    root = Path(directory)
    if not root.is_dir():
        raise FrameError(f"{root}: frame bundle directory does not exist")
    meta_path = root / META_FILE
    meta = _read_json(meta_path)
    if not isinstance(meta, dict):
        raise FrameError(f"{meta_path}: must hold a JSON object, got {type(meta).__name__}")

    rgb_path = root / RGB_FILE
    rgb = _read_rgb(rgb_path)
    h, w = rgb.shape[:2]
    for key, actual in (("width", w), ("height", h)):
        if key in meta and meta[key] != actual:
            raise FrameError(f"{meta_path}: {key} is {meta[key]!r} but {rgb_path} is {w}x{h}")
    if "K" not in meta:
        raise FrameError(f"{meta_path}: missing field K (3x3 intrinsics in pixels)")

    depth, depth_path = _read_depth(root, meta, (h, w))
    src = _Sources(
        rgb=str(rgb_path),
        depth=str(depth_path),
        K=f"{meta_path} field K",
        T_base_cam=f"{meta_path} field T_base_cam",
        masks=str(root / MASKS_FILE),
        mask_names=str(root / MASK_NAMES_FILE),
    )
    masks: np.ndarray | None = None
    names: Any = {}
    if (root / MASKS_FILE).exists():
        masks = _load_npy(root / MASKS_FILE)
        if (root / MASK_NAMES_FILE).exists():
            names = _read_json(root / MASK_NAMES_FILE)
    elif (root / MASK_NAMES_FILE).exists():
        raise FrameError(f"{root / MASK_NAMES_FILE}: found without {MASKS_FILE}")

    return Frame._validated(
        src,
        rgb=rgb,
        depth=depth,
        K=meta["K"],
        T_base_cam=meta.get("T_base_cam"),
        masks=masks,
        mask_names=names,
        metadata={k: v for k, v in meta.items() if k not in _RESERVED_KEYS},
    )


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise FrameError(f"{path}: missing file")
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FrameError(f"{path}: cannot parse JSON ({err})") from err


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise FrameError(f"{path}: cannot read .npy array ({err})") from err


def _open_png(path: Path) -> Any:

    if not path.is_file():
        raise FrameError(f"{path}: missing file")
    try:
        img = Image.open(path)
        img.load()
    except (OSError, UnidentifiedImageError) as err:
        raise FrameError(f"{path}: cannot read image ({err})") from err
    return img


def _read_rgb(path: Path) -> np.ndarray:
    img = _open_png(path)
    if img.mode in ("RGBA", "L", "LA", "P"):
        img = img.convert("RGB")
    if img.mode != "RGB":
        raise FrameError(f"{path}: rgb must be an 8-bit colour image, got PIL mode {img.mode!r}")
    return np.asarray(img, dtype=np.uint8)


def _read_depth(root: Path, meta: dict[str, Any], hw: tuple[int, int]) -> tuple[np.ndarray, Path]:
    npy, png = root / DEPTH_NPY_FILE, root / DEPTH_PNG_FILE
    if npy.exists() and png.exists():
        raise FrameError(f"{root}: both {DEPTH_NPY_FILE} and {DEPTH_PNG_FILE} present; keep one")
    if npy.exists():
        if "depth_scale" in meta:
            raise FrameError(
                f"{root / META_FILE}: depth_scale applies to {DEPTH_PNG_FILE} only; "
                f"{DEPTH_NPY_FILE} is in metres"
            )
        return _load_npy(npy), npy
    if not png.exists():
        raise FrameError(
            f"{root}: missing depth: expected {DEPTH_NPY_FILE} (float32 m) or {DEPTH_PNG_FILE} (uint16)"
        )
    scale = meta.get("depth_scale")
    if scale is None:
        raise FrameError(
            f"{root / META_FILE}: depth_scale (m per {DEPTH_PNG_FILE} unit, RealSense D4xx: 0.001) "
            f"is required with {DEPTH_PNG_FILE}"
        )
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale) or scale <= 0:
        raise FrameError(
            f"{root / META_FILE}: depth_scale must be a positive number (m per unit), got {scale!r}"
        )
    raw = np.asarray(_open_png(png))
    if raw.dtype != np.uint16 and raw.dtype != np.int32:
        raise FrameError(
            f"{png}: depth.png must be a 16-bit single-channel image, got {raw.dtype} {raw.shape}"
        )
    if raw.shape != hw:
        raise FrameError(f"{png}: depth shape {raw.shape} does not match {root / RGB_FILE} (H, W) = {hw}")
    return (raw.astype(np.float64) * float(scale)).astype(np.float32), png
