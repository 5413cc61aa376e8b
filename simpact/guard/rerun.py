"""Controlled reruns (SimuGuard §3.5): a replay of a recording with one simulation parameter changed, applied
from step 0 or switched on ``lead_s`` (0.1 s) before the first flagged artifact; in the second form the
prefix before the switch is verified bit for bit against the recording. Scored by the task's own success
check when the recording came from a task rollout.

Parameters (``PARAM[:BODY]=VALUE``; ``BODY`` defaults to the body of the first flagged event):

- ``mass:BODY=kg`` — the body's mass (inertia scaled with it; ``mj_setConst`` recomputes derived constants);
- ``iterations=N`` — constraint solver iterations;
- ``solref=s`` / ``solref:BODY=s`` — contact time constant of every geom (or of the body's geoms, which then
  take priority in every contact they make);
- ``timestep=s`` — physics step. The episode keeps its duration; the recorded actuation is resampled on the
  time axis: each recorded value is taken as the target at the end of its step (a MuJoCo world's controls
  interpolates targets that way), so continuous inputs (ctrl, forces, mocap poses) are linearly
  interpolated at each new step's end time, mocap quaternions renormalised, ``eq_active`` held;
  between-step writes move to the nearest new step;
- ``depenetration:BODY=m/s`` — a limit on the speed at which the body's overlaps are removed, MuJoCo's way:
  its geoms get priority and a critically damped time constant ``tau = max(tau0, d / (e * dmax * v))``
  (``d``: the deepest contact of the flagged event, ``dmax`` the geom's solimp dmax), since a critically
  damped overlap ``d`` separates at a peak speed of about ``d / (e * dmax * tau)``;
- ``clamp:BODY=m/s`` — after each step, the linear velocity of the body's free joint is scaled down to this
  speed (the paper's speed clamp; not a simulation parameter).

Between-step writes are applied only to the components they changed in the recorded episode (found by
replaying it), so a write does not pull a rerun back onto the recorded trajectory.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simpact.core.errors import SimpactError
from simpact.guard.detector import detect
from simpact.guard.recorder import Hook, Recorder
from simpact.guard.replay import (
    Collector,
    Divergence,
    _source,
    build,
    compare,
    replay_recorder,
    schedule,
    state_bit,
    task_outcome,
)
from simpact.guard.store import Recording, load_recording
from solvers.mujoco.world import Snapshot, mujoco_access
from solvers.world import World

__all__ = ["PARAMS", "Change", "RerunError", "RerunResult", "change_model", "rerun", "rerun_controls"]

PARAMS = ("mass", "iterations", "solref", "timestep", "depenetration", "clamp")
_BODY_PARAMS = ("mass", "depenetration", "clamp")


Masks = dict[tuple[int, int], np.ndarray]
"""(recorded step, ``mjtState`` bit) -> components a between-step write changed."""


class RerunError(SimpactError, ValueError):
    """A change that cannot be applied (unknown parameter, bad value, no flagged body, ...)."""


@dataclass(frozen=True)
class Change:
    """One simulation parameter changed: ``param`` (see :data:`PARAMS`), its ``value`` (SI units) and the
    body it acts on (None: the flagged body, or every geom for ``solref``)."""

    param: str
    value: float
    body: str | None = None

    @classmethod
    def parse(cls, text: str) -> Change:
        """``PARAM[:BODY]=VALUE``, e.g. ``mass:lid=0.5``, ``iterations=100``, ``depenetration=0.5``."""
        key, sep, raw = text.partition("=")
        param, _, body = key.strip().partition(":")
        if not sep or param not in PARAMS:
            raise RerunError(
                f"--set {text!r}: expected PARAM[:BODY]=VALUE with PARAM one of {', '.join(PARAMS)}"
            )
        try:
            value = float(raw)
        except ValueError:
            raise RerunError(f"--set {text!r}: {raw!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise RerunError(f"--set {text!r}: the value must be positive")
        if param == "iterations" and value != int(value):
            raise RerunError(f"--set {text!r}: iterations must be a whole number")
        return cls(param, value, body or None)

    def __str__(self) -> str:
        return f"{self.param}{':' + self.body if self.body else ''}={self.value:g}"


@dataclass
class RerunResult:
    change: Change
    body: str | None
    switch_step: int
    switch_s: float
    prefix_exact: bool | None
    """Steps before the switch identical to the recording (None when switched at step 0)."""
    prefix_divergence: Divergence | None
    original_flagged: list[dict[str, Any]]
    flagged: list[dict[str, Any]]
    """Events of the rerun that pass all three detector stages."""
    original_success: bool | None
    success: bool | None
    """The task's own check on the rerun (None: not a task recording)."""
    score: float | None
    nsteps: int
    peak_speed: float | None
    """Peak speed of the changed body after the switch, m/s."""
    wall_s: float
    recording: Recording | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "change": str(self.change),
            "param": self.change.param,
            "value": self.change.value,
            "body": self.body,
            "switch_step": self.switch_step,
            "switch_s": self.switch_s,
            "prefix_exact": self.prefix_exact,
            "prefix_divergence": None if self.prefix_divergence is None else self.prefix_divergence.to_dict(),
            "original_flagged": self.original_flagged,
            "original_artifact": bool(self.original_flagged),
            "flagged": bool(self.flagged),
            "events": self.flagged,
            "original_success": self.original_success,
            "success": self.success,
            "rerun_success": self.success,
            "score": self.score,
            "nsteps": self.nsteps,
            "peak_speed": self.peak_speed,
            "wall_s": round(self.wall_s, 4),
        }


