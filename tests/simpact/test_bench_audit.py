"""``bench audit`` is resumable and reports precision and recall with intervals; ``bench perf`` reports the
audit cost."""

import json

import pytest

from simpact.bench import audit
from simpact.bench.audit import SUITE, audit_settings, run_audit_bench, wilson
from simpact.bench.audit_rollouts import run_rollout_audit
from simpact.bench.episodes import RUNS, settings_id
from simpact.bench.perf import run_perf
from simpact.guard.detector import Thresholds
from simpact.guard.suite import TASKS


def test_audit_bench_is_resumable_and_scores_the_planners_detector(tmp_path):
    out = tmp_path / "audit"
    seen = []
    result = run_audit_bench(out, seeds=[0, 14], progress=seen.append, pictures=True)  # overlap, drop
    assert [r["seed"] for r in seen] == [0, 14]
    assert [r["label"] for r in seen] == ["artifact", "clean"]
    assert (result["tp"], result["fp"], result["fn"], result["tn"]) == (1, 0, 0, 1)
    assert result["precision"] == 1.0 and result["recall"] == 1.0
    assert result["recall_ci95"] == wilson(1, 1) and result["recall_ci95"][1] == 1.0
    assert result["families"]["overlap"]["tp"] == 1 and result["families"]["drop"]["tn"] == 1
    assert result["flagged_body_matches"] == 1 and result["screen"]["violations"] == []
    assert (out / "pictures" / "overlap-000000.png").exists()  # a flagged episode's picture
    seen.clear()
    result = run_audit_bench(out, seeds=[0, 14, 23], progress=seen.append)
    assert [r["seed"] for r in seen] == [23]  # only the new seed ran
    assert result["ran"] == 1 and result["episodes"] == 3 and result["external"] == 1
    assert result["external_flagged"].endswith("of 1")
    lines = [json.loads(line) for line in (out / RUNS).read_text().splitlines()]
    assert [(r["task"], r["seed"]) for r in lines] == [(SUITE, 0), (SUITE, 14), (SUITE, 23)]
    assert {r["settings"] for r in lines} == {settings_id(audit_settings())}
    saved = json.loads((out / "result.json").read_text())
    assert saved["misses"] == [] and saved["false_alarms"] == [] and saved["targets"]["recall"] == 0.9


def test_wilson_intervals():
    assert wilson(0, 0) is None
    low, high = wilson(9, 10)
    assert low == pytest.approx(0.5958, abs=1e-3) and high == pytest.approx(0.9821, abs=1e-3)


def test_changed_detector_thresholds_rerun_the_episodes(tmp_path, monkeypatch):
    out = tmp_path / "audit"
    assert audit_settings()["thresholds"] == Thresholds().to_dict()  # the detector's own values
    assert set(audit_settings()["task_files"]) == set(TASKS)  # a changed task file changes the scenes
    first = run_audit_bench(out, seeds=[14])
    assert first["ran"] == 1 and first["ignored"] == 0
    monkeypatch.setattr(audit, "Thresholds", lambda: Thresholds(min_speed=0.6))
    again = run_audit_bench(out, seeds=[14])
    assert again["ran"] == 1 and again["ignored"] == 1 and again["episodes"] == 1  # the old line not counted
    assert len((out / RUNS).read_text().splitlines()) == 2  # but kept


def test_perf_reports_the_audit_cost():
    result = run_perf(k=2, repeats=1)
    # One timing pair per ratio: its median is its whole range (timings themselves are never asserted).
    ratio = result["audit_overhead_ratio"]
    assert result["audit_overhead_range"] == [ratio, ratio]
    record = result["audit_record_overhead_ratio"]
    assert result["audit_record_overhead_range"] == [record, record]
    assert isinstance(result["audit_record_in_memory_ratio"], float)
    assert result["audit_screen_suspicious"] is False  # the reference push is cleared by the screen
    assert result["audit_bytes_per_step"] > 0
    assert result["audit_monitor_errors"] == 0
    assert result["targets"]["audit_overhead_ratio"] == 0.25


def test_the_reference_rollouts_are_audited_as_the_planner_audits_them(tmp_path):
    seen = []
    result = run_rollout_audit(tmp_path, ["non_toppling_push"], [1], progress=seen.append)
    assert [(r["task"], r["seed"]) for r in seen] == [("non_toppling_push", 1)]
    row = seen[0]
    assert set(row) >= {"success", "screen", "recorded", "flagged", "events", "repair", "outcome_changed"}
    assert row["flagged"] == bool(row["events"]) and row["recorded"] == row["screen"]["suspicious"]
    total = result["all"]
    assert total["rollouts"] == 1 and total["outcome_changed"] <= total["flagged"] <= total["recorded"]
    assert result["tasks"]["non_toppling_push"] == total
    again = run_rollout_audit(tmp_path, ["non_toppling_push"], [1])
    assert again["ran"] == 0 and again["all"] == total  # resumed from runs.jsonl
