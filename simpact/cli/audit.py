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
from simpact.core.rundir import RunRecord, prepare_out
from simpact.guard.detector import detect
from simpact.guard.episodes import (
    AuditError,
    episode_from_result,
    open_recording,
    record_episode,
    record_request,
    resume_request,
    scene_to_settle,
)
from simpact.guard.replay import replay
from simpact.guard.rerun import Change, rerun
from simpact.guard.score import score
from simpact.guard.settle import settle_check
from simpact.guard.store import read_manifest

__all__ = ["add_parsers", "cmd_detect", "cmd_record", "cmd_replay", "cmd_rerun", "cmd_score", "cmd_settle"]

_REQUEST_FLAGS = ("mjcf", "task", "steps", "ctrl", "robot_prefix", "seed", "plan")


def _write(directory: str | Path, payload: dict[str, Any]) -> Path:
    return write_json(Path(directory) / "result.json", payload)


def _check_recording(path: str) -> None:
    """A one-line error now, before any output is prepared, when ``path`` holds no readable manifest."""
    try:
        read_manifest(path)
    except ValueError as exc:
        raise AuditError(f"cannot read the recording: {exc}") from None


def _prepare(args: argparse.Namespace, *inputs: str) -> Path | None:
    """Check ``--out`` (if given) before any work: a file, an unwritable folder, a used folder without
    ``--overwrite`` or one of the ``inputs`` is refused."""
    if not args.out:
        return None
    out = Path(args.out).resolve()
    for path in inputs:
        p = Path(path).resolve()
        if out == p or out in p.parents:
            raise UsageError(f"--out {args.out}: is (or holds) the input {path}; choose another folder")
    return prepare_out(args.out, overwrite=args.overwrite)


def cmd_record(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    given = {k: getattr(args, k) for k in _REQUEST_FLAGS}
    if args.resume:
        if args.overwrite:
            raise UsageError("--overwrite and --resume contradict each other: choose one")
        request = resume_request(args.out, given)
    else:
        request = record_request(**given)
    out = prepare_out(args.out, overwrite=args.overwrite, resume=args.resume)
    before = read_manifest(out).nsteps if args.resume else 0
    with RunRecord.start(out, "audit record", request) as run:
        try:
            rec = record_episode(out, request, resume=args.resume)
        except KeyboardInterrupt:
            saved = read_manifest(out).nsteps if (out / "manifest.json").is_file() else 0
            run.update(nsteps=saved, resume=f"simpact audit record --out {out} --resume")
            raise
        man = rec.manifest
        result = {
            "recording": str(Path(args.out)),
            "nsteps": man.nsteps,
            "resumed_from": before if args.resume else None,
            "timestep": man.timestep,
            "model_hash": man.model_hash,
            "source": man.meta.get("source"),
            "outcome": man.meta.get("outcome"),
            "errors": man.errors,
            "wall_s": round(time.perf_counter() - t0, 4),
        }
        run.update(**result)
    resumed = f", resumed at step {before}" if args.resume else ""
    print(f"audit record: {man.nsteps} steps ({man.nsteps * man.timestep:.2f} s){resumed} -> {run.path}")
    return result


def cmd_detect(args: argparse.Namespace) -> dict[str, Any]:
    _check_recording(args.recording)
    _prepare(args, args.recording)
    rec = open_recording(args.recording)
    events = detect(rec)
    flagged = [e for e in events if e.flagged]
    result = {
        "recording": str(args.recording),
        "events": [e.to_dict() for e in events],
        "flagged": bool(flagged),
        "n_events": len(events),
        "n_flagged": len(flagged),
        "n_consequences": sum(e.consequence_of is not None for e in events),
        "original_success": (rec.manifest.meta.get("outcome") or {}).get("success"),
    }
    out = _write(args.out, result)
    worst = max(flagged, key=lambda e: e.peak_speed, default=None)
    detail = (
        f", fastest {worst.body} at {worst.peak_speed:.2f} m/s (t={worst.onset_s:.3f} s)" if worst else ""
    )
    after = result["n_consequences"]
    also = f" ({after} consequences of a flagged artifact: its landing or bounces)" if after else ""
    print(f"audit detect: {len(flagged)} flagged of {len(events)} events{also}{detail} -> {out}")
    return result


def cmd_replay(args: argparse.Namespace) -> dict[str, Any]:
    _check_recording(args.recording)
    _prepare(args, args.recording)
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
    change = Change.parse(args.set)
    _check_recording(args.recording)
    _prepare(args, args.recording)
    res = rerun(open_recording(args.recording), change, args.switch_before_artifact)
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
    _prepare(args, *args.dirs)
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
    if not 0 < args.seconds < float("inf"):
        raise UsageError(f"--seconds {args.seconds}: must be a positive number")
    if args.seed < 0:
        raise UsageError(f"--seed {args.seed}: must be 0 or more")
    scene = scene_to_settle(args.scene, args.task, args.seed)
    _prepare(args, *([args.scene] if args.scene else []))
    report = settle_check(scene, args.seconds)
    result = report.to_dict()
    path = _write(args.out, result)
    moved = max((m.displacement for m in report.motion.values()), default=0.0)
    fallen = f", fell off the table: {', '.join(report.fallen)}" if report.fallen else ""
    shifted = [n for n in report.shifted if n not in report.fallen]
    restless = f", did not rest where placed: {', '.join(shifted)}" if shifted else ""
    print(
        f"audit settle: {'clean' if report.clean else 'NOT clean'}, {len(report.artifacts)} artifacts, "
        f"deepest overlap {1000 * report.max_overlap:.1f} mm, largest move {1000 * moved:.1f} mm "
        f"in {report.seconds:g} s{fallen}{restless} -> {path}"
    )
    return result


_OVERWRITE = "replace what an earlier run left in --out (cleared first)"


def _add_record_parser(verbs: Any) -> None:
    p = verbs.add_parser("record", help="record every physics step of an MJCF scene or a task rollout")
    p.add_argument("--mjcf", help="MJCF scene file (starts from its first keyframe, zero control)")
    p.add_argument("--task", help="task name or config file")
    p.add_argument("--steps", type=int, help="physics steps (MJCF; default: len(--ctrl) or 500)")
    p.add_argument("--robot-prefix", help="name prefix of robot links (MJCF)")
    p.add_argument("--ctrl", help="CTRL.npy, (N, nu) controls, one row per physics step (MJCF)")
    p.add_argument("--seed", type=int, help="task scene seed (default 0)")
    p.add_argument("--plan", help="plan JSON file or 'reference' (task; default reference)")
    p.add_argument("--out", required=True, help="recording folder (refused if it holds a recording)")
    p.add_argument("--overwrite", action="store_true", help="replace the recording already in --out")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted recording in --out from its last complete chunk (same settings)",
    )
    p.set_defaults(func=cmd_record)


