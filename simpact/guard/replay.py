"""Exact replay of a SimuGuard recording (SimuGuard §3.4): rebuild the scene in a fresh process, apply the
recorded actuation from step 0 plus the recorded between-step writes, and compare every recorded float bit
for bit (per-step body arrays, merged contacts, actuation and write logs, the 250-step state snapshots).

A recording is replayable when its manifest's ``meta["source"]`` says how to rebuild the scene:

- ``{"kind": "mjcf", "path": "/abs/scene.xml", "sha256": ..., "keyframe": 0 | None}``: an MJCF file, started
  from its first keyframe when it has one (``keyframe``), with ``ctrl`` zeroed before step 0;
- ``{"kind": "task", "task": NAME_OR_PATH, "seed": N, "tail_s": s, "plan": {...}, "action_end": [...]}``: a
  task scene (``simpact.tasks``) in its World (``make_world``; MuJoCo), started from the world's
  settled initial snapshot; ``plan`` and ``action_end`` (last physics step of each action) let a rerun be
  scored by the task's own check. ``meta["outcome"]`` holds that check's verdict on the recorded episode.

:func:`record_task_rollout` and :func:`record_mjcf` record with such a source. Run as
``python -m simpact.guard.replay REC`` to replay in a fresh process (prints the result as JSON).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simpact.core.actions import Plan
from simpact.core.errors import SimpactError
from simpact.core.rollout import Rollout, Trace
from simpact.guard.recorder import Recorder, model_hash
from simpact.guard.store import Recording, load_recording
from simpact.tasks import Evaluation, Task, load_task
from solvers.mujoco.world import Snapshot, mujoco_access
from solvers.world import World, make_world

__all__ = [
    "Built",
    "Divergence",
    "ReplayError",
    "ReplayResult",
    "build",
    "compare",
    "record_mjcf",
    "record_task_rollout",
    "replay",
    "schedule",
    "state_bit",
    "task_outcome",
    "task_rollout",
]

StepInputs = dict[int, list[tuple[int, np.ndarray]]]
"""Physics step -> (``mjtState`` bit, values) to set before that step."""


class ReplayError(SimpactError, ValueError):
    """A recording that cannot be replayed (no scene source, a changed scene file, ...)."""


def state_bit(name: str) -> int:
    """The ``mjtState`` bit of a state component named as in the manifest (``ctrl``, ``qpos``, ...)."""
    try:
        return int(getattr(mujoco.mjtState, f"mjSTATE_{name.upper()}"))
    except AttributeError:
        raise ReplayError(f"unknown state component {name!r} in the recording") from None


def schedule(recording: Recording) -> StepInputs:
    """Everything recorded as set before a step: actuation changes and between-step writes, per step."""
    out: StepInputs = {}
    for logs in (recording.actuation, recording.writes):
        for name, (steps, values) in logs.items():
            bit = state_bit(name)
            for k, v in zip(steps.tolist(), values):
                out.setdefault(int(k), []).append((bit, np.ascontiguousarray(v, dtype=float)))
    return out


# --- scene sources ----------------------------------------------------------------------------------------
@dataclass
class Built:
    """A rebuilt scene at the recording's initial state."""

    model: mujoco.MjModel
    data: mujoco.MjData
    world: World | None = None
    """The World of a task source (None for MJCF)."""
    task: Task | None = None
    scene: Any = None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_mjcf(path: Path) -> tuple[mujoco.MjModel, mujoco.MjData, int | None]:
    try:
        model = mujoco.MjModel.from_xml_path(str(path))
    except (ValueError, OSError) as exc:
        raise ReplayError(f"{path}: {str(exc).strip().splitlines()[0]}") from None
    data = mujoco.MjData(model)
    keyframe = 0 if model.nkey else None
    if keyframe is not None:
        mujoco.mj_resetDataKeyframe(model, data, keyframe)
    data.ctrl[:] = 0.0
    mujoco.mj_forward(model, data)
    return model, data, keyframe


def build(source: Mapping[str, Any]) -> Built:
    """Rebuild a scene from a manifest's ``meta["source"]`` (see the module docstring)."""
    kind = source.get("kind")
    if kind == "mjcf":
        path = Path(source["path"])
        if not path.is_file():
            raise ReplayError(f"scene file {path} not found")
        if source.get("sha256") and _sha256(path) != source["sha256"]:
            raise ReplayError(f"scene file {path} changed since it was recorded (sha256 differs)")
        model, data, _ = _load_mjcf(path)
        return Built(model, data)
    if kind == "task":
        task = load_task(source["task"])
        scene = task.scene(int(source.get("seed", 0)))
        world = make_world(scene)
        mj = mujoco_access(world)
        return Built(mj.model, mj.new_data(mj.initial_snapshot), world, task, scene)
    raise ReplayError(
        "the recording has no replayable scene source (manifest meta.source with kind 'mjcf' or 'task')"
    )


