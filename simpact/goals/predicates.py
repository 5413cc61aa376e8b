"""The goal predicates, one function each, registered by name (``simpact.goals.base.register``).

Each reads the rollout through a :class:`Context` and returns an :class:`Outcome` whose score is 1 exactly
when the predicate holds and otherwise falls off with the violation (0.5 at the predicate's ``scale``:
0.05 m for distances, 30 deg for angles unless given). Pose predicates take ``during``: ``end`` (the final
state), ``rollout`` (every step) or seconds (the trailing window); they must hold at every step of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simpact.core.robot_names import is_robot_link
from simpact.core.rotations import quat_conj, quat_mul, quat_rotate
from simpact.goals.base import (
    Context,
    GoalError,
    GoalHint,
    HintContext,
    Outcome,
    during_of,
    outcome,
    progress,
    register,
)
from simpact.goals.geometry import body_axis, half_extents, signed_distance, surface_points, z_range

_AXES = "xyz"


def _tilt(obj_axis: np.ndarray, quats: np.ndarray, either_end: bool) -> np.ndarray:
    """Angle (T,) in degrees between a body axis and the world's vertical."""
    up = quat_rotate(quats, np.tile(obj_axis, (len(quats), 1)))[:, 2]
    if either_end:
        up = np.abs(up)
    return np.degrees(np.arccos(np.clip(up, -1.0, 1.0)))


def _point_hint(ctx: HintContext, name: str, point: dict[int, float]) -> tuple[float, float, float]:
    """The object's scene position with the axes in ``point`` replaced."""
    pos = list(ctx.object(name).position)
    for axis, value in point.items():
        pos[axis] = value
    return (float(pos[0]), float(pos[1]), float(pos[2]))


# --- at -----------------------------------------------------------------------------------------------------
def _at_target(params: Mapping[str, Any], ctx: HintContext, other: np.ndarray | None) -> dict[int, float]:
    axes = {i: params[a] for i, a in enumerate(_AXES) if a in params}
    if not axes:
        raise GoalError("goal: 'at' needs at least one of x, y, z")
    base = np.zeros(3) if other is None else other
    return {i: float(base[i]) + ctx.value(v, f"at.{_AXES[i]}") for i, v in axes.items()}


def _at_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    other = params.get("relative_to")
    base = None if other is None else np.asarray(ctx.object(other).position, dtype=float)
    point = _at_target(params, ctx, base)
    return [GoalHint(params["object"], "place", point=_point_hint(ctx, params["object"], point))]


