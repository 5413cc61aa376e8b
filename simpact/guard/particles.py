"""SimuGuard for particles: a screen for artifacts of deformable simulation (a PD rope's particles, an MPM
body's particles) on the particle records a rollout's trace keeps.

A deformable object's particles are flagged when

* **speed**: a particle moves faster than the colliders and gravity explain, for at least ``sustain`` s
  and two record intervals, and its net displacement over that run is also too fast (so one noisy record,
  off and back again, is not an event). Its speed over a record interval is its
  displacement over the interval's duration; the speed explained is

      margin * (carrier + sqrt(2 g drop)) + speed_floor

  ``carrier``: the fastest surface speed of a collider (a robot link's or rigid object's box) that touched
  the object (one of its particles within ``reach`` of the box) at the object's last contact or in the
  ``memory`` s before it (a held rope moves with the gripper; a released one keeps what it was given);
  ``drop``: how far the particle is below the highest point it reached since ``memory`` s before that
  contact (since the start when the object was never touched): the free-fall speed of that drop. A
  collider's surface speed is bounded by its centre's speed plus its angular speed times its half diagonal
  (plus ``reach``). The motion a material passes on inside itself (sand pushed by the sand the finger
  pushes) is covered because the carrier is per object, not per particle;
* **escape**: a particle leaves the simulation domain (for MPM, where its interpolation stencil no longer
  lies on the grid) or passes more than ``table_depth`` below the table top;
* **non-finite**: a particle's position is NaN or infinite.

Thresholds (:class:`ParticleThresholds`) follow SimuGuard's rigid detector where it has one: the ratio 1.5
of its gravity and carrier stages and the 0.6 s it looks back for a drop; the floor is that detector's
0.5 m/s candidate speed halved (particles are lighter than bodies, so a smaller unexplained speed matters);
``reach`` is two 1 cm MPM cells (grid-node contact starts about a cell before particles touch).

Engine-free: it reads arrays (``simpact.core`` types and numpy only); the planner builds the colliders
(:class:`ColliderTrack`) and domains (:class:`Domain`) from its World. Units: SI (m, s, m/s).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from simpact.core.rollout import Trace

__all__ = [
    "ColliderTrack",
    "Domain",
    "ParticleEvent",
    "ParticleThresholds",
    "describe_particle_event",
    "screen_particles",
    "screen_trace",
]


@dataclass(frozen=True)
class ParticleThresholds:
    """The particle screen's parameters (see the module docstring for why they are what they are)."""

    margin: float = 1.5
    """Ratio on the explained speed (SimuGuard's gravity and carrier ratio)."""
    speed_floor: float = 0.25
    """Speed always explained, m/s."""
    reach: float = 0.02
    """A collider touches an object when one of its particles is this close to the collider's box, m."""
    memory: float = 0.6
    """How long before its last contact an object's carrier speed and a particle's height count, s."""
    sustain: float = 0.02
    """An unexplained speed must last at least this long (and two record intervals), s."""
    table_depth: float = 0.01
    """A particle this far below the table top has passed through it, m."""
    gravity: float = 9.81
    """m/s^2."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ColliderTrack:
    """Kinematic colliders over time: K oriented boxes sampled at ``time`` (C,) s with ``centre`` (C, K, 3)
    m, ``rotation`` (C, K, 3, 3) world from box and ``half`` extents (K, 3) m; ``names`` (K,) their owners."""

    time: np.ndarray
    centre: np.ndarray
    rotation: np.ndarray
    half: np.ndarray
    names: tuple[str, ...] = ()

    def speeds(self, reach: float) -> np.ndarray:
        """(C, K) bound on each box's surface speed (within ``reach`` of it) over the interval ending at each
        sample, m/s (0 at the first sample)."""
        out = np.zeros(self.centre.shape[:2])
        if len(self.time) < 2:
            return out
        dt = np.maximum(np.diff(self.time), 1e-12)[:, None]
        linear = np.linalg.norm(np.diff(self.centre, axis=0), axis=-1) / dt
        turn = np.einsum("ckij,cklj->ckil", self.rotation[1:], self.rotation[:-1])  # R_now R_before^T
        cos = np.clip((np.trace(turn, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
        arm = np.linalg.norm(self.half, axis=-1)[None] + reach
        out[1:] = linear + np.arccos(cos) / dt * arm
        return out


@dataclass(frozen=True)
class Domain:
    """Where an object's particles may be: inside the box [``lo``, ``hi``] (m; infinite for no bound) and
    not more than ``table_depth`` below ``table_z`` (None: no table)."""

    lo: np.ndarray = field(default_factory=lambda: np.full(3, -np.inf))
    hi: np.ndarray = field(default_factory=lambda: np.full(3, np.inf))
    table_z: float | None = 0.0


@dataclass(frozen=True)
class ParticleEvent:
    """A particle artifact of one deformable object: its first onset and how many particles share it."""

    body: str
    reason: str
    """``speed``, ``escape`` or ``non_finite``."""
    onset_s: float
    """Time the artifact starts (the start of the first unexplained interval, or the record where a
    particle is first out of its domain), s."""
    onset_record: int
    """Index of that particle record."""
    particle: int
    """The first particle flagged."""
    particles: int
    """How many of the object's particles show this artifact in the rollout."""
    peak_speed: float
    """Fastest speed of a flagged particle (``speed``) or of the first one at onset (others), m/s."""
    explained_speed: float
    """The speed explained at the peak (``speed``), else 0, m/s."""
    position: tuple[float, float, float]
    """The first flagged particle at onset, m (NaN when non-finite)."""
    onset_step: int = -1
    """The trace row at onset (set by :func:`screen_trace`)."""

    @property
    def flagged(self) -> bool:
        return True

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values: a speed past float range (a blow-up) reads as the largest float, a
        non-finite position as None."""
        out = asdict(self)
        out["position"] = [float(v) if np.isfinite(v) else None for v in self.position]
        for key in ("peak_speed", "explained_speed"):
            out[key] = float(min(out[key], np.finfo(float).max))
        return {"kind": "particles", **out, "flagged": True}


def _box_distance(
    points: np.ndarray, centre: np.ndarray, rotation: np.ndarray, half: np.ndarray
) -> np.ndarray:
    """(K,) smallest distance of ``points`` (N, 3) to each of K boxes (0 inside), m."""
    local = (points[None] - centre[:, None, :]) @ rotation  # each box frame: R^T (x - c), as rows
    gap = np.maximum(np.abs(local) - half[:, None, :], 0.0)
    return np.asarray(np.sqrt((gap * gap).sum(axis=-1).min(axis=1)))


def _carriers(
    time: np.ndarray, particles: np.ndarray, colliders: ColliderTrack | None, th: ParticleThresholds
) -> tuple[np.ndarray, np.ndarray]:
    """Per record interval (S - 1,): the carrier speed explained (m/s) and the record from which a
    particle's highest point counts for its drop."""
    s = len(time)
    carrier = np.zeros(s - 1)
    since = np.zeros(s - 1, dtype=int)
    if colliders is None or colliders.centre.shape[1] == 0:
        return carrier, since
    speed = colliders.speeds(th.reach)
    touch = np.zeros((s, colliders.centre.shape[1]), dtype=bool)
    sample = np.clip(np.searchsorted(colliders.time, time - 1e-9), 0, len(colliders.time) - 1)
    radius = np.linalg.norm(colliders.half, axis=-1) + th.reach
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a record with no finite particle: all-NaN
        lo, hi = np.nanmin(particles, axis=1), np.nanmax(particles, axis=1)  # (S, 3) bounding boxes
    centre = colliders.centre[sample]  # (S, K, 3)
    with np.errstate(invalid="ignore", over="ignore"):  # particles far out after a blow-up
        gap = np.maximum(np.maximum(lo[:, None] - centre, centre - hi[:, None]), 0.0)
        near = np.linalg.norm(gap, axis=-1) <= radius  # (S, K); False where no particle is finite
    for j in np.flatnonzero(near.any(axis=1)):
        pts = particles[j]
        pts = pts[np.isfinite(pts).all(axis=1)]
        idx = np.flatnonzero(near[j])
        with np.errstate(invalid="ignore", over="ignore"):
            d = _box_distance(pts, centre[j, idx], colliders.rotation[sample[j]][idx], colliders.half[idx])
        touch[j, idx] = d <= th.reach
    first = np.searchsorted(colliders.time, time[:-1], side="right")
    last = np.maximum(np.searchsorted(colliders.time, time[1:], side="right"), first + 1)
    own = np.zeros(s - 1)
    for i in range(s - 1):
        near = touch[i] | touch[i + 1]
        if near.any():
            own[i] = speed[first[i] : last[i]][:, near].max(initial=0.0)
    touched = np.flatnonzero(touch[:-1].any(axis=1) | touch[1:].any(axis=1))
    for i in range(s - 1):
        k = int(np.searchsorted(touched, i, side="right")) - 1
        if k < 0:
            continue
        latest = int(touched[k])
        start = int(np.searchsorted(time, time[latest] - th.memory - 1e-9))
        carrier[i] = own[start : latest + 1].max()
        since[i] = start
    return carrier, since


