"""real2sim end to end on a frame rendered from a task scene (the answers are known): scene.json, scene.xml
with the robot, the settle run, overlays, deformables' particles, an uncalibrated frame, plan --frame."""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import trimesh

from real2sim.pipeline import (
    ROBOT_REACH_X,
    Real2SimConfig,
    Real2SimError,
    load_scene,
    place_objects,
    run_real2sim,
)
from real2sim.scene_files import TABLE_MARGIN_M, column_parts, covering_table_size
from real2sim.separate import GAP_M
from real2sim.types import ObjectGeometry, TablePlane
from simpact.bench.scoring import ground_truth_box, pose_errors
from simpact.cli import main
from simpact.core.frame import Frame, write_frame_bundle
from simpact.core.scene import TABLE_NEAR_X, SceneObject
from simpact.tasks import load_task
from tests.vlm_doubles import ScriptedVLM

TASK = "non_toppling_push"


@pytest.fixture(scope="module")
def rendered() -> tuple[Frame, Any]:
    from solvers.mujoco.playback import render_frame
    from solvers.mujoco.world import MujocoWorld

    task = load_task(TASK)
    frame = render_frame(MujocoWorld(task.scene(0)))
    frame.metadata["instruction"] = task.instruction
    return frame, task


@pytest.fixture(scope="module")
def built(rendered: tuple[Frame, Any], tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    frame, task = rendered
    out = tmp_path_factory.mktemp("real2sim")
    return run_real2sim(frame, task=task, out=out), out


def test_scene_json_has_every_object_where_it_is(
    built: tuple[Any, Path], rendered: tuple[Frame, Any]
) -> None:
    result, out = built
    _, task = rendered
    raw = json.loads((out / "scene.json").read_text())
    assert [o["name"] for o in raw["objects"]] == ["carton", "blue_box"]
    assert raw["frame"]["world_frame"] == "T_base_cam" and np.asarray(raw["frame"]["T_world_cam"]).shape == (
        4,
        4,
    )
    assert raw["table"]["plane_world"] == {"normal": [0.0, 0.0, 1.0], "offset_m": 0.0}
    for o in raw["objects"]:
        assert o["kind"] == "rigid" and (out / o["mesh"]).is_file() and o["mass"] > 0 and o["friction"] > 0
        assert o["physics"]["sources"]["mass_kg"] == "material_table"
        centre, R, extent, symmetry = ground_truth_box(task.nominal_scene.object(o["name"]))
        err = pose_errors(
            np.asarray(o["position"]), o["quaternion"], np.asarray(o["extent"]), centre, R, extent, symmetry
        )
        assert err["position_cm"] <= 1.0 and err["extent_pct"] <= 10.0 and err["rotation_deg"] <= 5.0, err
        mesh = trimesh.load(out / o["mesh"], force="mesh")
        assert np.allclose(mesh.extents, 1.0, atol=1e-6)  # unit box; mesh_scale gives metres
        assert o["mesh_scale"] == o["extent"]
    res = json.loads((out / "result.json").read_text())
    assert res["labels"]["source"] == "task" and res["clean"] is True
    assert {"labels", "perception", "physics", "placement", "world", "settle", "total"} <= set(
        res["timings_s"]
    )


def test_scene_xml_loads_with_the_robot_and_settles_cleanly(built: tuple[Any, Path]) -> None:
    result, out = built
    model = mujoco.MjModel.from_xml_path(str(out / "scene.xml"))
    names = {model.body(i).name for i in range(model.nbody)}
    assert {"carton", "blue_box", "fr3_link0"} <= names
    assert result.settle is not None and result.settle.clean and not result.settle.artifacts
    for motion in result.settle.motion.values():
        assert motion.displacement < 0.005 and motion.rotation < np.radians(2)
    for name in ("masks.png", "meshes.png", "scene_vs_photo.png", "overlay.png"):
        assert (out / name).is_file() and result.files[name] == name
    scene = load_scene(out)
    assert [o.name for o in scene.objects] == ["carton", "blue_box"]
    assert scene.table_size == result.scene.table_size == (1.4, 1.4)  # both boxes well inside the default
    assert scene.object("carton").size == pytest.approx(result.objects[0]["extent"])


def test_deformables_get_particles_and_stay_out_of_mujoco(
    rendered: tuple[Frame, Any], tmp_path: Path
) -> None:
    frame, task = rendered
    config = Real2SimConfig(kinds={"carton": "mpm"}, particle_spacing_m=0.01, render=False, settle_s=0.2)
    result = run_real2sim(frame, task=task, out=tmp_path, config=config)
    raw = json.loads((tmp_path / "scene.json").read_text())
    carton = raw["objects"][0]
    assert carton["kind"] == "mpm" and "mesh" not in carton and carton["physics"]["sources"]["kind"] == "user"
    pts = np.load(tmp_path / carton["particles"])
    assert pts.shape == (carton["particle_count"], 3) and pts[:, 2].min() > 0
    assert pts[:, 2].max() == pytest.approx(0.2, abs=0.012)  # filled from the table up to the carton's top
    volume = len(pts) * 0.01**3
    assert volume == pytest.approx(0.07 * 0.07 * 0.2, rel=0.35)
    assert carton["mass"] == pytest.approx(carton["physics"]["density_kg_m3"] * volume)
    assert carton["material"]["model"] == "plasticine" and carton["material"]["grid_dx"] == 0.02
    # The deformable is in the scene (its own solver next to MuJoCo), not in MuJoCo's model.
    assert [(o.name, o.kind) for o in result.scene.objects] == [("carton", "mpm"), ("blue_box", "rigid")]
    assert "carton" not in (tmp_path / "scene.xml").read_text()
    assert result.world is not None
    assert result.world.state().deformables["carton"].particles.shape == pts.shape
    loaded = load_scene(tmp_path)
    assert [(o.name, o.kind) for o in loaded.objects] == [("carton", "mpm"), ("blue_box", "rigid")]
    assert np.array_equal(np.load(loaded.object("carton").particles), pts)
    assert dict(loaded.object("carton").material) == carton["material"]


def test_an_uncalibrated_frame_puts_the_objects_in_front_of_the_robot(
    rendered: tuple[Frame, Any], tmp_path: Path
) -> None:
    frame, task = rendered
    bare = dataclasses.replace(frame, T_base_cam=None)
    result = run_real2sim(bare, labels="carton, blue box", out=tmp_path, config=Real2SimConfig(render=False))
    assert result.frame_info["world_frame"] == "table_plane" and "table_frame_to_world" in result.frame_info
    centre = np.mean([g.position for g in result.geometries.values()], axis=0)
    assert centre[:2] == pytest.approx([ROBOT_REACH_X, 0.0], abs=1e-6)
    cam = np.asarray(result.frame_info["T_world_cam"])[:3, 3]
    assert cam[0] > centre[0]  # the camera looks back at the robot
    # Distances between the objects are those of the calibrated scene.
    truth = np.subtract(
        task.nominal_scene.object("carton").position, task.nominal_scene.object("blue_box").position
    )
    got = result.geometries["carton"].position - result.geometries["blue_box"].position
    assert np.linalg.norm(got) == pytest.approx(np.linalg.norm(truth), abs=0.01)
    assert result.labels.source == "user" and result.settle is not None and result.settle.clean


def _box(
    label: str, size: tuple[float, float, float], position: tuple[float, float, float]
) -> ObjectGeometry:
    return ObjectGeometry(
        label,
        trimesh.creation.box(size),
        np.array(position, float),
        np.array([1.0, 0, 0, 0]),
        np.array(size),
        np.array([position]),
    )


def test_placement_sets_objects_down_and_cuts_overlaps_apart() -> None:
    a = _box("a", (0.1, 0.1, 0.1), (0.5, 0.0, 0.062))  # 12 mm above the table
    b = _box("b", (0.1, 0.1, 0.1), (0.58, 0.0, 0.045))  # 5 mm into the table, 2 cm into a
    c = _box("c", (0.05, 0.05, 0.05), (0.2, 0.3, 0.2))  # held up high
    placed, info, warnings = place_objects([a, b, c], ["a", "b", "c"])
    lows = [g.world_vertices()[:, 2].min() for g in placed]
    assert lows[0] == pytest.approx(0.0, abs=1e-6) and lows[1] == pytest.approx(0.0, abs=1e-6)
    assert lows[2] == pytest.approx(0.175)
    assert info["a"]["lift_m"] == pytest.approx(-0.012) and info["b"]["lift_m"] == pytest.approx(0.005)
    # Each box keeps its own side of the plane midway between what was seen of them (their centres here; the
    # plane's normal is searched over directions about half a degree apart, so a face's corners may stand
    # 0.5 mm off x = 0.54).
    assert placed[0].world_vertices()[:, 0].max() == pytest.approx(0.54 - GAP_M / 2, abs=5e-4)
    assert placed[1].world_vertices()[:, 0].min() == pytest.approx(0.54 + GAP_M / 2, abs=5e-4)
    assert info["a"]["push_m"] == [0.0, 0.0] and info["b"]["push_m"] == [0.0, 0.0]
    assert [cut["with"] for cut in info["a"]["cuts"]] == ["b"] and info["c"]["cuts"] == []
    assert info["a"]["cuts"][0]["removed_cm3"] == pytest.approx(1e6 * 0.0102 * 0.1 * 0.1, rel=0.01)
    assert "'c' floats" in warnings[0]


def test_placement_pushes_apart_what_a_cut_would_mostly_remove() -> None:
    # a was seen only at its left edge, 1 cm from b's point: a cut there would leave a 15 % sliver of a.
    a = _box("a", (0.1, 0.1, 0.1), (0.5, 0.0, 0.05))
    b = _box("b", (0.1, 0.1, 0.1), (0.58, 0.0, 0.05))
    a = dataclasses.replace(a, points_world=np.array([[0.46, 0.0, 0.05]]))
    b = dataclasses.replace(b, points_world=np.array([[0.47, 0.0, 0.05]]))
    placed, info, _ = place_objects([a, b], ["a", "b"])
    assert info["a"]["cuts"] == [] and info["b"]["cuts"] == []
    gap = placed[1].position[0] - placed[0].position[0]
    assert 0.1 <= gap <= 0.102 and placed[0].position[1] == pytest.approx(0.0)


def test_column_parts_keep_a_bowl_open() -> None:
    from solvers.mujoco.meshes import bowl_mesh

    bowl = bowl_mesh(0.07, 0.05, 0.005)
    bowl.apply_translation([0, 0, -0.025])
    verts, faces = column_parts(bowl)
    assert 20 <= len(verts) <= 64 and all(len(f) >= 4 for f in faces)
    volume = sum(trimesh.Trimesh(v, f).convex_hull.volume for v, f in zip(verts, faces))
    assert volume < 0.5 * bowl.convex_hull.volume  # the cavity is not filled in
    assert volume > 0.9 * bowl.volume


def test_nothing_found_is_a_clear_error(rendered: tuple[Frame, Any]) -> None:
    frame, _ = rendered
    table = TablePlane(
        np.array([0.0, 0.0, -1.0]), 1.0, np.eye(4), np.ones(frame.depth.shape, bool), "T_base_cam"
    )

    def nothing(frame: Frame, labels: Any, **_: Any) -> Any:
        return types.SimpleNamespace(table=table, segments=[], objects=[], timings_s={}, warnings=[])

    with pytest.raises(Real2SimError, match="no object found .*looked for cup"):
        run_real2sim(frame, labels=["cup"], perceive_fn=nothing)


def test_the_command_writes_the_scene_and_plan_frame_builds_the_task_scene(
    rendered: tuple[Frame, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from real2sim.task_scene import task_scene_from_frame

    frame, task = rendered
    bundle = write_frame_bundle(frame, tmp_path / "frame")
    assert (
        main(
            [
                "real2sim",
                str(bundle),
                "--task",
                TASK,
                "--no-render",
                "--settle-s",
                "0.2",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "2 objects [carton (rigid), blue_box (rigid)]" in line and "settle clean" in line
    assert (tmp_path / "out" / "scene.xml").is_file()
    scene = task_scene_from_frame(task, bundle, tmp_path / "plan")
    assert [o.name for o in scene.objects] == [
        "carton",
        "blue_box",
    ] and scene.robot == task.nominal_scene.robot
    carton = scene.object("carton")  # the task's box, with the measured pose and size
    assert carton.shape == "box" and carton.size == pytest.approx((0.07, 0.07, 0.2), abs=0.008)
    assert carton.position == pytest.approx((0.52, 0.0, 0.1), abs=0.005)
    # offline, the material table only guesses a mass and a friction: the task's own values stand instead
    nominal = task.nominal_scene.object("carton")
    assert (carton.mass, carton.friction) == (nominal.mass, nominal.friction)
    assert main(["real2sim", str(bundle), "--kind", "carton=soft", "--out", str(tmp_path / "x")]) == 2
    assert "NAME=rigid|pd|mpm" in capsys.readouterr().err


class TableTopVLM(ScriptedVLM):
    """Answers real2sim's three questions for the push scene: which objects, which cluster is which (by
    colour from the prompt's cluster list), and their physics."""

    def __init__(self) -> None:
        super().__init__(default=self.answer, name="tabletop")

    @staticmethod
    def answer(parts: Any, role: Any) -> Any:
        text = parts[0]
        if role == "object_labels":
            answer: Any = {
                "objects": [
                    {"label": "carton", "role": "manipulated"},
                    {"label": "blue box", "role": "target"},
                ]
            }
        elif role == "assign_labels":
            listing = text.split("RGB 0-255):", 1)[1].split("## Output", 1)[0]
            clusters = json.loads(listing)
            blue = max(clusters, key=lambda c: c["colour_rgb"][2] - c["colour_rgb"][0])
            tall = max((c for c in clusters if c is not blue), key=lambda c: c["height_m"])
            answer = {
                "assignments": [
                    {"label": "carton", "cluster": tall["index"]},
                    {"label": "blue box", "cluster": blue["index"]},
                ]
            }
        else:
            answer = {
                "objects": [
                    {
                        "name": "carton",
                        "deformable": False,
                        "simulator": "rigid",
                        "reason": "paper",
                        "mass_kg": 0.3,
                        "friction": 0.4,
                    },
                    {
                        "name": "blue_box",
                        "deformable": False,
                        "simulator": "rigid",
                        "reason": "wood",
                        "mass_kg": 0.2,
                        "friction": 0.5,
                    },
                ]
            }
        return answer


def test_a_vlm_names_the_objects_labels_the_clusters_and_sets_the_physics(
    rendered: tuple[Frame, Any], tmp_path: Path
) -> None:
    frame, task = rendered
    vlm = TableTopVLM()
    config = Real2SimConfig(render=False, settle_s=0.2, overlays=False)
    result = run_real2sim(frame, instruction=task.instruction, vlm=vlm, out=tmp_path, config=config)
    assert vlm.roles == ["object_labels", "assign_labels", "physics"]
    assert result.labels.source == "vlm" and result.names == ["carton", "blue_box"]
    carton = result.parameters["carton"]
    assert (carton.mass_kg, carton.friction) == (0.3, 0.4) and carton.sources["mass_kg"] == "vlm"
    assert result.geometries["carton"].extent[2] == pytest.approx(0.2, rel=0.1)
    exchange = json.loads((tmp_path / "vlm_exchange.json").read_text())
    assert [e["role"] for e in exchange] == ["object_labels", "assign_labels", "physics"]
    assert task.instruction in exchange[0]["prompt"]
    # planning the task from the frame: the VLM's mass and friction stand over the task's own
    from real2sim.task_scene import task_scene_from_frame

    bundle = write_frame_bundle(frame, tmp_path / "frame")
    scene = task_scene_from_frame(task, bundle, tmp_path / "plan", vlm=TableTopVLM())
    assert (scene.object("carton").mass, scene.object("carton").friction) == (0.3, 0.4)


def test_a_real_frame_becomes_a_scene_that_rests_on_the_table(tmp_path: Path) -> None:
    from real2sim.datasets import SharedDataMissing, read_any_frame, shared_data_dir

    try:
        path = shared_data_dir("rgbd", "posecnn", "000003-color.png")
    except SharedDataMissing as exc:
        pytest.skip(f"real frames absent: {exc}")
    frame = read_any_frame(path)
    labels = "potted meat can, tomato soup can, red bowl"
    result = run_real2sim(frame, labels=labels, out=tmp_path, config=Real2SimConfig(settle_s=0.5))
    assert result.names == ["potted_meat_can", "tomato_soup_can", "red_bowl"]
    assert result.frame_info["world_frame"] == "table_plane"
    raw = json.loads((tmp_path / "scene.json").read_text())
    bowl = next(o for o in raw["objects"] if o["name"] == "red_bowl")
    assert bowl["concave"] and bowl["convex_parts"] >= 8  # an open bowl, not its hull
    for name, g in result.geometries.items():
        assert g.world_vertices()[:, 2].min() == pytest.approx(0.0, abs=1e-6), name
        assert abs(result.placement[name]["lift_m"]) < 0.02, name  # perception already had it on the table
    assert result.settle is not None and result.settle.clean, result.settle.to_dict()
    assert result.settle.shifted == [] and not any("does not rest" in w for w in result.warnings)
    for picture in ("masks.png", "meshes.png", "scene_vs_photo.png", "overlay.png"):
        assert (tmp_path / picture).is_file()
    # The photo's own camera comes from the table fit: the reconstructed scene explains the measured depth.
    report = json.loads((tmp_path / "result.json").read_text())
    for name, fit in report["fit"]["objects"].items():
        assert fit["iou"] > 0.7 and fit["depth_residual_m"] < 0.005 and fit["verdict"] != "poor", (name, fit)
    assert report["fit"]["table"]["depth_residual_m"] < 0.005
    occluded = result.renders["occluded"]
    for seg, name in zip(result.perception.segments, result.names):  # checked against the photo's outline
        assert seg.silhouette is not None and not np.array_equal(seg.silhouette, seg.mask)
        assert report["fit"]["objects"][name]["mask_px"] == int((seg.silhouette & ~occluded).sum())
    assert set(report["matches"]) == set(result.geometries) and report["not_found"] == []


def test_every_object_of_a_cluttered_real_frame_rests_where_it_was_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """UOIS 0008, ten objects: the marker standing before the orange mug was drawn as a height field whose
    columns' feet the silhouette's cone had cut away, and tipped over as soon as the simulation started (8.3
    cm, 100°), unreported; a shape must stand to be chosen now (:mod:`real2sim.stability`). The command
    reports any object the settle run moves (:func:`test_the_command_names_the_objects_that_did_not_rest`)."""
    from real2sim.datasets import SharedDataMissing, shared_data_dir

    try:
        path = shared_data_dir("rgbd", "uois", "image_0008.npy")
    except SharedDataMissing as exc:
        pytest.skip(f"real frames absent: {exc}")
    assert main(["real2sim", str(path), "--no-render", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "result.json").read_text())
    assert len(report["settle"]["motion"]) == 10 and report["settle"]["shifted"] == []
    assert all(m["displacement"] < 0.005 for m in report["settle"]["motion"].values()), report["settle"]
    assert "does not rest" not in printed and "did not rest" not in printed


def test_the_command_names_the_objects_that_did_not_rest(
    rendered: tuple[Frame, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Whatever makes an object move in the settle run, the summary line says so beside "settle clean"."""
    import simpact.cli.real2sim as command
    from real2sim.pipeline import _note_shifted
    from simpact.guard.settle import ObjectMotion, SettleReport

    toppled = ObjectMotion(0.083, np.radians(100.0), 1.4, (0.5, 0.0, 0.05), (0.55, 0.06, 0.01))
    result = types.SimpleNamespace(
        objects=[{"name": "marker", "kind": "rigid"}],
        settle=SettleReport(1.0, 500, [], [], {"marker": toppled}),
        fit={"objects": {"marker": {"iou": 0.96, "verdict": "good"}}},
        warnings=[],
        timings_s={"total": 1.0},
    )
    _note_shifted(result)  # type: ignore[arg-type]
    monkeypatch.setattr(command, "run_real2sim", lambda *a, **k: result)
    bundle = write_frame_bundle(rendered[0], tmp_path / "frame")
    assert main(["real2sim", str(bundle), "--no-render", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("simpact real2sim: warning: 'marker' does not rest where it was fitted")
    assert "settle clean but marker did not rest where fitted" in printed[-1]


def test_plan_frame_keeps_the_task_shapes_with_measured_sizes() -> None:
    from real2sim.task_scene import _in_task_shape
    from simpact.core.scene import SceneObject

    measured = SceneObject(
        "white_bowl",
        "mesh",
        (0.146, 0.144, 0.05),
        (0.54, 0.1, 0.025),
        mesh="bowl.obj",
        convex_decomposition=True,
    )
    task_bowl = SceneObject("white_bowl", "bowl", (0.075, 0.05, 0.005), (0.5, 0.1, 0.0))
    bowl = _in_task_shape(measured, task_bowl)
    assert bowl.shape == "bowl" and bowl.mesh is None
    assert bowl.size == pytest.approx((0.0725, 0.05, 0.005)) and bowl.position == pytest.approx(
        (0.54, 0.1, 0.0)
    )
    can = _in_task_shape(measured, SceneObject("can", "cylinder", (0.033, 0.12), (0, 0, 0.06)))
    assert (
        can.shape == "cylinder"
        and can.size == pytest.approx((0.0725, 0.05))
        and can.position == measured.position
    )


def test_a_box_turned_a_quarter_is_named_in_the_task_box_axes() -> None:
    from real2sim.task_scene import _in_task_shape

    quarter = (np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4))
    measured = SceneObject("back_wall", "mesh", (0.44, 0.04, 0.04), (0.76, 0.02, 0.02), quarter, mesh="w.obj")
    task_wall = SceneObject("back_wall", "box", (0.04, 0.44, 0.04), (0.76, 0.02, 0.02))
    wall = _in_task_shape(measured, task_wall)
    assert wall.shape == "box" and wall.size == pytest.approx((0.04, 0.44, 0.04))
    assert abs(wall.quaternion[0]) == pytest.approx(1.0) and wall.position == measured.position


def test_plan_frame_tells_two_like_walls_apart_by_where_the_task_puts_them(tmp_path: Path) -> None:
    from real2sim.task_scene import task_scene_from_frame

    task = load_task("box_to_corner")
    assert main(["render", "box_to_corner", "--out", str(tmp_path / "frame")]) == 0
    scene = task_scene_from_frame(task, tmp_path / "frame", tmp_path / "plan")
    for name in ("back_wall", "side_wall"):
        truth, got = task.nominal_scene.object(name), scene.object(name)
        assert np.linalg.norm(np.subtract(got.position, truth.position)[:2]) < 0.025, name
        assert got.size[:2] == pytest.approx(truth.size[:2], abs=0.05), (
            name
        )  # a wall's thickness along x or y


def test_the_table_reaches_past_every_object() -> None:
    near = SceneObject("near", "box", (0.1, 0.1, 0.2), (0.5, 0.0, 0.1))
    assert covering_table_size((near,)) == (1.4, 1.4)  # the default table: 0.6 m to spare
    far = near.moved(
        name="far", position=(1.3, -0.8, 0.1)
    )  # beyond the default's far (1.1) and side (0.7) edges
    sx, sy = covering_table_size((near, far))
    r = 0.5 * float(np.linalg.norm(far.size))
    assert sx == pytest.approx(1.3 + r + TABLE_MARGIN_M - TABLE_NEAR_X)
    assert sy == pytest.approx(2 * (0.8 + r + TABLE_MARGIN_M))


@pytest.mark.parametrize("height_m", [0.1, 0.3])
def test_the_robot_starts_above_the_tallest_object(rendered: tuple[Frame, Any], height_m: float) -> None:
    """A bottle taller than the default start (fingertips 25 cm up) under it: the robot starts above it, and
    the scene settles without the fingers inside the bottle (UOIS frame 8's 28 cm bottle)."""
    from real2sim.scene_files import ROBOT_CLEARANCE_M
    from real2sim.types import Segment
    from simpact.core.scene import RobotStart

    frame, _ = rendered
    table = TablePlane(
        np.array([0.0, 0.0, -1.0]), 1.0, np.eye(4), np.ones(frame.depth.shape, bool), "T_base_cam"
    )
    x, y, z = RobotStart().position
    mesh = trimesh.creation.cylinder(radius=0.035, height=height_m, sections=32)
    bottle = ObjectGeometry(
        "bottle",
        mesh,
        np.array([x, y, height_m / 2]),
        np.array([1.0, 0, 0, 0]),
        mesh.extents,
        np.zeros((0, 3)),
    )
    seg = Segment("bottle", np.zeros(frame.depth.shape, bool))

    def one_bottle(frame: Frame, labels: Any, **_: Any) -> Any:
        return types.SimpleNamespace(table=table, segments=[seg], objects=[bottle], timings_s={}, warnings=[])

    result = run_real2sim(
        frame, labels=["bottle"], perceive_fn=one_bottle, config=Real2SimConfig(settle_s=0.2)
    )
    assert result.scene.robot.position[2] == pytest.approx(max(z, height_m + ROBOT_CLEARANCE_M))
    assert result.settle is not None and result.settle.clean, result.settle.to_dict()["overlaps"]


def test_a_run_without_out_leaves_no_folder_when_the_process_ends(
    rendered: tuple[Frame, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``out`` the meshes go to a temporary folder that outlives the call (worlds are built from
    them) and is removed at exit: a process that runs real2sim per frame left one folder each before."""
    import real2sim.pipeline
    from real2sim.types import Segment

    at_exit: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(real2sim.pipeline.atexit, "register", lambda f, *a, **k: at_exit.append((f, a, k)))
    frame, _ = rendered
    table = TablePlane(
        np.array([0.0, 0.0, -1.0]), 1.0, np.eye(4), np.ones(frame.depth.shape, bool), "T_base_cam"
    )
    mesh = trimesh.creation.box((0.05, 0.05, 0.05))
    box = ObjectGeometry(
        "box", mesh, np.array([0.5, 0.0, 0.025]), np.array([1.0, 0, 0, 0]), mesh.extents, np.zeros((0, 3))
    )
    seg = Segment("box", np.zeros(frame.depth.shape, bool))

    def one_box(frame: Frame, labels: Any, **_: Any) -> Any:
        return types.SimpleNamespace(table=table, segments=[seg], objects=[box], timings_s={}, warnings=[])

    config = Real2SimConfig(settle_s=0.0, render=False, overlays=False)
    result = run_real2sim(frame, labels=["box"], perceive_fn=one_box, config=config)
    mesh_file = Path(str(result.scene.object("box").mesh))
    assert mesh_file.is_file() and mesh_file.parents[1].name.startswith("real2sim_")
    for f, args, kwargs in at_exit:
        f(*args, **kwargs)
    assert not mesh_file.parents[1].exists()


def _alone(frame: Frame, g: ObjectGeometry, out: Path) -> tuple[dict[str, Any], Any]:
    """``g`` as the one object real2sim perceives on ``frame``'s table (base frame, table at z = 0): its
    ``scene.json`` entry and the run's result (0.2 s settle)."""
    from real2sim.types import Segment

    table = TablePlane(
        np.array([0.0, 0.0, -1.0]), 1.0, np.eye(4), np.ones(frame.depth.shape, bool), "T_base_cam"
    )
    seg = Segment(g.label, np.zeros(frame.depth.shape, bool))

    def only_g(frame: Frame, labels: Any, **_: Any) -> Any:
        return types.SimpleNamespace(table=table, segments=[seg], objects=[g], timings_s={}, warnings=[])

    result = run_real2sim(
        frame, labels=[g.label], perceive_fn=only_g, out=out, config=Real2SimConfig(settle_s=0.2)
    )
    return json.loads((out / "scene.json").read_text())["objects"][0], result


def test_a_bottle_with_a_neck_is_written_so_and_settles(rendered: tuple[Frame, Any], tmp_path: Path) -> None:
    """A box with a neck on top (box and cylinder in one mesh, not convex): ``scene.json`` says the neck's
    radius and length, and the scene (physics takes the mesh's hull) settles clean."""
    from real2sim.necks import _with_neck

    body = np.array([0.055, 0.055, 0.13])
    box = ObjectGeometry(
        "bottle",
        trimesh.creation.box(extents=body),
        np.array([0.5, 0.25, body[2] / 2]),
        np.array([1.0, 0, 0, 0]),
        body,
        np.zeros((0, 3)),
    )
    bottle = _with_neck(box, 2, np.zeros(2), 1.0, 0.013, body[2] / 2 + 0.03)
    entry, result = _alone(rendered[0], bottle, tmp_path / "necked")
    assert entry["neck_m"] == [0.013, 0.03] and entry["extent"][2] == pytest.approx(0.16)
    assert result.settle is not None and result.settle.clean, result.settle.to_dict()["overlaps"]


def test_a_prism_is_written_so_and_settles(rendered: tuple[Frame, Any], tmp_path: Path) -> None:
    """A plus-shaped block standing on one arm (a face's outline extruded, concave): ``scene.json`` says its
    depth, gives it convex parts (physics does not fill its corners in), and the scene settles clean."""
    import manifold3d

    from ._render import plus_outline

    solid = manifold3d.CrossSection([plus_outline(0.08, 0.026)]).extrude(0.03).translate((0.0, 0.0, -0.015))
    m = solid.to_mesh()
    mesh = trimesh.Trimesh(np.asarray(m.vert_properties)[:, :3], np.asarray(m.tri_verts))
    mesh.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1.0, 0.0, 0.0]))  # face to -y
    block = ObjectGeometry(
        "block", mesh, np.array([0.5, 0.25, 0.04]), np.array([1.0, 0, 0, 0]), mesh.extents, np.zeros((0, 3))
    )
    block = dataclasses.replace(block, concave=True, prism_depth_m=0.03)
    entry, result = _alone(rendered[0], block, tmp_path / "prism")
    assert entry["prism_depth_m"] == 0.03 and entry["extent"] == pytest.approx([0.08, 0.03, 0.08])
    assert entry["convex_parts"] >= 3  # the plus's arms, apart
    assert result.settle is not None and result.settle.clean, result.settle.to_dict()["overlaps"]


def test_a_height_field_is_written_so_and_settles(rendered: tuple[Frame, Any], tmp_path: Path) -> None:
    """A step (columns 3 cm and 1 cm high, :mod:`real2sim.heightfield`): ``scene.json`` says its cell, gives
    it convex parts, and the scene settles clean."""
    from real2sim.heightfield import CELL_M, add_heightfield

    i, j = np.mgrid[:30, :40]
    points = np.column_stack(
        [(i.ravel() + 0.5) * 0.002, (j.ravel() + 0.5) * 0.002, np.where(j < 20, 0.03, 0.01).ravel()]
    )
    shell = ObjectGeometry(
        "step", trimesh.creation.box((0.06, 0.08, 0.03)), np.zeros(3), np.eye(4)[0], np.ones(3), points
    )
    step = add_heightfield(shell)
    assert step is not None
    step = dataclasses.replace(step, position=step.position + [0.47, 0.21, 0.0])
    entry, result = _alone(rendered[0], step, tmp_path / "field")
    assert entry["heightfield_cell_m"] == CELL_M and entry["extent"] == pytest.approx(
        [0.06, 0.08, 0.03], abs=0.002
    )
    assert entry["convex_parts"] >= 2  # the low step apart from the high one
    assert result.settle is not None and result.settle.clean, result.settle.to_dict()["overlaps"]
