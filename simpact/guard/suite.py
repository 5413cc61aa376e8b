"""A labelled suite of small SimuGuard episodes: contact artifacts (positives) and hard negatives.

Every episode is a small MJCF scene built with :class:`mujoco.MjSpec` (a floor and a few boxes or balls;
kinematic pushers and grippers named with the robot prefix ``fr3_`` stand in for robot links), a control
schedule, a step count and a label. Parameters (sizes, masses, overlaps, speeds, heights) are drawn from
``numpy.random.default_rng(seed)``; the family is ``FAMILIES[seed % len(FAMILIES)]``, so seeds ``0..53``
hold six episodes of each of the nine families.

Positives (an artifact is expected on ``SuiteEpisode.body``):

- ``overlap``: a lid created 1.5-3 cm deep inside a base box, stiff contacts (solref 4 ms);
- ``kick_rest``: a box resting on the floor gets a one-step impulse (``xfrc_applied``) no contact explains;
- ``kick_air``: the same impulse while the box falls, touching nothing. The paper's detector (stage 1)
  needs a contact in the last 40 ms and misses it; :func:`free_jumps` is this suite's extra rule for it;
- ``thin_wall``: a light box pressed slowly into a 3-5 mm wall by a pusher (stiff contacts).

Hard negatives (nothing may be flagged): ``bin_drop`` (a box dropped into a bin), ``robot_push`` (a box
pushed by an actuated link), ``tray_carry`` (a box riding a tray shoved by a link), ``gripper_lift`` (a
box pinched by the servoed fingers of a servoed hand, lifted and carried at up to 1 m/s), ``roll_off`` (a
ball rolling off a table).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simpact.guard.detector import Event, Thresholds, Verdict, detect
from simpact.guard.recorder import Recorder
from simpact.guard.store import Recording

__all__ = [
    "FAMILIES",
    "NEGATIVES",
    "POSITIVES",
    "SuiteEpisode",
    "Kick",
    "Schedule",
    "audit_events",
    "episode",
    "free_jumps",
    "run_episode",
    "suite",
]

POSITIVES = ("overlap", "kick_rest", "kick_air", "thin_wall")
NEGATIVES = ("bin_drop", "robot_push", "tray_carry", "gripper_lift", "roll_off")
FAMILIES = POSITIVES + NEGATIVES
ROBOT_PREFIX = "fr3_"
TIMESTEP = 0.002
"""Physics step of every episode, s."""

Keyframes = tuple[tuple[float, tuple[float, ...]], ...]
"""Piecewise-linear schedule: (time in s, values) pairs in increasing time."""


@dataclass(frozen=True)
class Kick:
    """A wrench applied to one body during a single physics step (an impulse of ``force * timestep``)."""

    step: int
    body: str
    force: tuple[float, ...]
    """(fx, fy, fz, tx, ty, tz) in the world frame, N and N m."""


@dataclass(frozen=True)
class Schedule:
    """What is set before each physics step: actuator targets and mocap positions interpolated linearly
    between keyframes (held after the last), and one-step kicks."""

    ctrl: Keyframes = ()
    """Per keyframe: ``nu`` actuator targets (m for slide position servos)."""
    mocap: Keyframes = ()
    """Per keyframe: the ``nmocap`` mocap body positions, flattened (x, y, z, ...), m."""
    kicks: tuple[Kick, ...] = ()

    def apply(self, step: int, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Set ``data``'s inputs for physics step ``step`` (time ``step * timestep``)."""
        t = step * model.opt.timestep
        if self.ctrl:
            data.ctrl[:] = _interp(self.ctrl, t)
        if self.mocap:
            data.mocap_pos[:] = _interp(self.mocap, t).reshape(-1, 3)
        if self.kicks:
            data.xfrc_applied[:] = 0.0
            for kick in self.kicks:
                if kick.step == step:
                    data.xfrc_applied[model.body(kick.body).id] = kick.force

    def to_dict(self) -> dict[str, Any]:
        return {
            "ctrl": [[t, list(v)] for t, v in self.ctrl],
            "mocap": [[t, list(v)] for t, v in self.mocap],
            "kicks": [{"step": k.step, "body": k.body, "force": list(k.force)} for k in self.kicks],
        }


