"""A corpus of bad frames: each kind gets a one-line error from ``simpact real2sim`` (exit status 2) that
names the file or field and the problem, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from simpact.cli import main
from simpact.core.frame import Frame, write_frame_bundle

H, W = 96, 128
K = [[100.0, 0.0, 63.5], [0.0, 100.0, 47.5], [0.0, 0.0, 1.0]]


def table_depth(tilt: float = 0.6, distance: float = 0.8) -> np.ndarray:
    """Depth (m) of a camera looking down at a flat table at ``distance`` m, pitched by ``tilt`` rad."""
    v, u = np.mgrid[0:H, 0:W].astype(float)
    ray = np.stack([(u - 63.5) / 100.0, (v - 47.5) / 100.0, np.ones_like(u)], axis=-1)
    normal = np.array([0.0, -np.cos(tilt), -np.sin(tilt)])  # towards the camera
    return (distance / -(ray @ normal)).astype(np.float32)


def good_bundle(root: Path, depth: np.ndarray | None = None) -> Path:
    rgb = np.full((H, W, 3), 120, np.uint8)
    frame = Frame(rgb=rgb, depth=table_depth() if depth is None else depth, K=np.array(K))
    return write_frame_bundle(frame, root)


def edit_json(path: Path, **fields: object) -> None:
    raw = json.loads(path.read_text())
    raw.update(fields)
    path.write_text(json.dumps(raw))


def _nan(d: Path) -> None:
    a = np.load(d / "depth.npy")
    a[3, 4] = np.nan
    np.save(d / "depth.npy", a)


def _mm(d: Path) -> None:
    np.save(d / "depth.npy", np.load(d / "depth.npy") * 1000)


def _negative(d: Path) -> None:
    a = np.load(d / "depth.npy")
    a[0, 0] = -0.1
    np.save(d / "depth.npy", a)


def _zero(d: Path) -> None:
    np.save(d / "depth.npy", np.zeros((H, W), np.float32))


def _shape(d: Path) -> None:
    np.save(d / "depth.npy", np.ones((H // 2, W), np.float32))


def _int_depth(d: Path) -> None:
    np.save(d / "depth.npy", np.ones((H, W), np.uint16))


def _both_depths(d: Path) -> None:
    Image.fromarray(np.ones((H, W), np.uint16)).save(d / "depth.png")


def _png_no_scale(d: Path) -> None:
    (d / "depth.npy").unlink()
    Image.fromarray(np.full((H, W), 800, np.uint16)).save(d / "depth.png")


def _corrupt_rgb(d: Path) -> None:
    (d / "rgb.png").write_bytes(b"not a png")


def _no_meta(d: Path) -> None:
    (d / "frame.json").unlink()


def _no_K(d: Path) -> None:
    raw = json.loads((d / "frame.json").read_text())
    del raw["K"]
    (d / "frame.json").write_text(json.dumps(raw))


def _focal(d: Path) -> None:
    edit_json(d / "frame.json", K=[[-100.0, 0.0, 63.5], [0.0, 100.0, 47.5], [0.0, 0.0, 1.0]])


def _principal(d: Path) -> None:
    edit_json(d / "frame.json", K=[[100.0, 0.0, 500.0], [0.0, 100.0, 47.5], [0.0, 0.0, 1.0]])


def _not_rigid(d: Path) -> None:
    T = np.eye(4)
    T[:3, :3] *= 2.0
    edit_json(d / "frame.json", T_base_cam=T.tolist())


def _size_mismatch(d: Path) -> None:
    edit_json(d / "frame.json", width=W + 1)


def _masks_shape(d: Path) -> None:
    np.save(d / "masks.npy", np.zeros((H, W + 3), np.int32))


def _bad_json(d: Path) -> None:
    (d / "frame.json").write_text("{K: ")


#: kind -> (how to spoil a good bundle, a phrase the error must contain)
CORPUS: dict[str, tuple[Callable[[Path], None], str]] = {
    "NaN depth": (_nan, "NaN/inf"),
    "depth in millimetres": (_mm, "millimetres"),
    "negative depth": (_negative, "negative"),
    "depth all zero": (_zero, "all zero"),
    "depth shape mismatch": (_shape, "does not match"),
    "integer depth.npy": (_int_depth, "floating point metres"),
    "two depth files": (_both_depths, "keep one"),
    "depth.png without scale": (_png_no_scale, "depth_scale"),
    "corrupt rgb": (_corrupt_rgb, "cannot read image"),
    "no frame.json": (_no_meta, "frame.json: missing file"),
    "malformed frame.json": (_bad_json, "cannot parse JSON"),
    "no intrinsics": (_no_K, "missing field K"),
    "negative focal length": (_focal, "focal lengths must be positive"),
    "principal point off the image": (_principal, "outside"),
    "camera pose not rigid": (_not_rigid, "T_base_cam"),
    "width disagrees with rgb": (_size_mismatch, "width"),
    "masks of another size": (_masks_shape, "masks shape"),
}


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["real2sim", *args])
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize("kind", list(CORPUS))
def test_bad_bundle_gives_its_clear_error(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spoil, phrase = CORPUS[kind]
    bundle = good_bundle(tmp_path / "frame")
    spoil(bundle)
    code, err = run([str(bundle), "--out", str(tmp_path / "out")], capsys)
    assert code == 2, err
    assert err.startswith("simpact real2sim: error: ") and len(err.splitlines()) == 1
    assert phrase in err, err
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_paths_that_are_no_frame(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run([str(tmp_path / "missing"), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "no such file or directory" in err
    (tmp_path / "notes.txt").write_text("hello")
    code, err = run([str(tmp_path / "notes.txt"), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "unknown frame format" in err


def test_a_uois_frame_without_its_camera_file_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = {"rgb": np.full((H, W, 3), 120, np.uint8), "depth": (table_depth() * 1000).astype(np.uint16)}
    np.save(tmp_path / "image_0001.npy", np.array(frame, dtype=object), allow_pickle=True)
    code, err = run([str(tmp_path / "image_0001.npy"), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "camera_params.json" in err, err
    (tmp_path / "camera_params.json").write_text(
        json.dumps({"fx": 100.0, "fy": 100.0, "x_offset": 63.5, "y_offset": 47.5})
    )
    code, err = run([str(tmp_path / "image_0001.npy"), "--out", str(tmp_path / "out")], capsys)
    assert "camera_params.json" not in err, err  # read as UOIS now: what follows is about its (empty) table


def test_bad_labels_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = good_bundle(tmp_path / "frame")
    out = str(tmp_path / "out")
    assert run([str(bundle), "--labels", "cup,,bowl", "--out", out], capsys)[1].endswith(
        "an empty label between commas"
    )
    assert "--spacing" in run([str(bundle), "--spacing", "0", "--out", out], capsys)[1]
    assert "unknown task" in run([str(bundle), "--task", "juggling", "--out", out], capsys)[1]
    code, err = run([str(bundle), "--vlm", "replay", "--out", out], capsys)
    assert code == 2 and "--replay FILE" in err


def test_a_vlm_without_its_key_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("google.genai", reason="the vlm extra (google-genai) is not installed")
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    bundle = good_bundle(tmp_path / "frame")
    code, err = run([str(bundle), "--vlm", "gemini", "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "GEMINI_API_KEY" in err


def test_a_table_with_nothing_on_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = good_bundle(tmp_path / "frame")
    code, err = run([str(bundle), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "no object found" in err, err


def test_a_frame_without_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    bundle = good_bundle(tmp_path / "frame", rng.uniform(0.3, 3.0, (H, W)).astype(np.float32))
    code, err = run([str(bundle), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "table" in err.lower(), err


def test_bad_mask_images_and_their_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = good_bundle(tmp_path / "frame")
    out = str(tmp_path / "out")
    wrong_size = tmp_path / "small.png"
    Image.fromarray(np.zeros((H // 2, W), np.uint8)).save(wrong_size)
    code, err = run([str(bundle), "--masks", str(wrong_size), "--out", out], capsys)
    assert code == 2 and "mask image is 128x48 px, the frame 128x96" in err, err
    empty = tmp_path / "empty.png"
    Image.fromarray(np.zeros((H, W), np.uint8)).save(empty)
    assert "marks no object" in run([str(bundle), "--masks", str(empty), "--out", out], capsys)[1]
    (tmp_path / "broken.png").write_bytes(b"not a png")
    assert (
        "not a readable mask image"
        in run([str(bundle), "--masks", str(tmp_path / "broken.png"), "--out", out], capsys)[1]
    )
    two = np.zeros((H, W), np.uint8)
    two[10:20, 10:20], two[40:50, 60:70] = 1, 2
    Image.fromarray(two).save(tmp_path / "two.png")
    code, err = run(
        [str(bundle), "--masks", str(tmp_path / "two.png"), "--labels", "cup", "--out", out], capsys
    )
    assert code == 2 and "--labels names 1 objects but --masks" in err and "holds 2" in err, err
    code, err = run(
        [str(bundle), "--masks", str(tmp_path / "two.png"), "--segmenter", "grounded_sam2", "--out", out],
        capsys,
    )
    assert code == 2 and "drop --segmenter grounded_sam2" in err, err
    assert not (tmp_path / "out").exists()
