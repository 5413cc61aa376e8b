"""Avoid obstacle: the object ends on the target region and the obstacle is never disturbed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simpact.checks.common import progress, robot_touches, tilt_deg
from simpact.core.rollout import Rollout
from simpact.core.scene import Scene
from simpact.tasks import Evaluation


def check(
    rollout: Rollout, scene: Scene, targets: Mapping[str, float], params: Mapping[str, Any]
) -> Evaluation:
    """Success: the object's centre lies over the region (a box marker) grown by ``tolerance`` m, it stands
    (tilt below ``max_tilt_deg``, default 20), the robot has let go of it, and the obstacle moved less than
    ``max_obstacle_move`` m at every step."""
    name, obstacle = params["object"], params["obstacle"]
    region = scene.object(params["region"])
    half = np.asarray(region.size[:2]) / 2 + float(params["tolerance"])
    final = rollout.final.objects[name].position
    offset = np.abs(final[:2] - np.asarray(region.position[:2]))
    outside = float(np.linalg.norm(np.maximum(offset - half, 0.0)))  # m beyond the grown region
    assert rollout.trace is not None, "the avoid_obstacle check needs the rollout's trace"
    positions, _ = rollout.trace.object_pose(obstacle)
    moved = float(np.linalg.norm(positions - rollout.initial.objects[obstacle].position, axis=1).max())
    touching = robot_touches(rollout, name)
    inside = outside == 0.0
    undisturbed = moved < params["max_obstacle_move"]
    tilt = float(tilt_deg(rollout.final.objects[name].quaternion))
    upright = tilt < float(params.get("max_tilt_deg", 20.0))
    success = inside and undisturbed and upright and not touching
    distance = float(np.linalg.norm(final[:2] - np.asarray(region.position[:2])))
    score = progress(distance, 0.05) * (1.0 if undisturbed else 0.5 * progress(moved, 0.02))
    score *= 1.0 if upright else 0.5
    return Evaluation(
        bool(success),
        score,
        {
            "distance_m": distance,
            "outside_region_m": outside,
            "inside": bool(inside),
            "obstacle_moved_m": moved,
            "object_tilt_deg": tilt,
            "robot_touching": bool(touching),
        },
    )
