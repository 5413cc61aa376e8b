"""Settle check for a scene (e.g. one real2sim built): let it rest with no control and see what happens.

The scene starts as placed: objects at their scene poses, at rest, the robot at its start pose with its
controllers holding it (the state a MuJoCo World (:mod:`solvers.mujoco.world`) is in before its own settling,
so overlaps that settling would hide are seen). It is stepped for ``seconds`` with the controls held, every
step recorded by the :class:`~simpact.guard.recorder.Recorder`, and the detector is run on the recording.

The report gives the detector's events (artifacts: those flagged), the initial overlaps (penetration depth per
body pair at t = 0 from MuJoCo's contacts with ``dist < 0``), how far each object moved and rotated while
settling, the objects that fell off the table (their origin ended under its top, z = 0) and those that did
not rest where they were placed (tipped over, pushed by a neighbour): a scene where something falls or
topples is not the scene that was photographed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from simpact.core.scene import Scene
from simpact.guard.detector import Event, Thresholds, detect
from simpact.guard.recorder import Recorder, state_layout
from solvers.mujoco.robot import ARM_JOINTS, FINGER_JOINTS
from solvers.mujoco.world import mujoco_access
from solvers.world import World, make_world

__all__ = [
    "FALLEN_DROP",
    "FALLEN_Z",
    "SHIFTED_DEG",
    "SHIFTED_M",
    "ObjectMotion",
    "Overlap",
    "SettleReport",
    "placed_state",
    "settle_check",
]

OVERLAP_TOLERANCE = 1e-3
"""Penetration at t = 0 up to this depth (m) is not counted against a clean scene."""

FALLEN_Z = -0.02
"""An object whose origin ends the settle run below this height (m; the table top is z = 0), and
:data:`FALLEN_DROP` lower than it started, fell off the table (one placed in a drawer under it did not)."""
FALLEN_DROP = 0.05
"""m; see :data:`FALLEN_Z`."""
SHIFTED_M = 0.01
"""An object that moves more than this (m) while settling ..."""
SHIFTED_DEG = 10.0
"""... or turns more than this (degrees) does not rest where it was placed (:attr:`SettleReport.shifted`):
one placed at rest settles by a fraction of a millimetre."""


@dataclass(frozen=True)
class Overlap:
    """Two bodies interpenetrating at t = 0."""

    bodies: tuple[str, str]
    """Body names, in body-id order."""
    depth: float
    """Deepest penetration among the pair's contacts (-dist), m."""
    contacts: int
    """MuJoCo contacts of the pair with dist < 0."""

    def to_dict(self) -> dict[str, Any]:
        return {"bodies": list(self.bodies), "depth": self.depth, "contacts": self.contacts}


