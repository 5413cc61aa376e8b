"""``simpact robot execute``: the contract (result.json fields, exit status) on refusals, dry runs and
franky-sim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robot.safety import HOME_TCP_QUATERNION, plan_sha256
from simpact.cli import main
from simpact.core.actions import Plan

START = {"position": [0.45, 0.0, 0.3], "quaternion": list(HOME_TCP_QUATERNION), "gripper_width": 0.08}


def write_plan(tmp_path: Path, *actions: dict) -> Path:
    return Plan.from_actions(list(actions), start_pose=START).save(tmp_path / "plan.json")


def read_result(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())


def test_plan_outside_the_workspace_is_refused_with_status_2(tmp_path: Path, capsys) -> None:
    plan = write_plan(
        tmp_path, {"type": "LIFT", "dz": 0.02}, {"type": "MOVE", "dx": 0.45, "dy": 0.0, "dz": 0.0}
    )
    out = tmp_path / "out"
    # nothing listens at this address: a refusal never connects
    args = ["robot", "execute", "--host", "127.0.0.254", "--plan", str(plan), "--yes", "--table-only"]
    status = main([*args, "--out", str(out)])
    assert status == 2
    result = read_result(out)
    assert result["executed"] is False
    assert "action 1 (MOVE): the tool reaches x = 0.900 m, outside the workspace" in result["refused"]
    assert result["validation"]["violations"][0]["action"] == 1
    assert result["waypoint_errors_m"] == [] and result["gripper_widths"] == []
    assert "refused, nothing moved" in capsys.readouterr().err


def test_a_collision_in_the_given_scene_is_refused(tmp_path: Path) -> None:
    scene = tmp_path / "scene.yaml"
    scene.write_text(
        "objects:\n  - {name: pillar, shape: box, size: [0.06, 0.06, 0.7], position: [0.45, 0.22, 0.35], "
        "fixed: true}\n"
    )
    plan = write_plan(
        tmp_path, {"type": "LIFT", "dz": 0.02}, {"type": "MOVE", "dx": 0.0, "dy": 0.25, "dz": 0.0}
    )
    out = tmp_path / "out"
    args = ["robot", "execute", "--host", "127.0.0.254", "--plan", str(plan), "--yes", "--out", str(out)]
    assert main([*args, "--scene", str(scene)]) == 2
    result = read_result(out)
    assert result["collision_scene"] == f"scene file {scene}"
    assert "action 1 (MOVE): in simulation the robot's fr3_link" in result["refused"]
    assert "hits 'pillar'" in result["refused"]


def test_without_yes_and_without_a_terminal_it_is_a_dry_run(tmp_path: Path, capsys) -> None:
    plan = write_plan(tmp_path, {"type": "LIFT", "dz": 0.02})
    out = tmp_path / "out"
    status = main(
        ["robot", "execute", "--host", "127.0.0.254", "--plan", str(plan), "--table-only", "--out", str(out)]
    )
    assert status == 0
    assert "--table-only: collisions were checked against the table alone" in capsys.readouterr().out
    result = read_result(out)
    assert result["collision_scene"] == "the table only (--table-only)"
    assert result["executed"] is False and result["dry_run"] is True and result["refused"] is None
    assert "pass --yes to move" in result["reason"]
    assert result["plan_sha256"] == plan_sha256(Plan.from_dict(json.loads(plan.read_text())))
    assert result["validation"]["ok"] is True


def test_a_plan_that_is_not_the_validated_one_is_refused(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, {"type": "LIFT", "dz": 0.02})
    out = tmp_path / "out"
    args = ["robot", "execute", "--host", "127.0.0.254", "--plan", str(plan), "--yes", "--out", str(out)]
    args += ["--table-only"]
    assert main([*args, "--plan-sha256", "0" * 64]) == 2
    assert "it is not the plan you validated" in read_result(out)["refused"]
    no_start = tmp_path / "no_start.json"
    no_start.write_text(json.dumps({"actions": [{"type": "LIFT", "dz": 0.02}]}))
    assert main([*args[:5], str(no_start), *args[6:]]) == 2
    assert "has no start_pose; pass --from-current" in read_result(out)["refused"]


def test_execute_on_franky_sim_writes_the_measurements(franky_sim, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        {"type": "LIFT", "dz": 0.03},
        {"type": "GRASP", "d": 0.02},
        {"type": "MOVE", "dx": 0.0, "dy": 0.04, "dz": -0.02},
        {"type": "RELEASE"},
    )
    out = tmp_path / "out"
    status = main(
        [
            "robot",
            "execute",
            "--host",
            franky_sim.host,
            "--plan",
            str(plan),
            "--task",
            "non_toppling_push",
            "--no-realtime",
            "--speed",
            "0.25",
            "--yes",
            "--out",
            str(out),
        ]
    )
    assert status == 0
    result = read_result(out)
    assert result["executed"] is True and result["refused"] is None and result["error"] is None
    assert result["collision_scene"] == "task non_toppling_push seed 0"
    assert len(result["waypoint_errors_m"]) >= 4 and max(result["waypoint_errors_m"]) < 0.005
    assert [(g["action"], g["commanded_m"]) for g in result["gripper_widths"]] == [(1, 0.02), (3, 0.08)]
    assert all(abs(g["measured_m"] - g["commanded_m"]) < 0.003 for g in result["gripper_widths"])
    assert result["plan_sha256"] == result["executed_plan_sha256"]

    # a plan without a start pose runs from where the robot is with --from-current
    lift = tmp_path / "lift.json"
    lift.write_text(json.dumps({"actions": [{"type": "LIFT", "dz": 0.02}]}))
    again = tmp_path / "again"
    args = ["robot", "execute", "--host", franky_sim.host, "--plan", str(lift), "--no-realtime", "--yes"]
    assert main([*args, "--from-current", "--task", "non_toppling_push", "--out", str(again)]) == 0
    result = read_result(again)
    assert result["executed"] is True and result["plan_sha256"] != result["executed_plan_sha256"]
    assert result["start"]["commanded"] == pytest.approx([0.45, 0.04, 0.31], abs=0.002)  # where it stopped
    assert max(result["waypoint_errors_m"]) < 0.005


def test_without_a_scene_it_refuses_unless_table_only(tmp_path: Path, capsys) -> None:
    plan = write_plan(tmp_path, {"type": "LIFT", "dz": 0.02})
    out = tmp_path / "out"
    args = ["robot", "execute", "--host", "127.0.0.254", "--plan", str(plan), "--yes", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "the collision pre-check needs one" in err and "--table-only" in err and "\n" not in err
    assert not out.exists()  # refused before anything was read, written or connected
