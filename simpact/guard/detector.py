"""Contact-artifact detection on recorded arrays (SimuGuard §3.3, thresholds of its appendix B.5).

Three stages, run per body of role ``object``:

1. *Contact ejection*: a candidate touched another body within the last 40 ms, moves faster than 0.5 m/s
   after the step and changes velocity by at least 0.35 m/s in one 4 ms step (the change threshold scales
   with the physics step: 0.175 m/s per 2 ms step). It is confirmed if within 240 ms it travels at least
   4 cm and either flies free (no contact) for 16 ms or stays in violent contact with its container (a step
   in contact with a non-robot body with a velocity change of at least 0.75 m/s per 4 ms at a speed of at
   least 1 m/s).
2. *Gravity*: kept only if the peak speed in the 0.1 s after onset exceeds 1.5 x sqrt(2 g dz), dz being the
   height dropped from the highest point in the 0.6 s before onset to the point of peak speed (the free-fall
   speed has a floor of 0.05 m/s).
3. *Carrier*: discarded if a body that touched both the object and a robot link in the 40 ms before onset
   (a robot link touching the object directly counts too) moved, before onset, at least 1/1.5 of the
   object's peak speed (floor 0.05 m/s).

Events of a body that start within the flight of its flagged artifact (from onset until its speed stays
below 0.5 m/s for 240 ms: the landing, the bounces) are reported with ``consequence_of`` set and are not
flagged: one glitch is one artifact. Two extensions of the paper, both switchable in :class:`Thresholds`: a
robot link touching the object counts as a carrier (``robot_contact_carries``), and the gravity stage also
counts the speed the body had before onset (``own_motion``: a thrown or falling body that hits something
keeps the energy it had).

Row ``k`` of a recording is the state at the start of physics step ``k`` and the contacts acting during it,
so the velocity change of step ``k`` is ``vel[k + 1] - vel[k]``; the onset of an event is that step.
:func:`detect` is a pure function of the arrays and works on synthetic recordings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from simpact.guard.store import Recording

__all__ = ["Event", "Thresholds", "Verdict", "detect"]


@dataclass(frozen=True)
class Thresholds:
    """Detector parameters (SimuGuard appendix B.5), identical for every task."""

    reference_step: float = 0.004
    """Physics step the velocity-change thresholds are given for, s."""
    contact_window: float = 0.040
    """A candidate touched another body within this time before the step, s."""
    min_speed: float = 0.5
    """A candidate moves faster than this after the step, m/s."""
    min_dv: float = 0.35
    """A candidate's velocity changes by at least this in one reference step, m/s."""
    confirm_window: float = 0.240
    """Time after onset in which a candidate is confirmed, s."""
    min_displacement: float = 0.04
    """A confirmed candidate travels at least this far from its onset position, m."""
    free_flight: float = 0.016
    """...and flies free of any contact for at least this long, s,"""
    violent_dv: float = 0.75
    """...or stays in contact with a velocity change of at least this per reference step, m/s,"""
    violent_speed: float = 1.0
    """...at a speed of at least this, m/s."""
    gravity_before: float = 0.6
    """Window before onset for the drop height, s."""
    peak_after: float = 0.1
    """Window after onset for the peak speed, s."""
    gravity_ratio: float = 1.5
    """Kept if the peak speed exceeds this times the free-fall speed."""
    carrier_before: float = 0.040
    """Window before onset in which carriers touched the object and a robot link, s."""
    carrier_ratio: float = 1.5
    """Discarded if the peak speed is below this times the fastest carrier's speed."""
    speed_floor: float = 0.05
    """Floor of the free-fall and carrier speeds in the ratios' denominators, m/s."""
    robot_contact_carries: bool = True
    """A robot link touching the object directly counts as a carrier (an extension of the paper)."""
    own_motion: bool = True
    """The gravity stage also counts the speed the body already had before onset (an extension of the
    paper): the speed it explains is ``sqrt(max_j (v_j^2 + 2 g (z_j - z_peak)))`` over the window's steps
    ``j`` up to onset, which is the paper's free-fall speed for a body starting at rest."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Thresholds:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})

    def steps(self, seconds: float, dt: float) -> int:
        """A window in whole physics steps (at least one)."""
        return max(1, int(round(seconds / dt)))


@dataclass(frozen=True)
class Verdict:
    """One stage's outcome: whether the event passed it, why, and the numbers it compared (SI units)."""

    passed: bool
    reason: str
    values: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "reason": self.reason, "values": dict(self.values)}