@dataclass(frozen=True)
class ObjectMotion:
    """How far one object moved while settling (start of the check to its end)."""

    displacement: float
    """Distance between the body frame's start and end positions, m."""
    rotation: float
    """Angle of the rotation from the start to the end orientation, rad."""
    max_speed: float
    """Peak speed of the centre of mass, m/s."""
    start_position: tuple[float, float, float]
    end_position: tuple[float, float, float]
    """Body frame positions in the world frame, m."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "displacement": self.displacement,
            "rotation": self.rotation,
            "max_speed": self.max_speed,
            "start_position": list(self.start_position),
            "end_position": list(self.end_position),
        }


@dataclass(frozen=True)
class SettleReport:
    """Outcome of :func:`settle_check`."""

    seconds: float
    """Time simulated, s."""
    nsteps: int
    events: list[Event]
    """Confirmed contact ejections; those with ``flagged`` are artifacts."""
    overlaps: list[Overlap]
    """Interpenetrating body pairs at t = 0, deepest first."""
    motion: dict[str, ObjectMotion]
    """Per movable scene object."""
    overlap_tolerance: float = OVERLAP_TOLERANCE
    """m; see :attr:`clean`."""
    monitor_errors: int = 0

    @property
    def artifacts(self) -> list[Event]:
        return [e for e in self.events if e.flagged]

    @property
    def max_overlap(self) -> float:
        """Deepest penetration at t = 0, m (0 without overlaps)."""
        return max((o.depth for o in self.overlaps), default=0.0)

    @property
    def fallen(self) -> list[str]:
        """The objects that fell off the table (see :data:`FALLEN_Z`)."""
        return [
            name
            for name, m in self.motion.items()
            if m.end_position[2] < FALLEN_Z and m.end_position[2] < m.start_position[2] - FALLEN_DROP
        ]

    @property
    def shifted(self) -> list[str]:
        """The objects that did not rest where they were placed: moved more than :data:`SHIFTED_M` or turned
        more than :data:`SHIFTED_DEG` (tipped, rolled, slid, pushed by a neighbour; fallen ones too)."""
        limit = np.radians(SHIFTED_DEG)
        return [n for n, m in self.motion.items() if m.displacement > SHIFTED_M or m.rotation > limit]

    @property
    def clean(self) -> bool:
        """No flagged artifact, no overlap at t = 0 deeper than ``overlap_tolerance`` and nothing fallen."""
        return not self.artifacts and self.max_overlap <= self.overlap_tolerance and not self.fallen

    def to_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "seconds": self.seconds,
            "nsteps": self.nsteps,
            "artifacts": len(self.artifacts),
            "events": [e.to_dict() for e in self.events],
            "max_overlap": self.max_overlap,
            "overlap_tolerance": self.overlap_tolerance,
            "overlaps": [o.to_dict() for o in self.overlaps],
            "fallen": self.fallen,
            "shifted": self.shifted,
            "motion": {name: m.to_dict() for name, m in self.motion.items()},
            "monitor_errors": self.monitor_errors,
        }


def placed_state(world: World, data: mujoco.MjData) -> None:
    """Put ``data`` into the world's state as placed, before its settling: the model's reference pose
    (objects at their scene poses) at rest, the arm and fingers at the controllers' targets of the initial
    snapshot (the robot's start, solved by IK when the world was built). ``mj_step`` for ``SETTLE_S`` from it
    reproduces ``world.initial_snapshot`` bit for bit. ``world`` must be a MuJoCo world."""
    mj = mujoco_access(world)
    model = mj.model
    mujoco.mj_resetData(model, data)
    offset, size = state_layout(model)["ctrl"]
    ctrl = mj.initial_snapshot[offset : offset + size]
    data.ctrl[:] = ctrl
    arm = [int(model.joint(j).qposadr[0]) for j in ARM_JOINTS]
    data.qpos[arm] = ctrl[: len(arm)]
    for j in FINGER_JOINTS:
        data.qpos[int(model.joint(j).qposadr[0])] = ctrl[len(arm)] / 2  # ctrl: the finger opening, m
    mujoco.mj_forward(model, data)


def overlaps(model: mujoco.MjModel, data: mujoco.MjData, names: list[str]) -> list[Overlap]:
    """Body pairs whose contacts in ``data`` (after ``mj_forward``) have ``dist < 0``, deepest first."""
    deepest: dict[tuple[int, int], tuple[float, int]] = {}
    for i in range(data.ncon):
        c = data.contact[i]
        if c.dist >= 0:
            continue
        a, b = sorted(int(model.geom_bodyid[g]) for g in c.geom)
        depth, count = deepest.get((a, b), (0.0, 0))
        deepest[(a, b)] = (max(depth, -float(c.dist)), count + 1)
    out = [Overlap((names[a], names[b]), d, n) for (a, b), (d, n) in deepest.items()]
    return sorted(out, key=lambda o: -o.depth)


def _angle(q0: np.ndarray, q1: np.ndarray) -> float:
    """Angle of the rotation between two unit quaternions, rad."""
    return float(2.0 * np.arccos(np.clip(abs(float(np.dot(q0, q1))), 0.0, 1.0)))


def settle_check(
    scene_or_world: Scene | World,
    seconds: float = 1.0,
    *,
    thresholds: Thresholds | None = None,
    overlap_tolerance: float = OVERLAP_TOLERANCE,
    meta: Mapping[str, Any] | None = None,
) -> SettleReport:
    """Let a scene rest for ``seconds`` (s) with the robot holding its start pose, from the state as placed
    (see the module docstring); report artifacts, overlaps at t = 0 and every object's motion.

    A :class:`Scene` is built into its World (``make_world``) first; a world (MuJoCo) is used as is (its own
    data is not touched)."""
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    world = make_world(scene_or_world) if isinstance(scene_or_world, Scene) else scene_or_world
    mj = mujoco_access(world)
    model = mj.model
    data = mj.new_data()
    placed_state(world, data)
    recorder = Recorder.for_world(
        world, data=data, thresholds=thresholds, meta={"settle_s": seconds, **(meta or {})}
    )
    names = recorder.manifest.bodies
    initial = overlaps(model, data, names)
    nsteps = max(1, int(round(seconds / model.opt.timestep)))
    recorder.run(np.tile(data.ctrl, (nsteps, 1)))
    mujoco.mj_forward(model, data)  # poses after the last step (the recording's rows start each step)
    end_pos = {name: data.xpos[b].copy() for name, b in mj.objects.items()}
    end_quat = {name: data.xquat[b].copy() for name, b in mj.objects.items()}
    rec = recorder.close()
    events = detect(rec, thresholds)
    motion = {}
    for name, b in mj.objects.items():
        if recorder.manifest.roles[b] != "object":
            continue  # fixed objects and markers do not move
        p0, q0 = rec.xpos[0, b], rec.xquat[0, b]
        motion[name] = ObjectMotion(
            displacement=float(np.linalg.norm(end_pos[name] - p0)),
            rotation=_angle(q0, end_quat[name]),
            max_speed=float(np.linalg.norm(rec.vel[:, b], axis=-1).max()),
            start_position=(float(p0[0]), float(p0[1]), float(p0[2])),
            end_position=(float(end_pos[name][0]), float(end_pos[name][1]), float(end_pos[name][2])),
        )
    return SettleReport(
        seconds=nsteps * float(model.opt.timestep),
        nsteps=nsteps,
        events=events,
        overlaps=initial,
        motion=motion,
        overlap_tolerance=overlap_tolerance,
        monitor_errors=rec.manifest.errors,
    )
