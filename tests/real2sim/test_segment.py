"""Segmentation back-ends: given masks, the geometric clusters and their label assignment, clear errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from real2sim.frame import Frame
from real2sim.segment import SegmentationError, find_clusters, grounded_sam2_settings, segment
from real2sim.table import fit_table

from ._render import render_task, without_calibration


@pytest.fixture(scope="module")
def push() -> tuple[Frame, Any]:
    return render_task("non_toppling_push")


def test_masks_back_end_matches_labels_by_name(push: tuple[Frame, Any]) -> None:
    frame, _ = push
    table = fit_table(frame)
    segs = segment(frame, table, ["Blue box", "carton"], "masks")
    assert [s.label for s in segs] == ["Blue box", "carton"]
    assert frame.masks is not None and np.array_equal(segs[1].mask, frame.masks == 1)
    with pytest.raises(SegmentationError, match="names no mask"):
        segment(frame, table, ["teapot"], "masks")


@pytest.mark.parametrize("calibrated", [True, False])
def test_geometric_clusters_are_the_objects_and_not_the_robot(
    push: tuple[Frame, Any], calibrated: bool
) -> None:
    frame, _ = push
    if not calibrated:
        frame = without_calibration(frame)
    clusters = find_clusters(frame, fit_table(frame))
    assert frame.masks is not None and len(clusters) == 2
    for cluster, obj_id in zip(clusters, (1, 2)):  # carton (larger), then the blue box
        truth = frame.masks == obj_id
        iou = (cluster.mask & truth).sum() / (cluster.mask | truth).sum()
        assert iou > 0.9


def test_labels_are_assigned_by_colour_then_size_or_by_a_callable(push: tuple[Frame, Any]) -> None:
    frame, _ = push
    table = fit_table(frame)
    segs = segment(frame, table, ["blue box", "carton"])
    assert frame.masks is not None
    assert (segs[0].mask & (frame.masks == 2)).sum() > 0.9 * segs[0].mask.sum()
    assert (segs[1].mask & (frame.masks == 1)).sum() > 0.9 * segs[1].mask.sum()
    calls = []

    def assign(rgb: np.ndarray, clusters: Any, labels: Any) -> dict[int, str]:
        calls.append(len(clusters))
        return {1: "carton"}  # deliberately the smaller region

    segs = segment(frame, table, ["carton"], assign=assign)
    assert calls == [2] and (segs[0].mask & (frame.masks == 2)).any()
    with pytest.raises(SegmentationError, match="cluster indices"):
        segment(frame, table, ["carton"], assign=lambda *_: {5: "carton"})


def test_unknown_back_end_and_missing_settings_are_named(
    push: tuple[Frame, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    frame, _ = push
    table = fit_table(frame)
    with pytest.raises(SegmentationError, match="unknown segmenter"):
        segment(frame, table, ["carton"], "sam9")
    for env in ("SIMPACT_GROUNDING_DINO_CONFIG", "SIMPACT_GROUNDING_DINO_CHECKPOINT"):
        monkeypatch.delenv(env, raising=False)
    with pytest.raises(SegmentationError, match="SIMPACT_GROUNDING_DINO_CONFIG"):
        grounded_sam2_settings()
    with pytest.raises(SegmentationError, match="SIMPACT_GROUNDING_DINO_CONFIG"):
        segment(frame, table, ["carton"], "grounded_sam2")