def _write_masks(rec: Recording) -> Masks:
    """(step, bit) -> components each between-step write changed in the recorded episode (by replaying it)."""
    built = build(_source(rec))
    model, data = built.model, built.data
    writes = {state_bit(n) for n in rec.writes}
    masks: dict[tuple[int, int], np.ndarray] = {}
    inputs = schedule(rec)
    last = max((int(s[-1]) for s, _ in rec.writes.values() if len(s)), default=-1)
    for k in range(last + 1):
        for bit, values in inputs.get(k, ()):
            if bit in writes:
                now = np.empty(mujoco.mj_stateSize(model, bit))
                mujoco.mj_getState(model, data, now, bit)
                masks[(k, bit)] = now.view(np.uint64) != values.view(np.uint64)
            mujoco.mj_setState(model, data, values, bit)
        mujoco.mj_step(model, data)
    return masks


def _apply(
    model: mujoco.MjModel, data: mujoco.MjData, k: int, entries: Any, masks: Masks, writes: set[int]
) -> None:
    """Set one step's recorded inputs; a write at recorded step ``k`` only where it changed the state."""
    for bit, values in entries:
        mask = masks.get((k, bit)) if bit in writes else None
        if mask is not None:
            now = np.empty(mujoco.mj_stateSize(model, bit))
            mujoco.mj_getState(model, data, now, bit)
            values = np.where(mask, values, now)
        mujoco.mj_setState(model, data, values, bit)


def _resample(rec: Recording, start: int, dt_new: float) -> list[list[tuple[int, np.ndarray, int]]]:
    """Inputs for new steps of ``dt_new`` from recorded step ``start`` to the episode's end (see the module
    docstring): per new step, (bit, values, recorded step of a write or -1) to set before it."""
    n, dt = rec.nsteps, rec.manifest.timestep
    t0 = float(rec.time[start])
    t_end = float(rec.time[-1]) + dt
    m = max(1, int(round((t_end - t0) / dt_new)))
    new_start = t0 + np.arange(m) * dt_new
    sample_end = new_start + dt_new  # a value applies as the target at its step's end
    rec_end = rec.time + dt
    out: list[list[tuple[int, np.ndarray, int]]] = [[] for _ in range(m)]
    for name, (steps, values) in rec.actuation.items():
        bit = state_bit(name)
        dense = values[np.searchsorted(steps, np.arange(n), side="right") - 1]
        if name == "eq_active":
            held = np.clip(np.floor((new_start - rec.time[0]) / dt + 1e-9).astype(int), 0, n - 1)
            cols = dense[held]
        else:
            cols = np.column_stack(
                [np.interp(sample_end, rec_end, dense[:, j]) for j in range(dense.shape[1])]
            )
            if name == "mocap_quat" and cols.size:
                q = cols.reshape(m, -1, 4)
                cols = (q / np.linalg.norm(q, axis=-1, keepdims=True)).reshape(m, -1)
        for j in range(m):
            out[j].append((bit, np.ascontiguousarray(cols[j]) if cols.size else np.zeros(0), -1))
    for name, (steps, values) in rec.writes.items():
        bit = state_bit(name)
        for k, v in zip(steps.tolist(), values):
            if k >= start:
                j = min(m - 1, int(round((rec.time[k] - t0) / dt_new)))
                out[j].append((bit, np.ascontiguousarray(v), int(k)))
    return out


