"""A planning session as a Rerun recording (``simpact plan --rerun``): scrub through proposals, rollouts and
end-of-action states in 3D with the Rerun viewer (``rerun DIR/session.rrd``).

Needs rerun-sdk (imported lazily). Entity tree, world frame z up, metres:

- ``world/table`` and ``world/fixed/<name>``: the table top and objects that never move (static);
- ``world/proposals/NNN/objects/<name>``: each free object's pose over proposal NNN's rollout (a
  ``Transform3D``; its ``shape`` child is a box approximating the object from the scene's sizes:
  cylinders, spheres and bowls by their bounding boxes, meshes by their scale);
- ``world/proposals/NNN/tool`` (the tool-centre point now), ``.../tool_path`` (the whole path) and
  ``.../end_states`` (tool and object positions at the end of each action, labelled with the action);
- ``proposals/NNN/summary``: source, score, success and plan as Markdown; ``scores/score``: the task
  score per proposal; ``session``: the run's summary.

Timelines: ``proposal`` (the proposal's index, a sequence) and ``sim_time`` (seconds since the rollout's
start). Traces are subsampled to about 30 Hz.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError
from simpact.core.rollout import Rollout
from simpact.core.scene import Scene, SceneObject
from simpact.planner.records import PlanResult, Proposal
from simpact.vlm.context import bbox_size

__all__ = ["RerunMissingError", "log_session"]

RATE_HZ = 30.0
"""Trace samples logged per second of simulated time."""
_TOOL_RGBA = (40, 120, 230, 255)
_OK_RGBA = (30, 170, 60, 255)
_FAIL_RGBA = (210, 50, 40, 255)


class RerunMissingError(SimpactError, ImportError):
    """rerun-sdk is not installed."""


def _import_rerun() -> Any:
    try:
        import rerun
    except ImportError:
        raise RerunMissingError(
            "--rerun needs the Rerun SDK: pip install rerun-sdk (numpy >= 2), or plan without --rerun"
        ) from None
    return rerun


def _rgba8(rgba: tuple[float, ...]) -> tuple[int, int, int, int]:
    r, g, b, a = (int(round(255 * min(max(float(v), 0.0), 1.0))) for v in rgba)
    return r, g, b, a


def _xyzw(wxyz: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) from this project's (w, x, y, z) to Rerun's (x, y, z, w)."""
    q = np.asarray(wxyz, dtype=float)
    return q[..., [1, 2, 3, 0]]


def _box_size(obj: SceneObject) -> list[float]:
    size = bbox_size(obj)
    return list(size) if size is not None else [float(v) for v in obj.size]


def _subsample(times: np.ndarray, rate_hz: float = RATE_HZ) -> np.ndarray:
    """Indices of the first sample in each 1/rate_hz bin, plus the last sample."""
    if len(times) == 0:
        return np.zeros(0, dtype=int)
    bins = np.floor((np.asarray(times, dtype=float) - float(times[0])) * rate_hz).astype(np.int64)
    keep = np.flatnonzero(np.diff(bins, prepend=bins[0] - 1) != 0)
    if keep[-1] != len(times) - 1:
        keep = np.append(keep, len(times) - 1)
    return keep