@dataclass(frozen=True)
class Event:
    """A confirmed contact ejection with the verdicts of the gravity and carrier stages."""

    body: str
    body_id: int
    onset_step: int
    onset_s: float
    """Time at the start of the onset step, s."""
    speed_before: float
    """Speed of the body's centre of mass at onset, m/s."""
    peak_speed: float
    """Peak speed in the window after onset, m/s."""
    peak_s: float
    kinetic_energy_gained: float
    """0.5 m (peak^2 - before^2), J (translational)."""
    contact_pair: tuple[str, str]
    """The body pair at onset with the largest normal impulse on the body."""
    contact_depth: float
    """Deepest penetration of that pair at onset, m."""
    contact_impulse: float
    """Normal impulse of that pair during the onset step, N s."""
    ejection: Verdict
    gravity: Verdict
    carrier: Verdict
    consequence_of: int | None = None
    """Onset step of the flagged artifact of the same body whose flight this event falls in (its landing or
    a bounce): a consequence of that artifact, not an artifact of its own. None otherwise."""

    @property
    def passed(self) -> bool:
        """The event passed all three stages."""
        return self.ejection.passed and self.gravity.passed and self.carrier.passed

    @property
    def flagged(self) -> bool:
        """True when the event passed all three stages and is not a consequence of an earlier artifact: a
        candidate contact artifact."""
        return self.passed and self.consequence_of is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "body": self.body,
            "body_id": self.body_id,
            "onset_step": self.onset_step,
            "onset_s": self.onset_s,
            "speed_before": self.speed_before,
            "peak_speed": self.peak_speed,
            "peak_s": self.peak_s,
            "kinetic_energy_gained": self.kinetic_energy_gained,
            "contact_pair": list(self.contact_pair),
            "contact_depth": self.contact_depth,
            "contact_impulse": self.contact_impulse,
            "flagged": self.flagged,
            "consequence_of": self.consequence_of,
            "stages": {
                "ejection": self.ejection.to_dict(),
                "gravity": self.gravity.to_dict(),
                "carrier": self.carrier.to_dict(),
            },
        }


class _Arrays:
    """Per-step, per-body views of a recording that the stages share."""

    def __init__(self, rec: Recording, th: Thresholds) -> None:
        m = rec.manifest
        self.names = list(m.bodies)
        self.roles = np.asarray(m.roles)
        self.masses = np.asarray(m.masses, dtype=float)
        self.dt = float(m.timestep)
        self.g = float(np.linalg.norm(m.gravity))
        self.time = rec.time
        self.pos = rec.xpos
        self.vel = rec.vel
        self.speed = np.linalg.norm(rec.vel, axis=-1)  # (n, nb)
        n, nb = self.speed.shape
        self.n, self.nb = n, nb
        self.dv = np.linalg.norm(np.diff(rec.vel, axis=0), axis=-1)  # (n - 1, nb), change during step k
        counts = np.diff(rec.contact_start)
        self.cstep = np.repeat(np.arange(n), counts)
        self.cpair = rec.contact_bodies.astype(np.int64)
        self.cimpulse = rec.contact_impulse
        self.cdepth = rec.contact_depth
        robot = self.roles == "robot"
        self.robot = robot
        # touch[k, b]: b in contact at step k; touch_free[k, b]: with a non-robot body ("its container").
        self.touch = np.zeros((n, nb), dtype=bool)
        self.touch_container = np.zeros((n, nb), dtype=bool)
        a, b = self.cpair[:, 0], self.cpair[:, 1]
        self.touch[self.cstep, a] = True
        self.touch[self.cstep, b] = True
        self.touch_container[self.cstep[~robot[b]], a[~robot[b]]] = True
        self.touch_container[self.cstep[~robot[a]], b[~robot[a]]] = True
        scale = self.dt / th.reference_step
        self.min_dv = th.min_dv * scale
        self.violent_dv = th.violent_dv * scale

    def recent_touch(self, window: int) -> np.ndarray:
        """(n, nb): touched anything in steps [k - window, k]."""
        cs = np.cumsum(self.touch, axis=0, dtype=np.int64)
        before = np.zeros_like(cs)
        before[window + 1 :] = cs[: -window - 1]
        return (cs - before) > 0

    def contacts_in(self, lo: int, hi: int) -> np.ndarray:
        """Indices of the contact pairs recorded in steps [lo, hi]."""
        return np.flatnonzero((self.cstep >= lo) & (self.cstep <= hi))


