"""SimuGuard loses nothing and fails clearly: an interrupted recording is a valid partial recording that
``--resume`` completes bit for bit like an uninterrupted one; bad input is one line and exit 2."""

import filecmp
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import simpact.guard.replay as replay_module
from simpact.cli import main
from simpact.guard.recorder import Recorder
from simpact.guard.replay import record_mjcf, record_task_rollout
from simpact.guard.store import CHECKPOINT, load_recording, read_manifest

ARM = """<mujoco><option timestep="0.002"/>
<worldbody><geom name="floor" type="plane" size="2 2 0.1"/>
<body name="arm" pos="0 0 0.1"><joint name="j" type="hinge" axis="0 0 1"/>
  <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/></body>
<body name="box" pos="0.2 0.1 0.05"><freejoint/><geom type="box" size=".04 .04 .04" mass="0.2"/></body>
</worldbody><actuator><motor joint="j" gear="1"/></actuator></mujoco>"""

STEPS = 1100
CTRL = 0.5 * np.sin(0.01 * np.arange(STEPS))[:, None]


def stop_after(n: int):
    def stop(recorder: Recorder) -> None:
        if recorder.nsteps == n:
            raise KeyboardInterrupt

    return stop


def assert_same_folders(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert filecmp.cmp(a / name, b / name, shallow=False), name


@pytest.fixture
def arm(tmp_path):
    path = tmp_path / "arm.xml"
    path.write_text(ARM)
    return path


@pytest.mark.parametrize("stop", [620, 100])
def test_an_interrupted_recording_resumes_bit_for_bit(tmp_path, arm, stop):
    full = tmp_path / "full"
    record_mjcf(arm, STEPS, full, ctrl=CTRL)
    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        record_mjcf(arm, STEPS, part, ctrl=CTRL, hooks=[stop_after(stop)])
    man = read_manifest(part)
    complete = stop // 250 * 250
    assert man.status == "interrupted" and man.nsteps == complete and len(man.chunks) == stop // 250
    assert load_recording(part).nsteps == complete  # a valid partial recording of its complete chunks
    assert (part / CHECKPOINT).is_file() == (complete > 0)
    if complete:  # the finished chunks are not taken again: they keep their files
        before = (part / "chunk_00000.npz").stat().st_mtime_ns
    record_mjcf(arm, STEPS, part, ctrl=CTRL, resume=True)
    assert_same_folders(full, part)  # chunks and manifest identical, resume.npz gone
    if complete:
        assert (part / "chunk_00000.npz").stat().st_mtime_ns == before


def test_an_interrupt_while_a_chunk_is_queued_leaves_only_written_chunks_listed(tmp_path, arm, monkeypatch):
    """Ctrl-C / SIGTERM may land in the main thread after a chunk is listed but before its write is
    queued: the interrupted manifest must still name only files on disk, and resume must complete it."""
    full = tmp_path / "full"
    record_mjcf(arm, STEPS, full, ctrl=CTRL)
    real = Recorder._checkpoint
    calls = []

    def interrupted_third(self: Recorder) -> dict:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self)

    part = tmp_path / "part"
    monkeypatch.setattr(Recorder, "_checkpoint", interrupted_third)
    with pytest.raises(KeyboardInterrupt):
        record_mjcf(arm, STEPS, part, ctrl=CTRL)
    monkeypatch.undo()
    man = read_manifest(part)
    assert man.status == "interrupted" and man.chunks == ["chunk_00000.npz", "chunk_00001.npz"]
    assert man.nsteps == 500 and not (part / "chunk_00002.npz").exists()
    record_mjcf(arm, STEPS, part, ctrl=CTRL, resume=True)
    assert_same_folders(full, part)


