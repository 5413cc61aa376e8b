"""The glass part of the real2sim bench: ClearGrasp's transparent frames reconstructed from their annotated
masks and compared with the painted twin frames' depth fits."""

from __future__ import annotations

from pathlib import Path

import pytest

from real2sim import datasets
from real2sim.pipeline import Real2SimConfig
from simpact.bench.glass import bench_glass_pair, glass_lines, glass_pairs

PAIR = ("rgbd/cleargrasp/000000153-transparent-rgb-img.jpg", "rgbd/cleargrasp/000000153-opaque-rgb-img.jpg")


def test_a_glass_bottle_is_fitted_to_its_silhouette_and_lands_where_its_painted_twin_does(
    tmp_path: Path,
) -> None:
    try:
        frames = datasets.discover_real_frames(datasets.shared_data_dir("rgbd"))
    except datasets.SharedDataMissing as exc:
        pytest.skip(str(exc))
    assert PAIR in glass_pairs(frames)
    assert glass_pairs([PAIR[0]]) == []  # no twin, no pair
    config = Real2SimConfig(render=False, overlays=False, settle_s=0.0)
    record = bench_glass_pair(*PAIR, tmp_path, config)
    bottle = record["objects"]["object_0"]  # the lone lying bottle: 15 % of it has depth above the table
    assert bottle["source"] == "silhouette" and bottle["twin_source"] == "geometric"
    # Measured: 28.8 % (13.2 cm long against 16.3: its neck is left out), 1.7 cm; depth-fitted, 19.3 %, 1.5 cm
    # but a silhouette IoU of 0.92 against 0.94.
    assert bottle["extent_pct"] < 35 and bottle["centre_cm"] < 2.5
    assert bottle["iou"] > 0.9 and bottle["verdict"] == "check"
    assert any("object_0  silhouette" in line for line in glass_lines([record]))