@register(
    "at",
    required=("object", "tolerance"),
    optional=("x", "y", "z", "relative_to", "during", "scale"),
    hints=_at_hints,
)
def at(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """The object's centre within ``tolerance`` m (Euclidean over the axes given) of a point: ``x``, ``y``,
    ``z`` are numbers or expressions; with ``relative_to: OTHER`` they are offsets from OTHER's position in
    the same state (``x: 0`` lines the object up with OTHER along x)."""
    name, other = params["object"], params.get("relative_to")
    pos, _ = ctx.poses(name, during_of(params, "end"))
    if other is None:
        target = _at_target(params, ctx, None)
        goal = np.tile([target.get(i, 0.0) for i in range(3)], (len(pos), 1))
    else:
        other_pos, _ = ctx.poses(other, during_of(params, "end"))
        target = _at_target(params, ctx, np.zeros(3))
        goal = other_pos + np.array([target.get(i, 0.0) for i in range(3)])
    axes = sorted(target)
    error = np.linalg.norm((pos - goal)[:, axes], axis=1)
    worst = float(error.max())
    tol = float(params["tolerance"])
    scale = float(params.get("scale", 0.05))
    return outcome(worst <= tol, progress(worst - tol, scale), error_m=worst, tolerance_m=tol)


# --- in_region ----------------------------------------------------------------------------------------------
def _region(params: Mapping[str, Any], ctx: HintContext) -> tuple[np.ndarray, np.ndarray]:
    """The region's lower and upper corners (3,) (z unbounded for a marker object or 2-D bounds)."""
    grow = float(params.get("tolerance", 0.0))
    if "region" in params:
        marker = ctx.object(params["region"])
        centre, half = np.asarray(marker.position, float), half_extents(marker)
        low = np.r_[centre[:2] - half[:2] - grow, -np.inf]
        high = np.r_[centre[:2] + half[:2] + grow, np.inf]
        return low, high
    if "min" not in params or "max" not in params:
        raise GoalError("goal: 'in_region' needs 'region: MARKER' or 'min' and 'max' corners")
    low = [ctx.value(v, "in_region.min") for v in params["min"]]
    high = [ctx.value(v, "in_region.max") for v in params["max"]]
    if len(low) not in (2, 3) or len(high) != len(low):
        raise GoalError("goal: 'in_region' min and max must both be [x, y] or [x, y, z]")
    pad = [] if len(low) == 3 else [np.inf]
    return np.r_[low, [-v for v in pad]] - grow, np.r_[high, pad] + grow


def _in_region_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    low, high = _region(params, ctx)
    bounded = [i for i in range(3) if np.isfinite(low[i]) and np.isfinite(high[i])]
    centre = {i: float((low[i] + high[i]) / 2) for i in bounded}
    return [GoalHint(n, "place", point=_point_hint(ctx, n, centre)) for n in ctx.expand(params["object"])]


@register(
    "in_region",
    required=("object",),
    optional=("region", "min", "max", "tolerance", "fraction", "during", "scale"),
    hints=_in_region_hints,
)
def in_region(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """At least ``fraction`` (default 1) of the objects matching ``object`` (a name or a glob) have their
    centre inside a region: a flat marker object's footprint (``region: MARKER``) or an axis-aligned box
    ``min: [x, y(, z)]``, ``max: [...]``, grown by ``tolerance`` m. Score: the mean per-object progress,
    over the fraction needed."""
    names = ctx.expand(params["object"])
    low, high = _region(params, ctx)
    during = during_of(params, "end")
    outside = []
    for name in names:
        pos, _ = ctx.poses(name, during)
        beyond = np.maximum(np.maximum(low - pos, pos - high), 0.0)
        outside.append(float(np.linalg.norm(beyond, axis=1).max()))
    out = np.asarray(outside)
    fraction = float(np.mean(out == 0.0))
    need = float(params.get("fraction", 1.0))
    scale = float(params.get("scale", 0.05))
    mean_progress = float(np.mean([progress(d, scale) for d in out]))
    return outcome(
        fraction >= need - 1e-9,
        mean_progress / max(need, 1e-9),
        fraction_inside=fraction,
        inside=int((out == 0.0).sum()),
        objects=len(names),
        max_outside_m=float(out.max()),
    )


# --- upright / tilt_below / standing_on ---------------------------------------------------------------------
def _tilt_outcome(angle: np.ndarray, max_deg: float, scale: float) -> Outcome:
    worst = float(angle.max())
    return outcome(
        worst <= max_deg,
        progress(worst - max_deg, scale),
        tilt_deg=worst,
        max_deg=max_deg,
        tilt_final_deg=float(angle[-1]),
    )


def _tilt_angles(params: Mapping[str, Any], ctx: Context, axis: str, either_end: bool) -> np.ndarray:
    name = params["object"]
    obj = ctx.object(name)
    _, quats = ctx.poses(name, during_of(params, "end"))
    if axis in ("longest", "shortest"):  # a tie (a cube) accepts any of the tied axes
        half = half_extents(obj)
        pick = half.max() if axis == "longest" else half.min()
        tied = [np.eye(3)[i] for i in range(3) if abs(half[i] - pick) < 1e-9]
        return np.min([_tilt(a, quats, True) for a in tied], axis=0)
    return _tilt(body_axis(obj, axis), quats, either_end)


def _tilt_params(params: Mapping[str, Any]) -> tuple[str, bool]:
    axis = str(params.get("axis", "z"))
    if axis not in ("x", "y", "z", "longest", "shortest"):
        raise GoalError(f"goal: 'axis' must be x, y, z, longest or shortest, got {axis!r}")
    return axis, bool(params.get("either_end", axis in ("longest", "shortest")))


def _upright_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    return [GoalHint(params["object"], "upright")]


@register(
    "tilt_below",
    required=("object", "max_deg"),
    optional=("axis", "either_end", "during", "scale"),
    hints=_upright_hints,
)
def tilt_below(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """A body axis (``axis``: x, y, z (default), longest or shortest) within ``max_deg`` of the vertical,
    about any horizontal axis; ``either_end: true`` lets it point up or down."""
    axis, either = _tilt_params(params)
    angle = _tilt_angles(params, ctx, axis, either)
    return _tilt_outcome(angle, float(params["max_deg"]), float(params.get("scale", 30.0)))


@register(
    "upright",
    required=("object",),
    optional=("max_deg", "axis", "either_end", "during", "scale"),
    hints=_upright_hints,
)
def upright(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """``tilt_below`` with ``max_deg`` 15 by default: the object's z axis (as placed) stays near vertical."""
    return tilt_below({"max_deg": 15.0, **params}, ctx)


def _standing_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    face = params.get("face", "smallest")
    return [GoalHint(params["object"], "standing" if face == "smallest" else "topple", face=face)]


@register(
    "standing_on", required=("object", "face"), optional=("max_deg", "during", "scale"), hints=_standing_hints
)
def standing_on(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """The object rests on one of its ``smallest`` or ``largest`` faces: the axis normal to that face
    (the longest, resp. shortest, of its bounding box) within ``max_deg`` (default 20) of the vertical."""
    face = params["face"]
    if face not in ("smallest", "largest"):
        raise GoalError(f"goal: standing_on 'face' must be smallest or largest, got {face!r}")
    axis = "longest" if face == "smallest" else "shortest"
    angle = _tilt_angles(params, ctx, axis, True)
    return _tilt_outcome(angle, float(params.get("max_deg", 20.0)), float(params.get("scale", 30.0)))


# --- on_top_of / nested_in ----------------------------------------------------------------------------------
def _footprint_outside(ctx: Context, name: str, base: str, pos: np.ndarray, margin: float) -> float:
    """How far (m) ``pos``'s xy lies outside ``base``'s footprint in its final pose, shrunk by margin."""
    obj = ctx.object(base)
    state = ctx.rollout.final.objects[base]
    local = quat_rotate(quat_conj(state.quaternion)[None], (pos - state.position)[None])[0]
    half = half_extents(obj)
    if obj.shape in ("cylinder", "bowl", "sphere"):
        return max(float(np.linalg.norm(local[:2])) - (half[0] - margin), 0.0)
    return float(np.linalg.norm(np.maximum(np.abs(local[:2]) - (half[:2] - margin), 0.0)))


def _onto_hints(kind: str) -> Any:
    def hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
        name, onto = params["object"], params["onto"]
        base, obj = ctx.object(onto), ctx.object(name)
        top = float(base.position[2]) + (base.size[1] if base.shape == "bowl" else half_extents(base)[2])
        if kind == "nested_in":
            floor = float(base.position[2]) + (base.size[2] if base.shape == "bowl" else 0.0)
            bottom = floor if base.shape == "bowl" else top - 2 * half_extents(base)[2]
        else:
            bottom = top
        lift = 0.0 if obj.shape == "bowl" else half_extents(obj)[2]
        point = (float(base.position[0]), float(base.position[1]), bottom + lift)
        return [GoalHint(name, "place", point=point, onto=onto)]

    return hints


@register(
    "on_top_of",
    required=("object", "onto"),
    optional=("max_gap", "margin", "scale"),
    hints=_onto_hints("on_top_of"),
)
def on_top_of(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """At the end, the object rests on ``onto``: its lowest point within ``max_gap`` (default 0.01 m) of
    onto's highest, and its centre over onto's footprint, at least ``margin`` (default 0) m inside."""
    name, onto = params["object"], params["onto"]
    pos, quat = ctx.poses(name, "end")
    base_pos, base_quat = ctx.poses(onto, "end")
    low, _ = z_range(ctx.object(name), pos, quat)
    _, top = z_range(ctx.object(onto), base_pos, base_quat)
    gap = float(low[0] - top[0])
    outside = _footprint_outside(ctx, name, onto, pos[0], float(params.get("margin", 0.0)))
    max_gap = float(params.get("max_gap", 0.01))
    violation = outside + max(abs(gap) - max_gap, 0.0)
    return outcome(
        violation == 0.0,
        progress(violation, float(params.get("scale", 0.05))),
        gap_m=gap,
        outside_footprint_m=outside,
    )


@register(
    "nested_in", required=("object", "onto"), optional=("max_xy", "scale"), hints=_onto_hints("nested_in")
)
def nested_in(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """At the end, the object sits inside ``onto`` (a bowl, cylinder or box opening up): centres within
    ``max_xy`` m in the plane (default: onto's inner half-width less the object's), the object's lowest point
    above onto's floor (a bowl's wall thickness above its base) and below onto's rim."""
    name, onto = params["object"], params["onto"]
    obj, base = ctx.object(name), ctx.object(onto)
    pos, quat = ctx.poses(name, "end")
    base_pos, base_quat = ctx.poses(onto, "end")
    low, _ = z_range(obj, pos, quat)
    base_low, base_top = z_range(base, base_pos, base_quat)
    wall = float(base.size[2]) if base.shape == "bowl" else 0.0
    xy = float(np.linalg.norm(pos[0, :2] - base_pos[0, :2]))
    default_xy = max(half_extents(base)[0] - wall - half_extents(obj)[0], 0.005)
    max_xy = float(params.get("max_xy", default_xy))
    floor = float(base_low[0]) + 0.5 * wall
    height = float(low[0]) - float(base_low[0])
    violation = (
        max(xy - max_xy, 0.0) + max(floor - float(low[0]), 0.0) + max(float(low[0] - base_top[0]), 0.0)
    )
    return outcome(
        violation == 0.0,
        progress(violation, float(params.get("scale", 0.05))),
        xy_error_m=xy,
        max_xy_m=max_xy,
        foot_above_base_m=height,
    )


# --- lifted / stays_on_table --------------------------------------------------------------------------------
def _robot_holds(ctx: Context, name: str) -> bool:
    return any(
        (a == name and is_robot_link(b)) or (b == name and is_robot_link(a))
        for a, b in ctx.rollout.final_contacts
    )


def _lift_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    return [GoalHint(params["object"], "lift", height=float(params["dz"]))]


@register(
    "lifted", required=("object", "dz"), optional=("held", "from_z", "during", "scale"), hints=_lift_hints
)
def lifted(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """The object's lowest point at least ``dz`` m above the table (over ``during``, default the end), or
    above the height ``from_z`` (m; e.g. a drawer's floor below the table plane); ``held``: true (a robot
    link must touch it at the end), false (none may) or omitted (either)."""
    name = params["object"]
    pos, quat = ctx.poses(name, during_of(params, "end"))
    low, _ = z_range(ctx.object(name), pos, quat)
    dz = float(params["dz"]) + float(params.get("from_z", 0.0))
    worst = float(low.min())
    held = _robot_holds(ctx, name)
    want = params.get("held")
    held_ok = want is None or bool(want) == held
    score = progress(dz - worst, float(params.get("scale", 0.05))) * (1.0 if held_ok else 0.5)
    return outcome(worst >= dz and held_ok, score, lowest_m=worst, dz_m=dz, held=held)


def _keep_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    return [GoalHint(n, "keep") for n in ctx.expand(params["object"])]


def _on_table_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    return [GoalHint(n, "on_table") for n in ctx.expand(params["object"])]


@register(
    "stays_on_table",
    required=("object",),
    optional=("max_lift", "during", "scale"),
    hints=_on_table_hints,
    during="rollout",
)
def stays_on_table(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """The object is never lifted: its lowest point stays within ``max_lift`` (default 0.01) m of where it
    started (over ``during``, default the whole rollout) and its centre ends over the table top."""
    worst_lift, worst_off = 0.0, 0.0
    names = ctx.expand(params["object"])
    sx, sy = ctx.scene.table_size
    for name in names:
        obj = ctx.object(name)
        pos, quat = ctx.poses(name, during_of(params, "rollout"))
        low, _ = z_range(obj, pos, quat)
        start_low, _ = z_range(obj, *ctx.initial_pose(name))
        worst_lift = max(worst_lift, float(low.max() - start_low[0]))
        end = ctx.rollout.final.objects[name].position
        off = np.maximum(np.abs(end[:2] - np.array([-0.3 + sx / 2, 0.0])) - np.array([sx, sy]) / 2, 0.0)
        worst_off = max(worst_off, float(np.linalg.norm(off)), float(max(-low[-1] - 0.01, 0.0)))
    max_lift = float(params.get("max_lift", 0.01))
    violation = max(worst_lift - max_lift, 0.0) + worst_off
    return outcome(
        violation == 0.0,
        progress(violation, float(params.get("scale", 0.05))),
        max_lift_m=worst_lift,
        off_table_m=worst_off,
    )


# --- not_moved / not_touched / at_rest ----------------------------------------------------------------------
def _motion(ctx: Context, name: str, during: Any) -> tuple[float, float]:
    """Largest displacement (m) and rotation (deg) of ``name`` from its initial pose over ``during``."""
    pos, quat = ctx.poses(name, during)
    p0, q0 = ctx.initial_pose(name)
    moved = float(np.linalg.norm(pos - p0, axis=1).max())
    rel = quat_mul(np.tile(quat_conj(q0), (len(quat), 1)), quat)
    turned = float(np.degrees(2 * np.arccos(np.clip(np.abs(rel[:, 0]), 0.0, 1.0))).max())
    return moved, turned


@register(
    "not_moved",
    required=("object",),
    optional=("tolerance", "max_deg", "during", "scale"),
    hints=_keep_hints,
    during="rollout",
)
def not_moved(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """Every object matching ``object`` stays within ``tolerance`` (default 0.01) m of its start (and, with
    ``max_deg``, within that rotation) over ``during`` (default the whole rollout)."""
    tol = float(params.get("tolerance", 0.01))
    max_deg = float(params.get("max_deg", np.inf))
    moved, turned = 0.0, 0.0
    for name in ctx.expand(params["object"]):
        m, t = _motion(ctx, name, during_of(params, "rollout"))
        moved, turned = max(moved, m), max(turned, t)
    violation = max(moved - tol, 0.0) + (0.0 if np.isinf(max_deg) else max(turned - max_deg, 0.0) / 600.0)
    return outcome(
        violation == 0.0,
        progress(violation, float(params.get("scale", 0.02))),
        moved_m=moved,
        turned_deg=turned,
    )


_STILL_M, _STILL_DEG, _TCP_REACH = 0.002, 2.0, 0.005
"""Robot touches seen without per-step contacts: the object displaced by more than 2 mm or turned by more
than 2 deg, or the tool centre point within 5 mm of its solid."""


def _robot_touch(ctx: Context, name: str, during: Any) -> tuple[bool, float, dict[str, Any]]:
    """Whether the robot touched ``name`` over ``during`` and by how much (m), with the evidence."""
    held = _robot_holds(ctx, name)
    if during == "end":
        return held, 0.01 if held else 0.0, {"robot_contact_at_end": held}
    moved, turned = _motion(ctx, name, during)
    near = np.inf
    trace = ctx.rollout.trace
    if trace is not None:
        pos, quat = ctx.poses(name, during)
        tcp = np.asarray(trace.tcp_position, float)[-len(pos) :]
        near = float(signed_distance(ctx.object(name), pos, quat, tcp[:, None, :]).min())
    disturbed = moved > _STILL_M or turned > _STILL_DEG
    touched = held or disturbed or near < _TCP_REACH
    amount = max(moved - _STILL_M, 0.0) + max(_TCP_REACH - near, 0.0) + (0.01 if held else 0.0)
    return (
        touched,
        amount,
        {"robot_contact_at_end": held, "moved_m": moved, "turned_deg": turned, "tcp_clearance_m": near},
    )


def _clearance(ctx: Context, a: str, b: str, during: Any) -> float:
    """Smallest distance (m) between objects ``a`` and ``b`` over ``during``, from sampled surface points of
    each against the other's solid (negative: they overlap)."""
    pa, qa = ctx.poses(a, during)
    pb, qb = ctx.poses(b, during)
    step = max(len(pa) // 2000, 1)  # at most ~2000 instants; a 2 ms step leaves no touch unseen at 4 ms
    pa, qa, pb, qb = pa[::step], qa[::step], pb[::step], qb[::step]
    oa, ob = ctx.object(a), ctx.object(b)
    d1 = signed_distance(ob, pb, qb, surface_points(oa, pa, qa)).min()
    d2 = signed_distance(oa, pa, qa, surface_points(ob, pb, qb)).min()
    return float(min(d1, d2))


@register(
    "not_touched",
    required=("object",),
    optional=("by", "margin", "during", "scale"),
    hints=_keep_hints,
    during="rollout",
)
def not_touched(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """Nothing named in ``by`` touches ``object`` over ``during`` (default the whole rollout). ``by``:
    ``robot`` (default), an object name or glob, or a list of them. Objects: their shapes come no closer than
    ``margin`` (default 0.001) m at any step of the trace. The robot: a contact at the end, or (the trace
    holds no per-step contacts) the object displaced > 2 mm or turned > 2 deg, or the tool centre point
    within 5 mm of it, at any step."""
    by = params.get("by", "robot")
    by = [by] if isinstance(by, str) else list(by)
    during = during_of(params, "rollout")
    margin = float(params.get("margin", 0.001))
    touched, amount, details = False, 0.0, {}
    for name in ctx.expand(params["object"]):
        for who in by:
            if who == "robot":
                hit, much, info = _robot_touch(ctx, name, during)
                details.update({f"{name}.{k}": v for k, v in info.items()})
            else:
                hit, much = False, 0.0
                for other in ctx.expand(who):
                    gap = _clearance(ctx, name, other, during)
                    details[f"{name}.clearance_to_{other}_m"] = gap
                    hit, much = hit or gap < margin, max(much, margin - gap)
            touched, amount = touched or hit, max(amount, much)
    return outcome(
        not touched, progress(amount, float(params.get("scale", 0.01))), touched=touched, **details
    )


@register("at_rest", required=("object",), optional=("max_speed", "max_angular", "scale"), hints=None)
def at_rest(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """At the end, every object matching ``object`` moves slower than ``max_speed`` (default 0.01 m/s) and
    turns slower than ``max_angular`` (default 0.2 rad/s)."""
    speed, spin = 0.0, 0.0
    for name in ctx.expand(params["object"]):
        state = ctx.rollout.final.objects[name]
        speed = max(speed, float(np.linalg.norm(state.linear_velocity)))
        spin = max(spin, float(np.linalg.norm(state.angular_velocity)))
    max_speed, max_spin = float(params.get("max_speed", 0.01)), float(params.get("max_angular", 0.2))
    violation = max(speed - max_speed, 0.0) + 0.05 * max(spin - max_spin, 0.0)
    return outcome(
        violation == 0.0,
        progress(violation, float(params.get("scale", 0.05))),
        speed_m_s=speed,
        angular_rad_s=spin,
    )


# --- turned -------------------------------------------------------------------------------------------------
_DIRECTIONS = {"ccw": 1.0, "cw": -1.0, "any": 0.0}


def _turn_params(params: Mapping[str, Any]) -> tuple[float, float]:
    """``min_deg`` and the direction's sign (+1 ccw, -1 cw, 0 any)."""
    direction = str(params.get("direction", "any"))
    if direction not in _DIRECTIONS:
        raise GoalError(f"goal: turned 'direction' must be ccw, cw or any, got {direction!r}")
    min_deg = float(params["min_deg"])
    if not 0.0 < min_deg < 180.0:
        raise GoalError(f"goal: turned 'min_deg' must be in (0, 180), got {min_deg}")
    return min_deg, _DIRECTIONS[direction]


def _turned_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    min_deg, sign = _turn_params(params)
    angle = (sign or 1.0) * min_deg
    return [GoalHint(n, "turn", angle=angle) for n in ctx.expand(params["object"])]


@register(
    "turned",
    required=("object", "min_deg"),
    optional=("direction", "max_tilt_deg", "max_move", "scale"),
    hints=_turned_hints,
)
def turned(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """At the end, the object's yaw about the world's vertical has changed from its initial pose by at least
    ``min_deg`` (in (0, 180)) in ``direction``: ``ccw`` (positive about +z, seen from above), ``cw`` or
    ``any`` (default). The yaw is that of the rotation from the initial to the final pose, in (-180, 180]
    (CALVIN's rotate check: its Euler z); with ``max_tilt_deg``, that rotation also tips the vertical by at
    most that much, and with ``max_move`` the centre ends within that many m of its start."""
    name = params["object"]
    min_deg, sign = _turn_params(params)
    _, quat = ctx.poses(name, "end")
    p0, q0 = ctx.initial_pose(name)
    rel = quat_mul(quat[-1], quat_conj(q0))
    x_axis = quat_rotate(rel[None], np.array([[1.0, 0.0, 0.0]]))[0]
    z_axis = quat_rotate(rel[None], np.array([[0.0, 0.0, 1.0]]))[0]
    yaw = float(np.degrees(np.arctan2(x_axis[1], x_axis[0])))
    tilt = float(np.degrees(np.arccos(np.clip(z_axis[2], -1.0, 1.0))))
    moved = float(np.linalg.norm(ctx.rollout.final.objects[name].position - p0))
    along = abs(yaw) if sign == 0.0 else sign * yaw
    scale = float(params.get("scale", 30.0))
    violation = max(min_deg - along - 1e-9, 0.0)  # a turn by exactly min_deg holds despite rounding
    max_tilt = params.get("max_tilt_deg")
    if max_tilt is not None:
        violation += max(tilt - float(max_tilt), 0.0)
    max_move = params.get("max_move")
    if max_move is not None:
        violation += max(moved - float(max_move), 0.0) * scale / 0.05  # 5 cm count as much as the scale
    return outcome(
        violation == 0.0,
        progress(violation, scale),
        yaw_deg=yaw,
        min_deg=min_deg,
        tilt_deg=tilt,
        moved_m=moved,
    )
