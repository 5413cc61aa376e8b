"""The fit score: a scene rendered from the photo's camera against the depth it came from."""

from __future__ import annotations

import types

import numpy as np
import trimesh

from real2sim.fitscore import fit_scores, fit_warnings, render_depth, verdict

K = np.array([[500.0, 0.0, 80.0], [0.0, 500.0, 60.0], [0.0, 0.0, 1.0]])
H, W = 120, 160
T_WORLD_CAM = np.eye(4)  # world = camera frame here


def _box(
    centre: tuple[float, float, float], size: tuple[float, float, float]
) -> tuple[np.ndarray, np.ndarray]:
    m = trimesh.creation.box(size)
    m.apply_translation(centre)
    return np.asarray(m.vertices), np.asarray(m.faces)


def test_render_depth_sees_the_front_face_at_its_depth() -> None:
    depth, index, normals = render_depth([_box((0, 0, 1.0), (0.1, 0.1, 0.1))], T_WORLD_CAM, K, H, W)
    assert index[60, 80] == 0 and index[0, 0] == -1
    assert abs(depth[60, 80] - 0.95) < 1e-6  # front face: 1.0 - 0.05 m
    assert abs(abs(normals[60, 80, 2]) - 1.0) < 1e-6
    # 0.1 m at 0.95 m is 500 * 0.1 / 0.95 ≈ 52.6 px wide
    assert 50 <= int(index[60].__eq__(0).sum()) <= 55


def test_a_scene_that_explains_its_depth_scores_good_and_a_shifted_one_poor() -> None:
    truth = [_box((0, 0, 1.0), (0.1, 0.1, 0.1))]
    depth, index, _ = render_depth(truth, T_WORLD_CAM, K, H, W)
    mask = {"box": index == 0}
    good, _ = fit_scores(["box"], truth, mask, depth, T_WORLD_CAM, K)
    s = good["objects"]["box"]
    assert s["iou"] == 1.0 and s["depth_residual_m"] == 0.0 and s["verdict"] == "good"
    assert fit_warnings(good) == []
    # 2 cm too far and 2 cm to the side: the silhouettes part and the depth is off.
    moved = [_box((0.02, 0, 1.02), (0.1, 0.1, 0.1))]
    poor, _ = fit_scores(["box"], moved, mask, depth, T_WORLD_CAM, K)
    p = poor["objects"]["box"]
    assert p["iou"] < 0.85 and abs(p["depth_residual_m"] - 0.02) < 1e-3 and p["verdict"] == "poor"
    assert "poor" in fit_warnings(poor)[0] and "'box'" in fit_warnings(poor)[0]


def test_an_unmodelled_occluder_is_left_out_of_both_silhouettes() -> None:
    truth = [_box((0, 0, 1.0), (0.1, 0.1, 0.1))]
    depth, index, _ = render_depth(truth, T_WORLD_CAM, K, H, W)
    mask = index == 0
    # Something not in the scene hides the box's left half, 0.3 m in front of it.
    hidden = mask & (np.arange(W)[None, :] < 80)
    depth = np.where(hidden, 0.6, depth)
    scores, _ = fit_scores(["box"], truth, {"box": mask & ~hidden}, depth, T_WORLD_CAM, K)
    assert scores["objects"]["box"]["iou"] == 1.0


def test_a_neighbour_in_front_hides_what_its_own_render_falls_short_of() -> None:
    """A box behind another, the front one reconstructed too narrow: where the back box's render shows
    through the front one's mask, the photo sees the front box, not the back one's edge: the back box's
    score does not count it as spill (the front box's coverage does)."""
    truth = [_box((0, 0, 1.0), (0.1, 0.1, 0.1)), _box((0.03, 0, 0.7), (0.06, 0.1, 0.02))]
    depth, index, _ = render_depth(truth, T_WORLD_CAM, K, H, W)
    masks = {"back": index == 0, "front": index == 1}
    narrow = [truth[0], _box((0.04, 0, 0.7), (0.04, 0.1, 0.02))]  # 2 cm too narrow on the left
    scores, _ = fit_scores(["back", "front"], narrow, masks, depth, T_WORLD_CAM, K)
    back, front = scores["objects"]["back"], scores["objects"]["front"]
    assert back["iou"] == 1.0 and back["verdict"] == "good"
    assert front["coverage"] < 0.75 and front["spill"] == 0.0


