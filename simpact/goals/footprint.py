"""Goal predicates on a deformable's top-down footprint (kind ``mpm``): ``footprint_iou``, its occupancy IoU
with a target rectangle on the table, and ``footprint_ratio``, its length over its width.

The footprint hardly depends on the resolution: a 2.5 mm pixel is occupied when a particle lies within 0.71
of the particle spacing (the median nearest-neighbour distance) of its centre, which covers a filled lattice
without holes (a square lattice needs 1/sqrt 2) and reaches about a fifth of a spacing beyond its outer
particles: a 1 cm lattice overstates a 6 cm disc by about 25%, 5 mm and finer ones by at most 10%.
Core types only; metres.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from simpact.goals.base import Context, GoalError, GoalHint, HintContext, Outcome, outcome, progress, register

__all__ = ["footprint_area", "footprint_iou", "footprint_ratio", "occupancy"]

PIXEL = 0.0025
"""Footprint pixel, m."""


def _spacing(xy: np.ndarray) -> float:
    if len(xy) < 2:
        return PIXEL
    distance, _ = cKDTree(xy).query(xy, k=2)
    return float(max(np.median(distance[:, 1]), PIXEL))


def occupancy(points: np.ndarray, lo: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Bool (shape) image of the footprint of ``points`` (N, >= 2; x, y used) on pixels from ``lo`` (x, y)."""
    xy = np.asarray(points, dtype=float)[:, :2]
    centres = (
        lo
        + (np.stack(np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij"), -1) + 0.5) * PIXEL
    )
    spacing = _spacing(np.unique(np.round(xy, 5), axis=0))
    distance, _ = cKDTree(xy).query(centres.reshape(-1, 2), distance_upper_bound=0.71 * spacing)
    return np.isfinite(distance).reshape(shape)


def footprint_area(points: np.ndarray) -> float:
    """Top-down footprint area of ``points``, m^2."""
    xy = np.asarray(points, dtype=float)[:, :2]
    lo = xy.min(axis=0) - 0.02
    shape = tuple(int(v) for v in np.ceil((xy.max(axis=0) + 0.02 - lo) / PIXEL))
    return float(occupancy(xy, lo, shape).sum()) * PIXEL**2  # type: ignore[arg-type]


def _rectangle(params: Mapping[str, Any], ctx: HintContext) -> tuple[np.ndarray, np.ndarray, float]:
    try:
        centre = np.array([ctx.value(v, "footprint_iou centre") for v in params["centre"]], dtype=float)
        size = np.array([ctx.value(v, "footprint_iou size") for v in params["size"]], dtype=float)
    except TypeError:
        raise GoalError("goal: footprint_iou: 'centre' and 'size' must be [x, y] lists") from None
    if centre.shape != (2,) or size.shape != (2,) or not (size > 0).all():
        raise GoalError("goal: footprint_iou: 'centre' is [x, y] and 'size' two positive lengths [sx, sy], m")
    return centre, size, float(ctx.value(params.get("yaw", 0.0), "footprint_iou yaw"))


def _particles(ctx: Context, name: str, predicate: str) -> np.ndarray:
    state = ctx.rollout.final.deformables.get(name)
    if state is None:
        raise GoalError(f"goal: {predicate}: '{name}' is not a deformable object of this rollout")
    return np.asarray(state.particles, dtype=float)


def _hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    """A ``shape`` hint: the footprint's centre (``point``) and its long axis (``angle``, deg from x) when
    the rectangle is longer one way."""
    centre, size, yaw = _rectangle(params, ctx)
    axis = yaw if size[0] >= size[1] else yaw + math.pi / 2
    angle = None if size[0] == size[1] else math.degrees(axis)
    return [GoalHint(params["object"], "shape", point=(float(centre[0]), float(centre[1]), 0.0), angle=angle)]


def _ratio_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    """A ``shape`` hint with the long axis (``angle``, deg from x) when the goal names one."""
    yaw = params.get("yaw")
    angle = None if yaw is None else math.degrees(ctx.value(yaw, "footprint_ratio yaw"))
    return [GoalHint(params["object"], "shape", angle=angle)]


@register("footprint_iou", required=("object", "centre", "size"), optional=("yaw", "min_iou"), hints=_hints)
def footprint_iou(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """The deformable's top-down footprint covers the target rectangle (``centre`` [x, y], full ``size``
    [sx, sy] m, turned by ``yaw`` rad; numbers or expressions) with occupancy IoU at least ``min_iou``
    (default 0.7)."""
    xy = _particles(ctx, params["object"], "footprint_iou")[:, :2]
    centre, size, yaw = _rectangle(params, ctx)
    reach = float(np.hypot(*size)) / 2.0
    lo = np.minimum(xy.min(axis=0), centre - reach) - 0.01
    hi = np.maximum(xy.max(axis=0), centre + reach) + 0.01
    shape = tuple(int(v) for v in np.ceil((hi - lo) / PIXEL))
    mine = occupancy(xy, lo, shape)  # type: ignore[arg-type]
    grid = (
        lo
        + (np.stack(np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij"), -1) + 0.5) * PIXEL
    )
    c, s = math.cos(yaw), math.sin(yaw)
    rel = grid - centre
    local = np.stack([c * rel[..., 0] + s * rel[..., 1], -s * rel[..., 0] + c * rel[..., 1]], -1)
    target = (np.abs(local[..., 0]) <= size[0] / 2) & (np.abs(local[..., 1]) <= size[1] / 2)
    iou = float((mine & target).sum() / max((mine | target).sum(), 1))
    need = float(params.get("min_iou", 0.7))
    return outcome(iou >= need, progress(need - iou, 0.2), iou=iou, min_iou=need)


def _principal(xy: np.ndarray) -> tuple[float, float, float]:
    """Length and width (m) of a footprint along its principal axes, plus one particle spacing, and the
    long axis's direction (rad from x, in (-pi/2, pi/2])."""
    centred = xy - xy.mean(axis=0)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    along = centred @ axes.T
    spacing = _spacing(np.unique(np.round(xy, 5), axis=0))
    length, width = np.ptp(along, axis=0) + spacing
    return float(length), float(width), _axis_angle(math.atan2(axes[0, 1], axes[0, 0]))


def _extent(xy: np.ndarray) -> tuple[float, float]:
    """Length and width (m) of a footprint along its principal axes, plus one particle spacing."""
    length, width, _ = _principal(xy)
    return length, width


def _axis_angle(angle: float) -> float:
    """An axis direction (rad) as the angle in (-pi/2, pi/2] of the same line."""
    return math.pi / 2 - (math.pi / 2 - angle) % math.pi


@register(
    "footprint_ratio",
    required=("object", "ratio"),
    optional=("tolerance", "yaw", "max_yaw_error_deg"),
    hints=_ratio_hints,
)
def footprint_ratio(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """The deformable's footprint is ``ratio`` times as long as it is wide (principal axes, top-down),
    within a relative ``tolerance`` (default 0.15); with ``yaw`` (rad from x, a number or expression), its
    long axis also lies within ``max_yaw_error_deg`` (default 15) of that direction."""
    xy = _particles(ctx, params["object"], "footprint_ratio")[:, :2]
    length, width, axis = _principal(xy)
    want = float(ctx.value(params["ratio"], "footprint_ratio ratio"))
    tol = float(params.get("tolerance", 0.15))
    if not (want > 0 and tol > 0):
        raise GoalError("goal: footprint_ratio: 'ratio' and 'tolerance' must be positive")
    error = abs(length / max(width, 1e-9) / want - 1.0)
    details: dict[str, Any] = {}
    miss = error - tol
    if params.get("yaw") is not None:
        limit = float(params.get("max_yaw_error_deg", 15.0))
        want_axis = ctx.value(params["yaw"], "footprint_ratio yaw")
        yaw_error = abs(math.degrees(_axis_angle(axis - want_axis)))
        details = {"axis_deg": math.degrees(axis), "yaw_error_deg": yaw_error}
        miss = max(miss, (yaw_error - limit) / 100.0)
    return outcome(
        miss <= 0.0,
        progress(miss, 0.3),
        ratio=length / max(width, 1e-9),
        want=want,
        length_m=length,
        width_m=width,
        tolerance=tol,
        **details,
    )