def _geoms(model: mujoco.MjModel, body: int) -> np.ndarray:
    return np.flatnonzero(model.geom_bodyid == body)


def change_model(model: mujoco.MjModel, change: Change, body: int | None, depth: float) -> None:
    """Apply ``change`` to ``model`` in place (see the module docstring); ``body`` is the body id it acts on
    (None: every geom, for ``solref``), ``depth`` the overlap (m) a ``depenetration`` limit is sized for.
    ``clamp`` is not a model parameter (see :func:`_clamp`)."""
    p, v = change.param, change.value
    if p == "mass":
        assert body is not None
        factor = v / model.body_mass[body]
        model.body_mass[body] = v
        model.body_inertia[body] *= factor
        mujoco.mj_setConst(model, mujoco.MjData(model))
    elif p == "iterations":
        model.opt.iterations = int(v)
    elif p == "timestep":
        model.opt.timestep = v
    elif p in ("solref", "depenetration"):
        geoms = np.arange(model.ngeom) if body is None else _geoms(model, body)
        if p == "solref":
            tau = np.full(len(geoms), v)
        else:
            dmax = model.geom_solimp[geoms, 1]
            tau = np.maximum(model.geom_solref[geoms, 0], depth / (math.e * dmax * v))
            model.geom_solref[geoms, 1] = 1.0  # critically damped
        model.geom_solref[geoms, 0] = tau
        if body is not None:
            model.geom_priority[geoms] = int(model.geom_priority.max(initial=0)) + 1
        elif model.npair:
            model.pair_solref[:, 0] = v


def _clamp(
    model: mujoco.MjModel, data: mujoco.MjData, body: int | None, change: Change
) -> Callable[[], None]:
    """The ``clamp`` change: a function to call after each step that scales the linear velocity of the
    body's free joint down to ``change.value`` m/s."""
    name = model.body(body).name if body is not None else None
    if (
        body is None
        or model.body_jntnum[body] < 1
        or model.jnt_type[model.body_jntadr[body]] != (mujoco.mjtJoint.mjJNT_FREE)
    ):
        raise RerunError(f"clamp: body {name!r} has no free joint")
    dof = int(model.jnt_dofadr[model.body_jntadr[body]])
    limit = change.value

    def clamp() -> None:
        v = data.qvel[dof : dof + 3]
        speed = float(np.linalg.norm(v))
        if speed > limit:
            v *= limit / speed

    return clamp


def rerun_controls(
    world: World,
    snapshot: Snapshot,
    ctrl: np.ndarray,
    change: Change,
    *,
    body: int | None,
    depth: float = 0.0,
    switch: int = 0,
    hooks: Sequence[Hook] = (),
    meta: Mapping[str, Any] | None = None,
) -> tuple[Recording, mujoco.MjModel]:
    """Record ``ctrl`` (N, nu) stepped from ``snapshot`` on a copy of a MuJoCo world's model, with ``change``
    applied from step ``switch`` on (steps before it are the world's own physics, bit for bit); the world is
    not touched. Returns the recording and the changed model. ``timestep`` is refused: the controls are per
    physics step."""
    if change.param == "timestep":
        raise RerunError("timestep: a rerun of per-step controls keeps the physics step")
    if not 0 <= switch <= len(ctrl):
        raise RerunError(f"switch step {switch} is outside the {len(ctrl)} steps")
    model = copy.copy(mujoco_access(world).model)
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, snapshot, mujoco.mjtState.mjSTATE_INTEGRATION)
    mujoco.mj_forward(model, data)
    recorder = Recorder.for_world(world, data, model=model, hooks=hooks, meta=meta)
    if switch:
        recorder.run(ctrl[:switch])
    change_model(model, change, body, depth)
    if change.param == "clamp":
        clamp = _clamp(model, data, body, change)
        for u in ctrl[switch:]:
            recorder.step(u)
            clamp()
    elif switch < len(ctrl):
        recorder.run(ctrl[switch:])
    return recorder.close(), model


