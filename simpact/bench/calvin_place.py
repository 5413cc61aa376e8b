"""Mode ``simpact-offline``'s subtasks that start with a block in the hand (``place_in_slider``,
``place_in_drawer``, ``stack_block``: each follows a lift in its chain; CALVIN never resets the robot
between subtasks) and those in the drawer's inside (``lift_C_block_drawer``, ``push_into_drawer``).

The scene starts with the robot holding the block (:class:`~simpact.core.scene.RobotStart` ``holding``;
the block the robot alone touches, :func:`held_block`, taken from the simulator: the hand hides it from
the camera), and the goal is CALVIN's check as predicates in the scene frame (:data:`PLACE_GOALS`):

* ``place_in_slider``: the block's centre over the part of the sliding cabinet's plank the door leaves
  open (:func:`~simpact.bench.calvin_parts.slider_openings`), clear of the blocks already there, resting
  on it, and the robot no longer touching it (CALVIN: it touches ``plank_link``, not the robot).
* ``place_in_drawer``: the same over the open drawer's floor, in front of the table's edge (CALVIN: it
  touches ``drawer_link``); the drawer's inside is in that scene as fixed boxes
  (:func:`~simpact.bench.calvin_parts.drawer_boxes`).
* ``stack_block``: the block resting on another (any of those on the table top in front of the cabinet,
  or of all others if none is; CALVIN: a block-to-block contact appears, the blocks slower than 1 m/s
  and 1 rad/s), not touched by the robot.

The planner sets the held block down with its ``place`` primitive (no new grasp).

The drawer's inside (in the scenes of :data:`INSIDE_DRAWER`):

* ``lift_C_block_drawer``: the block's lowest point 6 cm above the drawer's floor, held (CALVIN: it rises
  5 cm from where it was on ``drawer_link``, the robot its only contact).
* ``push_into_drawer``: a block on the table top (any of them) resting on the open drawer's floor in
  front of the table, not touched by the robot at the end (CALVIN: from touching only the table's
  ``base_link`` to touching ``drawer_link``, no robot contact at either time: a pick and place counts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simpact.bench.calvin_parts import (
    DRAWER_INSIDE,
    PLANK,
    TABLE_Z,
    aabb,
    slider_openings,
    to_calvin,
    to_scene,
)
from simpact.core.errors import SimpactError
from simpact.core.scene import Scene, SceneObject

__all__ = ["HAND_START", "INSIDE_DRAWER", "PLACE_GOALS", "held_block"]

_MARGIN = 0.01
"""Room kept between a placed block and a wall or another block, m."""
_REST = (-0.01, 0.015)
"""A placed block's centre below / above where it rests on the surface, m (it rests, not held up)."""
_TABLE_EDGE_Y = -0.182
"""CALVIN's table top's front edge, m: the drawer's floor behind it is under the table."""
_OPEN = 0.12
"""The drawer's joint position from which its inside is reachable from above, m."""
_PAST_EDGE = 0.03
"""How much farther than needed to clear the table's edge a block pushed into the drawer must go, m."""

_COLORS = ("red", "blue", "pink")
HAND_START = ("place_in_slider", "place_in_drawer", "stack_block")
"""Subtasks planned with the robot holding the block it alone touches (another subtask that starts with a
block in the hand, e.g. after a rotation CALVIN's check stopped mid-turn, is planned as before: the
fingers at their opening around it, not squeezing)."""
INSIDE_DRAWER = ("place_in_drawer", "push_into_drawer", *(f"lift_{c}_block_drawer" for c in _COLORS))
"""Subtasks planned with the drawer's inside in the scene."""


def held_block(env: Any) -> str | None:
    """The colour of the block the robot alone touches in ``env`` (rebuild back-end), or ``None``."""
    touching = {body for body, _ in env.snapshot().robot_contacts}
    held = [color for color, uid in env.table.blocks.items() if uid in touching]
    return held[0] if len(held) == 1 and len(touching) == 1 else None


def _held(scene: Scene, task: str) -> SceneObject:
    if scene.robot.holding is None:
        raise SimpactError(f"{task}: the robot holds no block (the lift before it failed)")
    return scene.object(scene.robot.holding)


def _gap(lo: float, hi: float, blocked: list[tuple[float, float]]) -> tuple[float, float]:
    """The widest part of [lo, hi] (m) outside every blocked span."""
    best, at = (lo, lo), lo
    for a, b in sorted(blocked) + [(hi, hi)]:
        if a > at and min(a, hi) - at > best[1] - best[0]:
            best = (at, min(a, hi))
        at = max(at, b)
    return best


