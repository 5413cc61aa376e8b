"""Recorded answers replay exactly, keyed by the request; unknown requests are clear errors."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from simpact.vlm import ReplayMissError, VLMError, VLMRequestError, get_vlm
from simpact.vlm.answers import plan_schema
from simpact.vlm.replay import RecordingVLM, ReplayVLM
from tests.vlm_doubles import ScriptedVLM

DOWN = VLMRequestError("scripted failure", status=503, attempts=5)


def image(value: int) -> np.ndarray:
    return np.full((8, 8, 3), value, np.uint8)


def record_session(path, texts):
    vlm = RecordingVLM(ScriptedVLM(*texts), path)
    answers = []
    for i in range(3):
        answers.append(vlm.generate(["sample", image(1)], plan_schema(), temperature=1.0, role=f"sample/{i}"))
    answers.append(vlm.generate(["judge", image(2)], role="evaluate"))
    return answers


def test_replay_returns_identical_answers(tmp_path):
    path = tmp_path / "vlm.jsonl"
    recorded = record_session(path, ['{"actions": [{"type": "RELEASE"}]}', "{}", "[]", "yes"])
    replay = get_vlm("replay", path=path)
    assert isinstance(replay, ReplayVLM)
    assert len(replay) == 4 and replay.model == "scripted-1"
    # Out of order on purpose: each request finds its own answer.
    evaluate = replay.generate(["judge", image(2)], role="evaluate")
    samples = [
        replay.generate(["sample", image(1)], plan_schema(), temperature=1.0, role=f"sample/{i}")
        for i in (2, 0, 1)
    ]
    assert evaluate == recorded[3]
    assert samples == [recorded[2], recorded[0], recorded[1]]


def test_every_part_of_the_request_is_in_the_key(tmp_path):
    path = tmp_path / "vlm.jsonl"
    record_session(path, ["a", "b", "c", "d"])
    replay = ReplayVLM(path)
    base: dict[str, Any] = dict(
        parts=["sample", image(1)], schema=plan_schema(), temperature=1.0, role="sample/0"
    )
    changes: list[dict[str, Any]] = [
        dict(parts=["sample!", image(1)]),
        dict(parts=["sample", image(3)]),
        dict(parts=["sample"]),
        dict(schema=None),
        dict(temperature=0.5),
        dict(role="sample/9"),
    ]
    for change in changes:
        req = {**base, **change}
        with pytest.raises(ReplayMissError):
            replay.generate(req["parts"], req["schema"], temperature=req["temperature"], role=req["role"])
    assert replay.generate(base["parts"], base["schema"], temperature=1.0, role="sample/0").text == "a"


def test_unknown_request_error_names_the_request(tmp_path):
    path = tmp_path / "vlm.jsonl"
    record_session(path, ["a", "b", "c", "d"])
    with pytest.raises(ReplayMissError) as info:
        ReplayVLM(path).generate(["Optimize the plan given these rollouts", image(5)], role="optimize/1")
    message = str(info.value)
    for phrase in ("role='optimize/1'", "Optimize the plan", "1 image(s)", str(path), "sample/0", "evaluate"):
        assert phrase in message


def test_identical_requests_replay_in_recorded_order_then_miss(tmp_path):
    path = tmp_path / "vlm.jsonl"
    vlm = RecordingVLM(ScriptedVLM("first", "second"), path)
    assert [vlm.generate("same").text for _ in range(2)] == ["first", "second"]
    replay = ReplayVLM(path)
    assert [replay.generate("same").text for _ in range(2)] == ["first", "second"]
    with pytest.raises(ReplayMissError, match="recorded 2 time"):
        replay.generate("same")


def test_recorded_failures_are_raised_again(tmp_path):
    path = tmp_path / "vlm.jsonl"
    vlm = RecordingVLM(ScriptedVLM(DOWN, "ok"), path)
    with pytest.raises(VLMRequestError):
        vlm.generate("hi")
    assert vlm.generate("hi").text == "ok"
    replay = ReplayVLM(path)
    with pytest.raises(VLMRequestError, match="scripted failure") as info:
        replay.generate("hi")
    assert info.value.status == 503
    assert replay.generate("hi").text == "ok"


def test_images_can_be_matched_by_position_only(tmp_path):
    path = tmp_path / "vlm.jsonl"
    RecordingVLM(ScriptedVLM("seen"), path).generate(["look", image(1)])
    with pytest.raises(ReplayMissError):
        ReplayVLM(path).generate(["look", image(2)])
    assert ReplayVLM(path, match_images=False).generate(["look", image(2)]).text == "seen"


def test_the_record_is_readable_and_holds_images_by_digest(tmp_path):
    path = tmp_path / "vlm.jsonl"
    RecordingVLM(ScriptedVLM('{"a": 1}'), path).generate(["look", image(1)], {"type": "object"}, role="r")
    (line,) = path.read_text().splitlines()
    record = json.loads(line)
    assert record["request"]["parts"][0] == {"text": "look"}
    assert (
        record["request"]["parts"][1]["shape"] == [8, 8, 3]
        and len(record["request"]["parts"][1]["image"]) == 64
    )
    assert record["answer"]["data"] == {"a": 1} and record["request"]["role"] == "r"


def test_png_bytes_and_arrays_are_both_accepted(tmp_path):
    path = tmp_path / "vlm.jsonl"
    vlm = RecordingVLM(ScriptedVLM("x"), path)
    from simpact.vlm import ImagePart

    png = ImagePart.from_array(image(7)).data
    vlm.generate(["look", png])
    assert ReplayVLM(path).generate(["look", png]).text == "x"


def test_bad_recordings_and_parts_are_clear_errors(tmp_path):
    with pytest.raises(VLMError, match="no recording"):
        ReplayVLM(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(VLMError, match="line 1"):
        ReplayVLM(bad)
    good = tmp_path / "vlm.jsonl"
    RecordingVLM(ScriptedVLM("x"), good).generate("hi")
    with pytest.raises(ValueError, match="part 1: an image must be a uint8 array"):
        ReplayVLM(good).generate(["hi", np.zeros((4, 4), np.float32)])
    with pytest.raises(ValueError, match="PNG or JPEG"):
        ReplayVLM(good).generate(["hi", b"GIF89a"])
