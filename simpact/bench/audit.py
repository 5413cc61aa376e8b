"""``simpact bench audit``: the planner's detector (:func:`simpact.guard.detector.detect`, nothing else) on
SimuGuard's labelled suite, resumable.

Each episode of :mod:`simpact.guard.suite` (task scenes with artifacts MuJoCo's contact handling makes, and
hard negatives) is simulated under the recorder, detected, screened, and labelled by
:func:`simpact.guard.labels.label` (an energy audit and a rerun with the suspected cause removed; the
detector's output is never read). An episode is predicted positive when ``detect`` flags any event.
``artifact`` / ``clean`` labels are scored, ``ambiguous`` ones listed, ``external`` impulses reported apart.

``--split dev`` is where thresholds and rules were fixed; ``--split eval`` (disjoint seeds and main-parameter
bands) is the one reported. ``DIR/result.json``: per family and overall precision and recall with Wilson 95%
intervals, every miss and false alarm (with a picture under ``DIR/pictures`` when ``--pictures``), the
ambiguous episodes, and the screen's guarantee (a clean screen while the detector finds any event is a
violation). Each finished episode is one line of ``DIR/runs.jsonl`` (keyed on the detector's thresholds and
the labelling constants); a rerun with the same ``DIR`` skips the seeds already there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

from simpact.bench.episodes import EpisodeLog, settings_id
from simpact.core.jsonio import write_json
from simpact.guard.detector import Event, Thresholds
from simpact.guard.labels import LABEL_FLOOR_J, LABEL_SPEED, Run, label, simulate
from simpact.guard.report import plot_episode
from simpact.guard.suite import FAMILIES, FIX_SUBSTEPS, TASKS, episode, split_seeds
from simpact.tasks import load_task

__all__ = ["SUITE", "audit_settings", "run_audit_bench", "wilson"]

SUITE = "simuguard_suite"
"""The ``task`` of the audit bench's log lines: the labelled suite of :mod:`simpact.guard.suite`."""

TARGETS = {"precision": 0.9, "recall": 0.9, "screen_violations": 0}


def wilson(k: int, n: int) -> list[float] | None:
    """Wilson score 95% interval of ``k`` successes in ``n`` trials (scipy's), None for ``n = 0``."""
    if n == 0:
        return None
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return [round(float(ci.low), 4), round(float(ci.high), 4)]


def _event(e: Event) -> dict[str, Any]:
    """The short form of an event kept in the log."""
    return {
        "body": e.body,
        "onset_s": round(e.onset_s, 4),
        "peak_speed": round(e.peak_speed, 3),
        "contact_pair": list(e.contact_pair),
        "contact_depth": round(e.contact_depth, 5),
        "flagged": e.flagged,
        "consequence_of": e.consequence_of,
        "reasons": [e.ejection.reason, e.gravity.reason, e.carrier.reason],
    }


def _outcome(lab: str, flagged: bool) -> str:
    if lab == "artifact":
        return "tp" if flagged else "fn"
    if lab == "clean":
        return "fp" if flagged else "tn"
    return lab


def _picture(run: Run, record: dict[str, Any], pictures: Path) -> str:
    assert run.recording is not None
    title = f"{record['name']}: label {record['label']}, {record['outcome']}"
    path = plot_episode(
        run.recording, run.energy, run.gain, run.events, pictures / f"{record['name']}.png", title
    )
    return str(path)


