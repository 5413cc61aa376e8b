"""Raw frame readers and the shared-data locator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from real2sim.datasets import (
    POSECNN_K,
    SHARED_DATA_ENV,
    SharedDataMissing,
    mask_image_objects,
    read_any_frame,
    shared_data_dir,
)
from simpact.bench.real_truth import REAL_FRAMES
from simpact.core.frame import Frame, FrameError, write_frame_bundle


def _data(rel: str) -> Path:
    try:
        return shared_data_dir(rel)
    except SharedDataMissing as err:
        pytest.skip(f"shared data absent: {err}")


def test_locator_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rgbd").mkdir()
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    assert shared_data_dir("rgbd") == tmp_path / "rgbd"
    with pytest.raises(SharedDataMissing, match=SHARED_DATA_ENV):
        shared_data_dir("nothing_here")


@pytest.mark.parametrize("rel", sorted(REAL_FRAMES))
def test_real_frames_read_in_metres(rel: str) -> None:
    frame = read_any_frame(_data(rel))
    assert frame.rgb.shape == (480, 640, 3) and frame.depth.dtype == np.float32
    assert frame.T_base_cam is None and frame.masks is None
    valid = frame.depth[frame.depth > 0]
    assert 0.2 < np.median(valid) < 2.0  # a table-top scene about a metre away
    if "posecnn" in rel:
        assert np.array_equal(frame.K, POSECNN_K)
    else:
        assert frame.K[0, 0] == pytest.approx(616.4, abs=1.0)


def test_bundle_directories_are_read_too(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    frame = Frame(
        rng.integers(0, 255, (8, 10, 3), dtype=np.uint8),
        rng.uniform(0.5, 1.0, (8, 10)).astype(np.float32),
        np.array([[10.0, 0, 5], [0, 10.0, 4], [0, 0, 1]]),
    )
    back = read_any_frame(write_frame_bundle(frame, tmp_path / "b"))
    assert np.array_equal(back.depth, frame.depth)


def test_unknown_formats_are_refused(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(FrameError, match="unknown frame format"):
        read_any_frame(tmp_path / "x.txt")
    with pytest.raises(FrameError, match="no such file"):
        read_any_frame(tmp_path / "missing.jpg")
    with pytest.raises(FrameError, match="missing file"):
        read_any_frame(tmp_path / "000009-color.png")


def test_graspnet_frames_ship_their_object_points() -> None:
    from real2sim.datasets import read_graspnet_object_points

    pts = read_graspnet_object_points(_data("rgbd/6dof_graspnet/green_bowl.npy"))
    assert pts.ndim == 2 and pts.shape[1] == 3 and len(pts) > 1000 and np.isfinite(pts).all()
    assert 0.3 < np.median(pts[:, 2]) < 1.5  # camera frame: about half a metre in front of the camera
    assert REAL_FRAMES["rgbd/6dof_graspnet/green_bowl.npy"] == {"green bowl": None}  # not the YCB bowl


def test_every_real_frame_under_rgbd_is_discovered_and_read(tmp_path: Path) -> None:
    from real2sim.datasets import discover_real_frames

    frames = discover_real_frames(_data("rgbd"))
    assert set(REAL_FRAMES) <= set(frames)  # the frames with reference sizes are among those found
    formats = {read_any_frame(_data(rel)).metadata["format"] for rel in frames}
    assert {"posecnn", "6dof_graspnet"} <= formats
    for rel in frames:
        if "cleargrasp" in rel or "uois" in rel:
            frame = read_any_frame(_data(rel))
            valid = frame.depth[frame.depth > 0]
            assert frame.depth.shape == frame.rgb.shape[:2] and 0.2 < np.median(valid) < 2.0, rel
            assert frame.K[0, 0] > 500 and frame.K[2, 2] == 1.0
    # A frame dropped into the folder is found without code changes; other files are not frames.
    (tmp_path / "rgbd" / "new").mkdir(parents=True)
    (tmp_path / "rgbd" / "new" / "000042-color.png").write_bytes(b"")
    (tmp_path / "rgbd" / "new" / "LICENSE").write_text("x")
    assert discover_real_frames(tmp_path / "rgbd") == ["rgbd/new/000042-color.png"]
    # So is a frame bundle (what ``simpact robot capture`` writes): its folder, once, not the files in it.
    frame = read_any_frame(_data("rgbd/posecnn/000001-color.png"))
    write_frame_bundle(frame, tmp_path / "rgbd" / "mine" / "desk")
    (tmp_path / "rgbd" / "mine" / "desk" / "extra.npy").write_bytes(b"")  # a GraspNet-like name inside it
    found = discover_real_frames(tmp_path / "rgbd")
    assert found == ["rgbd/mine/desk", "rgbd/new/000042-color.png"]
    assert read_any_frame(tmp_path / found[0]).rgb.shape == frame.rgb.shape


def test_cleargrasp_frames_ship_their_objects_masks() -> None:
    from real2sim.datasets import reference_masks

    masks = reference_masks(_data("rgbd/cleargrasp/000000080-opaque-rgb-img.jpg"))
    assert masks is not None and len(masks) == 4  # four bottles, apart in the image
    assert all(m.shape == (720, 1280) and m.sum() > 20000 for m in masks)
    assert not np.any(np.sum(masks, axis=0) > 1)  # disjoint
    assert reference_masks(_data("rgbd/posecnn/000001-color.png")) is None


def test_hand_counted_objects_are_ground_truth_the_segmenter_never_reads() -> None:
    from real2sim.datasets import discover_real_frames
    from simpact.bench.real_truth import EXPECTED_OBJECTS

    frames = set(discover_real_frames(_data("rgbd")))
    assert set(EXPECTED_OBJECTS) <= frames
    assert not set(EXPECTED_OBJECTS) & set(REAL_FRAMES)  # counted frames run unlabelled: regions = objects
    assert all(n > 0 for n in EXPECTED_OBJECTS.values())
    root = Path(__file__).resolve().parents[2] / "real2sim"
    marks = ("REAL_FRAMES", "EXPECTED_OBJECTS", "LABEL_POINTS", "OBJECT_POINTS", "real_truth")
    readers = [p.name for p in root.glob("*.py") if any(m in p.read_text() for m in marks)]
    assert readers == []  # the measured code cannot see them (nor import the bench: the layer contract)


def test_a_mask_image_is_a_label_image_or_a_binary_mask_of_parts() -> None:
    labels = np.zeros((8, 10), np.uint16)
    labels[1:3, 1:3], labels[5:7, 5:9] = 7, 3  # values, not places, give the order
    first, second = mask_image_objects(labels)
    assert first.sum() == 8 and first[5, 5] and second.sum() == 4 and second[1, 1]
    binary = (labels > 0).astype(np.uint8) * 255
    top, bottom = mask_image_objects(binary)
    assert top[1, 1] and bottom[5, 5]  # one value: its separate parts, in reading order
    (big,) = mask_image_objects(binary, min_pixels=5)  # the 4-pixel part dropped
    assert big[5, 5]
