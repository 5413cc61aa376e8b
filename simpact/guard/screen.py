"""SimuGuard's screen: a conservative, vectorised first pass over a rollout's trace, so that only rollouts
that could hold a contact ejection pay for the full :class:`~simpact.guard.recorder.Recorder`.

A rollout stepped by ``mujoco.rollout`` (C, no Python per step) already returns ``qpos`` and ``qvel`` after
every step. For every object body on a free joint they give, at every step, the body frame's position and the
linear velocity of its centre of mass (``v + R (w x ipos)``: free joints hold the linear velocity in the world
frame and the angular one in the body frame, and MuJoCo keeps their quaternions normalised). The screen runs
the detector's first stage on these arrays with every contact condition taken as met, and thresholds relaxed
by a relative ``1e-6``:

* candidate: ``dv >= min_dv`` in one step and ``speed > min_speed`` after it (contact assumed recent);
* confirmed: the body travels ``min_displacement`` within ``confirm_window`` (free flight assumed).

Every exact event of :func:`~simpact.guard.detector.detect` is such a candidate, confirmed (its contact and
flight conditions only narrow the detector's sets; the relaxation absorbs the last-bit difference between
this velocity and the recorder's), so a clean screen means the full recording would have no event at all, and
the detector's stages need not run. A suspicious screen is re-executed under the recorder, exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from simpact.core.rollout import Rollout
from simpact.guard.detector import Thresholds
from simpact.guard.recorder import _cross, _rotate, body_roles, state_layout
from solvers.mujoco.world import Snapshot, mujoco_access
from solvers.world import World

__all__ = ["RELAX", "ScreenResult", "free_bodies_motion", "free_joint", "screen", "screen_rollout"]

RELAX = 1.0 - 1e-6
"""Factor on the screen's lower thresholds: far below any threshold, far above rounding differences."""


@dataclass(frozen=True)
class ScreenResult:
    """Whether a rollout needs the full recording, and why (SI units)."""

    suspicious: bool
    reason: str
    body: str | None = None
    step: int | None = None
    """Onset step of the first confirmed candidate."""

    def to_dict(self) -> dict[str, Any]:
        return {"suspicious": self.suspicious, "reason": self.reason, "body": self.body, "step": self.step}


def free_bodies_motion(
    model: mujoco.MjModel,
    bodies: Sequence[int],
    qpos: np.ndarray,
    qvel: np.ndarray,
    first: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Body frame positions (n, nb, 3), m, and centre-of-mass linear velocities (n, nb, 3), m/s, in the world
    frame of ``bodies`` (each on a single free joint: see :func:`free_joint`), from ``qpos`` (n, nq) and
    ``qvel`` (n, nv), with the row ``first`` = (qpos, qvel) put before them when given. Only the bodies'
    columns are read (a few numpy calls for all bodies and steps)."""
    joints = [int(model.body_jntadr[b]) for b in bodies]
    qa = np.array([model.jnt_qposadr[j] for j in joints], dtype=np.intp)[:, None]
    da = np.array([model.jnt_dofadr[j] for j in joints], dtype=np.intp)[:, None]
    qcols, vcols = qa + np.arange(7), da + np.arange(6)
    q, v = qpos[:, qcols], qvel[:, vcols]  # (n, nb, 7), (n, nb, 6)
    if first is not None:
        q = np.concatenate([first[0][qcols][None], q])
        v = np.concatenate([first[1][vcols][None], v])
    vel = v[..., :3]
    ipos = model.body_ipos[list(bodies)]
    off = np.flatnonzero(np.any(ipos != 0.0, axis=1))  # com away from the body frame: add R (w x ipos)
    if len(off):
        spin = _cross(v[:, off, 3:], np.broadcast_to(ipos[off], v[:, off, 3:].shape))
        vel = vel.copy()
        vel[:, off] += _rotate(q[:, off, 3:], spin)
    return q[..., :3], vel


def free_joint(model: mujoco.MjModel, body: int) -> bool:
    """Whether ``body`` sits on a single free joint (what the screen can see)."""
    j = int(model.body_jntadr[body])
    return bool(model.body_jntnum[body] == 1 and model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE)


def screen_rollout(
    world: World, rollout: Rollout, snapshot: Snapshot | None = None, thresholds: Thresholds | None = None
) -> ScreenResult:
    """:func:`screen` a MuJoCo world's rollout from ``snapshot`` (default: the world's initial one): the
    snapshot's state, then every row of its trace but the last (a trace's rows are the states after each
    step)."""
    if rollout.trace is None:
        raise ValueError("the rollout has no trace (roll out with trace=True to screen it)")
    mj = mujoco_access(world)
    snapshot = mj.initial_snapshot if snapshot is None else snapshot
    layout = state_layout(mj.model)
    (oq, nq), (ov, nv) = layout["qpos"], layout["qvel"]
    first = (snapshot[oq : oq + nq], snapshot[ov : ov + nv])
    trace = rollout.trace
    return screen(
        mj.model,
        trace.qpos[:-1],
        trace.qvel[:-1],
        first=first,
        robot_bodies=mj.robot_bodies,
        thresholds=thresholds,
    )


def screen(
    model: mujoco.MjModel,
    qpos: np.ndarray,
    qvel: np.ndarray,
    *,
    first: tuple[np.ndarray, np.ndarray] | None = None,
    robot_bodies: Iterable[int] | None = None,
    thresholds: Thresholds | None = None,
) -> ScreenResult:
    """Screen an episode given ``qpos`` (n, nq) and ``qvel`` (n, nv) at the start of each physics step (after
    the row ``first`` = (qpos, qvel) when given).

    Object bodies (:func:`~simpact.guard.recorder.body_roles`) must sit on a free joint of their own;
    otherwise the episode is suspicious (the screen cannot see it)."""
    th = thresholds or Thresholds()
    dt = float(model.opt.timestep)
    objects = [b for b, role in enumerate(body_roles(model, robot_bodies)) if role == "object"]
    names = [model.body(b).name or f"body{b}" for b in objects]
    for b, name in zip(objects, names):
        if not free_joint(model, b):
            return ScreenResult(True, f"object body {name!r} is not on a single free joint", name)
    n = len(qpos) + (first is not None)
    if n < 2 or not objects:
        return ScreenResult(False, "no object to screen" if not objects else "fewer than two steps")
    pos, vel = free_bodies_motion(model, objects, qpos, qvel, first)
    min_dv = th.min_dv * dt / th.reference_step * RELAX
    jump = np.diff(vel, axis=0)
    dv2 = (jump * jump).sum(axis=-1)  # (n - 1, nb)
    speed2 = (vel[1:] * vel[1:]).sum(axis=-1)
    cand = (dv2 >= min_dv * min_dv) & (speed2 > (th.min_speed * RELAX) ** 2)
    window = th.steps(th.confirm_window, dt)
    for k, i in zip(*(a.tolist() for a in np.nonzero(cand))):
        hi = min(n - 1, k + window)
        disp = float(np.linalg.norm(pos[k : hi + 1, i] - pos[k, i], axis=1).max())
        if disp >= th.min_displacement * RELAX:
            return ScreenResult(
                True,
                f"{names[i]} changed speed by {np.sqrt(dv2[k, i]):.2f} m/s in one step {k * dt:.3f} s into "
                f"the episode and moved {disp:.3f} m",
                names[i],
                k,
            )
    return ScreenResult(False, "no fast jump of any object")
