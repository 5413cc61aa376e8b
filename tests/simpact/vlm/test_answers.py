"""Every malformed answer becomes a typed result; plans are validated by simpact.core.actions."""

from __future__ import annotations

import json
import math

import pytest

from simpact.core.actions import ACTION_SPECS, Plan
from simpact.vlm import VLMAnswer
from simpact.vlm.answers import (
    AnswerKind,
    describe_actions,
    evaluation_schema,
    object_labels_schema,
    parse_evaluation,
    parse_json,
    parse_plan,
    physics_schema,
    plan_schema,
)

GOOD = {
    "description": "approach, push low, back off",
    "actions": [
        {"type": "MOVE", "dx": 0.1, "dy": 0.0, "dz": -0.05, "reason": "get behind"},
        {"type": "PUSH", "dx": 0.2, "dy": 0.0},
        {"type": "GRASP", "d": 0.04},
        {"type": "RELEASE"},
    ],
}
GOOD_TEXT = json.dumps(GOOD)


@pytest.mark.parametrize(
    "text, note",
    [
        (GOOD_TEXT, None),
        (f"```json\n{GOOD_TEXT}\n```", "code fence"),
        (f"Here is my plan:\n{GOOD_TEXT}\nIt pushes the carton low so it slides.", "around the JSON"),
        (f"Plan: ```\n{json.dumps(GOOD, indent=2)}\n``` done", "code fence"),
        (GOOD_TEXT.replace("}]", "},]"), None),  # a trailing comma
        (GOOD_TEXT[:-1], "closed 1 bracket"),  # only the final brace is missing
    ],
)
def test_json_is_found_wherever_it_is(text, note):
    result = parse_plan(text)
    assert result.ok, result.errors
    assert result.plan == Plan.from_dict(GOOD)
    if note:
        assert any(note in n for n in result.notes)


def test_a_bare_action_list_or_a_wrapped_plan_is_accepted():
    assert parse_plan(json.dumps(GOOD["actions"])).ok
    wrapped = parse_plan(json.dumps({"plan": GOOD}))
    assert wrapped.plan is not None and wrapped.plan.description == GOOD["description"]


def test_prose_with_braces_before_the_json_picks_the_plan():
    text = "Using {dx} for the push (see [notes]): " + GOOD_TEXT
    assert parse_plan(text).ok


@pytest.mark.parametrize(
    "answer, kind, phrase",
    [
        ("", AnswerKind.EMPTY, "empty"),
        ("   \n", AnswerKind.EMPTY, "empty"),
        (None, AnswerKind.EMPTY, "empty"),
        ("I'm sorry, but I can't help with controlling this robot.", AnswerKind.REFUSAL, "declined"),
        (VLMAnswer("", finish_reason="SAFETY"), AnswerKind.REFUSAL, "SAFETY"),
        (VLMAnswer("I cannot do that.", finish_reason="refusal"), AnswerKind.REFUSAL, "declined"),
        ("Push the carton gently to the left.", AnswerKind.NO_JSON, "no JSON"),
        (GOOD_TEXT[:80], AnswerKind.TRUNCATED, "cut off"),
        (VLMAnswer(GOOD_TEXT[:120], finish_reason="MAX_TOKENS"), AnswerKind.TRUNCATED, "MAX_TOKENS"),
        ('{"actions": [{"type": "MOVE", "dx": 0.1,', AnswerKind.TRUNCATED, "cut off"),
        ('{"actions": [{"type": "MOVE", "dx": 0.1,}', AnswerKind.INVALID, "missing"),
        ('{"actions": [{"type": "PUSH" "dx": 0.1}]}', AnswerKind.NO_JSON, "does not parse"),
        ('{"description": "x"}', AnswerKind.INVALID, "'actions' list"),
        ('{"actions": []}', AnswerKind.INVALID, "empty"),
        ('{"actions": "MOVE"}', AnswerKind.INVALID, "'actions' list"),
        ('{"actions": [{"type": "MOVE", "dx": 0.1, "dy": 0.0}]}', AnswerKind.INVALID, "'dz' is missing"),
        ('{"actions": [{"type": "PUSH", "dx": "far", "dy": 0}]}', AnswerKind.INVALID, "must be a number"),
        ('{"actions": [{"type": "PUSH", "dx": [0.1], "dy": 0}]}', AnswerKind.INVALID, "must be a number"),
        ('{"actions": [{"type": "PUSH", "dx": true, "dy": 0}]}', AnswerKind.INVALID, "must be a number"),
        ('{"actions": [{"type": "JUMP", "dz": 0.1}]}', AnswerKind.INVALID, "unknown type 'JUMP'"),
        ('{"actions": [{"dz": 0.1}]}', AnswerKind.INVALID, "unknown type None"),
        ('{"actions": [42]}', AnswerKind.INVALID, "expected an object"),
        ('{"actions": [{"type": "LIFT", "dz": NaN}]}', AnswerKind.INVALID, "finite"),
        ("[1, 2, 3]", AnswerKind.INVALID, "expected an object"),
        ("42", AnswerKind.NO_JSON, "no JSON"),
    ],
)
def test_malformed_answers_give_typed_results(answer, kind, phrase):
    result = parse_plan(answer)
    assert result.kind is kind
    assert not result.ok and result.plan is None
    assert result.errors and any(phrase in e for e in result.errors), result.errors