def _interp(keys: Keyframes, t: float) -> np.ndarray:
    times = np.array([k[0] for k in keys])
    values = np.array([k[1] for k in keys], dtype=float)
    i = int(np.searchsorted(times, t, side="right"))
    if i == 0:
        return values[0]
    if i == len(times):
        return values[-1]
    w = (t - times[i - 1]) / (times[i] - times[i - 1])
    return np.asarray((1.0 - w) * values[i - 1] + w * values[i])


@dataclass(frozen=True)
class SuiteEpisode:
    """One labelled episode: MJCF scene (starting from its first keyframe when it has one), control
    schedule, number of physics steps and label."""

    name: str
    family: str
    seed: int
    artifact: bool
    """The label: True when a contact artifact is expected (a positive)."""
    xml: str
    control: Schedule
    steps: int
    body: str | None = None
    """The body expected to be flagged (positives)."""
    params: dict[str, float] = field(default_factory=dict)
    """The drawn parameters (SI units)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "seed": self.seed,
            "artifact": self.artifact,
            "steps": self.steps,
            "body": self.body,
            "params": {k: round(v, 5) for k, v in self.params.items()},
            "control": self.control.to_dict(),
        }


# --- scene building ----------------------------------------------------------------------------------------
_BOX = mujoco.mjtGeom.mjGEOM_BOX
_STIFF = (0.004, 1.0)
"""solref of stiff contacts (time constant 4 ms = 2 physics steps, critically damped)."""


def _spec() -> mujoco.MjSpec:
    spec = mujoco.MjSpec()
    spec.option.timestep = TIMESTEP
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.1])
    return spec


def _quat(euler_deg: Sequence[float]) -> list[float]:
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.radians(np.asarray(euler_deg, dtype=float)), "xyz")
    return quat.tolist()


def _free_box(
    spec: mujoco.MjSpec,
    name: str,
    pos: Sequence[float],
    half: Sequence[float],
    mass: float,
    *,
    euler: Sequence[float] = (0.0, 0.0, 0.0),
    solref: tuple[float, float] | None = None,
    friction: float | None = None,
) -> mujoco.MjsBody:
    body = spec.worldbody.add_body(name=name, pos=list(pos), quat=_quat(euler))
    body.add_freejoint()
    geom = body.add_geom(type=_BOX, size=list(half), mass=mass)
    if solref is not None:
        geom.solref = list(solref)
    if friction is not None:
        geom.friction = [friction, 0.005, 0.0001]
    return body


def _slide_link(
    spec: mujoco.MjSpec,
    name: str,
    pos: Sequence[float],
    half: Sequence[float],
    mass: float,
    kp: float,
    kv: float,
) -> None:
    """A robot link on an x slide joint driven by a position servo (target in m)."""
    body = spec.worldbody.add_body(name=name, pos=list(pos))
    body.add_joint(name=f"{name}_x", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[1, 0, 0])
    body.add_geom(type=_BOX, size=list(half), mass=mass)
    act = spec.add_actuator(name=f"{name}_servo", target=f"{name}_x", trntype=mujoco.mjtTrn.mjTRN_JOINT)
    act.set_to_position(kp=kp, kv=kv)


def _mocap_link(
    spec: mujoco.MjSpec,
    name: str,
    pos: Sequence[float],
    half: Sequence[float],
    friction: float | None = None,
    solref: tuple[float, float] | None = None,
) -> None:
    body = spec.worldbody.add_body(name=name, pos=list(pos), mocap=True)
    geom = body.add_geom(type=_BOX, size=list(half))
    if friction is not None:
        geom.friction = [friction, 0.005, 0.0001]
    if solref is not None:
        geom.solref = list(solref)


def _bin(spec: mujoco.MjSpec, half: float = 0.1, height: float = 0.1, wall: float = 0.005) -> None:
    w = spec.worldbody
    w.add_geom(name="bin_floor", type=_BOX, pos=[0, 0, wall], size=[half, half, wall])
    for i, (x, y) in enumerate(((half, 0), (-half, 0), (0, half), (0, -half))):
        size = [wall, half, height / 2] if x else [half, wall, height / 2]
        w.add_geom(name=f"bin_wall{i}", type=_BOX, pos=[x, y, height / 2], size=size)


def _xml(spec: mujoco.MjSpec) -> str:
    spec.compile()
    return str(spec.to_xml())


# --- families ----------------------------------------------------------------------------------------------
Built = tuple[mujoco.MjSpec, Schedule, float, dict[str, float]]
"""(scene, control, duration in s, drawn parameters)."""


def _overlap(rng: np.random.Generator) -> Built:
    h, lid = rng.uniform(0.04, 0.06), rng.uniform(0.02, 0.035)
    depth = rng.uniform(0.015, 0.03)
    m_base, m_lid = rng.uniform(0.1, 0.4), rng.uniform(0.05, 0.15)
    dx, dy = rng.uniform(-0.01, 0.01, 2)
    spec = _spec()
    _free_box(spec, "base", (0, 0, h), (h, h, h), m_base, solref=_STIFF)
    _free_box(spec, "lid", (dx, dy, 2 * h + lid - depth), (lid, lid, lid), m_lid, solref=_STIFF)
    return spec, Schedule(), 1.0, {"base_half": h, "lid_half": lid, "overlap": depth, "lid_mass": m_lid}


def _kick(rng: np.random.Generator, airborne: bool) -> Built:
    half, mass = rng.uniform(0.02, 0.035), rng.uniform(0.05, 0.3)
    dv = rng.uniform(1.5, 4.0)  # velocity change given by the kick, m/s
    heading, elevation = rng.uniform(0, 2 * np.pi), rng.uniform(0.3, 1.0)
    direction = np.array(
        [np.cos(heading) * np.cos(elevation), np.sin(heading) * np.cos(elevation), np.sin(elevation)]
    )
    if airborne:
        height = rng.uniform(0.35, 0.5)  # bottom of the box, m
        t_kick = rng.uniform(0.08, 0.14)  # it falls 3-10 cm before the kick, far from the floor
    else:
        height = 0.0
        t_kick = rng.uniform(0.2, 0.4)
    step = int(round(t_kick / TIMESTEP))
    force = tuple(float(x) for x in mass * dv / TIMESTEP * direction) + (0.0, 0.0, 0.0)
    spec = _spec()
    _free_box(spec, "box", (0, 0, height + half), (half, half, half), mass)
    schedule = Schedule(kicks=(Kick(step, "box", force),))
    params = {"half": half, "mass": mass, "kick_dv": dv, "kick_s": t_kick, "height": height}
    return spec, schedule, 1.0, params


def _thin_wall(rng: np.random.Generator) -> Built:
    half, mass = rng.uniform(0.018, 0.022), rng.uniform(0.008, 0.012)
    wall = rng.uniform(0.0015, 0.0025)
    speed = rng.uniform(0.09, 0.12)
    spec = _spec()
    spec.worldbody.add_geom(
        name="wall", type=_BOX, pos=[0, 0, 0.1], size=[wall, 0.15, 0.1], solref=list(_STIFF)
    )
    x0 = -wall - half - 0.001
    _free_box(spec, "box", (x0, 0, half + 0.001), (half, half, half), mass, solref=_STIFF)
    px = x0 - half - 0.02
    _mocap_link(spec, "fr3_pusher", (px, 0, half + 0.001), (0.02, 0.03, 0.75 * half))
    push_s = 0.6
    schedule = Schedule(
        mocap=((0.0, (px, 0.0, half + 0.001)), (push_s, (px + speed * push_s, 0.0, half + 0.001)))
    )
    return spec, schedule, 1.0, {"half": half, "mass": mass, "wall_half": wall, "push_speed": speed}


def _bin_drop(rng: np.random.Generator) -> Built:
    half, mass = rng.uniform(0.02, 0.035), rng.uniform(0.1, 0.3)
    height = rng.uniform(0.15, 0.3)
    dx, dy = rng.uniform(-0.03, 0.03, 2)
    spec = _spec()
    _bin(spec)
    _free_box(spec, "box", (dx, dy, height), (half, half, half), mass, euler=rng.uniform(-20, 20, 3).tolist())
    return spec, Schedule(), 1.2, {"half": half, "mass": mass, "height": height}


def _robot_push(rng: np.random.Generator) -> Built:
    half, mass = rng.uniform(0.025, 0.035), rng.uniform(0.1, 0.3)
    speed, friction = rng.uniform(0.3, 0.8), rng.uniform(0.3, 0.8)
    spec = _spec()
    x0 = -half - 0.07
    _slide_link(spec, "fr3_pusher", (x0, 0, half), (0.01, 0.04, 0.6 * half), 1.0, kp=3000, kv=100)
    _free_box(spec, "box", (0, 0, half), (half, half, half), mass, friction=friction)
    travel = 0.3
    schedule = Schedule(ctrl=((0.0, (0.0,)), (travel / speed, (travel,))))
    return spec, schedule, 1.0, {"half": half, "mass": mass, "push_speed": speed, "friction": friction}


def _tray_carry(rng: np.random.Generator) -> Built:
    half, mass = rng.uniform(0.025, 0.035), rng.uniform(0.1, 0.3)
    speed = rng.uniform(1.0, 2.0)
    spec = _spec()
    _slide_link(spec, "fr3_pusher", (-0.17, 0, 0.02), (0.01, 0.1, 0.015), 2.0, kp=5000, kv=200)
    _free_box(spec, "tray", (0, 0, 0.005), (0.15, 0.15, 0.005), 0.5, friction=0.05)
    _free_box(spec, "box", (0, 0, 0.01 + half), (half, half, half), mass, friction=1.0)
    travel = 0.4
    schedule = Schedule(ctrl=((0.0, (0.0,)), (travel / speed, (travel,))))
    return spec, schedule, 1.0, {"half": half, "mass": mass, "shove_speed": speed}


def _gripper_lift(rng: np.random.Generator) -> Built:
    half, mass = rng.uniform(0.02, 0.03), rng.uniform(0.05, 0.2)
    lift_speed, carry_speed = rng.uniform(0.3, 0.8), rng.uniform(0.3, 1.0)
    squeeze = rng.uniform(0.002, 0.004)  # how far each finger's target lies inside the box, m
    spec = _spec()
    _free_box(spec, "box", (0, 0, half), (half, half, half), mass, friction=1.0)
    # A servoed hand (x and z slides) with two servoed fingers (y slides), gravity compensated.
    hand = spec.worldbody.add_body(name="fr3_hand", pos=[0, 0, half], gravcomp=1.0)
    for axis, name in (([1, 0, 0], "x"), ([0, 0, 1], "z")):
        hand.add_joint(name=f"fr3_hand_{name}", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=axis)
    hand.add_geom(type=_BOX, pos=[0, 0, half + 0.03], size=[0.02, half + 0.03, 0.01], mass=1.0)
    fw = 0.006  # finger half thickness, m
    open_y = half + fw + 0.02
    for side, sign in (("l", 1.0), ("r", -1.0)):
        finger = hand.add_body(name=f"fr3_finger_{side}", pos=[0, sign * open_y, 0], gravcomp=1.0)
        finger.add_joint(name=f"fr3_finger_{side}_y", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[0, sign, 0])
        finger.add_geom(
            type=_BOX, pos=[0, 0, 0.02], size=[0.015, fw, 0.035], mass=0.1, friction=[1.5, 0.005, 0.0001]
        )
    for joint, kp in (
        ("fr3_hand_x", 4000),
        ("fr3_hand_z", 4000),
        ("fr3_finger_l_y", 2000),
        ("fr3_finger_r_y", 2000),
    ):
        act = spec.add_actuator(name=joint, target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=kp, kv=0.1 * kp**0.5 * 2)
    close = open_y - (half + fw - squeeze)  # finger travel inwards, m
    t_close, lift, carry = 0.2, 0.12, 0.1
    t_lift = t_close + 0.1
    t_up = t_lift + lift / lift_speed
    t_end = t_up + carry / carry_speed
    schedule = Schedule(
        ctrl=(
            (0.0, (0.0, 0.0, 0.0, 0.0)),
            (t_close, (0.0, 0.0, -close, -close)),
            (t_lift, (0.0, 0.0, -close, -close)),
            (t_up, (0.0, lift, -close, -close)),
            (t_end, (carry, lift, -close, -close)),
        )
    )
    params = {
        "half": half,
        "mass": mass,
        "lift_speed": lift_speed,
        "carry_speed": carry_speed,
        "squeeze": squeeze,
    }
    return spec, schedule, t_end + 0.2, params


def _roll_off(rng: np.random.Generator) -> Built:
    radius, mass = rng.uniform(0.02, 0.04), rng.uniform(0.03, 0.1)
    speed, height = rng.uniform(0.8, 1.5), rng.uniform(0.3, 0.5)
    spec = _spec()
    spec.worldbody.add_geom(name="desk", type=_BOX, pos=[0, 0, height / 2], size=[0.3, 0.3, height / 2])
    ball = spec.worldbody.add_body(name="ball", pos=[0.1, 0, height + radius])
    ball.add_freejoint()
    ball.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0], mass=mass)
    spec.add_key(
        name="rolling", qpos=[0.1, 0, height + radius, 1, 0, 0, 0], qvel=[speed, 0, 0, 0, speed / radius, 0]
    )
    return spec, Schedule(), 1.8, {"radius": radius, "mass": mass, "speed": speed, "table_height": height}


_BUILDERS: dict[str, tuple[Callable[[np.random.Generator], Built], str | None]] = {
    "overlap": (_overlap, "lid"),
    "kick_rest": (lambda rng: _kick(rng, airborne=False), "box"),
    "kick_air": (lambda rng: _kick(rng, airborne=True), "box"),
    "thin_wall": (_thin_wall, "box"),
    "bin_drop": (_bin_drop, None),
    "robot_push": (_robot_push, None),
    "tray_carry": (_tray_carry, None),
    "gripper_lift": (_gripper_lift, None),
    "roll_off": (_roll_off, None),
}


def episode(seed: int, family: str | None = None) -> SuiteEpisode:
    """The episode of ``seed`` (family ``FAMILIES[seed % 9]`` unless given); deterministic in ``seed``."""
    family = family or FAMILIES[seed % len(FAMILIES)]
    if family not in _BUILDERS:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    build, body = _BUILDERS[family]
    spec, control, duration, params = build(np.random.default_rng(seed))
    return SuiteEpisode(
        name=f"{family}-{seed:03d}",
        family=family,
        seed=seed,
        artifact=family in POSITIVES,
        xml=_xml(spec),
        control=control,
        steps=int(round(duration / TIMESTEP)),
        body=body,
        params={k: float(v) for k, v in params.items()},
    )


def suite(seeds: Sequence[int] = range(54)) -> list[SuiteEpisode]:
    """The episodes of ``seeds`` (the default 54: six per family)."""
    return [episode(s) for s in seeds]


# --- running and judging -----------------------------------------------------------------------------------
def free_jumps(recording: Recording, thresholds: Thresholds | None = None) -> list[Event]:
    """This suite's extra rule (not the paper's): velocity jumps of object bodies that touch nothing.

    A body that touched nothing in the contact window (40 ms) before and during a step moves under gravity
    alone (the rule assumes free bodies: no joints to other bodies), so a velocity change beyond ``g dt``
    of at least the stage-1 threshold (0.35 m/s per 4 ms step) to a speed above 0.5 m/s has no physical
    cause in the scene. Reported as :class:`Event` with ``ejection.reason == "jump without contact"``;
    the gravity stage is applied as in :func:`detect`, the carrier stage passes (no contact, no carrier).
    """
    th = thresholds or Thresholds.from_dict(recording.manifest.thresholds or {})
    m = recording.manifest
    n = recording.nsteps
    if n < 2:
        return []
    dt = float(m.timestep)
    nb = len(m.bodies)
    touch = np.zeros((n, nb), dtype=bool)
    steps = np.repeat(np.arange(n), np.diff(recording.contact_start))
    pairs = recording.contact_bodies.astype(np.int64)
    touch[steps, pairs[:, 0]] = True
    touch[steps, pairs[:, 1]] = True
    w = th.steps(th.contact_window, dt)
    cs = np.cumsum(touch, axis=0, dtype=np.int64)
    before = np.zeros_like(cs)
    before[w + 1 :] = cs[: -w - 1]
    recent = (cs - before)[:-1] > 0
    jump = np.linalg.norm(np.diff(recording.vel, axis=0) - np.asarray(m.gravity) * dt, axis=-1)
    speed = np.linalg.norm(recording.vel, axis=-1)
    objects = np.asarray(m.roles) == "object"
    cand = ~recent & (jump >= th.min_dv * dt / th.reference_step) & (speed[1:] > th.min_speed)
    cand &= objects[None, :]
    if recording.valid is not None:
        cand &= (recording.valid[:-1] & recording.valid[1:])[:, None]
    after = th.steps(th.peak_after, dt)
    busy = th.steps(th.confirm_window, dt)
    events = []
    for b in np.flatnonzero(cand.any(axis=0)).tolist():
        last = -busy - 1
        for k in np.flatnonzero(cand[:, b]).tolist():
            if k - last <= busy:
                continue
            last = k
            hi = min(n - 1, k + after)
            peak_step = k + int(np.argmax(speed[k : hi + 1, b]))
            peak, before_speed = float(speed[peak_step, b]), float(speed[k, b])
            lo = max(0, k - th.steps(th.gravity_before, dt))
            drop = max(
                0.0, float(recording.xpos[lo : peak_step + 1, b, 2].max() - recording.xpos[peak_step, b, 2])
            )
            free_fall = float(np.sqrt(2.0 * np.linalg.norm(m.gravity) * drop))
            ratio = peak / max(free_fall, th.speed_floor)
            gravity = Verdict(
                ratio > th.gravity_ratio,
                "faster than free fall" if ratio > th.gravity_ratio else "explained by gravity",
                {"drop": drop, "free_fall_speed": free_fall, "ratio": ratio},
            )
            events.append(
                Event(
                    body=m.bodies[b],
                    body_id=b,
                    onset_step=k,
                    onset_s=float(recording.time[k]),
                    speed_before=before_speed,
                    peak_speed=peak,
                    peak_s=float(recording.time[peak_step]),
                    kinetic_energy_gained=0.5 * float(m.masses[b]) * (peak**2 - before_speed**2),
                    contact_pair=("", ""),
                    contact_depth=0.0,
                    contact_impulse=0.0,
                    ejection=Verdict(True, "jump without contact", {"velocity_jump": float(jump[k, b])}),
                    gravity=gravity,
                    carrier=Verdict(
                        True, "no carrier", {"carrier": None, "carrier_speed": 0.0, "ratio": None}
                    ),
                )
            )
    events.sort(key=lambda e: (e.onset_step, e.body_id))
    return events


def audit_events(recording: Recording, thresholds: Thresholds | None = None) -> list[Event]:
    """:func:`detect` (the paper's three stages) plus :func:`free_jumps`, in onset order."""
    events = detect(recording, thresholds) + free_jumps(recording, thresholds)
    return sorted(events, key=lambda e: (e.onset_step, e.body_id))


def run_episode(ep: SuiteEpisode, out: str | Path | None = None) -> tuple[Recording, list[Event]]:
    """Simulate ``ep`` under a :class:`Recorder` (to the folder ``out`` when given); its recording and
    :func:`audit_events`."""
    model = mujoco.MjModel.from_xml_string(ep.xml)
    data = mujoco.MjData(model)
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    meta = {"suite": replace(ep, xml="").to_dict()}
    recorder = Recorder(model, data, robot_prefix=ROBOT_PREFIX, out=out, seed=ep.seed, meta=meta)
    for k in range(ep.steps):
        ep.control.apply(k, model, data)
        recorder.step()
    recording = recorder.close()
    return recording, audit_events(recording)
