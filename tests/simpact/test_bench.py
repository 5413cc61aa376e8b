"""Benchmarks run and report what they promise (timings are reported, never asserted)."""

import json

import pytest

from simpact.bench.episodes import parse_seeds
from simpact.bench.perf import run_perf
from simpact.cli import main


def test_perf_reports_ratios_and_checks_parallel_equals_serial():
    result = run_perf(k=2, repeats=1)
    assert result["parallel_equals_serial"] is True
    # one timing pair: each ratio is that pair's, so it equals its range and the reported rates' quotient
    assert result["rollout_vs_bare_range"] == [result["rollout_vs_bare_ratio"]] * 2
    assert result["rollout_vs_bare_ratio"] == pytest.approx(
        result["rollout_steps_per_s"] / result["bare_steps_per_s"], rel=1e-2
    )
    assert result["parallel_speedup_range"] == [result["parallel_speedup"]] * 2
    assert result["parallel_speedup"] == pytest.approx(result["serial_s"] / result["parallel_s"], rel=1e-2)


def test_bench_tasks_is_resumable(tmp_path, capsys):
    out = tmp_path / "bench"
    args = ["bench", "tasks", "non_toppling_push", "--workers", "1", "--out", str(out)]
    assert main([*args, "--seeds", "1-2"]) == 0
    result = json.loads((out / "result.json").read_text())
    summary = result["tasks"]["non_toppling_push"]
    assert summary["successes"] == 2 and summary["runs"] == 2 and summary["mean_rollouts"] == 1
    assert result["planner"] == "reference" and result["seeds"] == [1, 2] and result["workers"] == 1
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2
    capsys.readouterr()
    assert main([*args, "--seeds", "1-3"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count(" seed ") == 1  # only seed 3 ran (progress on stderr)
    assert "non_toppling_push  3/3" in captured.out  # the per-task table
    assert len((out / "runs.jsonl").read_text().splitlines()) == 3


def test_parse_seeds():
    assert parse_seeds("1-3,7") == [1, 2, 3, 7]
    with pytest.raises(ValueError, match="cannot read 'x'"):
        parse_seeds("x")


def test_task_summary_sums_the_planner_audit_counts():
    from simpact.bench.tasks import _task_summary

    audit = {"audited": 12, "recorded": 1, "flagged": 1, "rerun": 1, "repaired": 1, "events": [],
             "particles_screened": 3, "particles_flagged": 1}  # fmt: skip
    records = [
        {"seed": 1, "success": True, "score": 1.0, "plan_wall_s": 2.0, "rollouts": 12, "audit": audit},
        {"seed": 2, "success": False, "score": 0.5, "plan_wall_s": 4.0, "audit": {"audited": 8}},
        {"seed": 3, "success": True, "score": 1.0, "rollout_wall_s": 0.3},  # a reference run: no audit
    ]
    summary = _task_summary(records)
    assert summary["audit"] == {"audited": 20, "recorded": 1, "flagged": 1, "rerun": 1, "repaired": 1,
                                "particles_screened": 3, "particles_flagged": 1}  # fmt: skip
    assert summary["failed_seeds"] == [2]