def rerun(
    recording: Recording | str | Path,
    change: Change | str,
    switch_before_artifact: bool = False,
    lead_s: float = 0.1,
) -> RerunResult:
    """Replay ``recording`` with ``change`` applied from step 0, or from ``lead_s`` before its first flagged
    artifact (prefix verified bit for bit); detect artifacts in the rerun and score it by the task's check.

    Long (about 95 lines): one straight sequence (load, rebuild, verify the prefix, switch, detect, score)."""
    t0 = time.perf_counter()
    rec = recording if isinstance(recording, Recording) else load_recording(recording)
    change = Change.parse(change) if isinstance(change, str) else change
    man = rec.manifest
    source = _source(rec)
    original = [e for e in detect(rec) if e.flagged]
    if switch_before_artifact and not original:
        raise RerunError("--switch-before-artifact: the recording has no flagged artifact to switch before")
    body_name = change.body
    if body_name is None and change.param in _BODY_PARAMS:
        if not original:
            raise RerunError(
                f"{change.param}: no flagged artifact to take the body from; name one (PARAM:BODY=VALUE)"
            )
        body_name = original[0].body
    body = None
    if body_name is not None:
        if body_name not in man.bodies:
            raise RerunError(f"{change}: no body named {body_name!r} in the recording")
        body = man.bodies.index(body_name)
    event = next((e for e in original if e.body == body_name), original[0] if original else None)
    depth = event.contact_depth if event is not None else 0.0
    if change.param == "depenetration" and depth <= 0:
        b = body
        rows = (rec.contact_bodies == b).any(axis=1)
        depth = float(rec.contact_depth[rows].max(initial=0.0))
    dt = man.timestep
    switch = 0
    if switch_before_artifact:
        assert original
        switch = max(0, original[0].onset_step - int(round(lead_s / dt)))

    built = build(source)
    model, data = built.model, built.data
    inputs = schedule(rec)
    writes = {state_bit(n) for n in rec.writes}
    masks = _write_masks(rec) if any(len(s) for s, _ in rec.writes.values()) else {}
    collector = Collector()
    recorder = replay_recorder(model, data, rec, hooks=[collector])
    # prefix: the recorded physics, unchanged
    for k in range(switch):
        _apply(model, data, k, inputs.get(k, ()), masks, writes)
        recorder.step()
    change_model(model, change, body, depth)
    clamp = _clamp(model, data, body, change) if change.param == "clamp" else None
    if change.param == "timestep":
        for entries in _resample(rec, switch, change.value):
            for bit, values, k in entries:
                _apply(model, data, k, [(bit, values)], masks, writes)
            recorder.step()
    else:
        for k in range(switch, rec.nsteps):
            _apply(model, data, k, inputs.get(k, ()), masks, writes)
            recorder.step()
            if clamp is not None:
                clamp()
    result = recorder.close()
    prefix_div = compare(rec, result, stop=switch) if switch else None
    flagged = [e for e in detect(result) if e.flagged]
    success = score = None
    if source.get("kind") == "task":
        ctrl = np.zeros((len(collector.rows), model.nu))  # the checks read states, not the trace's ctrl
        ae = source["action_end"]
        if change.param == "timestep":  # the same moments in time, in the new steps
            ae = [min(result.nsteps - 1, int(round((i + 1) * dt / change.value)) - 1) for i in ae]
        evaluation = task_outcome(built, {**source, "action_end": ae}, collector, ctrl)
        success, score = evaluation.success, evaluation.score
    outcome = man.meta.get("outcome") or {}
    switch_row = min(int(round((rec.time[switch] - rec.time[0]) / model.opt.timestep)), result.nsteps)
    peak = float(result.speed(body)[switch_row:].max(initial=0.0)) if body is not None else None
    return RerunResult(
        change=change,
        body=body_name,
        switch_step=switch,
        switch_s=float(rec.time[switch] - rec.time[0]) if rec.nsteps else 0.0,
        prefix_exact=None if not switch else prefix_div is None,
        prefix_divergence=prefix_div,
        original_flagged=[e.to_dict() for e in original],
        flagged=[e.to_dict() for e in flagged],
        original_success=outcome.get("success"),
        success=success,
        score=score,
        nsteps=result.nsteps,
        peak_speed=peak,
        wall_s=time.perf_counter() - t0,
        recording=result,
    )