def test_the_spill_counts_the_render_where_no_depth_was_measured_apart() -> None:
    """A box fitted 2 cm too wide on the left, where the camera measured nothing beside it (a stereo
    camera's blind band): all of its spill is on unmeasured pixels; on the right, on measured ones."""
    truth = [_box((0, 0, 1.0), (0.1, 0.1, 0.1))]
    depth, index, _ = render_depth(truth, T_WORLD_CAM, K, H, W)
    depth = np.where(index == 0, depth, 1.2)
    mask = {"box": index == 0}
    band = np.zeros((H, W), bool)
    band[:, :54] = True  # no depth left of the box (its left edge is at column 53.7)
    wide_left = [_box((-0.01, 0, 1.0), (0.12, 0.1, 0.1))]
    wide_right = [_box((0.01, 0, 1.0), (0.12, 0.1, 0.1))]
    for fitted, unmeasured in ((wide_left, True), (wide_right, False)):
        scores, _ = fit_scores(["box"], fitted, mask, np.where(band, 0.0, depth), T_WORLD_CAM, K)
        s = scores["objects"]["box"]
        assert s["spill_px"] > 400
        assert s["spill_unmeasured_px"] == (s["spill_px"] if unmeasured else 0), s


def test_the_table_beside_each_object_says_how_noisy_its_depth_is() -> None:
    """Two boxes before a plane 1.2 m away (the table, seen head-on here), the depth noisy (4 mm) on the
    left half only: the left box's ring of table carries that noise, the right one's none."""
    boxes = [_box((-0.1, 0, 1.0), (0.08, 0.08, 0.08)), _box((0.1, 0, 1.0), (0.08, 0.08, 0.08))]
    depth, index, _ = render_depth(boxes, T_WORLD_CAM, K, H, W)
    depth = np.where(index >= 0, depth, 1.2)
    left = np.arange(W)[None, :] < W // 2
    depth = depth + np.where(left, np.random.default_rng(1).normal(0, 0.004, depth.shape), 0.0)
    table = types.SimpleNamespace(inliers=index < 0, normal_cam=np.array([0.0, 0.0, -1.0]), offset_m=1.2)
    masks = {"a": index == 0, "b": index == 1}
    scores, _ = fit_scores(["a", "b"], boxes, masks, depth, T_WORLD_CAM, K, table)
    noisy, quiet = (scores["objects"][n]["table_nearby_residual_m"] for n in ("a", "b"))
    assert 0.002 < noisy < 0.004 and quiet < 1e-6  # median |N(0, 4 mm)| = 2.7 mm
    assert scores["table"]["px"] == int((index < 0).sum())  # the whole table's residual: every table pixel


def test_scores_are_bit_identical_across_runs() -> None:
    truth = [_box((0.01, -0.02, 0.9), (0.08, 0.12, 0.05))]
    depth, index, _ = render_depth(truth, T_WORLD_CAM, K, H, W)
    noisy = depth + np.random.default_rng(0).normal(0, 0.002, depth.shape) * (depth > 0)
    a, ra = fit_scores(["b"], truth, {"b": index == 0}, noisy, T_WORLD_CAM, K)
    b, rb = fit_scores(["b"], truth, {"b": index == 0}, noisy, T_WORLD_CAM, K)
    assert a == b and np.array_equal(ra["depth"], rb["depth"])
    assert verdict(0.9, 0.004) == "good" and verdict(0.7, 0.01) == "check" and verdict(0.9, None) == "poor"


def test_a_label_s_dark_outline_stays_on_its_letters() -> None:
    """The overlays' labels: the dark outline around the text ends where the text does (a thick dark copy,
    which OpenCV spaces wider, had drifted 2 px a letter off a long title)."""
    from real2sim.overlays import _label

    img = np.full((40, 420, 3), 128, np.uint8)
    _label(img, "render from the photo camera, white: masks", (8, 20), (255, 255, 255))
    dark_cols = np.nonzero((img.sum(axis=2) < 60).any(axis=0))[0]
    text_cols = np.nonzero((img.min(axis=2) > 200).any(axis=0))[0]
    assert abs(dark_cols[-1] - text_cols[-1]) <= 2 and abs(dark_cols[0] - text_cols[0]) <= 2


def test_an_object_running_off_the_photo_is_check_at_best_and_says_so() -> None:
    """A box whose render matches its mask exactly is ``good`` inside the photo and ``check`` once it runs
    off its left edge (its part outside the photo is not checked); the edge pixels are counted."""
    from real2sim.task_scene import fit_warnings_for

    for x, expected in ((0.0, "good"), (-0.14, "check")):
        scene = [_box((x, 0, 1.0), (0.1, 0.1, 0.1))]
        depth, index, _ = render_depth(scene, T_WORLD_CAM, K, H, W)
        scores, _ = fit_scores(["box"], scene, {"box": index == 0}, depth, T_WORLD_CAM, K)
        s = scores["objects"]["box"]
        assert s["iou"] == 1.0 and s["verdict"] == expected
        assert s.get("image_edge_px", 0) == int((index == 0)[:, 0].sum()) == (0 if x == 0.0 else 53)
    (warning,) = fit_warnings_for(scores, ["box"])
    assert "runs off the photo's edge" in warning["message"]
