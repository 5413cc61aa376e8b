"""Benchmarks run and report what they promise (timings are reported, never asserted)."""

import json

import pytest

from simpact.bench.perf import run_perf
from simpact.bench.tasks import parse_seeds
from simpact.cli import main


def test_perf_reports_ratios_and_checks_parallel_equals_serial():
    result = run_perf(k=2, repeats=1)
    assert result["parallel_equals_serial"] is True
    for key in ("rollout_vs_bare_ratio", "parallel_speedup", "bare_steps_per_s", "rollout_steps_per_s"):
        assert result[key] > 0


def test_bench_tasks_is_resumable(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "tasks", "non_toppling_push", "--seeds", "1-2", "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["tasks"]["non_toppling_push"]["successes"] == 2
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2
    capsys.readouterr()
    assert main(["bench", "tasks", "non_toppling_push", "--seeds", "1-3", "--out", str(out)]) == 0
    assert capsys.readouterr().out.count("seed") == 2  # only seed 3 ran, then the summary line
    assert len((out / "runs.jsonl").read_text().splitlines()) == 3


def test_parse_seeds():
    assert parse_seeds("1-3,7") == [1, 2, 3, 7]
    with pytest.raises(ValueError, match="cannot read 'x'"):
        parse_seeds("x")
