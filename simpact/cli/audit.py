"""``simpact audit record|detect|replay|rerun|score|settle``: SimuGuard on recordings and scenes. Each verb
writes ``result.json`` (``replay`` and ``score`` only with ``--out``), prints a one-line summary and returns
the result; bad input raises :class:`~simpact.guard.episodes.AuditError`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from simpact.core.errors import UsageError
from simpact.core.jsonio import write_json
from simpact.guard.detector import detect
from simpact.guard.episodes import episode_from_result, open_recording, record_episode, scene_to_settle
from simpact.guard.replay import replay
from simpact.guard.rerun import rerun
from simpact.guard.score import score
from simpact.guard.settle import settle_check

__all__ = ["add_parsers", "cmd_detect", "cmd_record", "cmd_replay", "cmd_rerun", "cmd_score", "cmd_settle"]


def _write(directory: str | Path, payload: dict[str, Any]) -> Path:
    return write_json(Path(directory) / "result.json", payload)


def cmd_record(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    rec = record_episode(
        args.out,
        mjcf=args.mjcf,
        task=args.task,
        steps=args.steps,
        ctrl=args.ctrl,
        robot_prefix=args.robot_prefix,
        seed=args.seed,
        plan=args.plan,
    )
    man = rec.manifest
    result = {
        "recording": str(Path(args.out)),
        "nsteps": man.nsteps,
        "timestep": man.timestep,
        "model_hash": man.model_hash,
        "source": man.meta.get("source"),
        "outcome": man.meta.get("outcome"),
        "errors": man.errors,
        "wall_s": round(time.perf_counter() - t0, 4),
    }
    out = _write(args.out, result)
    print(f"audit record: {man.nsteps} steps ({man.nsteps * man.timestep:.2f} s) -> {out}")
    return result


def cmd_detect(args: argparse.Namespace) -> dict[str, Any]:
    rec = open_recording(args.recording)
    events = detect(rec)
    flagged = [e for e in events if e.flagged]
    result = {
        "recording": str(args.recording),
        "events": [e.to_dict() for e in events],
        "flagged": bool(flagged),
        "n_events": len(events),
        "n_flagged": len(flagged),
        "original_success": (rec.manifest.meta.get("outcome") or {}).get("success"),
    }
    out = _write(args.out, result)
    worst = max(flagged, key=lambda e: e.peak_speed, default=None)
    detail = (
        f", fastest {worst.body} at {worst.peak_speed:.2f} m/s (t={worst.onset_s:.3f} s)" if worst else ""
    )
    print(f"audit detect: {len(flagged)} flagged of {len(events)} events{detail} -> {out}")
    return result


def cmd_replay(args: argparse.Namespace) -> dict[str, Any]:
    res = replay(open_recording(args.recording))
    result = {"recording": str(args.recording), **res.to_dict()}
    where = f" -> {_write(args.out, result)}" if args.out else ""
    d = res.first_divergence
    verdict = (
        "exact" if res.exact else f"diverges at step {d.step} ({d.array} {d.where})" if d else "diverges"
    )
    print(f"audit replay: {verdict} over {res.nsteps} steps, {res.snapshots_checked} snapshots{where}")
    return result


def cmd_rerun(args: argparse.Namespace) -> dict[str, Any]:
    res = rerun(open_recording(args.recording), args.set, args.switch_before_artifact)
    result = {"recording": str(args.recording), **res.to_dict()}
    out = _write(args.out, result)
    outcome = "" if res.success is None else f", success {res.success} (as run {res.original_success})"
    prefix = "" if res.prefix_exact is None else f", prefix {'identical' if res.prefix_exact else 'DIFFERS'}"
    print(
        f"audit rerun {res.change} from {res.switch_s:.3f} s: {len(res.flagged)} flagged "
        f"(as run {len(res.original_flagged)}){prefix}{outcome} -> {out}"
    )
    return result


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def cmd_score(args: argparse.Namespace) -> dict[str, Any]:
    scores = score([episode_from_result(d) for d in args.dirs])
    result = scores.to_dict()
    where = f" -> {_write(args.out, result)}" if args.out else ""
    print(
        f"audit score: reported {_pct(scores.reported)} ({scores.successes}/{scores.episodes}), "
        f"{scores.flagged} flagged, excluded {_pct(scores.excluded)}, replay {_pct(scores.replay)}, "
        f"range [{_pct(scores.low)}, {_pct(scores.high)}]{where}"
    )
    return result


def cmd_settle(args: argparse.Namespace) -> dict[str, Any]:
    scene = scene_to_settle(args.scene, args.task, args.seed)
    if not args.seconds > 0:
        raise UsageError("--seconds must be positive")
    report = settle_check(scene, args.seconds)
    result = report.to_dict()
    path = _write(args.out, result)
    moved = max((m.displacement for m in report.motion.values()), default=0.0)
    print(
        f"audit settle: {'clean' if report.clean else 'NOT clean'}, {len(report.artifacts)} artifacts, "
        f"deepest overlap {1000 * report.max_overlap:.1f} mm, largest move {1000 * moved:.1f} mm "
        f"in {report.seconds:g} s -> {path}"
    )
    return result


def _add_record_parser(verbs: Any) -> None:
    p = verbs.add_parser("record", help="record every physics step of an MJCF scene or a task rollout")
    p.add_argument("--mjcf", help="MJCF scene file (starts from its first keyframe, zero control)")
    p.add_argument("--task", help="task name or config file")
    p.add_argument("--steps", type=int, help="physics steps (MJCF; default: len(--ctrl) or 500)")
    p.add_argument("--robot-prefix", help="name prefix of robot links (MJCF)")
    p.add_argument("--ctrl", help="CTRL.npy, (N, nu) controls, one row per physics step (MJCF)")
    p.add_argument("--seed", type=int, default=0, help="task scene seed")
    p.add_argument("--plan", help="plan JSON file or 'reference' (task; default reference)")
    p.add_argument("--out", required=True, help="recording directory")
    p.set_defaults(func=cmd_record)


def add_parsers(subparsers: Any) -> None:
    """Register ``audit record|detect|replay|rerun|score|settle`` (each sets ``func``)."""
    audit = subparsers.add_parser("audit", help="SimuGuard: record, detect, replay, rerun, score, settle")
    verbs = audit.add_subparsers(dest="audit", required=True)
    _add_record_parser(verbs)

    p = verbs.add_parser("detect", help="detect contact artifacts in a recording")
    p.add_argument("recording")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_detect)

    p = verbs.add_parser("replay", help="replay a recording from step 0 and compare it bit for bit")
    p.add_argument("recording")
    p.add_argument("--out")
    p.set_defaults(func=cmd_replay)

    p = verbs.add_parser("rerun", help="replay with one parameter changed")
    p.add_argument("recording")
    p.add_argument(
        "--set",
        required=True,
        help="PARAM[:BODY]=VALUE; PARAM: mass, iterations, solref, timestep, depenetration, clamp",
    )
    p.add_argument("--switch-before-artifact", action="store_true", help="switch on 0.1 s before it")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_rerun)

    p = verbs.add_parser("settle", help="leave a scene alone: initial overlaps, artifacts, object motion")
    p.add_argument("--scene", help="scene JSON (Scene.to_dict, e.g. from real2sim)")
    p.add_argument("--task", help="task name or config file (its scene of --seed)")
    p.add_argument("--seed", type=int, default=0, help="task scene seed")
    p.add_argument("--seconds", type=float, default=1.0, help="time to settle, s")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_settle)

    p = verbs.add_parser("score", help="reported, excluded, replay-estimated success and its range")
    p.add_argument("dirs", nargs="+", help="detect or rerun result directories, one per episode")
    p.add_argument("--out")
    p.set_defaults(func=cmd_score)
