"""Goal predicates on deformable objects' particles (kinds ``pd`` and ``mpm``): ``curve_distance``, the
distance between a rope's centre line and a target curve on the table.

Reads the rollout's :class:`~simpact.core.rollout.DeformableState` (its particles, in order along a rope)
and the trace's particle records; core types only. Metres, seconds, top-down (x, y) distances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simpact.goals.base import Context, GoalError, GoalHint, HintContext, Outcome, outcome, progress, register

__all__ = ["curve_distance", "polyline_distance", "resample"]

_SAMPLES = 200
"""Points a target curve is resampled to, evenly along its length."""


def resample(points: np.ndarray, count: int = _SAMPLES) -> np.ndarray:
    """``count`` points (count, D) evenly spaced along the polyline through ``points`` (M, D)."""
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    t = np.linspace(0.0, s[-1], count)
    return np.stack([np.interp(t, s, points[:, d]) for d in range(points.shape[1])], axis=1)


def polyline_distance(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """Distance (P,) from each of ``points`` (P, D) to the polyline through ``polyline`` (M, D)."""
    a, b = polyline[:-1], polyline[1:]
    ab = b - a
    length2 = np.maximum((ab * ab).sum(axis=1), 1e-18)
    t = np.clip(((points[:, None, :] - a[None]) * ab[None]).sum(axis=2) / length2[None], 0.0, 1.0)
    nearest = a[None] + t[..., None] * ab[None]
    return np.asarray(np.linalg.norm(points[:, None, :] - nearest, axis=2).min(axis=1))


def _curve(params: Mapping[str, Any], ctx: HintContext) -> np.ndarray:
    raw = params["polyline"]
    if not isinstance(raw, Sequence) or len(raw) < 2:
        raise GoalError("goal: curve_distance: 'polyline' must list at least two [x, y] points")
    points = []
    for i, point in enumerate(raw):
        if not isinstance(point, Sequence) or isinstance(point, str) or len(point) != 2:
            raise GoalError(f"goal: curve_distance: polyline point {i} must be [x, y], got {point!r}")
        points.append([ctx.value(v, f"curve_distance polyline point {i}") for v in point])
    return np.array(points, dtype=float)


def _hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    curve = _curve(params, ctx)
    middle = resample(curve, 3)[1]
    return [GoalHint(params["object"], "place", point=(float(middle[0]), float(middle[1]), 0.0))]


def _speed(ctx: Context, name: str, window: float) -> float:
    """Largest particle speed (m/s) over the trace's last ``window`` s (0 without particle records)."""
    trace = ctx.rollout.trace
    if trace is None or trace.particle_time is None or name not in trace.particles:
        return 0.0
    times, records = trace.particle_time, trace.particles[name]
    first = int(np.searchsorted(times, times[-1] - window - 1e-9))
    if first >= len(times) - 1:
        return 0.0
    step = np.linalg.norm(np.diff(records[first:].astype(np.float64), axis=0), axis=2)
    return float((step / np.diff(times[first:])[:, None]).max())


@register(
    "curve_distance",
    required=("object", "polyline", "tolerance"),
    optional=("max_speed", "scale"),
    hints=_hints,
)
def curve_distance(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """A deformable's centre line (its particles, top-down) lies along the target curve ``polyline``
    ([[x, y], ...], numbers or expressions): the larger of the mean distance from its particles to the curve
    and the mean distance from the curve (resampled evenly) to its centre line is at most ``tolerance`` m,
    and it is at rest (no particle faster than ``max_speed`` m/s, default 0.01, over the last 0.1 s)."""
    name = params["object"]
    state = ctx.rollout.final.deformables.get(name)
    if state is None:
        raise GoalError(f"goal: curve_distance: '{name}' is not a deformable object of this rollout")
    line = state.particles[:, :2]
    curve = resample(_curve(params, ctx))
    to_curve = float(polyline_distance(line, curve).mean())
    from_curve = float(polyline_distance(curve, line).mean())
    error = max(to_curve, from_curve)
    tol = float(params["tolerance"])
    max_speed = float(params.get("max_speed", 0.01))
    speed = _speed(ctx, name, 0.1)
    ok = error <= tol and speed <= max_speed
    score = progress(error - tol, float(params.get("scale", 0.03))) * (1.0 if speed <= max_speed else 0.9)
    return outcome(
        ok,
        score,
        mean_distance_m=error,
        rope_to_curve_m=to_curve,
        curve_to_rope_m=from_curve,
        tolerance_m=tol,
        max_speed_mps=speed,
    )
