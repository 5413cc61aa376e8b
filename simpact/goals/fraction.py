"""Goal predicate on a deformable's particles (kinds ``pd`` and ``mpm``): ``particles_in_region``, the
fraction of its particles whose centres lie over a region of the table (a flat marker object's footprint or
an axis-aligned box), as for swept sand or granular matter poured into a tray.

Core types only; metres, top-down unless the region gives z bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simpact.goals.base import Context, GoalError, GoalHint, HintContext, Outcome, outcome, progress, register
from simpact.goals.predicates import _region

__all__ = ["particles_in_region"]


def _hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    low, high = _region(params, ctx)
    centre = [
        float((lo + hi) / 2) if np.isfinite(lo) and np.isfinite(hi) else 0.0 for lo, hi in zip(low, high)
    ]
    return [GoalHint(str(params["object"]), "place", point=(centre[0], centre[1], 0.0))]


@register(
    "particles_in_region",
    required=("object",),
    optional=("region", "min", "max", "tolerance", "fraction", "scale"),
    hints=_hints,
)
def particles_in_region(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """At least ``fraction`` (default 0.7) of the particles of deformable ``object`` lie inside a region at
    the end: a flat marker object's footprint (``region: MARKER``, z unbounded) or an axis-aligned box
    ``min: [x, y(, z)]``, ``max: [...]``, grown by ``tolerance`` m. Score: the fraction's shortfall, 0.5 at
    ``scale`` (default 0.2) short."""
    name = str(params["object"])
    state = ctx.rollout.final.deformables.get(name)
    if state is None:
        raise GoalError(f"goal: particles_in_region: '{name}' is not a deformable object of this rollout")
    points = np.asarray(state.particles, dtype=float)
    low, high = _region(params, ctx)
    inside = np.all((points >= low) & (points <= high), axis=1)
    fraction = float(inside.mean()) if len(points) else 0.0
    need = float(params.get("fraction", 0.7))
    if not 0.0 < need <= 1.0:
        raise GoalError("goal: particles_in_region: 'fraction' must be in (0, 1]")
    scale = float(params.get("scale", 0.2))
    centre = points[:, :2].mean(axis=0) if len(points) else np.zeros(2)
    return outcome(
        fraction >= need - 1e-9,
        progress(need - fraction, scale),
        fraction_inside=fraction,
        inside=int(inside.sum()),
        particles=len(points),
        centre_x=float(centre[0]),
        centre_y=float(centre[1]),
    )
