"""Sweeping: most of the small pieces end up over the target region."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simpact.checks.common import progress
from simpact.core.rollout import Rollout
from simpact.core.scene import Scene
from simpact.tasks import Evaluation


def check(
    rollout: Rollout, scene: Scene, targets: Mapping[str, float], params: Mapping[str, Any]
) -> Evaluation:
    """Success: at least ``min_fraction`` of the pieces (objects named ``pieces``*) have their centre over
    the region (a box marker) at the end. Score: the mean per-piece progress toward the region."""
    names = [o.name for o in scene.objects if o.name.startswith(params["pieces"])]
    assert names, f"no objects named {params['pieces']}*"
    region = scene.object(params["region"])
    half = np.asarray(region.size[:2]) / 2
    xy = np.array([rollout.final.objects[n].position[:2] for n in names])
    outside = np.linalg.norm(np.maximum(np.abs(xy - np.asarray(region.position[:2])) - half, 0.0), axis=1)
    inside = outside == 0.0
    fraction = float(inside.mean())
    start = np.array([rollout.initial.objects[n].position[:2] for n in names])
    start_outside = np.linalg.norm(
        np.maximum(np.abs(start - np.asarray(region.position[:2])) - half, 0.0), axis=1
    )
    score = float(np.mean([progress(d, 0.03) for d in outside]))
    return Evaluation(
        fraction >= params["min_fraction"],
        score,
        {
            "fraction_inside": fraction,
            "pieces_inside": float(inside.sum()),
            "pieces": float(len(names)),
            "mean_outside_m": float(outside.mean()),
            "max_outside_m": float(outside.max()),
            "start_mean_outside_m": float(start_outside.mean()),
        },
    )
