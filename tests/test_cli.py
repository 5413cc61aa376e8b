"""The `simpact` command's contract: verbs, result files, exit statuses."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

import simpact.cli.real2sim as real2sim_verb
from simpact import __version__
from simpact.cli import build_parser, main
from simpact.cli.preflight import OPTIONAL_EXTRAS
from simpact.core.actions import load_plan
from simpact.core.frame import read_frame_bundle
from simpact.tasks import list_tasks


def test_tasks_lists_every_config(capsys):
    assert main(["tasks"]) == 0
    names = capsys.readouterr().out.split()
    assert names == list_tasks()
    assert {"non_toppling_push", "bowl_stacking", "pivoting", "avoid_obstacle", "sweeping"} <= set(names)


def test_rollout_reference_writes_result_and_plan(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["rollout", "non_toppling_push", "--plan", "reference", "--out", str(out)]) == 0
    assert "non_toppling_push seed 0: success" in capsys.readouterr().out
    result = json.loads((out / "result.json").read_text())
    assert result["success"] is True
    assert 0.0 <= result["score"] <= 1.0
    assert set(result["final_state"]) == {"carton", "blue_box"}
    assert len(result["final_state"]["carton"]["quaternion"]) == 4
    assert result["wall_s"] > 0
    plan = load_plan(out / "plan.json")
    assert plan.start_pose is not None and len(plan.actions) == len(result["states"])


def test_rollout_of_a_plan_file_with_video(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"actions": [{"type": "MOVE", "dx": 0.05, "dy": 0.0, "dz": -0.05}]}))
    out = tmp_path / "run"
    assert main(["rollout", "non_toppling_push", "--plan", str(plan), "--video", "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["success"] is False  # nothing was pushed
    assert (out / "rollout.mp4").stat().st_size > 1000
    assert load_plan(out / "plan.json").start_pose is not None


def test_render_writes_a_frame_bundle_that_loads_back(tmp_path):
    from simpact.tasks import load_task
    from solvers.mujoco.playback import render_frame
    from solvers.mujoco.world import MujocoWorld

    assert main(["render", "non_toppling_push", "--seed", "3", "--out", str(tmp_path / "frame")]) == 0
    frame = read_frame_bundle(tmp_path / "frame")
    task = load_task("non_toppling_push")
    expected = render_frame(MujocoWorld(task.scene(3)))
    assert np.array_equal(frame.rgb, expected.rgb)
    assert np.array_equal(frame.depth, expected.depth)
    assert np.array_equal(frame.masks, expected.masks)
    assert np.array_equal(frame.K, expected.K) and np.array_equal(frame.T_base_cam, expected.T_base_cam)
    assert frame.mask_names == {1: "carton", 2: "blue_box"}
    assert (frame.masks == 1).sum() > 500
    meta = json.loads((tmp_path / "frame" / "frame.json").read_text())
    assert (meta["width"], meta["height"]) == (640, 480)


@pytest.mark.parametrize(
    "args, message",
    [
        (["rollout", "no_such_task", "--plan", "reference"], "unknown task 'no_such_task'"),
        (["rollout", "non_toppling_push", "--plan", "missing.json"], "--plan missing.json: no such file"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, message):
    assert main([*args, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_bad_plan_file_is_refused_before_simulating(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"actions": [{"type": "PUSH", "dx": "far", "dy": 0}]}))
    assert main(["rollout", "non_toppling_push", "--plan", str(plan), "--out", str(tmp_path / "o")]) == 2
    assert "action 0 (PUSH): field 'dx' must be a number" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_console_script_runs():
    done = subprocess.run([sys.executable, "-m", "simpact.cli", "tasks"], capture_output=True, text=True)
    assert done.returncode == 0 and "non_toppling_push" in done.stdout


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"simpact {__version__}"


def test_every_command_group_registers_its_verbs():
    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(verbs) == {"tasks", "rollout", "render", "plan", "audit", "real2sim", "robot", "bench"}


def test_render_with_a_camera_file(tmp_path):
    camera = tmp_path / "camera.yaml"
    camera.write_text(
        "width: 320\nheight: 240\nK: [[300, 0, 150.5], [0, 300, 121], [0, 0, 1]]\n"
        "eye: [0.55, -0.6, 0.5]\ntarget: [0.55, 0.0, 0.05]\n"
    )
    assert main(["render", "non_toppling_push", "--camera", str(camera), "--out", str(tmp_path / "f")]) == 0
    frame = read_frame_bundle(tmp_path / "f")
    assert frame.rgb.shape == (240, 320, 3)
    assert frame.K[0, 2] == 150.5
    np.testing.assert_allclose(frame.T_base_cam[:3, 3], [0.55, -0.6, 0.5])
    assert (frame.depth > 0).mean() > 0.8  # looking down at the table


def test_bad_camera_file_exits_2(tmp_path, capsys):
    camera = tmp_path / "camera.yaml"
    camera.write_text("width: 320\nfov: 60\n")
    assert main(["render", "non_toppling_push", "--camera", str(camera), "--out", str(tmp_path / "f")]) == 2
    assert "unknown fields ['fov']" in capsys.readouterr().err


def test_a_plan_beyond_reach_completes_with_a_warning(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    far = {"type": "MOVE", "dx": 0.5, "dy": 0.0, "dz": 0.0}
    plan.write_text(json.dumps({"actions": [far, far]}))
    assert main(["rollout", "non_toppling_push", "--plan", str(plan), "--out", str(tmp_path / "o")]) == 0
    assert "leaves the robot's reach" in capsys.readouterr().err
    assert json.loads((tmp_path / "o" / "result.json").read_text())["ik_residual_max_m"] > 0.1


def test_a_missing_optional_package_names_its_extra(tmp_path, capsys, monkeypatch):
    def missing(name):
        def run(args):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        return run

    monkeypatch.setattr(real2sim_verb, "cmd_real2sim", missing("cv2"))
    assert main(["real2sim", "frame", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install -e '.[perception]'" in err, err
    monkeypatch.setattr(real2sim_verb, "cmd_real2sim", missing("no_such_module"))  # a real bug is not hidden
    with pytest.raises(ModuleNotFoundError):
        main(["real2sim", "frame", "--out", str(tmp_path / "out")])
    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert set(OPTIONAL_EXTRAS.values()) <= set(extras["optional-dependencies"])


def test_verbs_that_build_scenes_from_photos_check_for_the_perception_extra_first(
    tmp_path, capsys, monkeypatch
):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cv2" else object())
    frame = tmp_path / "frame"
    frame.mkdir()
    for verb in (
        ["real2sim", str(frame)],
        ["bench", "real2sim"],
        ["plan", "non_toppling_push", "--frame", str(frame)],
    ):
        assert main([*verb, "--out", str(tmp_path / "out")]) == 2
        assert "pip install -e '.[perception]'" in capsys.readouterr().err
        assert not (tmp_path / "out").exists()  # checked before any work