def _longest_run(mask: np.ndarray) -> int:
    """Length of the longest run of True in a 1-D boolean array."""
    if not mask.any():
        return 0
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return int((edges[1::2] - edges[::2]).max())


def _confirm(a: _Arrays, th: Thresholds, k: int, b: int) -> Verdict:
    w = th.steps(th.confirm_window, a.dt)
    hi = min(a.n - 1, k + w)
    disp = float(np.linalg.norm(a.pos[k : hi + 1, b] - a.pos[k, b], axis=-1).max())
    free = _longest_run(~a.touch[k + 1 : hi + 1, b]) * a.dt
    j = np.arange(k + 1, min(hi, a.n - 2) + 1)
    violent = bool(
        np.any(
            a.touch_container[j, b]
            & (a.dv[j, b] >= a.violent_dv)
            & (np.maximum(a.speed[j, b], a.speed[j + 1, b]) >= th.violent_speed)
        )
    )
    flies = free >= th.free_flight - 1e-12
    moved = disp >= th.min_displacement
    passed = moved and (flies or violent)
    if passed:
        reason = "free flight" if flies else "violent contact"
    elif not moved:
        reason = "travelled too little"
    else:
        reason = "neither free flight nor violent contact"
    values = {"displacement": disp, "free_flight_s": free, "violent_contact": violent}
    return Verdict(passed, reason, values)


def _gravity(a: _Arrays, th: Thresholds, k: int, b: int, peak_step: int, peak: float) -> Verdict:
    lo = max(0, k - th.steps(th.gravity_before, a.dt))
    z = a.pos[lo : peak_step + 1, b, 2]
    z_peak = a.pos[peak_step, b, 2]
    drop = max(0.0, float(z.max() - z_peak))
    free_fall = float(np.sqrt(2.0 * a.g * drop))
    explained = free_fall
    if th.own_motion:  # the speed the body could reach at the peak from any earlier step of the window
        v = a.speed[lo : k + 1, b]
        budget = v * v + 2.0 * a.g * (a.pos[lo : k + 1, b, 2] - z_peak)
        explained = max(free_fall, float(np.sqrt(max(0.0, float(budget.max())))))
    ratio = peak / max(explained, th.speed_floor)
    passed = ratio > th.gravity_ratio
    reason = "faster than free fall" if passed else "explained by gravity"
    values = {"drop": drop, "free_fall_speed": free_fall, "explained_speed": explained, "ratio": ratio}
    return Verdict(passed, reason, values)


def _carrier(a: _Arrays, th: Thresholds, k: int, b: int, peak: float) -> Verdict:
    lo = max(0, k - th.steps(th.carrier_before, a.dt))
    idx = a.contacts_in(lo, k)
    pairs = a.cpair[idx]
    partners = set(pairs[pairs[:, 0] == b, 1]) | set(pairs[pairs[:, 1] == b, 0])
    robot_pairs = pairs[a.robot[pairs[:, 0]] | a.robot[pairs[:, 1]]]
    touches_robot = set(robot_pairs.ravel()) - {int(i) for i in np.flatnonzero(a.robot)}
    moving = a.roles != "static"
    carriers = {int(c) for c in partners if c in touches_robot and moving[c] and not a.robot[c]}
    if th.robot_contact_carries:
        carriers |= {int(c) for c in partners if a.robot[c]}
    if not carriers:
        return Verdict(True, "no carrier", {"carrier": None, "carrier_speed": 0.0, "ratio": None})
    speeds = {c: float(a.speed[lo : k + 1, c].max()) for c in carriers}
    fastest = max(speeds, key=lambda c: speeds[c])
    ratio = peak / max(speeds[fastest], th.speed_floor)
    passed = ratio >= th.carrier_ratio
    reason = "faster than any carrier" if passed else f"carried by {a.names[fastest]}"
    values = {"carrier": a.names[fastest], "carrier_speed": speeds[fastest], "ratio": ratio}
    return Verdict(passed, reason, values)


