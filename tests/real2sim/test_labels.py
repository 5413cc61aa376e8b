"""Labels: --labels parsing, task objects, the VLM's answer (with a repair round) and cluster assignment."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from real2sim.labels import LabelError, object_name, parse_labels, resolve_labels, vlm_assigner, vlm_labels
from simpact.tasks import load_task
from tests.vlm_doubles import ScriptedVLM

RGB = np.full((32, 48, 3), 90, np.uint8)


def test_user_labels_are_parsed_and_checked() -> None:
    assert parse_labels(" green bowl,white  bowl ; cup") == ["green bowl", "white bowl", "cup"]
    assert object_name("Green  Bowl!") == "green_bowl"
    for bad, why in [
        ("", "comma-separated"),
        ("a,,b", "empty label"),
        ("bowl, Bowl", "same object"),
        ("!!!", "no letters"),
    ]:
        with pytest.raises(LabelError, match=why):
            parse_labels(bad)
    got = resolve_labels("green bowl, cup", task=load_task("bowl_stacking"))
    assert got.source == "user" and got.name_of("green bowl") == "green_bowl" and got.name_of("cup") == "cup"


def test_task_labels_leave_markers_out_and_keep_the_task_names() -> None:
    got = resolve_labels(task=load_task("avoid_obstacle"))
    assert got.source == "task" and got.labels == ["can", "mug"]
    got = resolve_labels(task=load_task("bowl_stacking"))
    assert got.labels == ["green bowl", "white bowl"] and got.name_of("white bowl") == "white_bowl"


def test_vlm_labels_from_the_instruction_with_a_repair_round() -> None:
    answer = {
        "objects": [{"label": "green bowl", "role": "manipulated"}, {"label": "white bowl", "role": "target"}]
    }
    vlm = ScriptedVLM("Sure! The bowls.", answer)
    got = resolve_labels(instruction="Put the green bowl into the white bowl.", vlm=vlm, rgb=RGB)
    assert got.source == "vlm" and got.labels == ["green bowl", "white bowl"]
    assert got.roles == {"green bowl": "manipulated", "white bowl": "target"}
    assert [r for r, _ in vlm.requests] == ["object_labels", "object_labels/repair"]
    assert "Put the green bowl" in vlm.requests[0][1][0] and isinstance(vlm.requests[0][1][1], np.ndarray)
    assert len(got.exchange) == 2
    with pytest.raises(LabelError, match="after a repair round"):
        vlm_labels(ScriptedVLM("no", {"objects": []}), RGB, "push it")
    with pytest.raises(LabelError, match="instruction"):
        vlm_labels(ScriptedVLM(), RGB, " ")


def test_without_vlm_or_labels_objects_are_found_geometrically() -> None:
    got = resolve_labels(instruction="push the carton")
    assert got.labels == [] and got.source == "none" and "--vlm" in got.warnings[0]


def test_vlm_assigns_clusters_to_labels() -> None:
    masks = [np.zeros((32, 48), bool) for _ in range(3)]
    for i, m in enumerate(masks):
        m[5:15, 5 + 14 * i : 15 + 14 * i] = True
    clusters = [{"mask": m, "extent_m": np.array([0.1, 0.1, 0.05]), "mean_rgb": [10, 200, 10]} for m in masks]
    answer = {"assignments": [{"label": "green bowl", "cluster": 2}, {"label": "white bowl", "cluster": -1}]}
    vlm = ScriptedVLM(answer)
    log: list[dict[str, Any]] = []
    assert vlm_assigner(vlm, log)(RGB, clusters, ["green bowl", "white bowl"]) == {2: "green bowl"}
    prompt = vlm.requests[0][1][0]
    assert '"index": 2' in prompt and "green bowl" in prompt and "mask" not in prompt
    image = vlm.requests[0][1][1]
    assert image.shape == RGB.shape and not np.array_equal(image, RGB)  # clusters drawn on it
    bad = {"assignments": [{"label": "green bowl", "cluster": 7}]}
    with pytest.raises(LabelError, match="cluster 7"):
        vlm_assigner(ScriptedVLM(bad, bad))(RGB, clusters, ["green bowl"])
