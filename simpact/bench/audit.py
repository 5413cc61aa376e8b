"""``simpact bench audit``: SimuGuard's precision and recall on the labelled suite, resumable.

Every episode of :mod:`simpact.guard.suite` is simulated under the recorder and audited
(:func:`simpact.guard.suite.audit_events`: the paper's three stages plus the suite's jump-without-contact
rule). An episode is predicted positive when any event is flagged. Each finished episode is one line of the
resumable episode log ``DIR/runs.jsonl`` (:class:`simpact.bench.episodes.EpisodeLog`, task ``SUITE``,
keyed on the detector's thresholds); a rerun with the same ``DIR`` skips the seeds already there.
``DIR/result.json`` gives per-family counts, precision and recall (targets >= 0.9 each), the false positives
and negatives with their events, and wall times (reported, never asserted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from simpact.bench.episodes import EpisodeLog, settings_id
from simpact.core.jsonio import write_json
from simpact.guard.detector import Event, Thresholds
from simpact.guard.report import write_report
from simpact.guard.suite import FAMILIES, POSITIVES, episode, run_episode

__all__ = ["SUITE", "audit_settings", "run_audit_bench"]

SUITE = "simuguard_suite"
"""The ``task`` of the audit bench's log lines: the labelled suite of :mod:`simpact.guard.suite`."""

TARGETS = {"precision": 0.9, "recall": 0.9}


def _event(e: Event) -> dict[str, Any]:
    """The short form of an event kept in the log."""
    return {
        "body": e.body,
        "onset_s": round(e.onset_s, 4),
        "peak_speed": round(e.peak_speed, 3),
        "contact_pair": list(e.contact_pair),
        "contact_depth": round(e.contact_depth, 5),
        "flagged": e.flagged,
        "reasons": [e.ejection.reason, e.gravity.reason, e.carrier.reason],
    }


def _run(seed: int, pictures: Path | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    ep = episode(seed)
    recording, events = run_episode(ep)
    sim_s = time.perf_counter() - t0
    flagged = [e for e in events if e.flagged]
    record: dict[str, Any] = {
        "task": SUITE,
        "seed": seed,
        "name": ep.name,
        "family": ep.family,
        "artifact": ep.artifact,
        "flagged": bool(flagged),
        "correct": bool(flagged) == ep.artifact,
        "expected_body": ep.body,
        "body_match": (not ep.artifact) or any(e.body == ep.body for e in flagged),
        "events": [_event(e) for e in events],
        "params": {k: round(v, 5) for k, v in ep.params.items()},
        "steps": ep.steps,
        "steps_per_s": round(ep.steps / sim_s, 1),
    }
    if pictures is not None and events:
        page = write_report(recording, events, pictures / ep.name, title=f"{ep.name} (label: {ep.artifact})")
        record["report"] = str(page)
    record["wall_s"] = round(time.perf_counter() - t0, 4)
    return record


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    tp = sum(r["artifact"] and r["flagged"] for r in records)
    fp = sum(not r["artifact"] and r["flagged"] for r in records)
    fn = sum(r["artifact"] and not r["flagged"] for r in records)
    tn = len(records) - tp - fp - fn
    families = {}
    for family in FAMILIES:
        rs = [r for r in records if r["family"] == family]
        if rs:
            families[family] = {
                "label": "positive" if family in POSITIVES else "negative",
                "episodes": len(rs),
                "flagged": sum(r["flagged"] for r in rs),
                "correct": sum(r["correct"] for r in rs),
            }

    def listed(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"name": r["name"], "seed": r["seed"], "events": r["events"]} for r in rs]

    return {
        "episodes": len(records),
        "positives": tp + fn,
        "negatives": fp + tn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "flagged_body_matches": sum(r["body_match"] for r in records if r["artifact"] and r["flagged"]),
        "families": families,
        "false_positives": listed([r for r in records if not r["artifact"] and r["flagged"]]),
        "false_negatives": listed([r for r in records if r["artifact"] and not r["flagged"]]),
    }


def audit_settings() -> dict[str, Any]:
    """What changes an audit episode's result besides its seed: the detector's thresholds (the suite audits
    with the defaults)."""
    return {"bench": "audit", "thresholds": Thresholds().to_dict()}


def run_audit_bench(
    out: Path,
    seeds: Sequence[int] = range(54),
    progress: Callable[[dict[str, Any]], None] | None = None,
    pictures: bool = False,
) -> dict[str, Any]:
    """Record and audit the suite's episodes of ``seeds`` (default 54: six per family) not yet in
    ``out/runs.jsonl`` under the current thresholds; results in ``out`` (``runs.jsonl``, ``result.json``;
    with ``pictures``, an HTML report per episode with events under ``out/reports``)."""
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log = EpisodeLog(out, {SUITE: settings_id(audit_settings())})
    wanted = [(SUITE, seed) for seed in seeds]
    todo = log.todo(wanted)
    reports = out / "reports" if pictures else None

    def run() -> Iterator[dict[str, Any]]:
        for _, seed in todo:
            yield _run(seed, reports)

    log.append(run(), progress)
    records = log.records(wanted)
    result = {
        "seeds": list(seeds),
        **_summary(records),
        "targets": TARGETS,
        "ran": len(todo),
        "ignored": log.ignored,
        "episode_wall_s": round(sum(r["wall_s"] for r in records), 3),
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    write_json(out / "result.json", result)
    return result