def _onset_contact(a: _Arrays, th: Thresholds, k: int, b: int) -> tuple[tuple[str, str], float, float]:
    """The pair with the largest impulse on ``b`` at the latest step <= k with a contact of ``b``."""
    lo = max(0, k - th.steps(th.contact_window, a.dt))
    idx = a.contacts_in(lo, k)
    idx = idx[(a.cpair[idx, 0] == b) | (a.cpair[idx, 1] == b)]
    if idx.size == 0:
        return ("", ""), 0.0, 0.0
    idx = idx[a.cstep[idx] == a.cstep[idx].max()]
    best = idx[np.argmax(a.cimpulse[idx])]
    p, q = a.cpair[best]
    return (a.names[p], a.names[q]), float(a.cdepth[best]), float(a.cimpulse[best])


def detect(recording: Recording, thresholds: Thresholds | None = None) -> list[Event]:
    """Confirmed contact ejections of object bodies, in onset order, with each stage's verdict.

    ``thresholds`` default to those in the recording's manifest (else the paper's). ``Event.flagged`` marks
    the candidate contact artifacts (events that passed all three stages).
    """
    th = thresholds or Thresholds.from_dict(recording.manifest.thresholds or {})
    a = _Arrays(recording, th)
    if a.n < 2:
        return []
    recent = a.recent_touch(th.steps(th.contact_window, a.dt))[:-1]
    objects = a.roles == "object"
    cand = recent & (a.dv >= a.min_dv) & (a.speed[1:] > th.min_speed) & objects[None, :]
    if recording.valid is not None:
        cand &= (recording.valid[:-1] & recording.valid[1:])[:, None]
    confirm_steps = th.steps(th.confirm_window, a.dt)
    after = th.steps(th.peak_after, a.dt)
    events = []
    for b in np.flatnonzero(cand.any(axis=0)).tolist():
        busy_until = -1
        for k in np.flatnonzero(cand[:, b]).tolist():
            if k <= busy_until:
                continue
            ejection = _confirm(a, th, k, b)
            if not ejection.passed:
                continue
            busy_until = k + confirm_steps
            hi = min(a.n - 1, k + after)
            peak_step = k + int(np.argmax(a.speed[k : hi + 1, b]))
            peak = float(a.speed[peak_step, b])
            before = float(a.speed[k, b])
            pair, depth, impulse = _onset_contact(a, th, k, b)
            events.append(
                Event(
                    body=a.names[b],
                    body_id=b,
                    onset_step=k,
                    onset_s=float(a.time[k]),
                    speed_before=before,
                    peak_speed=peak,
                    peak_s=float(a.time[peak_step]),
                    kinetic_energy_gained=0.5 * float(a.masses[b]) * (peak**2 - before**2),
                    contact_pair=pair,
                    contact_depth=depth,
                    contact_impulse=impulse,
                    ejection=ejection,
                    gravity=_gravity(a, th, k, b, peak_step, peak),
                    carrier=_carrier(a, th, k, b, peak),
                )
            )
    events.sort(key=lambda e: (e.onset_step, e.body_id))
    return _consequences(a, th, events)


def _flight_end(a: _Arrays, th: Thresholds, k: int, b: int) -> int:
    """Last step of the flight that starts at onset ``k``: before the body's speed stays below the candidate
    speed for a confirmation window (240 ms), or the recording's end."""
    w = th.steps(th.confirm_window, a.dt)
    slow = a.speed[k + 1 :, b] < th.min_speed
    if slow.size < w:
        return a.n - 1
    runs = np.convolve(slow.astype(np.int64), np.ones(w, dtype=np.int64), mode="valid")
    rest = np.flatnonzero(runs == w)
    return a.n - 1 if rest.size == 0 else k + 1 + int(rest[0])


def _consequences(a: _Arrays, th: Thresholds, events: list[Event]) -> list[Event]:
    """Mark the events that fall in the flight of an earlier flagged event of the same body."""
    flight: dict[int, tuple[int, int]] = {}  # body -> (onset of its artifact, last step of its flight)
    out = []
    for e in events:
        onset, end = flight.get(e.body_id, (-1, -1))
        if e.onset_step <= end:
            out.append(replace(e, consequence_of=onset))
            continue
        if e.flagged:
            flight[e.body_id] = (e.onset_step, _flight_end(a, th, e.onset_step, e.body_id))
        out.append(e)
    return out
