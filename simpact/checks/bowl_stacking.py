"""Bowl stacking: the upper bowl ends nested in the lower one, upright, at rest and out of the hand."""

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
    """Success at the end of the rollout: the upper bowl's centre within ``max_xy_m`` of the lower bowl's in
    xy, its foot inside the lower bowl (above its floor, below its rim), tilt below ``max_tilt_deg``,
    speed below ``max_speed`` m/s, and no robot link touching it.

    ``lifted_m`` reports the upper bowl's highest rise above its start (a grasp that held through a lift)."""
    upper, lower = params["upper"], params["lower"]
    up, low = rollout.final.objects[upper], rollout.final.objects[lower]
    xy = float(np.linalg.norm(up.position[:2] - low.position[:2]))
    # Bowl bodies have their origin at the base: the upper foot's height above the lower bowl's base.
    foot = float(up.position[2] - low.position[2])
    radius, rim, wall = (float(v) for v in scene.object(lower).size)
    # Inside: on or above the lower bowl's floor (not beside it on the table), below its rim.
    nested = bool(xy < radius and 0.5 * wall < foot < rim)
    tilt = float(tilt_deg(up.quaternion))
    speed = float(np.linalg.norm(up.linear_velocity))
    touching = robot_touches(rollout, upper)
    lifted = 0.0
    if rollout.trace is not None:
        z = rollout.trace.object_pose(upper)[0][:, 2]
        lifted = float(z.max() - rollout.initial.objects[upper].position[2])
    success = (
        xy <= params["max_xy_m"]
        and nested
        and tilt < params["max_tilt_deg"]
        and speed < params["max_speed"]
        and not touching
    )
    upright = float(np.clip(1.0 - tilt / 90.0, 0.0, 1.0))
    score = upright * progress(xy, 0.05) * (1.0 if nested else 0.5) * (0.8 if touching else 1.0)
    return Evaluation(
        bool(success),
        score,
        {
            "xy_error_m": xy,
            "foot_above_lower_base_m": foot,
            "nested": nested,
            "tilt_deg": tilt,
            "speed_m_s": speed,
            "robot_touching": touching,
            "lifted_m": lifted,
        },
    )