def test_an_interrupt_just_after_a_write_is_queued_keeps_checkpoint_and_manifest_together(
    tmp_path, arm, monkeypatch
):
    """SIGTERM landed once (this session's CI clone) after a chunk's write was handed to the writer thread
    and before the main thread noted it: the write went on to store the chunk and a checkpoint 250 steps
    ahead of the manifest the interruption then saved, and resume refused the folder."""
    from concurrent.futures import ThreadPoolExecutor

    import simpact.guard.recorder as recorder_module

    full = tmp_path / "full"
    record_mjcf(arm, STEPS, full, ctrl=CTRL)
    calls = []

    class InterruptedAfterThirdSubmit(ThreadPoolExecutor):
        def submit(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            future = super().submit(*args, **kwargs)
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt
            return future

    part = tmp_path / "part"
    monkeypatch.setattr(recorder_module, "ThreadPoolExecutor", InterruptedAfterThirdSubmit)
    with pytest.raises(KeyboardInterrupt):
        record_mjcf(arm, STEPS, part, ctrl=CTRL)
    monkeypatch.undo()
    man = read_manifest(part)
    assert man.status == "interrupted" and man.nsteps == 750 and len(man.chunks) == 3
    record_mjcf(arm, STEPS, part, ctrl=CTRL, resume=True)
    assert_same_folders(full, part)


def test_a_resumed_task_recording_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    """The task's collected rows travel in the checkpoint: the resumed recording's verdict is the same."""
    full = tmp_path / "full"
    record_task_rollout("bowl_stacking", 0, out=full)

    class Interrupting(replay_module.Collector):
        def __call__(self, recorder: Recorder) -> None:
            super().__call__(recorder)
            if recorder.nsteps == 777:
                raise KeyboardInterrupt

    part = tmp_path / "part"
    monkeypatch.setattr(replay_module, "Collector", Interrupting)
    with pytest.raises(KeyboardInterrupt):
        record_task_rollout("bowl_stacking", 0, out=part)
    monkeypatch.undo()
    assert read_manifest(part).nsteps == 750
    record_task_rollout("bowl_stacking", 0, out=part, resume=True)
    assert_same_folders(full, part)
    assert read_manifest(part).meta["outcome"] == read_manifest(full).meta["outcome"]


def audit(*argv: str) -> int:
    return main(["audit", *argv])


def test_sigterm_leaves_a_partial_recording_that_resume_completes(tmp_path, arm, capsys):
    steps = 30000
    rec = tmp_path / "rec"
    cmd = [sys.executable, "-m", "simpact.cli", "audit", "record", "--mjcf", str(arm), "--steps", str(steps)]
    proc = subprocess.Popen([*cmd, "--out", str(rec)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (rec / "manifest.json").is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the recording ended before it could be interrupted"
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip().splitlines() == [f"simpact audit: interrupted; what finished is in {rec}"]
    man = read_manifest(rec)
    result = json.loads((rec / "result.json").read_text())
    assert man.status == result["status"] == "interrupted" and 0 < man.nsteps == result["nsteps"] < steps
    assert audit("record", "--mjcf", str(arm), "--steps", str(steps), "--out", str(rec)) == 2
    assert "--resume" in capsys.readouterr().err  # refused: it holds a recording
    assert audit("record", "--out", str(rec), "--resume", "--steps", "5") == 2
    assert "differs from the recorded 30000" in capsys.readouterr().err
    assert audit("record", "--out", str(rec), "--resume") == 0
    result = json.loads((rec / "result.json").read_text())
    assert result["status"] == "done" and result["resumed_from"] == man.nsteps and result["nsteps"] == steps
    full = tmp_path / "full"
    assert audit("record", "--mjcf", str(arm), "--steps", str(steps), "--out", str(full)) == 0
    for name in sorted(p.name for p in full.iterdir() if p.name != "result.json"):
        assert filecmp.cmp(full / name, rec / name, shallow=False), name
    assert audit("record", "--out", str(rec), "--resume") == 2
    assert "complete recording" in capsys.readouterr().err


@pytest.fixture
def recording(tmp_path, arm):
    rec = tmp_path / "rec"
    assert audit("record", "--mjcf", str(arm), "--steps", "600", "--out", str(rec)) == 0
    return rec


def one_line_error(capsys, *argv: str) -> str:
    code = audit(*argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(tmp_path, arm, recording, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    for p in recording.iterdir():
        (bad / p.name).write_bytes(p.read_bytes())
    chunk = bad / "chunk_00001.npz"
    chunk.write_bytes(chunk.read_bytes()[: chunk.stat().st_size // 2])
    out = str(tmp_path / "o")
    for argv in (
        ["detect", str(bad), "--out", out],
        ["replay", str(bad)],
        ["rerun", str(bad), "--set", "iterations=5", "--out", out],
    ):
        assert "chunk_00001.npz: truncated or corrupt" in one_line_error(capsys, *argv)
    assert "PARAM one of mass, iterations" in one_line_error(
        capsys, "rerun", str(recording), "--set", "bogus=1", "--out", out
    )
    assert "must be positive" in one_line_error(
        capsys, "rerun", str(recording), "--set", "mass=-5", "--out", out
    )
    assert "no such recording" in one_line_error(capsys, "detect", str(tmp_path / "nope"), "--out", out)
    assert "is a file" in one_line_error(capsys, "detect", str(recording), "--out", str(arm))
    assert "at least 1" in one_line_error(capsys, "record", "--mjcf", str(arm), "--steps", "-1", "--out", out)
    np.save(tmp_path / "c.npy", np.zeros((5, 3)))
    ctrl = ["record", "--mjcf", str(arm), "--ctrl", str(tmp_path / "c.npy"), "--out", out]
    assert "shape (N, 1)" in one_line_error(capsys, *ctrl)
    assert "is (or holds) the input" in one_line_error(
        capsys, "detect", str(recording), "--out", str(recording), "--overwrite"
    )
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert "cannot write" in one_line_error(capsys, "detect", str(recording), "--out", str(locked / "x"))
    assert load_recording(recording).nsteps == 600  # earlier outputs untouched


def test_a_used_output_folder_is_refused_unless_overwrite(tmp_path, recording, capsys):
    out = tmp_path / "det"
    assert audit("detect", str(recording), "--out", str(out)) == 0
    (out / "stale.txt").write_text("from an earlier run")
    assert "holds an earlier run" in one_line_error(capsys, "detect", str(recording), "--out", str(out))
    assert (out / "stale.txt").is_file()
    assert audit("detect", str(recording), "--out", str(out), "--overwrite") == 0
    assert not (out / "stale.txt").exists() and (out / "result.json").is_file()


def test_every_audit_argument_has_help():
    from simpact.cli import build_parser

    parser = build_parser()
    verbs = next(a for a in parser._actions if a.dest == "verb").choices["audit"]
    for name, sub in next(a for a in verbs._actions if a.dest == "audit").choices.items():
        for action in sub._actions:
            if action.dest != "help":
                assert action.help, f"audit {name} {action.option_strings or action.dest}"
