"""scripts/gqcnn_bundles.py: gqcnn's PrimeSense examples as frame bundles the bench finds and scores."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
from PIL import Image

from real2sim.datasets import discover_real_frames, read_any_frame
from simpact.bench.real_truth import object_pixels

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gqcnn_bundles.py"
INTR = '{"_cy": 239.5, "_cx": 319.5, "_fy": 525.0, "_height": 480, "_fx": 525.0, "_width": 640, "_skew": 0.0}'
TF = """primesense_overhead
world
0.214280 0.004186 0.872913
0.021188 -0.975273 0.219984
-0.999765 -0.021698 0.000098
0.004678 -0.219934 -0.975504
"""  # the calibration as gqcnn ships it (data/calib/primesense)


def _fake_checkout(root: Path) -> None:
    (root / "data" / "calib" / "primesense").mkdir(parents=True)
    (root / "data" / "calib" / "primesense" / "primesense.intr").write_text(INTR)
    (root / "data" / "calib" / "primesense" / "primesense.tf").write_text(TF)
    for kind in ("clutter", "single_object"):
        folder = root / "data" / "examples" / kind / "primesense"
        folder.mkdir(parents=True)
        Image.fromarray(np.full((480, 640, 3), 90, np.uint8)).save(folder / "color_0.png")
        np.save(folder / "depth_0.npy", np.full((480, 640, 1), 0.7, np.float32))


def test_the_examples_become_bundles_with_the_camera_pose_and_the_hand_marks(tmp_path: Path) -> None:
    _fake_checkout(tmp_path / "gqcnn")
    script = runpy.run_path(str(SCRIPT))
    written = script["write_bundles"](tmp_path / "gqcnn", tmp_path / "data")
    assert [p.name for p in written] == ["gqcnn_clutter_0", "gqcnn_single_object_0"]
    assert discover_real_frames(tmp_path / "data" / "rgbd") == [
        "rgbd/gqcnn_clutter_0",
        "rgbd/gqcnn_single_object_0",
    ]
    pile = read_any_frame(written[0])
    assert pile.K[0, 0] == 525.0 and pile.T_base_cam is not None
    R = pile.T_base_cam[:3, :3]
    assert np.allclose(R @ R.T, np.eye(3), atol=1e-9) and np.linalg.det(R) > 0
    assert np.allclose(pile.T_base_cam[:3, 3], [0.21428, 0.004186, 0.872913])
    assert R[2, 2] < -0.97  # the camera looks down at the board, 13 degrees off vertical
    marks = object_pixels("rgbd/gqcnn_clutter_0", pile.metadata)
    assert marks is not None and marks[0] == ((290, 160),) and len(marks) == 5
    single = read_any_frame(written[1])
    assert single.metadata["expected_objects"] == 1 and "object_points" not in single.metadata
