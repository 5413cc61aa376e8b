"""``simpact bench tasks`` with a planner, a process pool or Ray: resumable after a kill, one writer."""

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from simpact.bench.episodes import RUNS, EpisodeLog, Progress, settings_id, task_settings
from simpact.bench.tasks import TaskEpisode, episode_settings, run_episode, run_tasks
from simpact.cli import main
from simpact.tasks import tasks_dir

TASK = "non_toppling_push"
ROOT = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for_line(path: Path, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\n") >= 1:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no episode in {path} after {timeout_s} s")


def test_killed_bench_resumes_without_losing_or_repeating_an_episode(tmp_path):
    out = tmp_path / "bench"
    command = [sys.executable, "-m", "simpact.cli", "bench", "tasks", TASK, "--seeds", "1-3"]
    command += ["--workers", "2", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _wait_for_line(out / "runs.jsonl", proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its pool workers: its own process group
        proc.communicate()
    assert 1 <= len(_lines(out / "runs.jsonl")) <= 3
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = Counter((r["task"], r["seed"]) for r in _lines(out / "runs.jsonl"))
    assert seen == {(TASK, 1): 1, (TASK, 2): 1, (TASK, 3): 1}
    result = json.loads((out / "result.json").read_text())
    summary = result["tasks"][TASK]
    assert summary["runs"] == 3 and summary["successes"] == 3 and summary["failed_seeds"] == []
    for key in ("mean_score", "mean_wall_s", "max_wall_s", "mean_rollouts"):
        assert summary[key] > 0
    assert result["resumed"] >= 1 and result["workers"] == 2 and result["errors"] == []
    assert f"{TASK}  3/3" in done.stdout and "total" in done.stdout  # the per-task table


def test_cem_planner_episode_solves_a_rigid_task():
    record = run_episode(TaskEpisode(TASK, 5, "cem"))  # one CEM population
    assert record["success"] is True and record["planner"] == "cem" and record["method"] == "cem"
    assert record["rollouts"] >= 1 and record["plan"]["actions"]
    assert "proposals" not in record  # the JSONL line stays small
    json.dumps(record)


def test_a_torn_last_line_is_cut_off(tmp_path):
    log = tmp_path / RUNS
    first = run_tasks([TASK], [1], tmp_path)
    (line,) = log.read_text().splitlines()
    assert json.loads(line)["settings"] == task_settings([TASK], episode_settings("reference", None))[TASK]
    log.write_text(line + "\n" + '{"task": "non_toppling_pu')  # killed mid-write
    result = run_tasks([TASK], [1], tmp_path)
    assert result["resumed"] == 1 and result["ignored"] == 0 and log.read_text() == line + "\n"
    assert result["tasks"] == first["tasks"]
    log.write_text(line + "\n" + "not json\n" + line + "\n")  # a broken line inside: not ours to guess
    assert main(["bench", "tasks", TASK, "--seeds", "1", "--out", str(tmp_path)]) == 2


def test_a_changed_planner_reruns_and_the_old_lines_are_ignored(tmp_path, capsys):
    base = ["bench", "tasks", TASK, "--seeds", "5", "--workers", "1", "--out", str(tmp_path)]
    assert main(base) == 0
    capsys.readouterr()
    assert main([*base, "--planner", "cem"]) == 0
    out = capsys.readouterr()
    assert out.err.count(" seed 5") == 1  # the cem episode ran
    assert "(1 earlier episodes under other settings ignored)" in out.out.splitlines()[-1]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["resumed"] == 0 and result["ignored"] == 1 and result["tasks"][TASK]["runs"] == 1
    assert [r["planner"] for r in _lines(tmp_path / RUNS)] == ["reference", "cem"]  # both kept
    assert main(base) == 0  # back to the reference planner: resumed, nothing rerun
    out = capsys.readouterr()
    assert out.err.count(" seed 5") == 0 and "1 earlier episodes under other settings ignored" in out.out
    assert len(_lines(tmp_path / RUNS)) == 2


def test_a_changed_task_file_reruns_the_episode(tmp_path):
    task = tmp_path / f"{TASK}.yaml"
    shutil.copy(tasks_dir() / f"{TASK}.yaml", task)
    out = tmp_path / "bench"
    first = run_tasks([str(task)], [1], out)
    assert first["resumed"] == 0 and first["tasks"][str(task)]["runs"] == 1
    task.write_text("# a comment changes nothing\n" + task.read_text())
    assert run_tasks([str(task)], [1], out)["resumed"] == 1
    task.write_text(task.read_text().replace("tail_s: 1.0", "tail_s: 1.5"))  # a number that changes results
    changed = run_tasks([str(task)], [1], out)
    assert changed["resumed"] == 0 and changed["ignored"] == 1 and changed["tasks"][str(task)]["runs"] == 1
    assert len(_lines(out / RUNS)) == 2


def test_the_key_holds_the_vlm_settings_but_not_where_they_are_recorded(tmp_path):
    vlm = {"vlm": "replay", "model": None, "base_url": None, "replay": "a.jsonl", "record": None, "k": 10}
    key = task_settings([TASK], episode_settings("vlm", vlm))
    assert key != task_settings([TASK], episode_settings("vlm", {**vlm, "replay": "b.jsonl"}))
    assert key != task_settings([TASK], episode_settings("vlm", {**vlm, "k": 8}))
    assert key == task_settings([TASK], episode_settings("vlm", {**vlm, "record": "log.jsonl"}))
    assert key != task_settings([TASK], episode_settings("cem", None))
    assert settings_id({"a": 1, "b": 2}) == settings_id({"b": 2, "a": 1})
    assert EpisodeLog(tmp_path, key).done == {}  # no log yet


def test_ray_executor_without_ray_names_the_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    argv = ["bench", "tasks", TASK, "--seeds", "1", "--executor", "ray", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("simpact bench: error:") and "pip install ray" in err


def test_vlm_flags_are_checked_before_any_episode(tmp_path):
    base = ["bench", "tasks", TASK, "--seeds", "1", "--out", str(tmp_path)]
    assert main([*base, "--planner", "vlm"]) == 2  # no --vlm
    assert main([*base, "--vlm", "gemini"]) == 2  # --vlm without --planner vlm
    assert main([*base, "--planner", "vlm", "--vlm", "replay"]) == 2  # no --replay FILE
    assert main([*base, "--model", "m"]) == 2
    assert not (tmp_path / RUNS).exists()


def test_progress_plain_lines_and_terminal_bar():
    plain = io.StringIO()
    progress = Progress(plain, tty=False)
    progress.start(2, [])
    record = {"task": TASK, "seed": 1, "success": True, "score": 0.9, "rollouts": 1, "plan_wall_s": 0.5}
    progress.record(record)
    progress.close()
    assert (
        plain.getvalue().count("\n") == 1
        and "[1/2] 1 ok" in plain.getvalue()
        and "\r" not in plain.getvalue()
    )
    bar = io.StringIO()
    progress = Progress(bar, tty=True)
    progress.start(1, [])
    progress.record(record)
    progress.close()
    assert "\r" in bar.getvalue() and "[1/1] 1 ok" in bar.getvalue() and bar.getvalue().endswith("\n")
