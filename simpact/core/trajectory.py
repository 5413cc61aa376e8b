"""Expansion of a plan into end-effector waypoints with bounded speed.

The same expansion drives the simulator and the real robot: it depends only on the plan, the start pose and
the motion limits, never on the simulated state, so a plan describes one path wherever it runs.
Orientation keeps the start pose's roll and pitch; ROTATE turns about the base frame's vertical axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simpact.core.actions import Plan, StartPose
from simpact.core.rotations import quat_about_z, quat_mul

__all__ = ["GRIPPER_MAX_WIDTH", "MotionLimits", "Waypoints", "expand_plan", "min_jerk"]

GRIPPER_MAX_WIDTH = 0.08
"""The Franka hand's widest opening, metres; wider commands are clamped."""


@dataclass(frozen=True)
class MotionLimits:
    """Speed bounds and timing of the expansion."""

    max_speed: float = 0.15
    """End-effector linear speed bound, m/s (peak of the minimum-jerk profile)."""
    max_yaw_rate: float = 1.0
    """End-effector yaw rate bound, rad/s."""
    gripper_speed: float = 0.1
    """Rate of change of the commanded gripper width, m/s."""
    min_motion_s: float = 0.2
    """Shortest duration of a motion, s."""
    settle_s: float = 0.25
    """Hold at the end of every action so the arm reaches the waypoint, s."""
    grasp_hold_s: float = 0.3
    """Extra hold after a gripper command so the fingers close on the object, s."""
    control_dt: float = 0.01
    """Spacing of the waypoints, s (the controller's rate)."""


@dataclass(frozen=True)
class Waypoints:
    """End-effector targets sampled every ``dt`` seconds.

    ``position`` (T, 3) m and ``quaternion`` (T, 4) (w, x, y, z) in the base frame; ``gripper`` (T,) commanded
    width in m; ``action_end`` (n_actions,) index of the last waypoint of each action.
    """

    dt: float
    position: np.ndarray
    quaternion: np.ndarray
    yaw: np.ndarray
    gripper: np.ndarray
    action_end: np.ndarray

    def __len__(self) -> int:
        return len(self.position)


def min_jerk(n: int) -> np.ndarray:
    """Minimum-jerk progress from 0 to 1 at ``n`` evenly spaced instants ending at 1 (the first sample is
    the first step, not 0): ``10 s^3 - 15 s^4 + 6 s^5``. Its peak speed is 1.875 times the mean."""
    s = np.arange(1, n + 1) / n
    return np.asarray(10 * s**3 - 15 * s**4 + 6 * s**5)


def expand_plan(plan: Plan, start: StartPose, limits: MotionLimits = MotionLimits()) -> Waypoints:
    """Expand ``plan`` from ``start`` into waypoints every ``limits.control_dt`` seconds.

    Motions follow minimum-jerk profiles whose peak speed (1.875 x the mean) stays within the limits; each
    action ends with a hold of ``limits.settle_s``.
    """
    dt = limits.control_dt
    pos = np.array(start.position, dtype=float)
    yaw = 0.0
    width = min(start.gripper_width, GRIPPER_MAX_WIDTH)
    positions: list[np.ndarray] = []
    yaws: list[np.ndarray] = []
    widths: list[np.ndarray] = []
    ends: list[int] = []
    count = 0

    def hold(seconds: float) -> None:
        nonlocal count
        n = max(1, round(seconds / dt))
        positions.append(np.tile(pos, (n, 1)))
        yaws.append(np.full(n, yaw))
        widths.append(np.full(n, width))
        count += n

    for action in plan.actions:
        p = action.params
        delta = np.zeros(3)
        dyaw = 0.0
        new_width = width
        if action.type == "PUSH":
            delta[:2] = p["dx"], p["dy"]
        elif action.type == "MOVE":
            delta[:] = p["dx"], p["dy"], p["dz"]
        elif action.type == "LIFT":
            delta[2] = p["dz"]
        elif action.type == "DESCEND":
            delta[2] = -p["dz"]
        elif action.type == "ROTATE":
            dyaw = p["dyaw"]
        elif action.type == "GRASP":
            new_width = min(p["d"], GRIPPER_MAX_WIDTH)
        elif action.type == "RELEASE":
            new_width = GRIPPER_MAX_WIDTH
        duration = max(
            limits.min_motion_s,
            1.875 * float(np.linalg.norm(delta)) / limits.max_speed,
            1.875 * abs(dyaw) / limits.max_yaw_rate,
            abs(new_width - width) / limits.gripper_speed,
        )
        n = max(1, math.ceil(duration / dt))
        s = min_jerk(n)
        positions.append(pos + s[:, None] * delta)
        yaws.append(yaw + s * dyaw)
        widths.append(width + np.arange(1, n + 1) / n * (new_width - width))
        count += n
        pos = pos + delta
        yaw += dyaw
        width = new_width
        hold(limits.settle_s + (limits.grasp_hold_s if action.type in ("GRASP", "RELEASE") else 0.0))
        ends.append(count - 1)

    position = np.concatenate(positions)
    yaw_arr = np.concatenate(yaws)
    quat = quat_mul(quat_about_z(yaw_arr), np.asarray(start.quaternion, dtype=float))
    return Waypoints(dt, position, quat, yaw_arr, np.concatenate(widths), np.asarray(ends))