def test_truncated_answer_keeps_what_was_complete_for_the_record():
    result = parse_plan(GOOD_TEXT[: GOOD_TEXT.index('{"type": "GRASP"') + 5])
    assert result.kind is AnswerKind.TRUNCATED
    assert result.data["actions"] == GOOD["actions"][:2]  # the partial value, never accepted as a plan


def test_all_invalid_actions_are_reported_at_once():
    raw = {"actions": [{"type": "JUMP"}, {"type": "LIFT"}, {"type": "GRASP", "d": "wide"}]}
    result = parse_plan(raw)
    assert result.kind is AnswerKind.INVALID and len(result.errors) == 3
    assert [e.split(":")[0] for e in result.errors] == ["action 0", "action 1 (LIFT)", "action 2 (GRASP)"]


def test_out_of_range_parameters_are_clamped_and_recorded():
    raw = {"actions": [{"type": "MOVE", "dx": 0.9, "dy": -2, "dz": 0.0}, {"type": "GRASP", "d": 0.15}]}
    result = parse_plan(raw)
    assert result.plan is not None
    move, grasp = result.plan.actions
    assert move.params == {"dx": 0.5, "dy": -0.5, "dz": 0.0} and grasp.params == {"d": 0.1}
    assert [(c.index, c.field, c.value, c.clamped) for c in result.clamps] == [
        (0, "dx", 0.9, 0.5),
        (0, "dy", -2.0, -0.5),
        (1, "d", 0.15, 0.1),
    ]
    assert "clamped to 0.5 (range [-0.5, 0.5])" in str(result.clamps[0])


def test_out_of_range_parameters_can_be_rejected_with_the_range():
    result = parse_plan({"actions": [{"type": "ROTATE", "dyaw": 4.0}]}, out_of_range="reject")
    assert result.kind is AnswerKind.INVALID and not result.clamps
    assert "outside [-3.14159, 3.14159]" in result.errors[0]


def test_numeric_strings_and_lower_case_types_are_read():
    result = parse_plan({"actions": [{"type": "lift", "dz": "0.1"}]})
    assert result.plan is not None and result.plan.actions[0].params == {"dz": 0.1}
    assert any("read dz" in n for n in result.notes)


@pytest.mark.parametrize(
    "answer, success",
    [
        ('{"reason": "nested and resting", "success": true}', True),
        ('```json\n{"reason": "tipped over", "success": false}\n```', False),
        ('{"reason": "r", "success": "yes"}', True),
        ("No. The carton fell over.", False),
        ("Yes, the bowl is nested.", True),
    ],
)
def test_evaluation_answers(answer, success):
    result = parse_evaluation(answer)
    assert result.ok and result.success is success


@pytest.mark.parametrize(
    "answer, kind",
    [
        ('{"reason": "unclear"}', AnswerKind.INVALID),
        ('{"reason": "r", "success": "maybe"}', AnswerKind.INVALID),
        ("[true]", AnswerKind.INVALID),
        ("", AnswerKind.EMPTY),
        ("I'm sorry, I cannot judge this.", AnswerKind.REFUSAL),
        ('{"reason": "the bowl is', AnswerKind.TRUNCATED),
        ("The bowl might be nested.", AnswerKind.NO_JSON),
    ],
)
def test_unusable_evaluations_are_typed(answer, kind):
    result = parse_evaluation(answer)
    assert result.kind is kind and result.success is None and result.errors


def test_parse_json_never_raises_on_odd_input():
    for text in ["{", "[", "}", '"', "{{{{", "```", "```json\n{", '{"a": "\\', "\x00", "{" * 500, "[]" * 300]:
        result = parse_json(text)
        assert isinstance(result.kind, AnswerKind)


def test_plan_schema_comes_from_the_action_specs():
    schema = plan_schema()
    branches = schema["properties"]["actions"]["items"]["anyOf"]
    assert [b["properties"]["type"]["enum"] for b in branches] == [[name] for name in ACTION_SPECS]
    for branch, spec in zip(branches, ACTION_SPECS.values()):
        assert branch["required"] == ["type", *spec.fields]
        for f, (lo, hi) in zip(spec.fields, spec.ranges):
            assert (branch["properties"][f]["minimum"], branch["properties"][f]["maximum"]) == (lo, hi)
    push = branches[0]["properties"]
    assert push["dx"]["description"] == "m" and branches[5]["properties"]["dyaw"]["description"] == "rad"
    json.dumps(schema)  # plain JSON


def test_action_description_lists_units_and_ranges():
    text = describe_actions()
    assert len(text.splitlines()) == len(ACTION_SPECS)
    assert "- PUSH(dx, dy): " in text and "dx in [-0.5, 0.5] m" in text
    assert f"dyaw in [{-math.pi:.4g}, {math.pi:.4g}] rad" in text
    assert "- RELEASE: open the gripper fully" in text


def test_other_schemas_are_json():
    for schema in (evaluation_schema(), object_labels_schema(), physics_schema()):
        assert schema["type"] == "object" and json.loads(json.dumps(schema)) == schema