def _escape(particles: np.ndarray, domain: Domain, th: ParticleThresholds) -> np.ndarray:
    """(S, N) particles outside their domain (non-finite ones excluded)."""
    with np.errstate(invalid="ignore"):
        out = ((particles < domain.lo) | (particles > domain.hi)).any(axis=-1)
        if domain.table_z is not None:
            out |= particles[..., 2] < domain.table_z - th.table_depth
    return out & np.isfinite(particles).all(axis=-1)


def _first_event(
    name: str, reason: str, bad: np.ndarray, time: np.ndarray, particles: np.ndarray, speed: np.ndarray
) -> ParticleEvent | None:
    """The event of ``bad`` (S, N) records (the first one in time), or None."""
    rows = np.flatnonzero(bad.any(axis=1))
    if not len(rows):
        return None
    j = int(rows[0])
    p = int(np.flatnonzero(bad[j])[0])
    v = float(speed[j - 1, p]) if j > 0 else 0.0  # how fast it got there (0 when not finite)
    v = v if np.isfinite(v) else 0.0
    at = tuple(float(c) for c in particles[j, p])
    count = int(bad.any(axis=0).sum())
    return ParticleEvent(name, reason, float(time[j]), j, p, count, v, 0.0, at)  # type: ignore[arg-type]


