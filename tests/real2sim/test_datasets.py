"""Raw frame readers and the shared-data locator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from real2sim.datasets import (
    POSECNN_K,
    REAL_FRAMES,
    SHARED_DATA_ENV,
    SharedDataMissing,
    read_any_frame,
    shared_data_dir,
)
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
