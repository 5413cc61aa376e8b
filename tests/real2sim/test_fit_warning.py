"""A poor (or rough) real2sim fit is passed on: a plan made on a scene built from a photo lists the objects
whose fit verdict is ``poor`` or ``check`` in ``result.json`` (``real2sim_warnings``), and the scene context
the VLM reads names them. real2sim itself is replaced by a crafted result (the unit under test is the
passing on, not the fit)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import real2sim.task_scene as task_scene
from real2sim.fitscore import NO_DEPTH_NOTE
from real2sim.task_scene import FrameScene, fit_warnings_for, task_scene_from_frame
from simpact.planner.session import plan_task
from simpact.tasks import load_task
from simpact.vlm.context import real2sim_warnings, scene_context
from solvers.world import make_world

TASK = "non_toppling_push"  # carton and blue_box

FIT = {
    "objects": {
        "carton": {
            "iou": 0.52,
            "depth_residual_m": 0.021,
            "table_nearby_residual_m": 0.0036,
            "verdict": "poor",
        },
        "blue_box": {"iou": 0.91, "depth_residual_m": 0.002, "verdict": "good"},
        "object_3": {"iou": 0.3, "depth_residual_m": 0.03, "verdict": "poor"},  # not in the task scene
    }
}


def _frame_scene(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FrameScene:
    task = load_task(TASK)

    def fake_real2sim(frame: Any, **_: Any) -> Any:
        return types.SimpleNamespace(
            scene=task.nominal_scene, fit=FIT, parameters={}, frame_info={"world_frame": "T_base_cam"}
        )

    monkeypatch.setattr(task_scene, "read_any_frame", lambda path: object())
    monkeypatch.setattr(task_scene, "run_real2sim", fake_real2sim)
    return task_scene_from_frame(task, tmp_path / "frame", tmp_path / "real2sim")


@pytest.fixture
def frame_scene(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FrameScene:
    return _frame_scene(monkeypatch, tmp_path)


def test_warnings_name_the_poor_and_rough_fits_of_scene_objects_only() -> None:
    fit = {
        "objects": {**FIT["objects"], "blue_box": {"iou": 0.7, "depth_residual_m": None, "verdict": "check"}}
    }
    warnings = fit_warnings_for(fit, ["blue_box", "carton"])
    assert [(w["object"], w["verdict"]) for w in warnings] == [("carton", "poor"), ("blue_box", "check")]
    assert warnings[0]["iou"] == 0.52 and warnings[0]["depth_residual_mm"] == 21.0
    assert "the table's beside it 3.6 mm" in warnings[0]["message"]  # how noisy the depth is there
    assert warnings[1]["depth_residual_mm"] is None and "no depth" in warnings[1]["message"]
    assert fit_warnings_for(FIT, ["blue_box"]) == []


def test_a_glass_object_fitted_to_its_silhouette_is_said_to_be_so() -> None:
    glass = {"iou": 0.93, "depth_residual_m": 0.031, "verdict": "check", "note": NO_DEPTH_NOTE}
    (warning,) = fit_warnings_for({"objects": {"bottle": glass}}, ["bottle"])
    assert NO_DEPTH_NOTE in warning["message"] and "31.0 mm" not in warning["message"]


def test_an_object_that_topples_in_simulation_is_passed_on_whatever_its_fit() -> None:
    """real2sim notes each object its settle run moved (here a pole fitted leaning, that toppled) and the
    planner passes it on, a good fit included."""
    from real2sim.pipeline import _note_shifted
    from simpact.guard.settle import ObjectMotion, SettleReport

    still = ObjectMotion(1e-4, 1e-4, 0.01, (0.3, 0.2, 0.025), (0.3, 0.2, 0.025))
    toppled = ObjectMotion(0.083, np.radians(92.0), 1.4, (0.5, 0.0, 0.1), (0.55, 0.06, 0.01))
    settle = SettleReport(1.0, 500, [], [], {"pole": toppled, "blue_box": still})
    fit = {"objects": {"pole": {"iou": 0.9, "depth_residual_m": 0.002, "verdict": "good"}, **FIT["objects"]}}
    result = types.SimpleNamespace(settle=settle, fit=fit, warnings=[])
    _note_shifted(result)  # type: ignore[arg-type]
    (line,) = result.warnings
    assert line == (
        "'pole' does not rest where it was fitted: the settle run moved it 8.3 cm and turned it 92° (it "
        "tipped, rolled or was pushed by a neighbour); the simulated scene differs from the photo there"
    )
    assert fit["objects"]["pole"]["shifted_in_settle"] == {"moved_m": 0.083, "turned_deg": 92.0}
    assert "shifted_in_settle" not in fit["objects"]["blue_box"]
    fit["objects"]["carton"]["shifted_in_settle"] = {"moved_m": 0.031, "turned_deg": 12.0}
    warnings = fit_warnings_for(fit, ["pole", "blue_box", "carton"])
    assert [(w["object"], w["verdict"]) for w in warnings] == [("carton", "poor"), ("pole", "good")]
    assert "may be off; it does not rest where it was fitted" in warnings[0]["message"]
    assert "moved 3.1 cm and turned 12°" in warnings[0]["message"]
    assert "matches the photo well (silhouette IoU 0.90" in warnings[1]["message"]
    assert "but it does not rest where it was fitted" in warnings[1]["message"]


def test_the_task_scene_carries_its_fit_warnings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame_scene = _frame_scene(monkeypatch, tmp_path)
    assert isinstance(frame_scene, FrameScene)
    assert [w["object"] for w in frame_scene.real2sim_warnings] == ["carton"]
    assert "fit of 'carton' is poor" in capsys.readouterr().err
    moved = frame_scene.replace_object(frame_scene.object("carton"))  # kept through dataclass replaces
    assert real2sim_warnings(moved) == real2sim_warnings(frame_scene)


def test_the_vlm_context_and_the_plan_result_list_the_warning(frame_scene: FrameScene) -> None:
    task = load_task(TASK)
    world = make_world(frame_scene)
    context = scene_context(frame_scene, world.state())
    assert context["objects"]["carton"]["real2sim_fit"] == "poor"
    assert "real2sim_fit" not in context["objects"]["blue_box"]
    (line,) = context["real2sim_warnings"]
    assert "'carton'" in line and "IoU 0.52" in line and "21.0 mm" in line
    text = json.dumps(context)  # what the VLM is sent
    assert "real2sim_warnings" in text and "may be off" in text

    result = plan_task(task, frame_scene, world, 0, "reference")
    (warning,) = result.to_dict()["real2sim_warnings"]
    assert warning["object"] == "carton" and warning["verdict"] == "poor"


def test_a_scene_not_from_a_photo_has_no_warnings() -> None:
    task = load_task(TASK)
    scene = task.scene(0)
    world = make_world(scene)
    assert real2sim_warnings(scene) == []
    assert "real2sim_warnings" not in scene_context(scene, world.state())
    assert "real2sim_warnings" not in plan_task(task, scene, world, 0, "reference").to_dict()
