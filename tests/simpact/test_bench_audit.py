"""``bench audit`` is resumable and reports precision and recall; ``bench perf`` reports the audit cost."""

import json

from simpact.bench.audit import run_audit_bench
from simpact.bench.perf import run_perf


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
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3
    saved = json.loads((out / "result.json").read_text())
    assert saved["false_positives"] == [] and saved["targets"] == {"precision": 0.9, "recall": 0.9}


def test_perf_reports_the_audit_cost():
    result = run_perf(k=2, repeats=1)
    assert result["audit_overhead_ratio"] > -1.0
    assert result["audit_record_overhead_ratio"] > -1.0
    assert result["audit_record_in_memory_ratio"] > -1.0
    assert result["audit_screen_suspicious"] is False  # the reference push is cleared by the screen
    assert result["audit_bytes_per_step"] > 0
    assert result["audit_monitor_errors"] == 0
    assert result["targets"]["audit_overhead_ratio"] == 0.25