def _samples(rollout: Rollout) -> tuple[np.ndarray, np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(times (N,), tool positions (N, 3), object name -> (positions (N, 3), wxyz quaternions (N, 4))):
    the trace subsampled, or — for a rollout without a trace — its initial, end-of-action and final states."""
    trace = rollout.trace
    if trace is not None and len(trace) > 0:
        idx = _subsample(trace.time)
        objects = {}
        for name in trace.object_qpos:
            pos, quat = trace.object_pose(name)
            objects[name] = (np.asarray(pos)[idx], np.asarray(quat)[idx])
        return np.asarray(trace.time)[idx], np.asarray(trace.tcp_position)[idx], objects
    states = [rollout.initial, *rollout.states, rollout.final]
    times = np.array([s.time for s in states], dtype=float)
    tool = np.array([s.robot.tcp_position for s in states], dtype=float)
    names = [n for n in rollout.initial.objects if all(n in s.objects for s in states)]
    objects = {
        n: (
            np.array([s.objects[n].position for s in states], dtype=float),
            np.array([s.objects[n].quaternion for s in states], dtype=float),
        )
        for n in names
    }
    return times, tool, objects


def _summary_md(i: int, p: Proposal, result: PlanResult) -> str:
    tags = []
    if result.accepted == i:
        tags.append("accepted")
    if result.best == i:
        tags.append("best")
    head = f"# Proposal {i}" + (f" ({', '.join(tags)})" if tags else "")
    lines = [
        head,
        "",
        f"- source: `{p.source}`, iteration {p.iteration}",
        f"- score: {p.score:.4f}",
        f"- success (task check): {'yes' if p.success else 'no'}",
    ]
    if "vlm_success" in p.notes:
        lines.append(f"- VLM success: {'yes' if p.notes['vlm_success'] else 'no'}")
    if p.notes.get("vlm_reason"):
        lines.append(f"- VLM reason: {p.notes['vlm_reason']}")
    lines += ["", "## Plan", ""]
    lines += [f"{k}. `{a}`" for k, a in enumerate(p.plan.actions, 1)]
    details = p.evaluation.details
    if details:
        lines += ["", "## Evaluation", ""]
        lines += [f"- {k}: {v}" for k, v in details.items()]
    return "\n".join(lines) + "\n"


def _session_md(result: PlanResult) -> str:
    chosen = result.chosen
    score = f"{chosen.score:.4f}" if chosen is not None else "n/a"
    return (
        f"# {result.task}, seed {result.seed}\n\n"
        f"- success: {'yes' if result.success else 'no'} (score {score})\n"
        f"- proposals: {len(result.proposals)}, rounds: {result.iterations}\n"
        f"- accepted: {result.accepted}, best: {result.best}\n"
        f"- VLM: {result.vlm or 'none'}, method: {result.method or 'n/a'}\n"
        f"- wall time: {result.wall_s:.1f} s\n"
    )


def _log_static_scene(rr: Any, rec: Any, scene: Scene, moving: set[str]) -> None:
    rec.log("world", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
    sx, sy = scene.table_size
    rec.log(
        "world/table",
        rr.Boxes3D(
            centers=[[-0.3 + sx / 2, 0.0, -0.01]],
            sizes=[[sx, sy, 0.02]],
            colors=[(200, 190, 170, 120)],
            fill_mode="solid",
        ),
        static=True,
    )
    for obj in scene.objects:
        if obj.name in moving:
            continue
        path = f"world/fixed/{rr.escape_entity_path_part(obj.name)}"
        rec.log(
            path,
            rr.Transform3D(translation=obj.position, quaternion=_xyzw(np.array(obj.quaternion))),
            static=True,
        )
        rec.log(
            f"{path}/shape",
            rr.Boxes3D(
                sizes=[_box_size(obj)],
                colors=[_rgba8(obj.rgba)],
                labels=[obj.name],
                fill_mode="solid" if obj.collides else "majorwireframe",
            ),
            static=True,
        )


def _log_proposal(rr: Any, rec: Any, i: int, p: Proposal, result: PlanResult, shapes: dict[str, Any]) -> None:
    root = f"world/proposals/{i:03d}"
    times, tool, objects = _samples(p.rollout)
    n = len(times)
    t0 = float(times[0]) if n else 0.0
    rel = (times - t0) if n else times

    def indexes(t: np.ndarray) -> list[Any]:
        return [rr.TimeColumn("proposal", sequence=[i] * len(t)), rr.TimeColumn("sim_time", duration=t)]

    for name, (pos, quat) in objects.items():
        path = f"{root}/objects/{rr.escape_entity_path_part(name)}"
        obj = shapes.get(name)
        rec.log(
            f"{path}/shape",
            rr.Boxes3D(
                sizes=[_box_size(obj)] if obj is not None else [[0.03, 0.03, 0.03]],
                colors=[_rgba8(obj.rgba) if obj is not None else (150, 150, 150, 255)],
                labels=[name],
                fill_mode="solid",
            ),
            static=True,
        )
        if n:
            rec.send_columns(
                path,
                indexes=indexes(rel),
                columns=rr.Transform3D.columns(translation=pos, quaternion=_xyzw(quat)),
            )
    if n:
        rec.send_columns(
            f"{root}/tool",
            indexes=indexes(rel),
            columns=rr.Points3D.columns(positions=tool).partition([1] * n),
        )

    rec.set_time("proposal", sequence=i)
    rec.set_time("sim_time", duration=0.0)
    color = _OK_RGBA if p.success else _FAIL_RGBA
    if n > 1:
        rec.log(f"{root}/tool_path", rr.LineStrips3D([tool], radii=0.002, colors=[color]))
    rec.log(
        f"proposals/{i:03d}/summary", rr.TextDocument(_summary_md(i, p, result), media_type="text/markdown")
    )

    # End-of-action states, revealed one by one as sim_time passes them.
    tool_pts: list[np.ndarray] = []
    tool_labels: list[str] = []
    obj_pts: list[np.ndarray] = []
    obj_labels: list[str] = []
    for k, (action, state) in enumerate(zip(p.plan.actions, p.rollout.states)):
        tool_pts.append(np.asarray(state.robot.tcp_position, dtype=float))
        tool_labels.append(f"{k}: {action}")
        for name, ostate in state.objects.items():
            obj_pts.append(np.asarray(ostate.position, dtype=float))
            obj_labels.append(f"{name} after {k}")
        rec.set_time("sim_time", duration=max(float(state.time) - t0, 0.0))
        rec.log(
            f"{root}/end_states/tool", rr.Points3D(tool_pts, radii=0.008, colors=[color], labels=tool_labels)
        )
        if obj_pts:
            rec.log(
                f"{root}/end_states/objects",
                rr.Points3D(obj_pts, radii=0.006, colors=[(120, 120, 120, 255)], labels=obj_labels),
            )

    rec.reset_time()
    rec.set_time("proposal", sequence=i)
    rec.log("scores/score", rr.Scalars(p.score))


def log_session(result: PlanResult, scene: Scene, out_path: str | Path) -> Path:
    """Write ``result`` (every proposal's rollout, end-of-action states, score and success) over ``scene``
    to the Rerun recording ``out_path`` (``.rrd``); returns the path. Raises :class:`RerunMissingError`
    (an ImportError) when rerun-sdk is not installed."""
    rr = _import_rerun()
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rec = rr.RecordingStream("simpact", recording_id=f"{result.task}-seed{result.seed}-{out.stem}")
    rec.save(out)
    try:
        moving: set[str] = set()
        for p in result.proposals:
            if p.rollout.trace is not None:
                moving.update(p.rollout.trace.object_qpos)
            else:
                moving.update(p.rollout.initial.objects)
        shapes = {o.name: o for o in scene.objects}
        _log_static_scene(rr, rec, scene, moving)
        rec.log("session", rr.TextDocument(_session_md(result), media_type="text/markdown"), static=True)
        for i, p in enumerate(result.proposals):
            _log_proposal(rr, rec, i, p, result, shapes)
        rec.flush()
    finally:
        rec.disconnect()
    return out
