"""Offscreen rendering through a calibrated camera: geometry of depth, intrinsics, segmentation, video."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from solvers.mujoco import render as render_mod
from solvers.mujoco.render import (
    CameraSpec,
    Renderer,
    add_camera,
    camera_from_model,
    object_masks,
    write_video,
)

TABLE_HALF = (0.35, 0.5, 0.02)  # m; top face at z = 0
RED_POS, RED_HALF, RED_YAW = (0.5, -0.12, 0.04), (0.04, 0.04, 0.04), np.deg2rad(30.0)
BLUE_POS, BLUE_HALF = (0.62, 0.15, 0.03), (0.03, 0.05, 0.03)


def _yaw_quat(yaw: float) -> list[float]:
    return [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))]


def build_scene(camera: CameraSpec) -> mujoco.MjModel:
    """Table (box, top at z = 0), a red cube turned 30 deg about z and a blue box, seen by ``camera``."""
    spec = mujoco.MjSpec()
    spec.worldbody.add_light(pos=[0.5, 0.0, 2.0], dir=[0.0, 0.0, -1.0])
    spec.worldbody.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=list(TABLE_HALF),
        pos=[0.55, 0.0, -TABLE_HALF[2]],
        rgba=[0.6, 0.6, 0.6, 1.0],
    )
    red = spec.worldbody.add_body(name="red_box", pos=list(RED_POS), quat=_yaw_quat(RED_YAW))
    red.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=list(RED_HALF), rgba=[0.9, 0.1, 0.1, 1.0])
    blue = spec.worldbody.add_body(name="blue_box", pos=list(BLUE_POS))
    blue.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=list(BLUE_HALF), rgba=[0.1, 0.2, 0.9, 1.0])
    add_camera(spec, camera)
    return spec.compile()


def render_once(camera: CameraSpec) -> tuple[mujoco.MjModel, render_mod.RenderedFrame]:
    model = build_scene(camera)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    with Renderer(model, camera=camera) as renderer:
        return model, renderer.render(data)


@pytest.fixture(scope="module")
def default_view() -> tuple[CameraSpec, mujoco.MjModel, render_mod.RenderedFrame]:
    camera = CameraSpec()
    model, frame = render_once(camera)
    return camera, model, frame


# A camera with roll and yaw (table depth varies along both image axes), strongly off-centre principal point.
SKEWED_VIEW = CameraSpec.look_at(
    (1.1, 0.45, 0.6),
    (0.5, -0.05, 0.0),
    up=(0.2, 0.0, 1.0),
    K=np.array([[590.0, 0.0, 250.5], [0.0, 610.0, 300.25], [0.0, 0.0, 1.0]]),
)


def _box_sdf(p_world: np.ndarray, pos: tuple[float, ...], yaw: float, half: tuple[float, ...]) -> np.ndarray:
    """Signed distance (m) of points (N, 3) to a z-yawed box."""
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    q = np.abs((p_world - np.asarray(pos)) @ R) - np.asarray(half)
    return np.linalg.norm(np.maximum(q, 0.0), axis=-1) + np.minimum(q.max(axis=-1), 0.0)


def _plane_depth(camera: CameraSpec, n_world: np.ndarray, d: float) -> np.ndarray:
    """Exact camera-frame z (m) at every pixel centre of the plane ``n . p = d`` (world frame)."""
    v, u = np.mgrid[0 : camera.height, 0 : camera.width].astype(np.float64)
    rays = np.stack([(u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy, np.ones_like(u)], axis=-1)
    R, t = camera.T_base_cam[:3, :3], camera.T_base_cam[:3, 3]
    return (d - n_world @ t) / (rays @ (R.T @ n_world))


def _depth_at(depth: np.ndarray, u: float, v: float) -> float:
    """Depth at sub-pixel (u, v), interpolating 1/z (exact on planes) between the 4 nearest pixel centres."""
    u0, v0 = int(np.floor(u)), int(np.floor(v))
    a, b = u - u0, v - v0
    inv = 1.0 / depth[v0 : v0 + 2, u0 : u0 + 2].astype(np.float64)
    w = np.array([[(1 - a) * (1 - b), a * (1 - b)], [(1 - a) * b, a * b]])
    return float(1.0 / (inv * w).sum())


# --- CameraSpec --------------------------------------------------------------------------------------------


def test_default_camera_is_d435i_looking_at_table() -> None:
    cam = CameraSpec()
    assert (cam.width, cam.height) == (640, 480)
    assert (cam.fx, cam.fy, cam.cx, cam.cy) == (606.0, 606.0, 321.0, 243.0)
    np.testing.assert_allclose(cam.T_base_cam[:3, 3], [1.25, 0.0, 0.55])
    uv, z = cam.project(np.array([0.5, 0.0, 0.05]))
    np.testing.assert_allclose(uv, [321.0, 243.0], atol=1e-9)
    assert z > 0
    # Facing the robot (-x): image right is world +y, image down points downwards.
    np.testing.assert_allclose(cam.T_base_cam[:3, 0], [0.0, 1.0, 0.0], atol=1e-12)
    assert cam.T_base_cam[2, 1] < 0
    # The whole table top is in view.
    corners = np.array([[x, y, 0.0] for x in (0.3, 0.8) for y in (-0.35, 0.35)])
    uv, _ = cam.project(corners)
    assert np.all((uv >= 0) & (uv <= [639, 479]))


def test_project_unproject_round_trip() -> None:
    pts = np.array([[0.4, 0.1, 0.02], [0.7, -0.2, 0.1]])
    uv, z = SKEWED_VIEW.project(pts)
    np.testing.assert_allclose(SKEWED_VIEW.unproject(uv, z), pts, atol=1e-12)


def _rot_x(angle: float) -> np.ndarray:
    T = np.eye(4)
    c, s = np.cos(angle), np.sin(angle)
    T[1:3, 1:3] = [[c, -s], [s, c]]
    return T


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"width": 0}, "width must be a positive integer"),
        ({"height": -480}, "height must be a positive integer"),
        ({"width": 640.0}, "width must be a positive integer"),
        ({"K": np.eye(2)}, "must be 3x3"),
        ({"K": [[606, 0, 321], [1, 606, 243], [0, 0, 1]]}, "upper-triangular pinhole"),
        ({"K": [[606, 0, 321], [0, 606, 243], [0, 0, 2]]}, "upper-triangular pinhole"),
        ({"K": [[606, 0.5, 321], [0, 606, 243], [0, 0, 1]]}, "skew"),
        ({"K": [[-606, 0, 321], [0, 606, 243], [0, 0, 1]]}, "focal lengths must be positive"),
        ({"K": [[606, 0, 700], [0, 606, 243], [0, 0, 1]]}, "principal point .* outside"),
        ({"K": [[606, 0, 321], [0, 606, -3], [0, 0, 1]]}, "principal point .* outside"),
        ({"T_base_cam": np.eye(3)}, "4x4"),
        ({"T_base_cam": np.diag([1.0, 1.0, 2.0, 1.0])}, "not a rigid transform"),
        ({"T_base_cam": np.diag([1.0, 1.0, -1.0, 1.0])}, "not a rigid transform"),
        ({"T_base_cam": _rot_x(0.3) + np.array([[0, 0, 0, 0]] * 3 + [[0, 0, 1, 0]])}, "last row"),
        ({"T_base_cam": np.full((4, 4), np.nan)}, "NaN"),
    ],
)
def test_camera_spec_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CameraSpec(**kwargs)


def test_look_at_rejects_degenerate_views() -> None:
    with pytest.raises(ValueError, match="coincide"):
        CameraSpec.look_at((0.5, 0, 1), (0.5, 0, 1))
    with pytest.raises(ValueError, match="parallel"):
        CameraSpec.look_at((0.5, 0, 1), (0.5, 0, 0))


def test_camera_spec_arrays_are_read_only_copies() -> None:
    K = np.array([[600.0, 0, 320], [0, 600, 240], [0, 0, 1]])
    cam = CameraSpec(K=K)
    K[0, 0] = 1.0
    assert cam.fx == 600.0
    with pytest.raises(ValueError):
        cam.K[0, 0] = 2.0


# --- add_camera / camera_from_model ------------------------------------------------------------------------


def test_add_camera_round_trips_through_model() -> None:
    model = build_scene(SKEWED_VIEW)
    assert model.vis.global_.offwidth >= 640 and model.vis.global_.offheight >= 480
    back = camera_from_model(model, "simpact_camera")
    assert (back.width, back.height) == (SKEWED_VIEW.width, SKEWED_VIEW.height)
    np.testing.assert_allclose(back.K, SKEWED_VIEW.K, rtol=0, atol=1e-9)
    np.testing.assert_allclose(back.T_base_cam, SKEWED_VIEW.T_base_cam, atol=1e-7)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    np.testing.assert_allclose(
        camera_from_model(model, "simpact_camera", data).T_base_cam, back.T_base_cam, atol=1e-12
    )


def test_add_camera_rejects_duplicate_name() -> None:
    spec = mujoco.MjSpec()
    add_camera(spec, CameraSpec())
    with pytest.raises(ValueError, match="already has a camera"):
        add_camera(spec, CameraSpec())


def test_renderer_rejects_mismatched_camera_and_unknown_name() -> None:
    model = build_scene(CameraSpec())
    with pytest.raises(ValueError, match="does not match the CameraSpec"):
        Renderer(model, camera=SKEWED_VIEW)
    with pytest.raises(ValueError, match="no camera named"):
        Renderer(model, camera_name="nope")


# --- rendering ---------------------------------------------------------------------------------------------


def test_render_shapes_and_types(default_view) -> None:
    camera, _, frame = default_view
    assert frame.rgb.shape == (480, 640, 3) and frame.rgb.dtype == np.uint8
    assert frame.depth.shape == (480, 640) and frame.depth.dtype == np.float32
    assert frame.segmentation.shape == (480, 640) and frame.segmentation.dtype == np.int32
    np.testing.assert_array_equal(frame.K, camera.K)
    np.testing.assert_allclose(frame.T_base_cam, camera.T_base_cam, atol=1e-7)
    # Background (sky above the table) has no depth; everything else has.
    background = frame.segmentation == -1
    assert background.any() and (~background).any()
    assert np.all(frame.depth[background] == 0) and np.all(frame.depth[~background] > 0)
    assert frame.rgb[~background].std() > 0


def test_depth_at_projected_points_equals_camera_z(default_view) -> None:
    camera, _, frame = default_view
    points = np.array(
        [
            [RED_POS[0], RED_POS[1], RED_POS[2] + RED_HALF[2]],  # red cube, top centre
            [BLUE_POS[0] + BLUE_HALF[0], BLUE_POS[1] + 0.01, 0.02],  # blue box, front face
            [0.40, 0.25, 0.0],  # table
            [0.75, -0.28, 0.0],  # table, far corner
        ]
    )
    uv, z = camera.project(points)
    for (u, v), z_true in zip(uv, z, strict=True):
        assert abs(_depth_at(frame.depth, u, v) - z_true) < 1e-3


def test_backprojected_depth_lies_on_the_boxes(default_view) -> None:
    camera, model, frame = default_view
    for body, pos, yaw, half in (
        ("red_box", RED_POS, RED_YAW, RED_HALF),
        ("blue_box", BLUE_POS, 0.0, BLUE_HALF),
    ):
        geom = model.body(body).geomadr[0]
        v, u = np.nonzero(frame.segmentation == geom)
        assert u.size > 200
        p = camera.unproject(np.stack([u, v], axis=-1), frame.depth[v, u])
        assert np.abs(_box_sdf(p, pos, yaw, half)).max() < 2e-3


@pytest.mark.parametrize("camera", [CameraSpec(), SKEWED_VIEW], ids=["d435i", "off_centre"])
def test_table_depth_matches_pinhole_model_everywhere(camera: CameraSpec) -> None:
    """Every table pixel equals the analytic plane depth: fx, fy, cx, cy (incl. half-pixel) are exact."""
    model, frame = render_once(camera)
    z = _plane_depth(camera, np.array([0.0, 0.0, 1.0]), 0.0)
    v, u = np.mgrid[0 : camera.height, 0 : camera.width]
    p = camera.unproject(np.stack([u, v], axis=-1), z)  # where each pixel's ray meets the plane z = 0
    on_top = (np.abs(p[..., 0] - 0.55) < TABLE_HALF[0] - 2e-3) & (np.abs(p[..., 1]) < TABLE_HALF[1] - 2e-3)
    table = (frame.segmentation == model.geom("table").id) & on_top  # not its side faces
    assert table.sum() > 10_000
    err = np.abs(frame.depth[table] - z[table])
    assert err.max() < 1e-4  # 0.1 mm; a half-pixel shift of the principal point gives > 1 mm here


def test_principal_point_shift_moves_the_image() -> None:
    """Moving cx by +20 px shifts the rendered content by +20 columns (and cy by +10 px by +10 rows)."""
    K = CameraSpec().K.copy()
    K[0, 2] += 20.0
    K[1, 2] += 10.0
    _, ref = render_once(CameraSpec())
    _, moved = render_once(CameraSpec(K=K))
    np.testing.assert_array_equal(moved.segmentation[10:, 20:], ref.segmentation[:-10, :-20])


def test_object_masks_label_the_right_objects(default_view) -> None:
    camera, model, frame = default_view
    red, blue = model.body("red_box").id, model.body("blue_box").id
    masks = object_masks(frame.segmentation, model, {red: 1, blue: 2})
    assert masks.dtype == np.int32 and masks.shape == frame.segmentation.shape
    assert set(np.unique(masks).tolist()) == {0, 1, 2}
    assert (masks == 1).sum() > 200 and (masks == 2).sum() > 200
    for obj_id, pos in ((1, RED_POS), (2, BLUE_POS)):
        (u, v), _ = camera.project(np.array([pos[0], pos[1], 2 * pos[2]]))  # top face centre
        assert masks[int(round(v)), int(round(u))] == obj_id
    np.testing.assert_array_equal(masks[frame.segmentation == -1], 0)
    np.testing.assert_array_equal(masks[frame.segmentation == model.geom("table").id], 0)


def test_object_masks_validation(default_view) -> None:
    _, model, frame = default_view
    with pytest.raises(ValueError, match="out of range"):
        object_masks(frame.segmentation, model, {model.nbody: 1})
    with pytest.raises(ValueError, match="must be positive"):
        object_masks(frame.segmentation, model, {1: 0})
    with pytest.raises(ValueError, match="must lie in"):
        object_masks(np.array([[model.ngeom]]), model, {})


def test_render_rgb_matches_render(default_view) -> None:
    camera, model, frame = default_view
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    with Renderer(model, camera=camera) as renderer:
        np.testing.assert_array_equal(renderer.render_rgb(data), frame.rgb)
    with pytest.raises(RuntimeError, match="closed"):
        renderer.render(data)
    renderer.close()  # idempotent


def test_rendered_frame_converts_to_frame(default_view) -> None:
    _, model, frame = default_view
    masks = object_masks(frame.segmentation, model, {model.body("red_box").id: 1})
    f = frame.to_frame(masks=masks, mask_names={1: "red_box"})
    assert f.depth is frame.depth and f.mask_names == {1: "red_box"}


def test_gl_failure_names_the_fix(monkeypatch: pytest.MonkeyPatch, default_view) -> None:
    _, model, _ = default_view

    def broken(*args, **kwargs):
        raise mujoco.FatalError("an OpenGL platform library has not been loaded into this process")

    monkeypatch.setattr(render_mod.mujoco, "Renderer", broken)
    with pytest.raises(RuntimeError, match="MUJOCO_GL=egl") as info:
        Renderer(model)
    assert (
        "libegl1" in str(info.value)
        and "MUJOCO_GL=osmesa" in str(info.value)
        and "libosmesa6" in str(info.value)
    )


# --- video -------------------------------------------------------------------------------------------------


def test_write_video_h264_yuv420p_even_size(tmp_path: Path) -> None:
    import imageio_ffmpeg

    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, size=(47, 63, 3), dtype=np.uint8) for _ in range(5)]
    path = write_video(iter(frames), tmp_path / "sub" / "clip.mp4", fps=10)
    assert path.is_file() and path.stat().st_size > 0
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    assert meta["codec"] == "h264" and meta["pix_fmt"].startswith("yuv420p")
    assert tuple(meta["size"]) == (64, 48)
    assert sum(1 for _ in reader) == 5


def test_write_video_rejects_bad_frames(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="uint8"):
        write_video([np.zeros((8, 8, 3), np.float32)], tmp_path / "a.mp4")
    with pytest.raises(ValueError, match="earlier frames"):
        write_video([np.zeros((8, 8, 3), np.uint8), np.zeros((8, 10, 3), np.uint8)], tmp_path / "b.mp4")
    with pytest.raises(ValueError, match="no frames"):
        write_video([], tmp_path / "c.mp4")
