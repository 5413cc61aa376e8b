import json
import math

import pytest

from simpact.core.actions import ACTION_SPECS, Plan, PlanError, load_plan


def plan_dict():
    return {
        "description": "pick and place",
        "actions": [
            {"type": "MOVE", "dx": 0.1, "dy": 0.0, "dz": -0.05, "reason": "approach"},
            {"type": "GRASP", "d": 0.04},
            {"type": "LIFT", "dz": 0.1},
            {"type": "ROTATE", "dyaw": 0.5},
            {"type": "PUSH", "dx": 0.0, "dy": 0.02},
            {"type": "DESCEND", "dz": 0.1},
            {"type": "RELEASE"},
        ],
    }


def test_round_trip_keeps_extra_fields(tmp_path):
    plan = Plan.from_dict(plan_dict())
    assert [a.type for a in plan.actions] == ["MOVE", "GRASP", "LIFT", "ROTATE", "PUSH", "DESCEND", "RELEASE"]
    assert plan.actions[0].extra == {"reason": "approach"}
    path = plan.save(tmp_path / "plan.json")
    again = load_plan(path)
    assert again == plan
    assert json.loads(path.read_text())["description"] == "pick and place"


def test_every_action_type_has_the_tasks_md_parameters():
    assert {k: v.fields for k, v in ACTION_SPECS.items()} == {
        "PUSH": ("dx", "dy"),
        "LIFT": ("dz",),
        "DESCEND": ("dz",),
        "GRASP": ("d",),
        "RELEASE": (),
        "ROTATE": ("dyaw",),
        "MOVE": ("dx", "dy", "dz"),
    }


@pytest.mark.parametrize(
    "action, message",
    [
        ({"type": "JUMP"}, "action 0: unknown type 'JUMP'"),
        ({"dx": 0.1}, "action 0: unknown type None"),
        ({"type": "PUSH", "dx": float("nan"), "dy": 0.0}, "action 0 (PUSH): field 'dx' is nan"),
        ({"type": "PUSH", "dx": 0.1}, "action 0 (PUSH): field 'dy' is missing"),
        ({"type": "LIFT", "dz": "high"}, "action 0 (LIFT): field 'dz' must be a number"),
        ({"type": "LIFT", "dz": True}, "action 0 (LIFT): field 'dz' must be a number"),
        ({"type": "LIFT", "dz": -0.1}, "action 0 (LIFT): field 'dz' = -0.1 is outside [0, 0.5]"),
        ({"type": "MOVE", "dx": 2.0, "dy": 0, "dz": 0}, "field 'dx' = 2 is outside [-0.5, 0.5]"),
        ({"type": "GRASP", "d": 0.5}, "action 0 (GRASP): field 'd' = 0.5 is outside [0, 0.1]"),
        ({"type": "ROTATE", "dyaw": math.inf}, "field 'dyaw' is inf"),
        ("MOVE", "expected an object"),
    ],
)
def test_bad_actions_name_the_action_and_field(action, message):
    with pytest.raises(PlanError, match=None) as info:
        Plan.from_dict({"actions": [action]})
    assert message in str(info.value)


def test_lower_case_type_is_accepted():
    assert Plan.from_dict({"actions": [{"type": "release"}]}).actions[0].type == "RELEASE"


@pytest.mark.parametrize(
    "raw, message",
    [
        ([], "must be a JSON object"),
        ({}, "must have an 'actions' list"),
        ({"actions": []}, "'actions' list is empty"),
        ({"actions": "MOVE"}, "must have an 'actions' list"),
        ({"actions": [{"type": "RELEASE"}], "start_pose": {"position": [0, 0]}}, "start_pose"),
        (
            {
                "actions": [{"type": "RELEASE"}],
                "start_pose": {"position": [0, 0, 0], "quaternion": [2, 0, 0, 0], "gripper_width": 0.0},
            },
            "unit norm",
        ),
    ],
)
def test_bad_plans(raw, message):
    with pytest.raises(PlanError) as info:
        Plan.from_dict(raw)
    assert message in str(info.value)


def test_bad_plan_files_name_the_file(tmp_path):
    with pytest.raises(PlanError, match="does not exist"):
        load_plan(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"actions": [')
    with pytest.raises(PlanError, match="broken.json is not valid JSON"):
        load_plan(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"actions": [{"type": "MOVE", "dx": 0.1}]}')
    with pytest.raises(PlanError, match="wrong.json: action 0 \\(MOVE\\): field 'dy' is missing"):
        load_plan(wrong)


def test_a_plan_file_that_is_binary_or_a_folder_is_a_plan_error(tmp_path):
    """Found by the Hypothesis parser test: a binary file was a UnicodeDecodeError, a folder an OSError."""
    binary = tmp_path / "plan.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PlanError, match="not text"):
        load_plan(binary)
    with pytest.raises(PlanError, match="is a folder"):
        load_plan(tmp_path)
