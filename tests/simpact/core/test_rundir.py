"""Output folders are checked before any work; result.json always says where the run stands."""

import json

import pytest

from simpact.core.errors import UsageError
from simpact.core.jsonio import write_json
from simpact.core.rundir import RunRecord, prepare_out


def test_a_used_folder_is_refused_unless_resumed_or_overwritten(tmp_path):
    out = tmp_path / "run"
    assert prepare_out(out) == out and out.is_dir()  # new: created
    (out / "result.json").write_text("{}")
    with pytest.raises(UsageError, match="--resume.*--overwrite"):
        prepare_out(out)
    assert prepare_out(out, resume=True) == out and (out / "result.json").exists()  # kept
    (out / "sub").mkdir()
    prepare_out(out, overwrite=True)
    assert list(out.iterdir()) == []  # cleared
    with pytest.raises(UsageError, match="no earlier run"):
        prepare_out(out, resume=True)
    with pytest.raises(UsageError, match="contradict"):
        prepare_out(out, overwrite=True, resume=True)


def test_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        prepare_out(tmp_path / "file")
    assert (tmp_path / "file").read_text() == "x"  # untouched


def test_the_record_says_running_then_done_interrupted_or_failed(tmp_path):
    with RunRecord.start(tmp_path, "plan", {"seed": 1}) as run:
        first = json.loads(run.path.read_text())
        assert first["status"] == "running" and first["settings"] == {"seed": 1}
        run.update(rollouts=3)
    assert json.loads(run.path.read_text())["status"] == "done"
    assert json.loads(run.path.read_text())["rollouts"] == 3
    with pytest.raises(KeyboardInterrupt), RunRecord.start(tmp_path, "plan", {}) as run:
        raise KeyboardInterrupt
    assert json.loads(run.path.read_text())["status"] == "interrupted"
    with pytest.raises(UsageError), RunRecord.start(tmp_path, "plan", {}) as run:
        raise UsageError("bad seed")
    failed = json.loads(run.path.read_text())
    assert failed["status"] == "failed" and failed["error"] == "bad seed"


def test_json_is_written_atomically(tmp_path):
    path = write_json(tmp_path / "a" / "r.json", {"x": 1})
    assert json.loads(path.read_text()) == {"x": 1}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary file left