def screen_particles(
    name: str,
    time: np.ndarray,
    particles: np.ndarray,
    colliders: ColliderTrack | None = None,
    domain: Domain | None = None,
    thresholds: ParticleThresholds | None = None,
) -> list[ParticleEvent]:
    """Particle artifacts of deformable ``name`` from its records ``particles`` (S, N, 3) m at ``time`` (S,)
    s, against ``colliders`` and within ``domain`` (module docstring): at most one event per reason, the
    first in time."""
    th = thresholds or ParticleThresholds()
    domain = domain or Domain()
    time = np.asarray(time, dtype=float)
    x = np.asarray(particles, dtype=float)
    events: list[ParticleEvent] = []
    finite = np.isfinite(x).all(axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        step = np.diff(x, axis=0)
        dt = np.maximum(np.diff(time), 1e-12)[:, None]
        speed = np.linalg.norm(step, axis=-1) / dt
        speed[np.isnan(speed)] = np.inf
    for reason, bad in (("non_finite", ~finite), ("escape", _escape(x, domain, th))):
        event = _first_event(name, reason, bad, time, x, speed)
        if event is not None:
            events.append(event)
    if len(time) < 3:
        return events
    carrier, since = _carriers(time, np.where(finite[..., None], x, np.nan), colliders, th)
    both = finite[:-1] & finite[1:]
    z = np.where(finite, x[..., 2], -np.inf)
    low = np.minimum(z[:-1], z[1:])
    base = th.margin * carrier[:, None] + th.speed_floor
    g2 = 2.0 * th.gravity
    explained = np.full(speed.shape, np.inf)
    with np.errstate(invalid="ignore"):  # -inf - -inf where a particle is not finite: excluded by ``both``
        # a lower bound of the explained speed (the drop within the interval only) picks the candidates
        drop = np.sqrt(g2 * np.maximum(z[:-1] - low, 0.0))
        candidate = both & (speed > base + th.margin * drop)
        highest = np.maximum.accumulate(z, axis=0)
        for i in np.flatnonzero(candidate.any(axis=1)):
            cols = np.flatnonzero(candidate[i])
            top = highest[i, cols] if since[i] == 0 else z[since[i] : i + 1, cols].max(axis=0)
            explained[i, cols] = base[i] + th.margin * np.sqrt(g2 * np.maximum(top - low[i, cols], 0.0))
    fast = candidate & (speed > explained)
    sustained = _sustained(fast, time, x, explained, th.sustain)
    if sustained.any():
        rows, cols = np.nonzero(sustained)
        j, p = int(rows[0]), int(cols[0])
        onset = j
        while onset > 0 and fast[onset - 1, p]:
            onset -= 1
        peak = np.where(sustained, speed, -np.inf)
        i, q = np.unravel_index(int(np.argmax(peak)), peak.shape)
        at = tuple(float(c) for c in x[onset, p])
        count = int(sustained.any(axis=0).sum())
        events.append(
            ParticleEvent(
                name,
                "speed",
                float(time[onset]),
                onset,
                p,
                count,
                float(speed[i, q]),
                float(explained[i, q]),
                at,  # type: ignore[arg-type]
            )
        )
    return sorted(events, key=lambda e: e.onset_s)


def _sustained(
    fast: np.ndarray, time: np.ndarray, x: np.ndarray, explained: np.ndarray, sustain: float
) -> np.ndarray:
    """(S - 1, N): intervals ending a run of at least two consecutive ``fast`` intervals that lasts at least
    ``sustain`` s and over which the particle's net displacement is also faster than explained (a single
    record off and back again is noise, not motion)."""
    out = np.zeros_like(fast)
    n = fast.shape[1]
    start = np.zeros(n, dtype=int)
    most = np.zeros(n)
    for i in np.flatnonzero(fast.any(axis=1)):
        on = fast[i]
        fresh = on & ~(fast[i - 1] if i > 0 else np.zeros_like(on))
        start[fresh] = i
        most[fresh] = explained[i, fresh]
        most[on] = np.maximum(most[on], explained[i, on])
        cols = np.flatnonzero(on & (i - start >= 1) & (time[i + 1] - time[start] >= sustain - 1e-9))
        if len(cols):
            net = np.linalg.norm(x[i + 1, cols] - x[start[cols], cols], axis=-1)
            out[i, cols] = net / (time[i + 1] - time[start[cols]]) > most[cols]
    return out


def screen_trace(
    trace: Trace,
    colliders: ColliderTrack | None = None,
    domains: Mapping[str, Domain] | None = None,
    thresholds: ParticleThresholds | None = None,
) -> list[ParticleEvent]:
    """:func:`screen_particles` every deformable of a rollout's trace (its particle records); each event's
    ``onset_step`` is the trace row at its onset. Empty for a trace without deformables."""
    if not trace.particles or trace.particle_time is None:
        return []
    events = []
    for name, records in trace.particles.items():
        found = screen_particles(
            name, trace.particle_time, records, colliders, (domains or {}).get(name), thresholds
        )
        for e in found:
            row = int(np.clip(np.searchsorted(trace.time, e.onset_s - 1e-9), 0, len(trace.time) - 1))
            events.append(ParticleEvent(**{**asdict(e), "onset_step": row}))
    return sorted(events, key=lambda e: e.onset_s)


def describe_particle_event(event: Mapping[str, Any]) -> str:
    """One sentence on a particle event (a :meth:`ParticleEvent.to_dict`) for a VLM or a report."""
    n, body, t = event["particles"], event["body"], event["onset_s"]
    what = {
        "speed": (
            f"moved at up to {event['peak_speed']:.3g} m/s, faster than the robot, the objects touching it "
            f"and gravity explain ({event['explained_speed']:.3g} m/s)"
        ),
        "escape": "left the simulation domain",
        "non_finite": "became non-finite (the simulation blew up)",
    }[event["reason"]]
    return f"{n} particle(s) of {body} {what} from t = {t:.2f} s; this outcome is not trustworthy."
