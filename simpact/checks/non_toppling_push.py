"""Non-toppling push: the object reaches the target line along the push axis and stays upright."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simpact.checks.common import progress, robot_touches, tilt_deg, trailing_window
from simpact.core.rollout import Rollout
from simpact.core.scene import Scene
from simpact.tasks import Evaluation


def check(
    rollout: Rollout, scene: Scene, targets: Mapping[str, float], params: Mapping[str, Any]
) -> Evaluation:
    """Success: centre within ``tolerance`` m of the target line along ``axis``; tilt below ``max_tilt_deg``
    throughout, and still upright in the last second with no robot contact."""
    name = params["object"]
    axis = "xyz".index(params["axis"])
    target = targets[params["target"]]
    final = rollout.final.objects[name]
    error = abs(float(final.position[axis]) - target)
    assert rollout.trace is not None, "the non_toppling_push check needs the rollout's trace"
    _, quats = rollout.trace.object_pose(name)
    tilt = tilt_deg(quats)
    upright_end = float(tilt[trailing_window(rollout.trace, 1.0)].max())
    max_tilt = float(tilt.max())
    start = float(rollout.initial.objects[name].position[axis])
    travelled = abs(start - target) - error
    success = (
        error <= params["tolerance"]
        and max_tilt < params["max_tilt_deg"]
        and not robot_touches(rollout, name)
    )
    upright = float(np.clip(1.0 - max_tilt / 90.0, 0.0, 1.0))
    score = upright * progress(error, 0.05)
    return Evaluation(
        bool(success),
        score,
        {
            "error_m": error,
            "max_tilt_deg": max_tilt,
            "tilt_last_1s_deg": upright_end,
            "travelled_m": travelled,
            "robot_touching": robot_touches(rollout, name),
        },
    )
