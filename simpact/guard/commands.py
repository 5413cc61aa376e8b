"""The ``simpact audit`` verbs (record, detect, replay, rerun, score, settle). Each writes ``result.json``
and prints a one-line summary; bad input raises :class:`AuditError` (a ValueError) with a one-line message.
:func:`add_audit_parser` registers them on the ``simpact`` command's subparsers."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError
from simpact.core.jsonio import write_json

__all__ = [
    "AuditError",
    "add_audit_parser",
    "cmd_detect",
    "cmd_record",
    "cmd_replay",
    "cmd_rerun",
    "cmd_score",
    "cmd_settle",
]


class AuditError(SimpactError, ValueError):
    """Bad input to an audit verb (reported in one line, exit status 2)."""


def _write(directory: str | Path, payload: dict[str, Any]) -> Path:
    return write_json(Path(directory) / "result.json", payload)


def _load(path: str) -> Any:
    from simpact.guard.store import load_recording

    try:
        return load_recording(path)
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        raise AuditError(f"{path}: cannot read the recording: {exc}") from None


def cmd_record(args: argparse.Namespace) -> dict[str, Any]:
    from simpact.guard.replay import ReplayError, record_mjcf, record_task_rollout

    t0 = time.perf_counter()
    if (args.mjcf is None) == (args.task is None):
        raise AuditError("give exactly one of --mjcf FILE or --task TASK")
    try:
        if args.mjcf is not None:
            ctrl = None
            if args.ctrl:
                try:
                    ctrl = np.load(args.ctrl, allow_pickle=False)
                except (OSError, ValueError) as exc:
                    raise AuditError(f"--ctrl {args.ctrl}: {exc}") from None
            steps = args.steps if args.steps is not None else (len(ctrl) if ctrl is not None else 500)
            if steps < 1:
                raise AuditError("--steps must be at least 1")
            prefix = args.robot_prefix if args.robot_prefix is not None else ()
            rec = record_mjcf(args.mjcf, steps, args.out, robot_prefix=prefix, ctrl=ctrl)
        else:
            from simpact.core.actions import load_plan

            plan = None if args.plan in (None, "reference") else load_plan(args.plan)
            rec = record_task_rollout(args.task, args.seed, plan, args.out)
    except ReplayError as exc:
        raise AuditError(str(exc)) from None
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
    from simpact.guard.detector import detect

    rec = _load(args.recording)
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
    from simpact.guard.replay import ReplayError, replay

    rec = _load(args.recording)
    try:
        res = replay(rec)
    except ReplayError as exc:
        raise AuditError(str(exc)) from None
    result = {"recording": str(args.recording), **res.to_dict()}
    where = f" -> {_write(args.out, result)}" if args.out else ""
    d = res.first_divergence
    verdict = (
        "exact" if res.exact else f"diverges at step {d.step} ({d.array} {d.where})" if d else "diverges"
    )
    print(f"audit replay: {verdict} over {res.nsteps} steps, {res.snapshots_checked} snapshots{where}")
    return result


def cmd_rerun(args: argparse.Namespace) -> dict[str, Any]:
    from simpact.guard.replay import ReplayError
    from simpact.guard.rerun import rerun

    rec = _load(args.recording)
    try:
        res = rerun(rec, args.set, args.switch_before_artifact)
    except ReplayError as exc:  # RerunError is a ValueError too, raised with a one-line message
        raise AuditError(str(exc)) from None
    result = {"recording": str(args.recording), **res.to_dict()}
    out = _write(args.out, result)
    outcome = "" if res.success is None else f", success {res.success} (as run {res.original_success})"
    prefix = "" if res.prefix_exact is None else f", prefix {'identical' if res.prefix_exact else 'DIFFERS'}"
    print(
        f"audit rerun {res.change} from {res.switch_s:.3f} s: {len(res.flagged)} flagged "
        f"(as run {len(res.original_flagged)}){prefix}{outcome} -> {out}"
    )
    return result


def _episode(directory: str) -> Any:
    from simpact.guard.score import Episode

    path = Path(directory) / "result.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AuditError(f"{path}: {exc}") from None
    success = raw.get("original_success", raw.get("success"))
    if success is None:
        raise AuditError(f"{path}: no outcome as run (original_success); record episodes with --task")
    flagged = raw.get("original_artifact", raw.get("flagged"))
    if flagged is None:
        raise AuditError(f"{path}: not a detect or rerun result (no 'flagged')")
    rerun = raw.get("rerun_success") if "rerun_success" in raw else None
    return Episode(str(directory), bool(success), bool(flagged), None if rerun is None else bool(rerun))


def cmd_score(args: argparse.Namespace) -> dict[str, Any]:
    from simpact.guard.score import score

    scores = score([_episode(d) for d in args.dirs])
    result = scores.to_dict()
    where = f" -> {_write(args.out, result)}" if args.out else ""

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    print(
        f"audit score: reported {pct(scores.reported)} ({scores.successes}/{scores.episodes}), "
        f"{scores.flagged} flagged, excluded {pct(scores.excluded)}, replay {pct(scores.replay)}, "
        f"range [{pct(scores.low)}, {pct(scores.high)}]{where}"
    )
    return result


def cmd_settle(args: argparse.Namespace) -> dict[str, Any]:
    from simpact.core.scene import Scene, SceneError
    from simpact.guard.settle import settle_check

    if (args.scene is None) == (args.task is None):
        raise AuditError("give exactly one of --scene SCENE.json or --task TASK")
    try:
        if args.scene is not None:
            try:
                scene = Scene.from_dict(json.loads(Path(args.scene).read_text()))
            except (OSError, ValueError) as exc:
                raise AuditError(f"--scene {args.scene}: {exc}") from None
        else:
            from simpact.tasks import load_task

            scene = load_task(args.task).scene(args.seed)
        if not args.seconds > 0:
            raise AuditError("--seconds must be positive")
        report = settle_check(scene, args.seconds)
    except SceneError as exc:
        raise AuditError(str(exc)) from None
    result = report.to_dict()
    path = _write(args.out, result)
    moved = max((m.displacement for m in report.motion.values()), default=0.0)
    print(
        f"audit settle: {'clean' if report.clean else 'NOT clean'}, {len(report.artifacts)} artifacts, "
        f"deepest overlap {1000 * report.max_overlap:.1f} mm, largest move {1000 * moved:.1f} mm "
        f"in {report.seconds:g} s -> {path}"
    )
    return result


def add_audit_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``audit record|detect|replay|rerun|score|settle`` on the ``simpact`` subparsers (each sets
    ``func``)."""
    audit = subparsers.add_parser("audit", help="SimuGuard: record, detect, replay, rerun, score, settle")
    verbs = audit.add_subparsers(dest="audit", required=True)

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
    return audit
