"""Pivoting: the object ends rotated about a horizontal axis (stood up) and rests against its support."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simpact.checks.common import progress, robot_touches, trailing_window
from simpact.core.rollout import Rollout
from simpact.core.rotations import quat_conj, quat_rotate
from simpact.core.scene import Scene, SceneObject
from simpact.tasks import Evaluation

_UP = np.array([0.0, 0.0, 1.0])


def _box_corners(size: tuple[float, ...], position: np.ndarray, quaternion: np.ndarray) -> np.ndarray:
    """World coordinates (8, 3) of a box's corners."""
    half = np.asarray(size[:3], dtype=float) / 2
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
    return np.asarray(position) + quat_rotate(np.tile(quaternion, (8, 1)), signs * half)


def _gap_to_box(points: np.ndarray, box: SceneObject) -> float:
    """Smallest distance (m) from ``points`` (N, 3) to the solid box ``box`` (0 if any point is inside)."""
    if box.shape != "box":
        raise ValueError(f"pivoting: the support '{box.name}' must be a box, not a {box.shape}")
    local = quat_rotate(
        np.tile(quat_conj(np.asarray(box.quaternion)), (len(points), 1)), points - np.asarray(box.position)
    )
    outside = np.maximum(np.abs(local) - np.asarray(box.size[:3]) / 2, 0.0)
    return float(np.linalg.norm(outside, axis=1).min())


def check(
    rollout: Rollout, scene: Scene, targets: Mapping[str, float], params: Mapping[str, Any]
) -> Evaluation:
    """Success: the direction that pointed up in the object at the start is between ``min_rotation_deg`` and
    ``max_rotation_deg`` from the vertical throughout the last ``hold_s`` (it stands; yaw does not count, a
    flip onto its top does not either), the robot does not touch the object at the end, and the object rests
    (speed below ``max_speed``) within ``max_support_gap`` of ``support``.

    Score: 1 on success, else up to 0.9 from the rotation held at the end (0.5, discounted by the gap to the
    support), the largest rotation reached (0.3) and the robot being off the object (0.1)."""
    name = params["object"]
    assert rollout.trace is not None, "the pivoting check needs the rollout's trace"
    _, quats = rollout.trace.object_pose(name)
    # The object-frame axis that pointed up initially, followed through the rollout.
    up_body = quat_rotate(quat_conj(rollout.initial.objects[name].quaternion), _UP)
    up_now = quat_rotate(quats, np.tile(up_body, (len(quats), 1)))
    rotation = np.degrees(np.arccos(np.clip(up_now[:, 2], -1.0, 1.0)))
    window = rotation[trailing_window(rollout.trace, float(params.get("hold_s", 1.0)))]
    hold = float(window.min())
    hold_max = float(window.max())
    final = rollout.final.objects[name]
    obj = scene.object(name)
    gap = 0.0
    if params.get("support"):
        support = scene.object(params["support"])
        if obj.shape == "box":
            gap = _gap_to_box(_box_corners(obj.size, final.position, final.quaternion), support)
        else:  # any other shape: its centre, less its largest half-extent
            gap = max(_gap_to_box(final.position[None], support) - max(obj.size) / 2, 0.0)
    speed = float(np.linalg.norm(final.linear_velocity))
    touching = robot_touches(rollout, name)
    need = float(params["min_rotation_deg"])
    success = (
        hold >= need
        and hold_max <= float(params.get("max_rotation_deg", 180.0))
        and not touching
        and gap <= float(params.get("max_support_gap", np.inf))
        and speed <= float(params.get("max_speed", np.inf))
    )
    reached = float(rotation.max())
    score = (
        1.0
        if success
        else (
            0.5 * min(hold / need, 1.0) * progress(gap, 0.05)
            + 0.3 * min(reached / need, 1.0)
            + 0.1 * (not touching)
        )
    )
    return Evaluation(
        bool(success),
        score,
        {
            "rotation_final_deg": float(rotation[-1]),
            "rotation_hold_min_deg": hold,
            "rotation_hold_max_deg": hold_max,
            "rotation_max_deg": reached,
            "support_gap_m": gap,
            "speed_m_s": speed,
            "robot_touching": touching,
        },
    )
