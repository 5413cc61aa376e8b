"""Objects the depth camera does not see (glass): found from their masks, fitted to their silhouettes, the
table fixing their distance; opaque objects still fitted to their depth."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import trimesh

from real2sim import datasets
from real2sim.fitscore import NO_DEPTH_NOTE, fit_scores, render_depth
from real2sim.no_depth import fit_silhouette, lying_cylinder_depth
from real2sim.overlays import look_at
from real2sim.perception import perceive
from simpact.cli import main
from simpact.core.frame import Frame

K = np.array([[600.0, 0.0, 160.0], [0.0, 600.0, 120.0], [0.0, 0.0, 1.0]])
H, W = 240, 320
# A camera 0.6 m from the object, 0.45 m above the table, looking down at it (world: z up, table z = 0).
T_WORLD_CAM = look_at(np.array([-0.45, -0.2, 0.45]), np.array([0.0, 0.0, 0.05]))


def _table() -> trimesh.Trimesh:
    table = trimesh.creation.box((1.5, 1.5, 0.01))
    table.apply_translation((0, 0, -0.005))
    return table


def _render(*meshes: trimesh.Trimesh) -> tuple[np.ndarray, np.ndarray]:
    depth, index, _ = render_depth(
        [(np.asarray(m.vertices), np.asarray(m.faces)) for m in meshes], T_WORLD_CAM, K, H, W
    )
    return depth, index


def _frame(obj: trimesh.Trimesh, glass: bool) -> tuple[Frame, np.ndarray]:
    """The object on the table, its mask named ``glass bottle``; ``glass``: most of its pixels without depth,
    a third showing the table through it (a depth camera on glass)."""
    depth, index = _render(obj, _table())
    mask = index == 0
    if glass:
        behind, _ = _render(_table())
        through = mask & (np.random.default_rng(0).random(mask.shape) < 0.3)
        depth = np.where(mask, 0.0, depth)
        depth[through] = behind[through]
    rgb = np.full((H, W, 3), 110, np.uint8)
    rgb[mask] = 190
    frame = Frame(rgb, depth.astype(np.float32), K, None, mask.astype(np.int32), {1: "glass bottle"})
    return frame, mask


def _in_camera(perception: object, position: np.ndarray) -> np.ndarray:
    T = np.asarray(perception.table.T_world_cam)  # type: ignore[attr-defined]
    return (np.linalg.inv(T) @ np.append(position, 1.0))[:3]


def _truth_in_camera(centre: tuple[float, float, float]) -> np.ndarray:
    return (np.linalg.inv(T_WORLD_CAM) @ np.append(centre, 1.0))[:3]


def test_the_lying_cylinder_depth_agrees_with_the_ray_caster() -> None:
    can = trimesh.creation.cylinder(radius=0.035, height=0.16, sections=256)
    can.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))
    can.apply_transform(trimesh.transformations.rotation_matrix(0.5, [0, 0, 1]))
    can.apply_translation((0.01, 0.02, 0.035))
    depth, index = _render(can)
    v, u = np.mgrid[0:H, 0:W]
    y = (v.ravel() - K[1, 2]) / K[1, 1]
    dirs = np.stack([(u.ravel() - K[0, 2]) / K[0, 0], y, np.ones_like(y)], axis=1) @ T_WORLD_CAM[:3, :3].T
    t = lying_cylinder_depth(np.array([0.01, 0.02, 0.5, 0.035, 0.16]), T_WORLD_CAM[:3, 3], dirs)
    seen = (index == 0).ravel()
    assert np.mean(np.isfinite(t) == seen) > 0.995  # hit where the ray caster hits, up to its facets
    assert np.median(np.abs(t[seen] - depth.ravel()[seen])) < 2e-4


def test_a_standing_glass_bottle_is_fitted_to_its_silhouette() -> None:
    bottle = trimesh.creation.cylinder(radius=0.033, height=0.15, sections=128)
    bottle.apply_translation((0.02, -0.01, 0.075))
    frame, _ = _frame(bottle, glass=True)
    found = perceive(frame, ["glass bottle"], segmenter="masks")
    assert len(found.objects) == 1
    g = found.objects[0]
    assert g.shape_source == "silhouette" and g.symmetry == "rotational"
    assert np.max(np.abs(np.sort(g.extent) - [0.066, 0.066, 0.15]) / [0.066, 0.066, 0.15]) < 0.05, g.extent
    assert np.linalg.norm(_in_camera(found, g.position) - _truth_in_camera((0.02, -0.01, 0.075))) < 0.005
    assert any("silhouette" in w for w in found.warnings)
    again = perceive(frame, ["glass bottle"], segmenter="masks").objects[0]  # deterministic
    assert np.array_equal(again.position, g.position) and np.array_equal(again.extent, g.extent)


def test_a_lying_glass_bottle_is_fitted_as_a_lying_cylinder() -> None:
    bottle = trimesh.creation.cylinder(radius=0.035, height=0.16, sections=128)
    bottle.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))
    bottle.apply_transform(trimesh.transformations.rotation_matrix(0.5, [0, 0, 1]))
    bottle.apply_translation((0.0, 0.03, 0.035))
    frame, _ = _frame(bottle, glass=True)
    g = perceive(frame, ["glass bottle"], segmenter="masks").objects[0]
    assert g.shape_source == "silhouette" and g.symmetry == "box"
    assert np.max(np.abs(np.sort(g.extent) - [0.07, 0.07, 0.16]) / [0.07, 0.07, 0.16]) < 0.06, g.extent


def test_an_opaque_bottle_is_still_fitted_to_its_depth() -> None:
    bottle = trimesh.creation.cylinder(radius=0.033, height=0.15, sections=128)
    bottle.apply_translation((0.02, -0.01, 0.075))
    frame, _ = _frame(bottle, glass=False)
    g = perceive(frame, ["glass bottle"], segmenter="masks").objects[0]
    assert g.shape_source == "geometric"


def test_a_silhouette_fit_is_at_best_check_whatever_its_depth_says() -> None:
    bottle = trimesh.creation.cylinder(radius=0.033, height=0.15, sections=64)
    bottle.apply_translation((0.0, 0.0, 0.075))
    depth, index = _render(bottle, _table())
    mesh = [(np.asarray(bottle.vertices), np.asarray(bottle.faces))]
    masks = {"bottle": index == 0}
    seen, _ = fit_scores(["bottle"], mesh, masks, depth, T_WORLD_CAM, K)
    assert seen["objects"]["bottle"]["verdict"] == "good"
    glass, _ = fit_scores(["bottle"], mesh, masks, depth, T_WORLD_CAM, K, silhouette_only=["bottle"])
    assert glass["objects"]["bottle"]["verdict"] == "check"
    assert glass["objects"]["bottle"]["note"] == NO_DEPTH_NOTE
    assert glass["objects"]["bottle"]["iou"] == seen["objects"]["bottle"]["iou"]


def test_the_command_line_takes_glass_masks_from_a_mask_image(tmp_path: Path) -> None:
    try:
        rgb = datasets.shared_data_dir("rgbd/cleargrasp/000000153-transparent-rgb-img.jpg")
    except datasets.SharedDataMissing as exc:
        pytest.skip(str(exc))
    masks = rgb.with_name("000000153-mask.png")  # one binary mask: two parts, the lone bottle first
    out = tmp_path / "out"
    args = ["real2sim", str(rgb), "--masks", str(masks), "--labels", "bottle, two bottles"]
    assert main([*args, "--no-render", "--settle-s", "0", "--out", str(out)]) == 0
    scene = json.loads((out / "scene.json").read_text())
    assert [(o["name"], o["shape_source"]) for o in scene["objects"]] == [
        ("bottle", "silhouette"),
        ("two_bottles", "silhouette"),
    ]
    assert scene["objects"][0]["fit"]["note"] == NO_DEPTH_NOTE


def test_a_mask_above_the_horizon_is_not_fitted() -> None:
    level = look_at(np.array([0.0, 0.0, 0.3]), np.array([1.0, 0.0, 0.3]))  # looking straight ahead
    frame = Frame(np.zeros((H, W, 3), np.uint8), np.ones((H, W), np.float32), K)
    mask = np.zeros((H, W), bool)
    mask[20:80, 100:160] = True  # above the image centre: every ray rises
    table = types.SimpleNamespace(T_world_cam=level)
    assert fit_silhouette(frame, table, mask, "lamp") is None  # type: ignore[arg-type]
