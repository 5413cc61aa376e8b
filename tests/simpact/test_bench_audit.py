"""``bench audit`` is resumable and reports precision and recall; ``bench perf`` reports the audit cost."""

import json

from simpact.bench import audit
from simpact.bench.audit import SUITE, audit_settings, run_audit_bench
from simpact.bench.episodes import RUNS, settings_id
from simpact.bench.perf import run_perf
from simpact.guard.detector import Thresholds


def test_audit_bench_is_resumable(tmp_path):
    out = tmp_path / "audit"
    seen = []
    result = run_audit_bench(out, seeds=[0, 4], progress=seen.append, pictures=True)
    assert [r["seed"] for r in seen] == [0, 4]
    assert (result["tp"], result["fp"], result["fn"], result["tn"]) == (1, 0, 0, 1)
    assert result["precision"] == 1.0 and result["recall"] == 1.0
    assert result["families"]["overlap"]["flagged"] == 1
    assert (out / "reports" / "overlap-000" / "index.html").exists()
    seen.clear()
    result = run_audit_bench(out, seeds=[0, 4, 5], progress=seen.append)
    assert [r["seed"] for r in seen] == [5]  # only the new seed ran
    assert result["ran"] == 1 and result["episodes"] == 3
    lines = [json.loads(line) for line in (out / RUNS).read_text().splitlines()]
    assert [(r["task"], r["seed"]) for r in lines] == [(SUITE, 0), (SUITE, 4), (SUITE, 5)]
    assert {r["settings"] for r in lines} == {settings_id(audit_settings())}
    saved = json.loads((out / "result.json").read_text())
    assert saved["false_positives"] == [] and saved["targets"] == {"precision": 0.9, "recall": 0.9}


def test_changed_detector_thresholds_rerun_the_episodes(tmp_path, monkeypatch):
    out = tmp_path / "audit"
    assert audit_settings()["thresholds"] == Thresholds().to_dict()  # the detector's own values
    first = run_audit_bench(out, seeds=[4])
    assert first["ran"] == 1 and first["ignored"] == 0
    monkeypatch.setattr(audit, "Thresholds", lambda: Thresholds(min_speed=0.6))
    again = run_audit_bench(out, seeds=[4])
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


def test_one_cycle_of_the_nine_families_is_labelled_exactly(tmp_path):
    result = run_audit_bench(tmp_path, seeds=range(9))
    assert (result["tp"], result["fp"], result["fn"], result["tn"]) == (4, 0, 0, 5)
    assert result["flagged_body_matches"] == 4  # each flagged artifact on its own body
    flagged = {family: f["flagged"] for family, f in result["families"].items()}
    assert flagged == {
        "overlap": 1,
        "kick_rest": 1,
        "kick_air": 1,
        "thin_wall": 1,
        "bin_drop": 0,
        "robot_push": 0,
        "tray_carry": 0,
        "gripper_lift": 0,
        "roll_off": 0,
    }
