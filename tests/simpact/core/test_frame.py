"""Frame bundles: exact round trips and one clear error per kind of bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from simpact.core.frame import Frame, FrameError, read_frame_bundle, write_frame_bundle

H, W = 48, 64


def make_frame(seed: int = 0, **overrides: Any) -> Frame:
    rng = np.random.default_rng(seed)
    depth = rng.uniform(0.3, 1.5, size=(H, W)).astype(np.float32)
    depth[rng.random((H, W)) < 0.1] = 0.0  # holes
    masks = np.zeros((H, W), np.int32)
    masks[10:20, 5:15] = 1
    masks[30:40, 40:60] = 7
    angle = 0.3
    T = np.eye(4)
    T[:3, :3] = [[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]
    T[:3, 3] = [1.25, 0.1 / 3, 0.55]
    fields: dict[str, Any] = {
        "rgb": rng.integers(0, 256, size=(H, W, 3), dtype=np.uint8),
        "depth": depth,
        "K": np.array([[60.6 / 7, 0.0, 32.1], [0.0, 60.7, 24.3], [0.0, 0.0, 1.0]]),
        "T_base_cam": T,
        "masks": masks,
        "mask_names": {1: "red cube", 7: "rope"},
        "metadata": {"instruction": "push the cube", "timestamp": 1.5, "camera": {"serial": "123"}},
    }
    fields.update(overrides)
    return Frame(**fields)


def test_round_trip_is_bit_exact(tmp_path: Path) -> None:
    frame = make_frame()
    out = write_frame_bundle(frame, tmp_path / "bundle")
    assert sorted(p.name for p in out.iterdir()) == [
        "depth.npy",
        "frame.json",
        "masks.json",
        "masks.npy",
        "rgb.png",
    ]
    back = read_frame_bundle(out)
    assert back.rgb.dtype == np.uint8 and np.array_equal(back.rgb, frame.rgb)
    assert back.depth.dtype == np.float32 and back.depth.tobytes() == frame.depth.tobytes()
    assert back.K.dtype == np.float64 and back.K.tobytes() == frame.K.tobytes()
    assert back.T_base_cam is not None and frame.T_base_cam is not None
    assert back.T_base_cam.dtype == np.float64 and back.T_base_cam.tobytes() == frame.T_base_cam.tobytes()
    assert back.masks is not None and frame.masks is not None and back.masks.dtype == np.int32
    assert np.array_equal(back.masks, frame.masks)
    assert back.mask_names == {1: "red cube", 7: "rope"}
    assert back.metadata == frame.metadata
    assert (back.depth == 0).sum() == (frame.depth == 0).sum() > 0  # holes kept as 0
    meta = json.loads((out / "frame.json").read_text())
    assert (meta["width"], meta["height"]) == (W, H)


def test_round_trip_without_optional_parts_and_overwrite(tmp_path: Path) -> None:
    write_frame_bundle(make_frame(), tmp_path)
    plain = make_frame(seed=1, T_base_cam=None, masks=None, mask_names={}, metadata={})
    write_frame_bundle(plain, tmp_path)  # stale masks from the first bundle must go
    back = read_frame_bundle(tmp_path)
    assert back.T_base_cam is None and back.masks is None and back.mask_names == {} and back.metadata == {}
    assert back.depth.tobytes() == plain.depth.tobytes()


def test_frame_normalises_types() -> None:
    ref = make_frame()
    assert ref.masks is not None
    frame = make_frame(depth=ref.depth.astype(np.float64), K=ref.K.tolist(), masks=ref.masks.astype(np.int64))
    assert frame.depth.dtype == np.float32 and frame.K.dtype == np.float64 and frame.masks is not None
    assert frame.masks.dtype == np.int32 and (frame.height, frame.width) == (H, W)


def test_reads_uint16_depth_png_with_scale(tmp_path: Path) -> None:
    frame = make_frame()
    write_frame_bundle(frame, tmp_path)
    raw = np.round(frame.depth * 1000).astype(np.uint16)
    (tmp_path / "depth.npy").unlink()
    Image.fromarray(raw).save(tmp_path / "depth.png")
    meta = json.loads((tmp_path / "frame.json").read_text())
    meta["depth_scale"] = 0.001
    (tmp_path / "frame.json").write_text(json.dumps(meta))
    back = read_frame_bundle(tmp_path)
    assert back.depth.dtype == np.float32
    np.testing.assert_array_equal(back.depth, (raw.astype(np.float64) * 0.001).astype(np.float32))
    assert "depth_scale" not in back.metadata


# --- errors in bundles: each names the file and the field ------------------------------------------------


def _edit_json(name: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        data = json.loads((root / name).read_text())
        edit(data)
        (root / name).write_text(json.dumps(data))

    return apply


def _save_depth(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        np.save(root / "depth.npy", fn(np.load(root / "depth.npy")))

    return apply


def _set(d: dict, key: str, value: object) -> None:
    d[key] = value


def _depth_png_without_scale(root: Path) -> None:
    (root / "depth.npy").unlink()
    Image.fromarray(np.full((H, W), 800, np.uint16)).save(root / "depth.png")


def _both_depths(root: Path) -> None:
    Image.fromarray(np.full((H, W), 800, np.uint16)).save(root / "depth.png")


def _nan(d: np.ndarray) -> np.ndarray:
    d[3, 4] = np.nan
    return d


def _inf(d: np.ndarray) -> np.ndarray:
    d[3, 4] = np.inf
    return d


def _negative(d: np.ndarray) -> np.ndarray:
    d[3, 4] = -0.2
    return d


BUNDLE_ERRORS = {
    "missing_rgb": (lambda r: (r / "rgb.png").unlink(), r"rgb\.png: missing file"),
    "missing_json": (lambda r: (r / "frame.json").unlink(), r"frame\.json: missing file"),
    "missing_depth": (lambda r: (r / "depth.npy").unlink(), r"missing depth: expected depth\.npy"),
    "bad_json": (lambda r: (r / "frame.json").write_text("{K: oops"), r"frame\.json: cannot parse JSON"),
    "depth_shape": (
        _save_depth(lambda d: d[:-1]),
        r"depth\.npy: depth shape \(47, 64\) does not match .*rgb\.png",
    ),
    "masks_shape": (
        lambda r: np.save(r / "masks.npy", np.zeros((H, W + 1), np.int32)),
        r"masks\.npy: masks shape \(48, 65\) does not match .*rgb\.png",
    ),
    "rgb_size_vs_json": (
        _edit_json("frame.json", lambda m: _set(m, "width", 640)),
        r"frame\.json: width is 640 but .*rgb\.png is 64x48",
    ),
    "depth_all_zero": (_save_depth(np.zeros_like), r"depth\.npy: depth is all zero"),
    "depth_nan": (_save_depth(_nan), r"depth\.npy: depth contains 1 NaN/inf"),
    "depth_inf": (_save_depth(_inf), r"depth\.npy: depth contains 1 NaN/inf"),
    "depth_negative": (_save_depth(_negative), r"depth\.npy: depth has negative values"),
    "depth_millimetres": (
        _save_depth(lambda d: d * 1000),
        r"depth\.npy: median valid depth is .* implausible in metres.*depth_scale",
    ),
    "depth_integer": (
        _save_depth(lambda d: (d * 1000).astype(np.uint16)),
        r"depth\.npy: depth must be floating point metres",
    ),
    "depth_png_no_scale": (_depth_png_without_scale, r"frame\.json: depth_scale .* is required"),
    "both_depths": (_both_depths, r"both depth\.npy and depth\.png"),
    "missing_K": (_edit_json("frame.json", lambda m: m.pop("K")), r"frame\.json: missing field K"),
    "K_not_3x3": (
        _edit_json("frame.json", lambda m: _set(m, "K", [[1, 0], [0, 1]])),
        r"frame\.json field K: K must be 3x3",
    ),
    "K_not_pinhole": (
        _edit_json("frame.json", lambda m: _set(m, "K", [[60, 0, 32], [0, 60, 24], [0.1, 0, 1]])),
        r"frame\.json field K: K must be a pinhole matrix",
    ),
    "principal_point_outside": (
        _edit_json("frame.json", lambda m: _set(m, "K", [[60, 0, 64], [0, 60, 24], [0, 0, 1]])),
        r"frame\.json field K: K principal point \(64\.0, 24\.0\) px lies outside the 64x48 image",
    ),
    "T_not_4x4": (
        _edit_json("frame.json", lambda m: _set(m, "T_base_cam", np.eye(3).tolist())),
        r"field T_base_cam: T_base_cam must be a 4x4 matrix",
    ),
    "T_not_rigid": (
        _edit_json("frame.json", lambda m: _set(m, "T_base_cam", np.diag([1, 2, 1, 1]).tolist())),
        r"frame\.json field T_base_cam: T_base_cam is not a rigid transform",
    ),
    "T_reflection": (
        _edit_json("frame.json", lambda m: _set(m, "T_base_cam", np.diag([1, 1, -1, 1]).tolist())),
        r"T_base_cam is not a rigid transform",
    ),
    "mask_names_bad_id": (
        _edit_json("masks.json", lambda m: _set(m, "zero", "x")),
        r"masks\.json: mask id 'zero' is not an integer",
    ),
    "mask_names_zero_id": (
        _edit_json("masks.json", lambda m: _set(m, "0", "table")),
        r"masks\.json: mask id 0 must be positive",
    ),
    "negative_mask": (
        lambda r: np.save(r / "masks.npy", -np.ones((H, W), np.int32)),
        r"masks\.npy: mask ids must be in",
    ),
    "names_without_masks": (lambda r: (r / "masks.npy").unlink(), r"masks\.json: found without masks\.npy"),
    "rgb_16bit": (
        lambda r: Image.fromarray(np.zeros((H, W), np.uint16)).save(r / "rgb.png"),
        r"rgb\.png: rgb must be an 8-bit colour image",
    ),
    "rgb_not_png": (lambda r: (r / "rgb.png").write_bytes(b"not an image"), r"rgb\.png: cannot read image"),
}


@pytest.mark.parametrize("case", sorted(BUNDLE_ERRORS))
def test_bundle_errors(tmp_path: Path, case: str) -> None:
    corrupt, message = BUNDLE_ERRORS[case]
    write_frame_bundle(make_frame(), tmp_path)
    corrupt(tmp_path)
    with pytest.raises(FrameError, match=message):
        read_frame_bundle(tmp_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FrameError, match="does not exist"):
        read_frame_bundle(tmp_path / "nope")


def test_frame_error_is_value_error() -> None:
    assert issubclass(FrameError, ValueError)


# --- errors for in-memory frames name the field -----------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rgb": np.zeros((H, W), np.uint8)}, r"Frame\.rgb: rgb must have shape \(H, W, 3\)"),
        ({"rgb": np.zeros((H, W, 3), np.float32)}, r"Frame\.rgb: rgb must be uint8"),
        (
            {"depth": np.ones((H, W + 2), np.float32)},
            r"Frame\.depth: depth shape .* does not match Frame\.rgb",
        ),
        ({"depth": np.zeros((H, W), np.float32)}, r"Frame\.depth: depth is all zero"),
        ({"depth": np.full((H, W), np.nan, np.float32)}, r"Frame\.depth: depth contains"),
        ({"depth": np.full((H, W), 850.0, np.float32)}, r"Frame\.depth: median valid depth is 850"),
        ({"K": np.eye(4)}, r"Frame\.K: K must be 3x3"),
        ({"K": np.diag([-1.0, 1.0, 1.0])}, r"Frame\.K: K focal lengths must be positive"),
        ({"T_base_cam": np.ones((4, 4))}, r"Frame\.T_base_cam: T_base_cam last row"),
        ({"masks": np.zeros((H - 1, W), np.int32)}, r"Frame\.masks: masks shape"),
        ({"masks": np.zeros((H, W), np.float32)}, r"Frame\.masks: masks must hold integer object ids"),
        ({"mask_names": {1: 5}}, r"Frame\.mask_names: name of mask id 1 must be a string"),
    ],
)
def test_frame_errors(overrides: dict, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        make_frame(**overrides)


def test_metadata_cannot_shadow_reserved_keys(tmp_path: Path) -> None:
    with pytest.raises(FrameError, match="reserved"):
        write_frame_bundle(make_frame(metadata={"K": 1}), tmp_path)
    with pytest.raises(FrameError, match="not JSON-serialisable"):
        write_frame_bundle(make_frame(metadata={"x": object()}), tmp_path / "b")
