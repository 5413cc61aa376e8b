"""One ask → validate → repair helper: one repair round with the errors, failures kept or raised as asked,
every request recorded; never a crash on a malformed answer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simpact.vlm import VLMRequestError
from simpact.vlm.answers import AnswerKind, parse_evaluation, parse_plan
from simpact.vlm.ask import Exchange, ask, check_json, echo_answer, echo_quoted, repair_message
from tests.vlm_doubles import ScriptedVLM

IMAGE = np.zeros((4, 4, 3), np.uint8)
YES = {"reason": "it is there", "success": True}


def read_names(data: Any) -> tuple[list[str] | None, list[str]]:
    names = data.get("names") if isinstance(data, dict) else None
    if not isinstance(names, list) or not names:
        return None, ["'names' must be a non-empty list"]
    return names, []


def test_repair_message_lists_every_error() -> None:
    result = parse_plan({"actions": [{"type": "JUMP"}, {"type": "LIFT"}]})
    message = repair_message(result)
    for error in result.errors:
        assert f"- {error}" in message
    assert "complete JSON" in message
    assert "- the answer was empty" in repair_message(parse_plan(""))
    assert "- one\n- two" in repair_message(["one", "two"])


def test_a_usable_answer_needs_no_repair() -> None:
    vlm = ScriptedVLM(YES)
    asked = ask(vlm, [IMAGE, "judge this"], None, parse_evaluation, role="evaluate", temperature=0.0)
    assert asked.result is not None and asked.result.success is True
    assert asked.repairs == 0 and asked.reason == "" and vlm.roles == ["evaluate"]
    (exchange,) = asked.exchanges
    assert (
        exchange.prompt == "judge this"
        and exchange.summary()["answer"] == '{"reason": "it is there", "success": true}'
    )
    record = exchange.to_dict()
    assert record["images"] == 1 and record["latency_s"] == 0.25 and record["error"] is None


def test_one_repair_round_sends_the_answer_back_with_the_errors() -> None:
    vlm = ScriptedVLM("maybe?", YES)
    seen: list[Exchange] = []
    asked = ask(vlm, ["judge this"], None, parse_evaluation, role="evaluate", record=seen.append)
    assert asked.result is not None and asked.repairs == 1 and seen == asked.exchanges
    assert vlm.roles == ["evaluate", "evaluate/repair"]
    repair = vlm.calls[1].parts
    assert repair[:2] == ["judge this", "maybe?"] and repair[2] == repair_message(asked.verdicts[0])
    assert asked.exchanges[1].prompt == repair[2]


def test_a_blank_answer_is_not_echoed_and_the_quoted_echo_says_so() -> None:
    assert echo_answer("  ") == [] and echo_quoted("") == ["Your answer was:\n"]
    vlm = ScriptedVLM("", YES)
    ask(vlm, ["judge this"], None, parse_evaluation, role="evaluate")
    assert len(vlm.calls[1].parts) == 2
    vlm = ScriptedVLM("hmm", YES)
    ask(vlm, ["judge this"], None, parse_evaluation, role="evaluate", echo=echo_quoted)
    assert vlm.calls[1].parts[1] == "Your answer was:\nhmm"


def test_still_unusable_after_repair_says_both_reasons() -> None:
    asked = ask(ScriptedVLM("", "{}"), ["judge"], None, parse_evaluation, role="evaluate")
    assert asked.result is None and asked.repairs == 1
    assert [v.kind for v in asked.verdicts] == [AnswerKind.EMPTY, AnswerKind.INVALID]
    assert asked.reason == "empty: the answer was empty; after repair invalid: 'success' is missing"


def test_request_failures_are_kept_or_raised() -> None:
    down = VLMRequestError("server down", status=503)
    asked = ask(ScriptedVLM(down), ["judge"], None, parse_evaluation, role="evaluate")
    assert asked.result is None and asked.error is down and asked.reason == "VLM error: server down"
    assert asked.exchanges[0].error == "server down" and asked.exchanges[0].answer is None
    asked = ask(ScriptedVLM("?", down), ["judge"], None, parse_evaluation, role="evaluate")
    assert asked.reason.startswith("no_json: ") and asked.reason.endswith("; repair: VLM error: server down")
    with pytest.raises(RuntimeError, match="bug"):  # only VLM errors are caught by default
        ask(ScriptedVLM(RuntimeError("bug")), ["judge"], None, parse_evaluation, role="evaluate")
    asked = ask(ScriptedVLM(RuntimeError("bug")), ["j"], None, parse_evaluation, role="e", catch=(Exception,))
    assert asked.reason == "RuntimeError: bug" and asked.exchanges[0].error == "RuntimeError: bug"
    with pytest.raises(VLMRequestError):
        ask(ScriptedVLM(down), ["judge"], None, parse_evaluation, role="evaluate", catch=())


def test_check_json_reads_a_value_or_says_why_not() -> None:
    vlm = ScriptedVLM("Sure, here:", {"names": []}, {"names": ["cup"]})

    def validate(answer: Any) -> Any:
        return check_json(answer, read_names)

    asked = ask(vlm, ["name them"], None, validate, role="names")
    assert asked.result is None and [v.kind for v in asked.verdicts] == [
        AnswerKind.NO_JSON,
        AnswerKind.INVALID,
    ]
    assert asked.verdicts[-1].errors == ("'names' must be a non-empty list",)
    asked = ask(vlm, ["name them"], None, validate, role="names")
    assert asked.result is not None and asked.result.value == ["cup"]