def _run(seed: int, pictures: Path | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    ep = episode(seed)
    run = simulate(ep)
    sim_s = time.perf_counter() - t0
    lab = label(run)
    flagged = [e for e in run.events if e.flagged]
    assert run.screen is not None and run.recording is not None
    record: dict[str, Any] = {
        "task": SUITE,
        "seed": seed,
        "name": ep.name,
        "family": ep.family,
        "split": ep.split,
        "scene_task": ep.task,
        "label": lab["label"],
        "flagged": bool(flagged),
        "outcome": _outcome(lab["label"], bool(flagged)),
        "energy": lab["energy"],
        "rerun": lab.get("rerun"),
        "body_match": any(e.body == lab["energy"]["body"] for e in flagged),
        "events": [_event(e) for e in run.events],
        "screen": run.screen.to_dict(),
        "screen_violation": not run.screen.suspicious and bool(run.events),
        "params": {k: round(v, 5) for k, v in ep.params.items()},
        "steps": run.recording.nsteps,
        "sim_s": round(sim_s, 3),
    }
    if pictures is not None and (record["outcome"] in ("fn", "fp", "ambiguous") or flagged):
        record["picture"] = _picture(run, record, pictures)
    record["wall_s"] = round(time.perf_counter() - t0, 4)
    return record


def _rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    count = {k: sum(r["outcome"] == k for r in records) for k in ("tp", "fp", "fn", "tn")}
    tp, fp, fn = count["tp"], count["fp"], count["fn"]
    return {
        "episodes": len(records),
        **count,
        "ambiguous": sum(r["outcome"] == "ambiguous" for r in records),
        "external": sum(r["outcome"] == "external" for r in records),
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "precision_ci95": wilson(tp, tp + fp),
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "recall_ci95": wilson(tp, tp + fn),
        "false_alarm_rate": round(fp / (fp + count["tn"]), 4) if fp + count["tn"] else None,
        "false_alarm_rate_ci95": wilson(fp, fp + count["tn"]),
    }


def _listed(records: list[dict[str, Any]], outcome: str) -> list[dict[str, Any]]:
    keys = ("name", "seed", "family", "energy", "rerun", "events", "params", "picture")
    return [{k: r.get(k) for k in keys} for r in records if r["outcome"] == outcome]


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    families = {f: _rates([r for r in records if r["family"] == f]) for f in FAMILIES}
    external = [r for r in records if r["outcome"] == "external"]
    violations = [r["name"] for r in records if r["screen_violation"]]
    return {
        **_rates(records),
        "families": {f: v for f, v in families.items() if v["episodes"]},
        "flagged_body_matches": sum(r["body_match"] for r in records if r["outcome"] == "tp"),
        "misses": _listed(records, "fn"),
        "false_alarms": _listed(records, "fp"),
        "ambiguous_episodes": _listed(records, "ambiguous"),
        "external_flagged": f"{sum(r['flagged'] for r in external)} of {len(external)}",
        "screen": {
            "cleared": sum(not r["screen"]["suspicious"] for r in records),
            "violations": violations,
            "flagged_but_cleared": sum(r["flagged"] and not r["screen"]["suspicious"] for r in records),
        },
    }


def audit_settings() -> dict[str, Any]:
    """What changes an audit episode's result besides its seed: the detector's thresholds, the labelling
    constants and the task files the suite's scenes come from."""
    return {
        "bench": "audit",
        "suite": 2,
        "task_files": {name: load_task(name).raw for name in TASKS},
        "thresholds": Thresholds().to_dict(),
        "label": {"speed": LABEL_SPEED, "floor_J": LABEL_FLOOR_J, "fix_substeps": FIX_SUBSTEPS},
    }


def run_audit_bench(
    out: Path,
    split: str = "eval",
    episodes: int = 240,
    progress: Callable[[dict[str, Any]], None] | None = None,
    pictures: bool = False,
    seeds: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Run the first ``episodes`` episodes of ``split`` (or exactly ``seeds``) not yet in
    ``out/runs.jsonl``; results in ``out`` (``runs.jsonl``, ``result.json``, with ``pictures`` a PNG per
    miss, false alarm, ambiguous or flagged episode under ``out/pictures``)."""
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    chosen = list(seeds) if seeds is not None else split_seeds(split, episodes)
    log = EpisodeLog(out, {SUITE: settings_id(audit_settings())})
    wanted = [(SUITE, seed) for seed in chosen]
    todo = log.todo(wanted)
    shots = out / "pictures" if pictures else None
    if shots is not None:
        shots.mkdir(exist_ok=True)

    def run() -> Iterator[dict[str, Any]]:
        for _, seed in todo:
            yield _run(seed, shots)

    log.append(run(), progress)
    records = log.records(wanted)
    result = {
        "split": split if seeds is None else "seeds",
        "seeds": chosen,
        **_summary(records),
        "targets": TARGETS,
        "ran": len(todo),
        "ignored": log.ignored,
        "episode_wall_s": round(sum(r["wall_s"] for r in records), 3),
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    write_json(out / "result.json", result)
    return result
