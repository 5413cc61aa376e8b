"""Which primitives a goal suggests: from the goal's hints and the objects' geometry, the
:class:`~simpact.planner.primitives.Primitive` instances (with their parameter ranges) a tree node tries.

* an object to be placed at a point: ``push`` it there (around an obstacle in the way), and, when it fits
  the hand, ``slide`` it there held if it must stay on the table, else ``pick`` it and place it there;
* an object to be placed on or in another: ``pick`` it and place it there;
* an object the robot starts holding (the scene's ``robot.holding``, at the root only): ``place`` it at
  the goal's point (or on the other object) without grasping it again;
* several objects to be placed at one point: ``sweep`` them there with a tool (a movable, graspable,
  elongated object no goal names);
* an object to stand on its smallest face: ``pivot`` it against the nearest fixed object;
* an object to be lifted: ``hold`` it up; to be toppled: ``topple`` it;
* an object to be turned about the vertical: ``turn`` it in place, held, when it fits the hand;
* a deformable to be shaped into a bar (a footprint goal): ``squeeze`` it along the bar's axis;
* an articulated part's joint to be driven to a position: ``actuate`` it (push it along its slide joint);
* below the root, also ``retreat``.

Ranges are in metres, radians or fractions of the object's size; none is taken from a reference plan or a
skeleton.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simpact.planner.actuate import actuate_primitive
from simpact.planner.primitives import (
    MAX_OPEN,
    MIN_Z,
    Box,
    Primitive,
    hold_builder,
    pick_builder,
    pivot_builder,
    place_builder,
    push_builder,
    retreat,
    slide_builder,
    squeeze_builder,
    sweep_builder,
    topple_builder,
    turn_builder,
)

__all__ = ["primitives_for"]


def _graspable(box: Box) -> bool:
    return not box.fixed and box.collides and box.narrow_axis()[1] <= MAX_OPEN - 0.005


def _tools(boxes: Mapping[str, Box], busy: set[str]) -> list[str]:
    """Movable, graspable, elongated objects no goal names (long side at least three times the narrow)."""
    out = []
    for name, b in boxes.items():
        if name in busy or not _graspable(b):
            continue
        horizontal = sorted(2 * float(b.local[k]) for k in range(3) if abs(b.R[2, k]) < 0.7)
        if len(horizontal) == 2 and horizontal[1] >= 3 * horizontal[0]:
            out.append(name)
    return out


def _supports(boxes: Mapping[str, Box], name: str) -> list[str]:
    """Fixed colliding objects within 25 cm of ``name``, nearest first."""
    c = boxes[name].centre[:2]
    near = [(float(np.linalg.norm(b.centre[:2] - c)), k) for k, b in boxes.items() if b.fixed and b.collides]
    return [k for dist, k in sorted(near) if dist < 0.25]


def primitives_for(
    hints: Sequence[Any], boxes: Mapping[str, Box], depth: int, held: str | None = None
) -> list[Primitive]:
    """The primitives the goal ``hints`` suggest in the state ``boxes``; ``depth`` (0 at the root) adds
    ``retreat`` below the root; ``held``: the object in the hand, which is only set down (``place``)."""
    out: list[Primitive] = []
    names = list(boxes)
    busy = {n for h in hints for n in fnmatch.filter(names, h.object)}
    busy |= {h.onto for h in hints if h.onto}
    on_table = {n for h in hints if h.kind == "on_table" for n in fnmatch.filter(names, h.object)}
    seen: set[str] = set()

    def add(p: Primitive) -> None:
        if p.label not in seen:
            seen.add(p.label)
            out.append(p)

    for h, members in _groups(hints, names):
        if len(members) > 2:
            if h.point is not None:
                for tool in _tools(boxes, busy):
                    add(_sweep_primitive(tool, members, h))
            continue
        for name in members:
            if name == held:
                if h.point is not None and h.kind in ("place", "upright"):
                    add(_place_primitive(name, np.asarray(h.point, dtype=float), h.onto))
                continue
            for p in _single(h, name, boxes[name], boxes, name in on_table):
                add(p)
    if depth > 0:
        add(Primitive("retreat", "gripper", "", (), (), (), retreat))
    return out


def _groups(hints: Sequence[Any], names: Sequence[str]) -> list[tuple[Any, list[str]]]:
    """The hints other than ``keep``, those asking the same (kind, point, onto) of several objects (a glob,
    or one hint per member) merged: each with the objects it names."""
    out: dict[tuple[Any, ...], tuple[Any, list[str]]] = {}
    for h in hints:
        if h.kind in ("keep", "on_table"):
            continue
        point = None if h.point is None else tuple(np.round(h.point, 6))
        key = (h.kind, point, h.onto, h.face, h.height, getattr(h, "angle", None), getattr(h, "joint", None))
        members = fnmatch.filter(names, h.object)
        entry = out.setdefault(key, (h, []))
        entry[1].extend(m for m in members if m not in entry[1])
    return list(out.values())


def _single(h: Any, name: str, box: Box, boxes: Mapping[str, Box], on_table: bool) -> list[Primitive]:
    """Primitives for a hint about one object ``name`` (``on_table``: it must never be lifted)."""
    out = []
    point = None if h.point is None else np.asarray(h.point, dtype=float)
    if h.onto is not None and h.onto in boxes and _graspable(box):
        out.append(_pick_primitive(name, None, h.onto))
    if point is not None and h.kind in ("place", "upright"):
        reach = 0.05
        if _graspable(box) and on_table:  # held, the object is caged: tried before pushing it loose
            out.append(
                Primitive(
                    "slide",
                    name,
                    f"({point[0]:.3f}, {point[1]:.3f})",
                    ("height", "squeeze", "press", "aim_dx", "aim_dy", "side", "route"),
                    (0.2, 0.0, 0.0, -reach, -reach, -1.0, -1.0),
                    (0.9, 0.9, 0.006, reach, reach, 1.0, 1.0),
                    slide_builder(name, point),
                )
            )
        out.append(
            Primitive(
                "push",
                name,
                f"({point[0]:.3f}, {point[1]:.3f})",
                ("aim_dx", "aim_dy", "height", "lateral", "overshoot", "width", "side", "route", "sideways"),
                (-reach, -reach, 0.05, -0.6, -0.02, 0.0, -1.0, -1.0, 0.0),
                (reach, reach, 0.95, 0.6, 0.04, MAX_OPEN, 1.0, 1.0, 1.0),
                push_builder(name, point),
            )
        )
        if _graspable(box) and not on_table:
            out.append(_pick_primitive(name, point, None))
    if h.kind == "standing":
        for support in _supports(boxes, name)[:1]:
            out.append(
                Primitive(
                    "pivot",
                    name,
                    support,
                    ("z0", "lateral", "overshoot", "into", "above", "t_end"),
                    (MIN_Z, -0.03, -0.01, 0.0, 0.0, math.radians(80)),
                    (0.03, 0.03, 0.02, 0.012, 0.012, math.radians(100)),
                    pivot_builder(name, support),
                )
            )
    if h.kind == "lift" and _graspable(box):
        height = 0.1 if h.height is None else float(h.height)
        out.append(
            Primitive(
                "hold",
                name,
                f"+{height:.3f} m",
                ("height", "squeeze", "extra"),
                (0.2, 0.0, 0.0),
                (0.9, 0.9, 0.03),
                hold_builder(name, height),
            )
        )
    if h.kind == "turn" and _graspable(box):
        degrees = float(getattr(h, "angle", None) or 90.0)
        out.append(
            Primitive(
                "turn",
                name,
                f"{degrees:+.0f} deg",
                ("height", "squeeze", "extra_deg", "lift"),
                (0.25, 0.0, 0.0, 0.0),
                (0.9, 0.9, 40.0, 0.01),
                turn_builder(name, degrees),
            )
        )
    if h.kind == "shape":
        out.append(_squeeze_primitive(name, h))
    if h.kind == "actuate" and getattr(h, "joint", None) is not None and box.axis is not None:
        out.append(actuate_primitive(name, float(h.joint)))
    if h.kind == "topple":
        out.append(
            Primitive(
                "topple",
                name,
                "",
                ("angle", "distance", "height", "lateral"),
                (-math.pi, 0.03, 0.55, -0.5),
                (math.pi, 0.15, 1.0, 0.5),
                topple_builder(name),
            )
        )
    return out


def _pick_primitive(name: str, point: np.ndarray | None, onto: str | None) -> Primitive:
    target = onto if onto is not None else f"({point[0]:.3f}, {point[1]:.3f})" if point is not None else ""
    span = 0.03
    return Primitive(
        "pick",
        name,
        target,
        ("height", "squeeze", "lift", "dx", "dy", "release"),
        (0.25, 0.0, 0.01, -span, -span, 0.0),
        (0.9, 0.9, 0.1, span, span, 0.03),
        pick_builder(name, point, onto),
    )


def _place_primitive(name: str, point: np.ndarray, onto: str | None) -> Primitive:
    """Set the held ``name`` down with its centre at ``point`` (m): carried ``lift`` clear of the others,
    up to 2 cm off in x and y, let go 5 mm to 2.5 cm above (set down lower, an error in the held object's
    height presses it and what it lands on into their support)."""
    span = 0.02
    return Primitive(
        "place",
        name,
        onto if onto is not None else f"({point[0]:.3f}, {point[1]:.3f}, {point[2]:.3f})",
        ("lift", "dx", "dy", "release"),
        (0.01, -span, -span, 0.005),
        (0.08, span, span, 0.025),
        place_builder(name, point),
    )


def _squeeze_primitive(name: str, h: Any) -> Primitive:
    """Squeeze ``name`` along the hint's axis (``angle``, deg; 0 without one) at its ``point``: the closing
    width over the gripper's whole useful range, the place up to 1.5 cm either side across the axis."""
    axis = math.radians(h.angle) if h.angle is not None else 0.0
    point = None if h.point is None else np.asarray(h.point, dtype=float)
    return Primitive(
        "squeeze",
        name,
        f"{math.degrees(axis) % 180.0:.0f} deg",
        ("width", "shift"),
        (0.0, -0.015),
        (0.06, 0.015),
        squeeze_builder(name, axis, point),
    )


def _sweep_primitive(tool: str, members: list[str], h: Any) -> Primitive:
    point = np.asarray(h.point, dtype=float)
    return Primitive(
        "sweep",
        members[0] if len(members) == 1 else f"{len(members)} objects like {members[0]}",
        f"({point[0]:.3f}, {point[1]:.3f}) with {tool}",
        ("height", "squeeze", "low", "standoff", "overshoot", "lateral"),
        (0.4, 0.0, 0.002, 0.0, -0.10, -0.03),
        (0.9, 0.8, 0.02, 0.04, 0.04, 0.03),
        sweep_builder(tool, members, point),
    )
