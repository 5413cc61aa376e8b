"""SimuGuard on PyBullet: a recorder adapter for the rebuilt CALVIN scene, so every chain is audited by the
same detector (:func:`simpact.guard.detector.detect`) as the planner's MuJoCo rollouts.

:class:`PhysicsAudit` attaches to a :class:`~simpact.calvin.env.CalvinEnv` by putting a thin proxy in front of
its ``pb`` module: every ``stepSimulation`` the environment makes (the reset's step, the 8 physics steps of
each control step, ``settle``) is recorded at 240 Hz without changing it (the proxy only reads PyBullet
state around the call; trajectories are bit-identical with auditing on or off). Per physics step it keeps:

- before the step, the blocks' centre-of-mass pose and linear / angular velocity
  (``getBasePositionAndOrientation``, ``getBaseVelocity``);
- after the step, the pose and velocity of every moving link, the table's articulated ones (slider, drawer,
  button, switch) and every robot link (``getLinkStates`` with link velocities and without forward
  kinematics: the cached poses are then those at the start of the step, PyBullet's own forward kinematics;
  fresh ones would refresh the cache ``robot_obs`` reads and so change what a policy sees), and the contact
  points that acted during the step (``getContactPoints``: bodies, links, position on A, normal on B,
  distance, normal force).

:meth:`PhysicsAudit.recording` builds the guard's own :class:`~simpact.guard.store.Recording` from them
(the type the MuJoCo recorder produces), with the same conventions: row ``k`` is the state at the start of
physics step ``k`` and the contacts acting during it (one more row holds the state after the last step);
one SimuGuard "body" per PyBullet link; contacts merged per (step, body pair) into the total normal
impulse (normal force x 1/240 s) and the deepest penetration. Only touching points count as contacts
(distance at most ``touch_distance``, 1 mm, or a positive normal force): PyBullet also reports points a
few millimetres apart, which would hide a body's free flight from the detector.

Bodies are named ``block_red`` / ``block_blue`` / ``block_pink`` (role ``object``), ``slider``,
``drawer``, ``button``, ``switch`` (the table's moving links, role ``object``, as MuJoCo's recorder calls a
jointed body), ``table``, ``led``, ``lightbulb``, ``plank``, ``floor``, ``pedestal`` (``static``), and the
robot's links by their URDF names (``panda_link0`` ... ``panda_hand``, ``panda_leftfinger``, ``tcp``; role
``robot``: the detector explains an object's motion by the speed of the robot links touching it). Masses
come from ``getDynamicsInfo``, gravity from the engine. The thresholds are the paper's
(:class:`~simpact.guard.detector.Thresholds` defaults): the detector scales its velocity-change thresholds
to the 1/240 s step (0.35 m/s per 4 ms becomes 0.365 m/s per step) and turns its windows into whole steps
(40 ms: 10 steps, 16 ms: 4, 240 ms: 58).

Only the rebuild back-end can be audited: the official ``calvin_env`` steps PyBullet through its own module
reference, out of reach of the proxy (:func:`auditable` says which environments can).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from simpact.calvin.env import CalvinEnv
from simpact.guard.detector import Event, Thresholds, detect
from simpact.guard.store import Manifest, Recording

__all__ = [
    "THRESHOLDS",
    "AuditBody",
    "PhysicsAudit",
    "artifacts",
    "auditable",
    "event_summary",
]

logger = logging.getLogger(__name__)

#: The paper's thresholds (appendix B.5); :func:`detect` scales them to the recording's 1/240 s step.
THRESHOLDS = Thresholds()

#: Table joint → body name (the moving parts a subtask acts on).
_TABLE_LINKS = {
    "base__slide": "slider",
    "base__drawer": "drawer",
    "base__button": "button",
    "base__switch": "switch",
    "base__led": "led",
    "base__light": "lightbulb",
    "base__plank": "plank",
}
_MAX_LOGGED = 10


@dataclass(frozen=True)
class AuditBody:
    """One SimuGuard body: a PyBullet link (``link`` -1 for a body's base)."""

    name: str
    uid: int
    link: int
    role: str
    """``object``, ``robot`` or ``static`` (as :func:`simpact.guard.recorder.body_roles`)."""
    mass: float
    """kg (``getDynamicsInfo``)."""


def auditable(env: Any) -> TypeGuard[CalvinEnv]:
    """Whether :class:`PhysicsAudit` can record ``env``'s physics steps (the rebuild back-end)."""
    return isinstance(env, CalvinEnv)


def artifacts(events: Sequence[Event]) -> list[Event]:
    """The flagged events: contact artifacts (all three stages passed), not their consequences."""
    return [e for e in events if e.flagged]


def event_summary(event: Event) -> dict[str, Any]:
    """A flagged event in a few JSON-ready numbers (for a chain's record)."""
    return {
        "body": event.body,
        "onset_step": event.onset_step,
        "onset_s": round(event.onset_s, 5),
        "speed_before": round(event.speed_before, 4),
        "peak_speed": round(event.peak_speed, 4),
        "kinetic_energy_gained": round(event.kinetic_energy_gained, 6),
        "contact_pair": list(event.contact_pair),
        "contact_depth": round(event.contact_depth, 6),
    }


class _SteppingProxy:
    """Stands in for the ``pybullet`` module inside an environment: ``stepSimulation`` is recorded, every
    other attribute is PyBullet's own."""

    def __init__(self, pb: Any, audit: PhysicsAudit) -> None:
        self._pb, self._audit = pb, audit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pb, name)

    def stepSimulation(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 (PyBullet's name)
        self._audit._before()
        out = self._pb.stepSimulation(*args, **kwargs)
        self._audit._after()
        return out


def _discover(env: CalvinEnv) -> list[AuditBody]:
    """Every link of every PyBullet body in the environment's client, named and given a role."""
    pb, cid = env.pb, env.cid
    robot, table, plane = env.robot.uid, env.table.uid, env.table.plane
    blocks = {uid: f"block_{color}" for color, uid in env.table.blocks.items()}
    bodies: list[AuditBody] = []
    for i in range(pb.getNumBodies(physicsClientId=cid)):
        uid = int(pb.getBodyUniqueId(i, physicsClientId=cid))
        base_link, body_name = (s.decode() for s in pb.getBodyInfo(uid, physicsClientId=cid))
        base_mass = float(pb.getDynamicsInfo(uid, -1, physicsClientId=cid)[0])
        free = base_mass > 0.0
        if uid == robot:
            base, role = base_link, "robot"
        elif uid == table:
            base, role = "table", "static"
        elif uid == plane:
            base, role = "floor", "static"
        elif uid in blocks:
            base, role = blocks[uid], "object"
        else:
            base = body_name or (
                "pedestal" if not pb.getNumJoints(uid, physicsClientId=cid) else f"body{uid}"
            )
            role = "object" if free else "static"
        if role == "object" and not free:
            role = "static"
        bodies.append(AuditBody(base, uid, -1, role, base_mass))
        moving = {-1: free}
        for j in range(pb.getNumJoints(uid, physicsClientId=cid)):
            info = pb.getJointInfo(uid, j, physicsClientId=cid)
            joint, kind, link, parent = info[1].decode(), int(info[2]), info[12].decode(), int(info[16])
            moving[j] = kind != pb.JOINT_FIXED or moving[parent]
            mass = float(pb.getDynamicsInfo(uid, j, physicsClientId=cid)[0])
            if uid == robot:
                name, link_role = link, "robot"
            elif uid == table:
                name, link_role = (
                    _TABLE_LINKS.get(joint, f"table/{link}"),
                    "object" if moving[j] else "static",
                )
            else:
                name, link_role = f"{base}/{link}", ("object" if moving[j] else "static")
            bodies.append(AuditBody(name, uid, j, link_role, mass))
    return bodies


class PhysicsAudit:
    """Records the rebuild environment's physics steps (see the module docstring) for SimuGuard.

    Use ``with PhysicsAudit(env) as audit:`` (or :meth:`attach` / :meth:`detach`) around the steps to
    audit, then :meth:`recording` and :meth:`detect`. ``nsteps`` counts the physics steps recorded so far
    (subtask boundaries are read from it). The monitor never stops the simulation: an exception inside it
    is caught, counted in ``errors`` and logged, and its row is marked invalid.
    """

    def __init__(
        self, env: CalvinEnv, *, touch_distance: float = 1e-3, thresholds: Thresholds | None = None
    ) -> None:
        if not auditable(env):
            raise TypeError(f"PhysicsAudit records the rebuild CalvinEnv, not {type(env).__name__}")
        self.env = env
        self.touch_distance = float(touch_distance)
        self.thresholds = thresholds or THRESHOLDS
        self.bodies = _discover(env)
        self.dt = 1.0 / float(env.physics_hz)
        self.errors = 0
        self.nsteps = 0
        self._pb: Any = env.pb
        self._cid = env.cid
        params = self._pb.getPhysicsEngineParameters(physicsClientId=self._cid)
        self.gravity = [float(params.get(f"gravityAcceleration{c}", 0.0)) for c in "XYZ"]
        """m/s^2, from the engine."""
        index = {(b.uid, b.link): i for i, b in enumerate(self.bodies)}
        self._lut = np.full(
            (max(b.uid for b in self.bodies) + 1, max(b.link for b in self.bodies) + 2), -1, dtype=np.int64
        )
        for (uid, link), i in index.items():
            self._lut[uid, link + 1] = i
        # What is read at every step: free bases, then the moving links of each body (one call per body).
        self._free = [b.uid for b in self.bodies if b.link == -1 and b.role == "object"]
        by_uid: dict[int, list[int]] = {}
        for b in self.bodies:
            if b.link >= 0 and b.role != "static":
                by_uid.setdefault(b.uid, []).append(b.link)
        self._links = sorted(by_uid.items())
        self._base_ids = np.asarray([index[(uid, -1)] for uid in self._free], dtype=np.int64)
        self._link_ids = np.asarray(
            [index[(uid, link)] for uid, links in self._links for link in links], dtype=np.int64
        )
        self._static = self._read_static()
        self._proxy: _SteppingProxy | None = None
        self._final: array[float] | None = None
        """The free bases' state after the last step, read when detached."""
        self._clear()

    # --- attaching ---------------------------------------------------------------------------------------
    def attach(self) -> PhysicsAudit:
        """Start recording the environment's physics steps (from an empty recording)."""
        if self._proxy is None:
            self._clear()
            self._proxy = _SteppingProxy(self._pb, self)
            self.env.pb = self._proxy
        return self

    def detach(self) -> None:
        """Stop recording (the environment steps PyBullet directly again); the recording is kept."""
        if self._proxy is not None:
            self.env.pb = self._pb
            self._proxy = None
            self._final = self._final_bases()

    def __enter__(self) -> PhysicsAudit:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    # --- per step ----------------------------------------------------------------------------------------
    # Free bases (the blocks) are read fresh before each step. Links are read after each step WITHOUT
    # forward kinematics: PyBullet's cached link poses then are those at the start of that step (its own
    # forward kinematics), exactly the row's; asking for fresh ones would refresh the cache that
    # ``getLinkState`` without forward kinematics (e.g. ``robot_obs``) reads, changing what policies see.
    # The link velocities read then are those at the end of the step (the next row's), computed in the
    # cached frames (off by one step's rotation: about 1e-4 m/s on the scripted chains).
    def _clear(self) -> None:
        self.nsteps = 0
        self.errors = 0
        self._bases = array("d")
        """13 numbers per free base and row: COM position, quaternion (x, y, z, w), linear, angular
        velocity (one array of floats: no Python objects kept per step)."""
        self._links_after = array("d")
        """13 numbers per moving link and step, read after it: the COM pose at the step's start (position,
        quaternion) and the linear and angular velocity at its end (the next row's)."""
        self._links_first = array("d")
        """The same read before the first step (for the first row's velocities)."""
        self._valid: list[bool] = []
        self._contacts = array("d")
        """13 numbers per contact point: step, uid A, uid B, link A, link B, position on A (3), normal on B
        (3), distance, normal force."""
        self._final = None

    def _read_bases(self, out: array[float]) -> None:
        pb, cid, extend = self._pb, self._cid, out.extend
        for uid in self._free:
            pos, quat = pb.getBasePositionAndOrientation(uid, physicsClientId=cid)
            lin, ang = pb.getBaseVelocity(uid, physicsClientId=cid)
            extend(pos + quat + lin + ang)

    def _read_links(self, out: array[float]) -> None:
        pb, cid, extend = self._pb, self._cid, out.extend
        for uid, links in self._links:
            states = pb.getLinkStates(
                uid, links, computeLinkVelocity=1, computeForwardKinematics=0, physicsClientId=cid
            )
            for pos, quat, _, _, _, _, lin, ang in states:
                extend(pos + quat + lin + ang)

    def _guard(self, fill: list[tuple[array[float], int]], read: Any, *args: Any) -> bool:
        """``read(*args)``; on an exception the arrays in ``fill`` get NaN rows of their sizes instead."""
        sizes = [len(out) for out, _ in fill]
        try:
            read(*args)
            return True
        except Exception as exc:
            for (out, width), size in zip(fill, sizes):
                del out[size:]
                out.extend([np.nan] * width)
            self._fail(exc, f"at {getattr(read, '__name__', read)}")
            return False

    def _final_bases(self) -> array[float]:
        final: array[float] = array("d")
        self._guard([(final, 13 * len(self._free))], self._read_bases, final)
        return final

    def _before(self) -> None:
        ok = self._guard([(self._bases, 13 * len(self._free))], self._read_bases, self._bases)
        if self.nsteps == 0:  # the first row's link velocities
            first = self._links_first
            ok &= self._guard([(first, 13 * len(self._link_ids))], self._read_links, first)
        self._valid.append(ok)

    def _after(self) -> None:
        k = self.nsteps
        self.nsteps += 1
        links = self._links_after
        ok = self._guard([(links, 13 * len(self._link_ids))], self._read_links, links)
        try:
            extend = self._contacts.extend
            for p in self._pb.getContactPoints(physicsClientId=self._cid):
                extend((k, *p[1:5], *p[5], *p[7], p[8], p[9]))
        except Exception as exc:
            ok = False
            self._fail(exc, "reading the contacts")
        self._valid[k] &= ok

    def _fail(self, exc: BaseException, where: str) -> None:
        self.errors += 1
        if self.errors <= _MAX_LOGGED:
            logger.warning(
                "CALVIN audit error %s at step %d (the simulation continues): %r", where, self.nsteps, exc
            )

    def _read_static(self) -> np.ndarray:
        """(nb, 13) pose and velocity of every body now (the static ones keep it)."""
        pb, cid = self._pb, self._cid
        out = np.zeros((len(self.bodies), 13))
        for i, b in enumerate(self.bodies):
            if b.link == -1:
                pos, quat = pb.getBasePositionAndOrientation(b.uid, physicsClientId=cid)
            else:
                s = pb.getLinkState(b.uid, b.link, physicsClientId=cid)
                pos, quat = s[0], s[1]
            out[i, :3], out[i, 3:7] = pos, quat
        return out

    # --- results -----------------------------------------------------------------------------------------
    def points(self) -> dict[str, np.ndarray]:
        """Every recorded contact point (unmerged, touching or not): ``step``, ``body_a`` / ``body_b``
        (indices into :attr:`bodies`), ``distance`` (m, negative when penetrating), ``normal_force`` (N),
        ``position_on_a`` (m) and ``normal_on_b`` (unit, from B to A)."""
        raw = np.frombuffer(self._contacts, dtype=float).reshape(-1, 13)
        uid_a, uid_b, link_a, link_b = (raw[:, j].astype(np.int64) for j in (1, 2, 3, 4))
        return {
            "step": raw[:, 0].astype(np.int64),
            "body_a": self._lut[uid_a, link_a + 1],
            "body_b": self._lut[uid_b, link_b + 1],
            "position_on_a": raw[:, 5:8].copy(),
            "normal_on_b": raw[:, 8:11].copy(),
            "distance": raw[:, 11].copy(),
            "normal_force": raw[:, 12].copy(),
        }

    def states(self) -> np.ndarray:
        """(n + 1, nb, 13): per row, every body's COM position, quaternion (x, y, z, w), linear and angular
        velocity (static bodies at their pose, at rest); the last row is the state after the last step
        (its link poses moved on by one step at the links' velocities)."""
        n, nf, nl = self.nsteps, len(self._free), len(self._link_ids)
        final = self._final if self._final is not None else self._final_bases()  # attached: now
        if n == 0:  # nothing stepped: the links as cached now
            now: array[float] = array("d")
            self._guard([(now, 13 * nl)], self._read_links, now)
            pose, vel = np.zeros((0, nl, 7)), np.frombuffer(now, dtype=float).reshape(1, nl, 13)[..., 7:]
            last = np.frombuffer(now, dtype=float).reshape(1, nl, 13)[..., :7].copy()
        else:
            after = np.frombuffer(self._links_after, dtype=float).reshape(n, nl, 13)
            first = np.frombuffer(self._links_first, dtype=float).reshape(1, nl, 13)
            pose, vel = after[..., :7], np.concatenate([first[..., 7:], after[..., 7:]])
            last = pose[-1:].copy()
            last[0, :, :3] += vel[-1, :, :3] * self.dt
        out = np.broadcast_to(self._static, (n + 1, *self._static.shape)).copy()
        bases = np.concatenate([np.frombuffer(self._bases, dtype=float), np.frombuffer(final, dtype=float)])
        out[:, self._base_ids] = bases.reshape(n + 1, nf, 13)
        out[:, self._link_ids, :7] = np.concatenate([pose, last])
        out[:, self._link_ids, 7:] = vel
        return out

    def recording(self, meta: Mapping[str, Any] | None = None) -> Recording:
        """The guard's :class:`Recording` of the steps so far: ``nsteps + 1`` rows (see the module
        docstring); ``meta`` goes into its manifest."""
        states = self.states()
        n, nb = len(states), len(self.bodies)
        pts = self.points()
        keep = (pts["distance"] <= self.touch_distance) | (pts["normal_force"] > 0.0)
        keep &= (pts["body_a"] >= 0) & (pts["body_b"] >= 0)
        step, a, b = pts["step"][keep], pts["body_a"][keep], pts["body_b"][keep]
        force, dist = pts["normal_force"][keep], pts["distance"][keep]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        key = (step * nb + lo) * nb + hi
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
        ukey = key[starts]
        impulse = np.add.reduceat(force[order], starts) * self.dt if len(key) else np.zeros(0)
        depth = np.maximum.reduceat(np.maximum(-dist[order], 0.0), starts) if len(key) else np.zeros(0)
        manifest = Manifest(
            bodies=[x.name for x in self.bodies],
            roles=[x.role for x in self.bodies],
            masses=[x.mass for x in self.bodies],
            timestep=self.dt,
            gravity=self.gravity,
            nsteps=n,
            thresholds=self.thresholds.to_dict(),
            errors=self.errors,
            meta={"engine": "pybullet", "backend": self.env.backend, "touch_distance": self.touch_distance}
            | dict(meta or {}),
        )
        xyzw = states[..., 3:7]
        valid = np.r_[np.asarray(self._valid, dtype=bool), True]
        return Recording(
            manifest=manifest,
            time=np.arange(n) * self.dt,
            xpos=states[..., :3].copy(),
            xquat=np.concatenate([xyzw[..., 3:], xyzw[..., :3]], axis=-1),
            vel=states[..., 7:10].copy(),
            contact_start=np.searchsorted(ukey // (nb * nb), np.arange(n + 1)).astype(np.int64),
            contact_bodies=np.column_stack([(ukey // nb) % nb, ukey % nb]).astype(np.int32),
            contact_impulse=impulse,
            contact_depth=depth,
            contact_count=np.diff(np.r_[starts, len(key)]).astype(np.int32),
            valid=valid,
        )

    def angular_velocity(self) -> np.ndarray:
        """(n + 1, nb, 3) angular velocity of every body, rad/s (not part of :class:`Recording`)."""
        return self.states()[..., 10:13]

    def detect(self, recording: Recording | None = None) -> list[Event]:
        """SimuGuard's events on this recording (all of them; :func:`artifacts` keeps the flagged ones)."""
        return detect(self.recording() if recording is None else recording, self.thresholds)
