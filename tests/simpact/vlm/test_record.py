"""--record never corrupts a session: an earlier recording is refused unless --append, a torn last line is
dropped before appending (and ignored by replay), a failed write stops the session; the VLM flags reach
build_vlm."""

from __future__ import annotations

import argparse
import json

import pytest

from simpact.cli.common import VLM_ARGUMENTS, add_vlm_arguments, vlm_from_args
from simpact.core.errors import ServiceError
from simpact.vlm import ReplayMissError, VLMServiceError, VLMSettingError
from simpact.vlm.replay import RecordingError, RecordingVLM, ReplayVLM
from simpact.vlm.settings import build_vlm
from tests.vlm_doubles import ScriptedVLM


def record(path, *texts, append=False):
    vlm = RecordingVLM(ScriptedVLM(*texts), path, append=append)
    for n, _ in enumerate(texts):
        vlm.generate(f"q{n}")
    return vlm


def test_an_existing_recording_is_refused_unless_append(tmp_path):
    path = tmp_path / "vlm.jsonl"
    record(path, "a")
    before = path.read_bytes()
    with pytest.raises(VLMSettingError, match="exists; pass --append") as info:
        RecordingVLM(ScriptedVLM("b"), path)
    assert info.value.exit_code == 2 and path.read_bytes() == before  # untouched
    with pytest.raises(VLMSettingError, match="--append"):
        build_vlm("replay", replay=str(path), record=str(path))
    record(path, "b", append=True)
    assert len(path.read_text().splitlines()) == 2


def test_an_empty_or_new_file_is_fine(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    record(empty, "a")
    record(tmp_path / "new" / "deeper" / "vlm.jsonl", "a")
    assert len(empty.read_text().splitlines()) == 1


def test_unwritable_record_paths_are_refused_before_any_request(tmp_path):
    with pytest.raises(VLMSettingError, match="is a folder"):
        RecordingVLM(ScriptedVLM("a"), tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(VLMSettingError, match="cannot create the file"):
        build_vlm("replay", replay=str(tmp_path / "file"), record=str(tmp_path / "file" / "vlm.jsonl"))
    with pytest.raises(VLMSettingError, match="--append goes with --record"):
        build_vlm("replay", replay=str(tmp_path / "file"), append=True)


def test_append_drops_a_torn_last_line_and_replay_ignores_one(tmp_path):
    path = tmp_path / "vlm.jsonl"
    record(path, "a", "b")
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"key": "abc", "answ')  # a writer killed mid-line
    assert len(ReplayVLM(path)) == 2  # the torn line is not a record
    record(path, "c", append=True)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)
    assert path.read_bytes().startswith(whole)


def test_a_failed_write_stops_the_session(tmp_path):
    path = tmp_path / "vlm.jsonl"
    vlm = RecordingVLM(ScriptedVLM("a"), path)
    path.unlink()
    path.mkdir()  # the file became a folder under the run
    with pytest.raises(RecordingError, match="cannot write") as info:
        vlm.generate("q")
    assert isinstance(info.value, ServiceError) and info.value.exit_code == 4


def test_a_recorded_service_failure_replays_as_one(tmp_path):
    path = tmp_path / "vlm.jsonl"
    down = VLMServiceError("openai VLM at http://x cannot be reached", status=None)
    vlm = RecordingVLM(ScriptedVLM(down), path)
    with pytest.raises(VLMServiceError):
        vlm.generate("q")
    with pytest.raises(VLMServiceError, match="cannot be reached") as info:
        ReplayVLM(path).generate("q")
    assert info.value.exit_code == 4
    with pytest.raises(ReplayMissError) as miss:
        ReplayVLM(path).generate("another")
    assert miss.value.exit_code == 4


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_vlm_arguments(p, ["none", "openai", "gemini", "replay"], "none", "the VLM")
    return p


def test_the_flags_reach_the_back_end(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    rec = tmp_path / "vlm.jsonl"
    rec.write_text('{"key": "k", "key_text": "k", "request": {}, "answer": {"text": "x"}}\n')
    args = parser().parse_args(
        ["--vlm", "openai", "--timeout", "9", "--retries", "0", "--record", str(rec), "--append"]
    )
    assert set(VLM_ARGUMENTS) <= set(vars(args))
    vlm = vlm_from_args(args)
    assert isinstance(vlm, RecordingVLM) and vlm.append
    assert vlm.inner.timeout_s == 9.0 and vlm.inner.retry.attempts == 1  # type: ignore[attr-defined]
    with pytest.raises(VLMSettingError, match="exists"):
        vlm_from_args(parser().parse_args(["--vlm", "openai", "--record", str(rec)]))
    with pytest.raises(VLMSettingError, match="--timeout"):
        vlm_from_args(parser().parse_args(["--vlm", "openai", "--timeout", "nan"]))


def test_every_vlm_flag_has_help():
    for action in parser()._actions:
        if action.dest != "help":
            assert action.help, action.dest