def _recording(p: argparse.ArgumentParser) -> None:
    p.add_argument("recording", help="recording folder (from 'simpact audit record')")


def add_parsers(subparsers: Any) -> None:
    """Register ``audit record|detect|replay|rerun|score|settle`` (each sets ``func``)."""
    audit = subparsers.add_parser("audit", help="SimuGuard: record, detect, replay, rerun, score, settle")
    verbs = audit.add_subparsers(dest="audit", required=True)
    _add_record_parser(verbs)

    p = verbs.add_parser("detect", help="detect contact artifacts in a recording")
    _recording(p)
    p.add_argument("--out", required=True, help="folder for result.json (the detected events)")
    p.add_argument("--overwrite", action="store_true", help=_OVERWRITE)
    p.set_defaults(func=cmd_detect)

    p = verbs.add_parser("replay", help="replay a recording from step 0 and compare it bit for bit")
    _recording(p)
    p.add_argument("--out", help="folder for result.json (default: print only)")
    p.add_argument("--overwrite", action="store_true", help=_OVERWRITE)
    p.set_defaults(func=cmd_replay)

    p = verbs.add_parser("rerun", help="replay with one parameter changed")
    _recording(p)
    p.add_argument(
        "--set",
        required=True,
        help="PARAM[:BODY]=VALUE; PARAM: mass, iterations, solref, timestep, depenetration, clamp",
    )
    p.add_argument("--switch-before-artifact", action="store_true", help="switch on 0.1 s before it")
    p.add_argument("--out", required=True, help="folder for result.json (the rerun's events and outcome)")
    p.add_argument("--overwrite", action="store_true", help=_OVERWRITE)
    p.set_defaults(func=cmd_rerun)

    p = verbs.add_parser("settle", help="leave a scene alone: initial overlaps, artifacts, object motion")
    p.add_argument("--scene", help="scene JSON (Scene.to_dict, e.g. from real2sim)")
    p.add_argument("--task", help="task name or config file (its scene of --seed)")
    p.add_argument("--seed", type=int, default=0, help="task scene seed")
    p.add_argument("--seconds", type=float, default=1.0, help="time to settle, s")
    p.add_argument("--out", required=True, help="folder for result.json (overlaps, artifacts, motion)")
    p.add_argument("--overwrite", action="store_true", help=_OVERWRITE)
    p.set_defaults(func=cmd_settle)

    p = verbs.add_parser("score", help="reported, excluded, replay-estimated success and its range")
    p.add_argument("dirs", nargs="+", help="detect or rerun result directories, one per episode")
    p.add_argument("--out", help="folder for result.json (default: print only)")
    p.add_argument("--overwrite", action="store_true", help=_OVERWRITE)
    p.set_defaults(func=cmd_score)