def _region(scene: Scene, task: str, block: SceneObject, xs: list[tuple[float, float]],
            ys: tuple[float, float], floor: float) -> list[dict[str, Any]]:  # fmt: skip
    """``block`` set down on a surface at height ``floor`` (scene frame, m), its centre over one
    of the x spans ``xs`` by y span ``ys`` (scene frame, m), clear of the other blocks there, let go."""
    lo, hi = aabb(block)
    half = (hi - lo) / 2
    blocked = []
    for o in scene.objects:
        if o.name.startswith("block_") and o.name != block.name:
            b_lo, b_hi = aabb(o)
            if b_lo[1] < ys[1] and b_hi[1] > ys[0] and b_lo[2] < floor + 0.03:
                blocked.append((float(b_lo[0]) - _MARGIN, float(b_hi[0]) + _MARGIN))
    x0, x1 = max((_gap(a, b, blocked) for a, b in xs), key=lambda g: g[1] - g[0])
    x0, x1 = x0 + half[0] + _MARGIN, x1 - half[0] - _MARGIN
    if x1 < x0:
        raise SimpactError(f"{task}: no room for {block.name} there")
    y0, y1 = ys[0] + half[1] + _MARGIN, ys[1] - half[1] - _MARGIN
    if y1 < y0:
        y0 = y1 = (ys[0] + ys[1]) / 2
    z = floor + half[2]
    box = {"min": [x0, y0, z + _REST[0]], "max": [x1, y1, z + _REST[1]]}
    return [
        {"in_region": {"object": block.name, **{k: [round(float(v), 4) for v in c] for k, c in box.items()}}},
        {"not_touched": {"object": block.name, "during": "end"}},
    ]


def _joint(scene: Scene, part: str, task: str) -> float:
    try:
        return float(scene.object(part).joint["position"])
    except (KeyError, SimpactError):
        raise SimpactError(f"{task}: the {part} is not in the scene") from None


def _place_in_slider(scene: Scene) -> list[dict[str, Any]]:
    q = _joint(scene, "slider", "place_in_slider")
    off = to_scene([0.0, 0.0, 0.0])
    xs = [(a + off[0], b + off[0]) for a, b in slider_openings(q)]
    ys = (PLANK[0][1] + off[1], PLANK[1][1] + off[1])
    held = _held(scene, "place_in_slider")
    return _region(scene, "place_in_slider", held, xs, ys, PLANK[1][2] - TABLE_Z)


def _drawer_inside(scene: Scene, task: str) -> tuple[np.ndarray, np.ndarray]:
    """The open drawer's inside in front of the table's edge, scene frame (low, high corners at its
    floor, m)."""
    q = _joint(scene, "drawer", task)
    if q < _OPEN:
        raise SimpactError(f"{task}: the drawer is closed ({q:.3f} m open)")
    (x0, y0, z0), (x1, y1, _) = DRAWER_INSIDE
    shift = -(q - 0.22)
    return to_scene([x0, y0 + shift, z0]), to_scene([x1, min(y1 + shift, _TABLE_EDGE_Y), z0])


def _place_in_drawer(scene: Scene) -> list[dict[str, Any]]:
    held = _held(scene, "place_in_drawer")
    low, high = _drawer_inside(scene, "place_in_drawer")
    return _region(scene, "place_in_drawer", held, [(low[0], high[0])], (low[1], high[1]), float(low[2]))


def _push_into_drawer(scene: Scene) -> list[dict[str, Any]]:
    low, high = _drawer_inside(scene, "push_into_drawer")
    blocks = [o for o in scene.objects if o.name.startswith("block_") and _on_table_top(o)]
    if not blocks:
        raise SimpactError("push_into_drawer: no block on the table top")
    ys = (float(low[1]), float(high[1]) - _PAST_EDGE)  # a push short of that may leave it on the edge
    span = [(float(low[0]), float(high[0]))], ys
    return [{"any": [_region(scene, "push_into_drawer", b, *span, float(low[2])) for b in blocks]}]


def _lift_from_drawer(color: str, scene: Scene) -> list[dict[str, Any]]:
    floor = to_scene([0.0, 0.0, DRAWER_INSIDE[0][2]])[2]
    return [
        {"lifted": {"object": f"block_{color}", "dz": 0.06, "from_z": round(float(floor), 4), "held": True}}
    ]


def _on_table_top(obj: SceneObject) -> bool:
    """Whether a block rests on CALVIN's table top in front of the cabinet (not in the cabinet, where the
    door may cover it, nor in the drawer)."""
    x, y, z = to_calvin(obj.position)
    return bool(_TABLE_EDGE_Y < y < 0.0 and z < TABLE_Z + 0.05 and abs(x) < 0.44)


def _stack(scene: Scene) -> list[dict[str, Any]]:
    held = _held(scene, "stack_block")
    others = [o for o in scene.objects if o.name.startswith("block_") and o.name != held.name]
    if not others:
        raise SimpactError("stack_block: no other block")
    onto = [o.name for o in others if _on_table_top(o)] or [o.name for o in others]
    return [
        {"any": [{"on_top_of": {"object": held.name, "onto": other}} for other in onto]},
        {"not_touched": {"object": held.name, "during": "end"}},
    ]


PLACE_GOALS: dict[str, Callable[[Scene], list[dict[str, Any]]]] = {
    "place_in_slider": _place_in_slider,
    "place_in_drawer": _place_in_drawer,
    "stack_block": _stack,
    "push_into_drawer": _push_into_drawer,
    **{f"lift_{c}_block_drawer": (lambda s, c=c: _lift_from_drawer(c, s)) for c in _COLORS},  # type: ignore[misc]
}
"""CALVIN subtask → its goal predicates (see the module docstring)."""