def _source(recording: Recording) -> Mapping[str, Any]:
    source = recording.manifest.meta.get("source")
    if not isinstance(source, Mapping):
        raise ReplayError("the recording has no scene source (manifest meta.source); it cannot be rebuilt")
    return source


class Collector:
    """A recorder hook that keeps what ``mujoco.rollout`` returns per step: time, qpos, qvel, sensordata
    after each step (sensordata as computed inside the step)."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []

    def __call__(self, recorder: Recorder) -> None:
        d = recorder.data
        self.rows.append(np.concatenate(([d.time], d.qpos, d.qvel, d.sensordata)))

    def arrays(self, model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        a = np.array(self.rows).reshape(len(self.rows), -1)
        nq, nv = model.nq, model.nv
        return a[:, 0], a[:, 1 : 1 + nq], a[:, 1 + nq : 1 + nq + nv], a[:, 1 + nq + nv :]


def task_rollout(
    built: Built,
    plan: Plan,
    action_end: Sequence[int],
    collector: Collector,
    ctrl: np.ndarray,
    snapshot: Snapshot | None = None,
    ik_residual_max: float = 0.0,
    wall_s: float = 0.0,
) -> Rollout:
    """A :class:`~simpact.core.rollout.Rollout` of a stepped episode of ``plan`` from ``snapshot``
    (default: the world's initial one), rebuilt from the collected rows with the World's own conversion."""
    mj, model = mujoco_access(built.world), built.model
    t, qpos, qvel, sens = collector.arrays(model)
    first = mujoco.MjData(model)
    mj.restore(mj.initial_snapshot if snapshot is None else snapshot, first)
    ws = mj.world_state  # the World's own conversion (qpos, qvel, sensordata -> WorldState)
    initial = ws(float(first.time), first.qpos, first.qvel, first.sensordata)
    ends = [ws(float(t[i]), qpos[i], qvel[i], sens[i]) for i in action_end if i < len(t)]
    final = ws(float(t[-1]), qpos[-1], qvel[-1], sens[-1])
    adr = {
        n: slice(model.sensor(n).adr[0], model.sensor(n).adr[0] + model.sensor(n).dim[0])
        for n in ("tcp_pos", "tcp_quat", "finger_joint1", "finger_joint2")
    }
    trace = Trace(
        time=t,
        qpos=qpos,
        qvel=qvel,
        ctrl=ctrl,
        tcp_position=sens[:, adr["tcp_pos"]],
        tcp_quaternion=sens[:, adr["tcp_quat"]],
        gripper_width=sens[:, adr["finger_joint1"]][:, 0] + sens[:, adr["finger_joint2"]][:, 0],
        object_qpos=dict(mj.object_qpos),
    )
    last = mujoco.MjData(model)
    spec = int(mujoco.mjtState.mjSTATE_TIME | mujoco.mjtState.mjSTATE_QPOS | mujoco.mjtState.mjSTATE_QVEL)
    mujoco.mj_setState(model, last, np.r_[t[-1], qpos[-1], qvel[-1]], spec)
    mujoco.mj_forward(model, last)
    contacts = mj.contacts(last)
    return Rollout(plan, initial, ends, final, trace, contacts, ik_residual_max, len(t), wall_s)


def task_outcome(
    built: Built, source: Mapping[str, Any], collector: Collector, ctrl: np.ndarray
) -> Evaluation:
    """The task's own evaluation of a stepped episode (its Rollout rebuilt from the collected rows)."""
    if built.task is None:
        raise ReplayError("the rebuilt scene has no task to evaluate the episode with")
    plan = Plan.from_dict(source["plan"])
    rollout = task_rollout(built, plan, source["action_end"], collector, ctrl)
    return built.task.evaluate(rollout, built.scene, int(source.get("seed", 0)))


# --- recording with a source ------------------------------------------------------------------------------
def _record(recorder: Recorder, ctrl: np.ndarray, resume: bool) -> None:
    """Step ``ctrl`` through ``recorder``, from the step the interrupted recording in its folder reached when
    ``resume``; after Ctrl-C (or SIGTERM) the recording is marked interrupted before the interrupt goes on."""
    start = recorder.restore() if resume else 0
    try:
        recorder.run(ctrl[start:])
    except KeyboardInterrupt:
        recorder.abort()
        raise


def record_task_rollout(
    task_name: str,
    seed: int = 0,
    plan: Any = None,
    out: str | Path | None = None,
    resume: bool = False,
    **recorder_kw: Any,
) -> Recording:
    """Record a task's rollout of ``plan`` (default: the task's reference plan) exactly as
    the World's ``rollout`` steps it, with a ``task`` scene source and the task's verdict
    (``meta["outcome"]``: success, score). ``resume`` continues the interrupted recording in ``out``."""
    task = load_task(task_name)
    scene = task.scene(seed)
    world = make_world(scene)
    mj = mujoco_access(world)
    if plan is None:
        plan = task.reference_plan(scene, world.start_pose(), seed)
    full_plan, ctrl, action_end, _ = mj.controls(plan, mj.initial_snapshot, task.tail_s)
    name = str(Path(task_name).resolve()) if Path(task_name).is_file() else task.name
    source = {
        "kind": "task",
        "task": name,
        "seed": seed,
        "tail_s": task.tail_s,
        "plan": full_plan.to_dict(),
        "action_end": [int(i) for i in action_end],
    }
    data = mj.new_data(mj.initial_snapshot)
    collector = Collector()
    meta = {"source": source, **recorder_kw.pop("meta", {})}
    recorder = Recorder.for_world(
        world,
        data,
        out=out,
        seed=seed,
        meta=meta,
        hooks=[collector],
        checkpoint_extras=lambda: {"collector": np.array(collector.rows)},
        **recorder_kw,
    )
    _record(recorder, ctrl, resume)
    if resume:
        collector.rows[:0] = list(recorder.resumed_extras.get("collector", ()))
    try:
        built = Built(mj.model, data, world, task, scene)
        evaluation = task_outcome(built, source, collector, ctrl)
    except KeyboardInterrupt:
        recorder.abort()
        raise
    recorder.manifest.meta["outcome"] = {"success": evaluation.success, "score": evaluation.score}
    return recorder.close()


def record_mjcf(
    path: str | Path,
    steps: int,
    out: str | Path | None = None,
    robot_prefix: str | Sequence[str] | None = None,
    ctrl: np.ndarray | None = None,
    resume: bool = False,
    **recorder_kw: Any,
) -> Recording:
    """Record ``steps`` physics steps of an MJCF scene from its first keyframe (if any) with zero control,
    or with ``ctrl`` (N, nu) (then ``steps`` defaults to N; shorter ``ctrl`` holds its last row).
    ``resume`` continues the interrupted recording in ``out``."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ReplayError(f"scene file {path} not found")
    model, data, keyframe = _load_mjcf(path)
    if ctrl is None:
        ctrl = np.zeros((steps, model.nu))
    else:
        ctrl = np.asarray(ctrl, dtype=float)
        if ctrl.ndim == 1 and model.nu == 1:
            ctrl = ctrl[:, None]
        if ctrl.ndim != 2 or ctrl.shape[1] != model.nu or len(ctrl) == 0:
            raise ReplayError(f"ctrl must have shape (N, {model.nu}) for {path.name}, got {ctrl.shape}")
        if len(ctrl) < steps:
            ctrl = np.vstack([ctrl, np.tile(ctrl[-1], (steps - len(ctrl), 1))])
        ctrl = ctrl[:steps]
    source = {"kind": "mjcf", "path": str(path), "sha256": _sha256(path), "keyframe": keyframe}
    meta = {"source": source, **recorder_kw.pop("meta", {})}
    recorder = Recorder(model, data, robot_prefix=robot_prefix, out=out, meta=meta, **recorder_kw)
    _record(recorder, ctrl, resume)
    return recorder.close()


# --- replay and comparison --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Divergence:
    """The first recorded float a replay does not reproduce."""

    step: int
    time_s: float | None
    array: str
    """``time``, ``xpos``, ``xquat``, ``vel``, ``contacts``, ``act.<field>``, ``write.<field>``,
    ``snapshot``, or ``nsteps``."""
    where: str
    """Body and component (``lid z``), contact pair, or state component and index."""
    recorded: Any
    replayed: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "time_s": self.time_s,
            "array": self.array,
            "where": self.where,
            "recorded": self.recorded,
            "replayed": self.replayed,
        }


@dataclass
class ReplayResult:
    exact: bool
    first_divergence: Divergence | None
    nsteps: int
    snapshots_checked: int
    model_hash_matches: bool
    wall_s: float
    replayed: Recording | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exact": self.exact,
            "first_divergence": None if self.first_divergence is None else self.first_divergence.to_dict(),
            "nsteps": self.nsteps,
            "snapshots_checked": self.snapshots_checked,
            "model_hash_matches": self.model_hash_matches,
            "wall_s": round(self.wall_s, 4),
        }


def _py(x: Any) -> Any:
    return x.tolist() if isinstance(x, np.ndarray) else (x.item() if isinstance(x, np.generic) else x)


def _rows_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: any element differs bit for bit (NaN equal to the same NaN)."""
    n = len(a)
    a2 = np.ascontiguousarray(a).reshape(n, -1)
    b2 = np.ascontiguousarray(b).reshape(n, -1)
    if a2.dtype.kind == "f":
        return (a2.view(np.uint64) != b2.view(np.uint64)).any(axis=1) if a2.size else np.zeros(n, bool)
    return (a2 != b2).any(axis=1)


def _first_col(a: np.ndarray, b: np.ndarray) -> int:
    a1, b1 = np.ravel(a), np.ravel(b)
    if a1.dtype.kind == "f":
        return int(np.flatnonzero(a1.view(np.uint64) != b1.view(np.uint64))[0])
    return int(np.flatnonzero(a1 != b1)[0])


def _component(layout: Mapping[str, Sequence[int]], col: int) -> str:
    for name, (offset, size) in layout.items():
        if offset <= col < offset + size:
            return f"{name}[{col - offset}]"
    return f"[{col}]"


def compare(recorded: Recording, replayed: Recording, stop: int | None = None) -> Divergence | None:
    """The earliest step at which ``replayed`` differs from ``recorded`` in any recorded float (only steps
    before ``stop`` when given); None if identical.

    Long (about 95 lines): one flat comparison per recorded array, in the order the manifest lists them."""
    man = recorded.manifest
    bodies = man.bodies
    n = min(recorded.nsteps, replayed.nsteps)
    if stop is not None:
        n = min(n, stop)
    found: list[Divergence] = []

    def t(step: int) -> float | None:
        return float(recorded.time[step]) if step < recorded.nsteps else None

    if stop is None and recorded.nsteps != replayed.nsteps:
        found.append(Divergence(n, t(n), "nsteps", "episode length", recorded.nsteps, replayed.nsteps))
    axes = {"xpos": "xyz", "xquat": "wxyz", "vel": "xyz"}
    for name in ("time", "xpos", "xquat", "vel"):
        a, b = getattr(recorded, name)[:n], getattr(replayed, name)[:n]
        rows = np.flatnonzero(_rows_differ(a, b))
        if len(rows):
            k = int(rows[0])
            if name == "time":
                where, ra, rb = "time", float(a[k]), float(b[k])
            else:
                col = _first_col(a[k], b[k])
                j, c = divmod(col, a.shape[2])
                where, ra, rb = f"{bodies[j]} {axes[name][c]}", float(a[k, j, c]), float(b[k, j, c])
            found.append(Divergence(k, t(k), name, where, ra, rb))
    # contacts (CSR): the first step whose pair count or any pair's values differ
    ca, cb = np.diff(recorded.contact_start[: n + 1]), np.diff(replayed.contact_start[: n + 1])
    bad = np.flatnonzero(ca != cb)
    limit = int(bad[0]) if len(bad) else n
    c_end = int(recorded.contact_start[limit])
    for name in ("contact_bodies", "contact_impulse", "contact_depth", "contact_count"):
        a, b = getattr(recorded, name), getattr(replayed, name)
        if a is None or b is None:
            continue
        rows = np.flatnonzero(_rows_differ(a[:c_end], b[:c_end]))
        if len(rows):
            r = int(rows[0])
            k = int(np.searchsorted(recorded.contact_start, r, side="right") - 1)
            pair = " / ".join(bodies[i] for i in recorded.contact_bodies[r])
            found.append(Divergence(k, t(k), name, pair, _py(a[r]), _py(b[r])))
            break
    if len(bad):
        k = int(bad[0])
        found.append(Divergence(k, t(k), "contact_count", "pairs in contact", int(ca[k]), int(cb[k])))
    # sparse logs and snapshots: (steps, values) compared entry by entry
    logs: list[tuple[str, tuple[np.ndarray, np.ndarray] | None, tuple[np.ndarray, np.ndarray] | None]] = []
    for prefix, ra_logs, rb_logs in (
        ("act", recorded.actuation, replayed.actuation),
        ("write", recorded.writes, replayed.writes),
    ):
        for name in sorted(set(ra_logs) | set(rb_logs)):
            logs.append((f"{prefix}.{name}", ra_logs.get(name), rb_logs.get(name)))
    logs.append(
        (
            "snapshot",
            (recorded.snapshot_step, recorded.snapshots),
            (replayed.snapshot_step, replayed.snapshots),
        )
    )
    empty = (np.zeros(0, dtype=np.int64), np.zeros((0, 0)))
    for name, la, lb in logs:
        sa, va = la or empty
        sb, vb = lb or empty
        sa, va = sa[sa < n], va[: int((sa < n).sum())]
        sb, vb = sb[sb < n], vb[: int((sb < n).sum())]
        m = min(len(sa), len(sb))
        differ = (sa[:m] != sb[:m]) | (
            _rows_differ(va[:m], vb[:m]) if m and va.shape[1:] == vb.shape[1:] else True
        )
        idx = np.flatnonzero(differ)
        if len(idx):
            i = int(idx[0])
            k = int(min(sa[i], sb[i]))
            if sa[i] != sb[i]:
                where, ra, rb = "logged at step", int(sa[i]), int(sb[i])
            else:
                col = _first_col(va[i], vb[i])
                field_name = name.partition(".")[2]
                where = _component(man.state_layout, col) if name == "snapshot" else f"{field_name}[{col}]"
                ra, rb = float(va[i].ravel()[col]), float(vb[i].ravel()[col])
            found.append(Divergence(k, t(k), name, where, ra, rb))
        elif len(sa) != len(sb):
            k = int(sa[m]) if len(sa) > m else int(sb[m])
            found.append(Divergence(k, t(k), name, "entry missing", len(sa), len(sb)))
    if not found:
        return None
    order = ["nsteps", "act.", "write.", "snapshot", "time", "xpos", "xquat", "vel", "contact"]

    def rank(d: Divergence) -> tuple[int, int]:
        return d.step, next(i for i, p in enumerate(order) if d.array.startswith(p))

    return min(found, key=rank)


def drive(
    model: mujoco.MjModel,
    data: mujoco.MjData,
    inputs: StepInputs,
    recorder: Recorder,
    steps: range,
    after: Callable[[int], None] | None = None,
) -> None:
    """Step ``steps`` through ``recorder``, setting the recorded inputs of each step before it."""
    for k in steps:
        for bit, values in inputs.get(k, ()):
            mujoco.mj_setState(model, data, values, bit)
        recorder.step()
        if after is not None:
            after(k)


def replay_recorder(model: mujoco.MjModel, data: mujoco.MjData, recording: Recording, **kw: Any) -> Recorder:
    """A recorder like the one that made ``recording`` (chunking, snapshots, roles, hash), in memory."""
    man = recording.manifest
    robots = [i for i, r in enumerate(man.roles) if r == "robot"]
    return Recorder(
        model,
        data,
        robot_bodies=robots,
        seed=man.seed,
        chunk_steps=man.chunk_steps,
        snapshot_every=man.snapshot_every,
        model_hash=man.model_hash,
        meta=man.meta,
        background_write=False,
        **kw,
    )


def replay(recording: Recording | str | Path) -> ReplayResult:
    """Rebuild the recording's scene, replay it from step 0 and compare it with the recording bit for bit."""
    t0 = time.perf_counter()
    rec = recording if isinstance(recording, Recording) else load_recording(recording)
    built = build(_source(rec))
    model, data = built.model, built.data
    hash_ok = model_hash(model) == rec.manifest.model_hash
    if not hash_ok:
        wrong = Divergence(0, None, "model", "model hash", rec.manifest.model_hash, model_hash(model))
        return ReplayResult(False, wrong, rec.nsteps, 0, False, time.perf_counter() - t0)
    recorder = replay_recorder(model, data, rec)
    drive(model, data, schedule(rec), recorder, range(rec.nsteps))
    replayed = recorder.close()
    div = compare(rec, replayed)
    checked = int(np.searchsorted(rec.snapshot_step, div.step)) if div else len(rec.snapshot_step)
    return ReplayResult(div is None, div, rec.nsteps, checked, True, time.perf_counter() - t0, replayed)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simpact.guard.replay REC``: replay in this (fresh) process, print the result as JSON."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m simpact.guard.replay REC", file=sys.stderr)
        return 2
    try:
        result = replay(args[0])
    except (SimpactError, FileNotFoundError) as exc:
        print(f"replay: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict()))
    return 0 if result.exact else 1


if __name__ == "__main__":
    sys.exit(main())
