"""What a rollout returns, independent of the solver: states at the end of each action and a per-step trace.

Frames and units: world = robot base frame, metres, seconds, radians; quaternions (w, x, y, z); velocities in
the world frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simpact.core.actions import Plan
from simpact.core.rotations import quat_to_rpy

__all__ = [
    "DeformableState",
    "ObjectState",
    "RobotState",
    "Rollout",
    "Trace",
    "WorldState",
    "voxel_keypoints",
]

KEYPOINT_VOXEL = 0.03
"""Edge of the voxels a deformable's particles are averaged in for its keypoints, m."""


def _round(values: np.ndarray, digits: int = 5) -> list[float]:
    return [round(float(v), digits) for v in values]


@dataclass(frozen=True)
class ObjectState:
    """6-DoF pose and velocity of one rigid object; for an articulated part (an object with a joint), also
    its ``joint`` position (m for a slide, rad for a hinge)."""

    position: np.ndarray
    quaternion: np.ndarray
    linear_velocity: np.ndarray
    angular_velocity: np.ndarray
    joint: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "position": _round(self.position),
            "quaternion": _round(self.quaternion),
            "rpy": _round(quat_to_rpy(self.quaternion)),
            "linear_velocity": _round(self.linear_velocity),
            "angular_velocity": _round(self.angular_velocity),
        }
        if self.joint is not None:
            out["joint"] = round(float(self.joint), 6)
        return out


def voxel_keypoints(points: np.ndarray, voxel: float = KEYPOINT_VOXEL) -> np.ndarray:
    """Voxel-downsampled keypoints (K, 3) of particles ``points`` (N, 3), m: the mean of the particles in each
    occupied voxel of edge ``voxel``, in the order of each voxel's first particle (a rope's stay in order)."""
    cells = np.floor(np.asarray(points) / voxel).astype(np.int64)
    _, first, group = np.unique(cells, axis=0, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    sums = np.zeros((len(first), 3))
    np.add.at(sums, group, points)
    means = sums / np.bincount(group, minlength=len(first))[:, None]
    return means[np.argsort(first, kind="stable")]


@dataclass(frozen=True)
class DeformableState:
    """A deformable object's particles at one instant: ``particles`` (N, 3) m (for a rope, its centre line
    in order); what the planner is shown: ``keypoints`` (voxel-downsampled) and the axis-aligned bounding
    box."""

    particles: np.ndarray

    @property
    def keypoints(self) -> np.ndarray:
        return voxel_keypoints(self.particles)

    @property
    def bbox_min(self) -> np.ndarray:
        return self.particles.min(axis=0)

    @property
    def bbox_max(self) -> np.ndarray:
        return self.particles.max(axis=0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "keypoints": [_round(k, 4) for k in self.keypoints],
            "bbox_min": _round(self.bbox_min, 4),
            "bbox_max": _round(self.bbox_max, 4),
            "particles": int(len(self.particles)),
        }


@dataclass(frozen=True)
class RobotState:
    """Tool-centre point pose and gripper opening (m)."""

    tcp_position: np.ndarray
    tcp_quaternion: np.ndarray
    gripper_width: float

    @property
    def tcp_rpy(self) -> np.ndarray:
        return quat_to_rpy(self.tcp_quaternion)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tcp_position": _round(self.tcp_position),
            "tcp_rpy": _round(self.tcp_rpy),
            "gripper_width": round(float(self.gripper_width), 5),
        }


@dataclass(frozen=True)
class WorldState:
    """The state the planner reasons about at one instant."""

    time: float
    robot: RobotState
    objects: dict[str, ObjectState]
    deformables: dict[str, DeformableState] = field(default_factory=dict)
    """Deformable objects (kinds ``pd``, ``mpm``) by name; empty in a rigid scene."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "time": round(self.time, 4),
            "robot": self.robot.to_dict(),
            "objects": {k: v.to_dict() for k, v in self.objects.items()},
        }
        if self.deformables:
            out["deformables"] = {k: v.to_dict() for k, v in self.deformables.items()}
        return out


@dataclass
class Trace:
    """Every physics step of a rollout: ``time`` (T,) s, ``qpos`` (T, nq), ``qvel`` (T, nv), ``ctrl`` (T, nu),
    ``tcp_position`` (T, 3) m, ``tcp_quaternion`` (T, 4), ``gripper_width`` (T,) m. ``object_qpos`` maps an
    object name to the qpos address of its free joint (7 values: position, quaternion). Deformables are
    recorded less often: ``particles`` maps a deformable's name to its particles (S, N, 3) m (float32) at
    ``particle_time`` (S,) s."""

    time: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray
    tcp_position: np.ndarray
    tcp_quaternion: np.ndarray
    gripper_width: np.ndarray
    object_qpos: dict[str, int] = field(default_factory=dict)
    particles: dict[str, np.ndarray] = field(default_factory=dict)
    particle_time: np.ndarray | None = None

    def particles_at(self, name: str, row: int) -> np.ndarray:
        """A deformable's particles (N, 3) at trace row ``row``: the last record at or before its time."""
        assert self.particle_time is not None, "this trace has no deformables"
        t = self.time[row]
        i = int(np.searchsorted(self.particle_time, t + 1e-9, side="right")) - 1
        return self.particles[name][max(i, 0)]

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Positions (T, 3) and quaternions (T, 4) of a free object over the rollout."""
        adr = self.object_qpos[name]
        return self.qpos[:, adr : adr + 3], self.qpos[:, adr + 3 : adr + 7]

    def __len__(self) -> int:
        return len(self.time)


@dataclass
class Rollout:
    """A plan rolled out from a snapshot.

    ``states[i]`` is the world at the end of action i (after its settle hold); ``final`` is the world after
    the extra ``tail_s`` of holding still that success checks use; ``plan`` carries the ``start_pose`` it
    began from.
    """

    plan: Plan
    initial: WorldState
    states: list[WorldState]
    final: WorldState
    trace: Trace | None
    final_contacts: list[tuple[str, str]]
    ik_residual_max: float
    """Largest distance between a waypoint and the joint target's forward kinematics, m."""
    nsteps: int
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "initial": self.initial.to_dict(),
            "states": [{"action": str(a), **s.to_dict()} for a, s in zip(self.plan.actions, self.states)],
            "final": self.final.to_dict(),
            "final_contacts": [list(c) for c in self.final_contacts],
            "ik_residual_max": round(self.ik_residual_max, 6),
            "nsteps": self.nsteps,
            "wall_s": round(self.wall_s, 4),
        }
