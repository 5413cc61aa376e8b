"""Goal predicates over articulated parts (scene objects with a ``joint``: a drawer, a sliding door, a
button, a switch): where the part's joint ends, from the rollout's final state.

Units: a slide's joint position in m, a hinge's in rad.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simpact.goals.base import (
    Context,
    GoalError,
    GoalHint,
    HintContext,
    Outcome,
    outcome,
    progress,
    register,
)

__all__ = ["joint_at", "joint_target"]

_MARGIN = 0.2
"""The hint asks for the threshold plus this share of the joint's range beyond it (a part pushed exactly
to a threshold stops short of it half the time)."""


def _joint_params(params: Mapping[str, Any]) -> tuple[str, float]:
    """The condition (``above``, ``below`` or ``moved``) and its value."""
    given = [k for k in ("above", "below", "moved") if k in params]
    if len(given) != 1:
        raise GoalError(f"goal: joint_at needs exactly one of above, below, moved; got {given or 'none'}")
    value = float(params[given[0]])
    if given[0] == "moved" and value == 0.0:
        raise GoalError("goal: joint_at 'moved' must be non-zero (its sign is the direction)")
    return given[0], value


def _scene_joint(ctx: HintContext, name: str) -> tuple[float, float, float]:
    """The part's joint position in the scene and its range (lo, hi)."""
    obj = ctx.object(name)
    if not obj.joint:
        raise GoalError(f"goal: joint_at: object '{name}' has no joint")
    lo, hi = (float(v) for v in obj.joint["range"])
    return float(obj.joint.get("position", lo)), lo, hi


def joint_target(params: Mapping[str, Any], ctx: HintContext) -> float:
    """The joint position a planner should drive the part to: past the condition's threshold by a fifth
    of the range (within the range)."""
    q0, lo, hi = _scene_joint(ctx, params["object"])
    cond, value = _joint_params(params)
    margin = _MARGIN * (hi - lo)
    if cond == "above":
        want = value + margin
    elif cond == "below":
        want = value - margin
    else:
        want = q0 + value + (margin if value > 0 else -margin)
    return float(min(max(want, lo), hi))


def _joint_hints(params: Mapping[str, Any], ctx: HintContext) -> list[GoalHint]:
    return [GoalHint(params["object"], "actuate", joint=joint_target(params, ctx))]


@register("joint_at", required=("object",), optional=("above", "below", "moved", "scale"), hints=_joint_hints)
def joint_at(params: Mapping[str, Any], ctx: Context) -> Outcome:
    """At the end, the articulated part's joint position is above ``above``, below ``below``, or changed
    from its initial value by more than ``moved`` in that value's direction (+ or -) (m for a slide, rad
    for a hinge); exactly one of the three. ``scale``: the shortfall that halves the score (default 0.05)."""
    name = params["object"]
    cond, value = _joint_params(params)
    final = ctx.rollout.final.objects[name].joint
    start = ctx.rollout.initial.objects[name].joint
    if final is None or start is None:
        raise GoalError(f"goal: joint_at: object '{name}' has no joint in the rollout")
    if cond == "above":
        shortfall = value - final
    elif cond == "below":
        shortfall = final - value
    else:
        shortfall = (value - (final - start)) * (1.0 if value > 0 else -1.0)
    ok = shortfall < 0.0
    return outcome(
        ok,
        progress(shortfall, float(params.get("scale", 0.05))),
        joint=float(final),
        joint_start=float(start),
        shortfall=float(shortfall),
    )
