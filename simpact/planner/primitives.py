"""Object-centric motion primitives computed from the scene's geometry, each expanding into symbolic actions.

A primitive names what it acts on (an object, where it should go, a support or a tool) and has a few
continuous parameters, each mapped from [0, 1] onto a range derived from the objects' sizes and poses in
the state the primitive starts from. :meth:`Primitive.actions` turns a parameter vector into the seven
symbolic actions of :mod:`simpact.core.actions`, so its plans execute and are audited like any other.

Primitives (every one but ``hold`` ends by letting go and retreating upward):

* ``push``: push an object from the side opposite an aim point, fingertips at a height, toward the point
  (with the fingers' front, or their side so the hand spans the push's line and clears walls beside it).
* ``pick``: grasp an object (from above, fingers across its narrowest side) and place it at a point or on /
  in another object (its top, or a bowl's inner floor).
* ``place``: set down an object the robot starts holding at a point or on / in another object.
* ``slide``: grasp an object, press it onto the table and slide it to a point (around an object in the way):
  it moves held, so it neither tips nor leaves the table.
* ``hold``: grasp an object and lift it by a height, holding it there.
* ``topple``: push an object high, in any direction, to tip it over.
* ``turn``: grasp an object from above, keep it on the table (or a few mm up) and turn the hand about the
  vertical by the wanted yaw change and a little more, then let go: it turns in place.
* ``pivot``: push an object against a fixed support and turn it up about its far bottom edge, the fingertip
  following the arc of its near edge (extrinsic dexterity: the support is the second hand).
* ``sweep``: grasp an elongated tool and drag it through a group of objects toward a point.
* ``squeeze``: with the ``squeeze_plates`` tool, stand the plates along a deformable's wanted long axis at a
  point, lower their edges to the table, close them to a width, open them and rise: the dough between them
  flows out along them into a bar.
* ``retreat``: open the gripper and rise.
* ``actuate`` (:mod:`simpact.planner.actuate`): push an articulated part along its joint axis.

Units: metres, radians. The tool centre point (TCP) is the fingertip centre; with the fingers' opening axis
across a push, the fingertips' front face is ``FINGER_FRONT`` ahead of the TCP and the palm, 3.7 cm
higher, 3.2 cm ahead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simpact.core.rollout import WorldState
from simpact.core.rotations import quat_to_matrix
from simpact.core.scene import Scene, SceneObject, joint_axis

__all__ = [
    "Box",
    "Context",
    "Hint",
    "Primitive",
    "Tcp",
    "geometry",
    "pick_builder",
    "place_builder",
    "pivot_builder",
    "push_builder",
    "hold_builder",
    "lowest_tcp",
    "retreat",
    "safe_height",
    "squeeze_builder",
    "slide_builder",
    "sweep_builder",
    "topple_builder",
    "turn_builder",
]

FINGER_FRONT = 0.0105
"""Fingertip front face ahead of the TCP along a push with the opening axis across it, m."""
FINGER_SIDE = 0.015
"""Closed fingers' outer side beyond their inner face, along the opening axis (a push with the fingers'
side, the opening axis along the push: the hand then spans the push's line, not across it), m."""
MAX_OPEN = 0.08
"""Widest gripper opening, m."""
MIN_Z = 0.003
"""Lowest TCP height above the table, m."""
PALM_CLEAR = 0.032
"""Lowest TCP height below an object's top when the fingers close around it: the palm, 3.7 cm above the
fingertips, stays 5 mm above the top, m."""
CLEAR = 0.05
"""TCP clearance above the tallest object when travelling, m."""
_MAX_YAW = 2.4
"""Largest tool yaw from home a primitive turns to, rad (the wrist turns +-2.9 rad)."""
_STEP = 0.45
"""Longest single displacement an action is given (actions allow 0.5 m)."""
SQUEEZE_TCP_Z = 0.015
"""TCP height of a squeeze: the ``squeeze_plates`` reach 2 cm below the TCP, so their lower edges stand 5 mm
below the table top (MuJoCo does not collide the plates; the MPM grid's box contact then squeezes the
dough's bottom layer too instead of letting it slip under the plates' lower faces), m."""


@dataclass(frozen=True)
class Hint:
    """What a goal is about (the fields of the goals module's ``GoalHint``): ``object`` (a name or a glob),
    ``kind`` (place, upright, standing, lift, topple, keep, turn, shape, actuate), a ``point`` (x, y, z) or
    ``onto`` another object, a ``face`` (smallest, largest), a ``height`` (m), an ``angle`` (deg, ccw) and
    a ``joint`` position (m or rad)."""

    object: str
    kind: str
    point: tuple[float, float, float] | None = None
    onto: str | None = None
    face: str | None = None
    height: float | None = None
    angle: float | None = None
    joint: float | None = None


@dataclass(frozen=True)
class Box:
    """An object's world-axis-aligned bounds now: ``centre`` (3,), ``half`` extents (3,), its rotation
    ``R`` and local half extents ``local`` (3,) (m); whether it is ``fixed``, ``collides``, its ``shape``."""

    name: str
    shape: str
    centre: np.ndarray
    half: np.ndarray
    R: np.ndarray
    local: np.ndarray
    fixed: bool
    collides: bool
    size: tuple[float, ...]
    joint: float | None = None
    """An articulated part's joint position now (m or rad); None for other objects."""
    axis: np.ndarray | None = None
    """An articulated part's unit joint axis in the world frame; None for other objects."""

    @property
    def top(self) -> float:
        return float(self.centre[2] + self.half[2])

    @property
    def bottom(self) -> float:
        return float(self.centre[2] - self.half[2])

    def extent(self, direction: np.ndarray) -> float:
        """Half extent along a horizontal unit ``direction`` (support of the oriented box), m."""
        d = np.array([direction[0], direction[1], 0.0])
        return float(np.abs(self.R.T @ d) @ self.local)

    def narrow_axis(self) -> tuple[float, float]:
        """The horizontal angle of the object's narrowest horizontal local axis and its full width, m."""
        best = (0.0, math.inf)
        for k in range(3):
            axis = self.R[:, k]
            if abs(axis[2]) > 0.7:
                continue
            width = 2.0 * float(self.local[k])
            if width < best[1]:
                best = (math.atan2(axis[1], axis[0]), width)
        return best if math.isfinite(best[1]) else (0.0, 2.0 * float(self.half[0]))


def _local_half(obj: SceneObject) -> tuple[np.ndarray, np.ndarray]:
    """Local half extents and the local offset of the centre from the body origin, m."""
    s = obj.size
    if obj.shape == "box" or obj.shape == "mesh":
        return np.array(s[:3]) / 2, np.zeros(3)
    if obj.shape == "cylinder":
        return np.array([s[0], s[0], s[1] / 2]), np.zeros(3)
    if obj.shape == "bowl":
        return np.array([s[0], s[0], s[1] / 2]), np.array([0.0, 0.0, s[1] / 2])
    return np.full(3, s[0]), np.zeros(3)


def geometry(scene: Scene, state: WorldState) -> dict[str, Box]:
    """Every object's :class:`Box` in ``state`` (its pose) and ``scene`` (its shape and size)."""
    out = {}
    for obj in scene.objects:
        pose = state.objects.get(obj.name)
        pos = np.asarray(obj.position if pose is None else pose.position, dtype=float)
        quat = np.asarray(obj.quaternion if pose is None else pose.quaternion, dtype=float)
        R = quat_to_matrix(quat)
        local, offset = _local_half(obj)
        half = np.abs(R) @ local
        out[obj.name] = Box(
            obj.name, obj.shape, pos + R @ offset, half, R, local, obj.fixed, obj.collides, obj.size,
            None if pose is None or not obj.joint else pose.joint,
            joint_axis(obj) if obj.joint else None,
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class Tcp:
    """Where the commanded tool is when a primitive starts: ``position`` (3,) m and ``yaw`` (rad, the
    fingers' opening axis from the x axis)."""

    position: tuple[float, float, float]
    yaw: float


class _Path:
    """Accumulates symbolic actions while tracking the commanded TCP position and yaw."""

    def __init__(self, tcp: Tcp, min_z: float = MIN_Z) -> None:
        self.min_z = min_z
        """Lowest TCP height, m (see :func:`lowest_tcp`)."""
        self.p = np.array(tcp.position, dtype=float)
        self.yaw = tcp.yaw
        self.actions: list[dict[str, Any]] = []

    def _add(self, kind: str, reason: str, **params: float) -> None:
        self.actions.append({"type": kind, **{k: float(v) for k, v in params.items()}, "reason": reason})

    def to_z(self, z: float, reason: str) -> None:
        dz = max(float(z), self.min_z) - self.p[2]
        while abs(dz) > 1e-4:
            step = float(np.clip(dz, -_STEP, _STEP))
            self._add("LIFT" if step > 0 else "DESCEND", reason, dz=abs(step))
            self.p[2] += step
            dz -= step

    def _xy(self, kind: str, x: float, y: float, reason: str, dz: float = 0.0) -> None:
        d = np.array([x - self.p[0], y - self.p[1], dz])
        n = max(1, math.ceil(float(np.abs(d).max()) / _STEP))
        if float(np.abs(d).max()) < 1e-4:
            return
        for _ in range(n):
            if kind == "PUSH":
                self._add("PUSH", reason, dx=d[0] / n, dy=d[1] / n)
            else:
                self._add("MOVE", reason, dx=d[0] / n, dy=d[1] / n, dz=d[2] / n)
        self.p += d

    def move_to(self, x: float, y: float, z: float | None = None, reason: str = "move") -> None:
        dz = 0.0 if z is None else max(float(z), self.min_z) - self.p[2]
        self._xy("MOVE", x, y, reason, dz)

    def push_to(self, x: float, y: float, reason: str) -> None:
        self._xy("PUSH", x, y, reason)

    def turn_to(self, yaw: float, reason: str) -> None:
        """Turn the opening axis to ``yaw`` (mod pi, the hand is symmetric): the nearest such angle within
        ``_MAX_YAW`` of the home orientation."""
        options = [yaw + k * math.pi for k in range(-3, 4) if abs(yaw + k * math.pi) <= _MAX_YAW]
        target = min(options, key=lambda a: abs(a - self.yaw))
        d = target - self.yaw
        if abs(d) > 1e-3:
            self._add("ROTATE", reason, dyaw=d)
            self.yaw = target

    def grip(self, width: float, reason: str) -> None:
        self._add("GRASP", reason, d=float(np.clip(width, 0.0, 0.1)))

    def release(self, reason: str) -> None:
        self.actions.append({"type": "RELEASE", "reason": reason})


Builder = Callable[["Context", np.ndarray], _Path]


@dataclass(frozen=True)
class Context:
    """What a primitive is built from: the objects now (``boxes``), the tool (``tcp``), the height to
    travel at (``safe_z``, m)."""

    boxes: Mapping[str, Box]
    tcp: Tcp
    safe_z: float
    start: Mapping[str, Any] | None = None
    """The start pose of the plans built here (``StartPose.to_dict()``)."""
    min_z: float = MIN_Z
    """Lowest TCP height, m (:func:`lowest_tcp`)."""


@dataclass(frozen=True)
class Primitive:
    """One primitive: its ``kind``, what it acts on (``subject``, ``target``), named parameter ranges and
    the builder that turns parameter values into actions."""

    kind: str
    subject: str
    target: str
    names: tuple[str, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    build: Builder

    @property
    def dim(self) -> int:
        return len(self.names)

    @property
    def label(self) -> str:
        return f"{self.kind}({self.subject}{' -> ' + self.target if self.target else ''})"

    def values(self, unit: np.ndarray) -> np.ndarray:
        lo, hi = np.array(self.lows), np.array(self.highs)
        return lo + np.clip(np.asarray(unit, dtype=float), 0.0, 1.0) * (hi - lo)

    def actions(self, context: Context, unit: np.ndarray) -> list[dict[str, Any]]:
        """The symbolic actions for parameters ``unit`` in [0, 1] (one per name)."""
        path = self.build(context, self.values(unit))
        if not path.actions:
            path._add("LIFT", "nothing to do", dz=0.0)
        return path.actions

    def describe(self, unit: np.ndarray) -> dict[str, float]:
        return {n: round(float(v), 4) for n, v in zip(self.names, self.values(unit))}


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v[:2]))
    return np.array([1.0, 0.0]) if n < 1e-9 else np.asarray(v[:2], dtype=float) / n


def _perp(d: np.ndarray) -> np.ndarray:
    return np.array([-d[1], d[0]])


def lowest_tcp(boxes: Mapping[str, Box]) -> float:
    """Lowest TCP height a primitive goes to, m: ``MIN_Z`` above the table plane, or above the lowest top
    of a fixed box below it (e.g. a drawer's floor under a table top that is a box, the plane shrunk)."""
    tops = [b.top for b in boxes.values() if b.fixed and b.collides]
    return MIN_Z + min(0.0, *tops) if tops else MIN_Z


def safe_height(boxes: Mapping[str, Box]) -> float:
    """TCP height clear of every colliding object's top, m."""
    return max((b.top for b in boxes.values() if b.collides), default=0.0) + CLEAR


# --- push and topple ---------------------------------------------------------------------------------------


def push_builder(name: str, goal: np.ndarray) -> Builder:
    def build(ctx: Context, v: np.ndarray) -> _Path:
        aim_x, aim_y, height, lateral, overshoot, width, side, route, sideways = v
        box = ctx.boxes[name]
        along = sideways >= 0.5
        aim = goal[:2] + np.array([aim_x, aim_y])
        path = _Path(ctx.tcp, ctx.min_z)
        path.to_z(max(path.p[2], ctx.safe_z), "rise to travel clear of the objects")
        c = box.centre[:2]
        via = _detour(ctx, box, aim, side, goal[:2])
        if via is None and abs(route) >= 0.5:  # an L-shaped route: along x then y, or y then x
            via = np.array([aim[0], c[1]]) if route > 0 else np.array([c[0], aim[1]])
            if float(np.linalg.norm(via - c)) < 0.01 or float(np.linalg.norm(aim - via)) < 0.01:
                via = None
        if via is not None:
            _push_leg(path, ctx, box, c, via, height, lateral, 0.0, width, along)
            c = via
        _push_leg(path, ctx, box, c, aim, height, lateral, overshoot, width, along)
        return path

    return build


def _detour(ctx: Context, box: Box, aim: np.ndarray, side: float, goal: np.ndarray) -> np.ndarray | None:
    """A point beside the first colliding object that the straight push of ``box`` to ``aim`` would hit
    (its nearest approach less than both half sizes plus 2 cm): clear of it by 3 cm plus up to 4 cm more
    (``|side|``), on the ``side`` (sign) of the push; None when nothing is in the way. An object the box
    would touch (within 5 mm) with its centre on the ``goal`` point (a wall the goal lies against) borders
    the goal and is not in the way."""
    c = box.centre[:2]
    d = _unit(aim - c)
    length = float(np.linalg.norm(aim - c))
    for other in ctx.boxes.values():
        if other.name == box.name or not other.collides or other.top < 0.01:
            continue
        if np.all(np.abs(other.centre[:2] - goal) < other.half[:2] + box.half[:2] + 0.005):
            continue
        rel = other.centre[:2] - c
        along = float(rel @ d)
        if not 0.0 < along < length:
            continue
        gap = abs(float(rel @ _perp(d)))
        reach = box.extent(_perp(d)) + other.extent(_perp(d))
        if gap < reach + 0.02:
            sign = 1.0 if side >= 0 else -1.0
            return c + d * along + _perp(d) * sign * (reach + 0.03 + 0.04 * abs(side))
    return None


def _push_leg(
    path: _Path,
    ctx: Context,
    box: Box,
    c: np.ndarray,
    aim: np.ndarray,
    height: float,
    lateral: float,
    overshoot: float,
    width: float,
    along: bool = False,
) -> None:
    """Fingertips ``height`` (fraction of the object's height) up, ``lateral`` (fraction of its half width)
    aside, push the object's centre from ``c`` to ``aim`` + ``overshoot`` along the push, back off, rise.
    The fingers (``width`` apart) push with their front, the opening axis across the push, or ``along`` it
    with their side (the hand then clears walls beside the push's line)."""
    d = _unit(aim - c)
    n = _perp(d)
    dist = float(np.linalg.norm(aim - c))
    e = box.extent(d)
    front = width / 2 + FINGER_SIDE if along else FINGER_FRONT
    start = c - d * (e + front + 0.03) + n * lateral * box.extent(n)
    z = max(box.bottom + height * 2 * box.half[2], path.min_z + 0.002)
    if along:
        path.turn_to(math.atan2(d[1], d[0]), "fingers along the push, their side pushing")
    else:
        path.turn_to(math.atan2(d[1], d[0]) + math.pi / 2, "fingers across the push")
    path.grip(width, "pusher width")
    path.move_to(start[0], start[1], reason=f"behind {box.name}, opposite the aim")
    path.to_z(z, f"down to the push height on {box.name}")
    end = start + d * (dist + 0.03 + overshoot)
    path.push_to(end[0], end[1], f"push {box.name} toward the aim")
    back = end - d * 0.05
    path.move_to(back[0], back[1], reason="back off")
    path.to_z(ctx.safe_z, "rise clear")


def topple_builder(name: str) -> Builder:
    def build(ctx: Context, v: np.ndarray) -> _Path:
        angle, dist, height, lateral = v
        box = ctx.boxes[name]
        aim = box.centre[:2] + dist * np.array([math.cos(angle), math.sin(angle)])
        path = _Path(ctx.tcp, ctx.min_z)
        path.to_z(max(path.p[2], ctx.safe_z), "rise to travel clear of the objects")
        _push_leg(path, ctx, box, box.centre[:2], aim, height, lateral, 0.0, 0.0)
        return path

    return build


# --- pick and place, hold --------------------------------------------------------------------------------


def _grasp(
    ctx: Context, box: Box, height: float, squeeze: float, path: _Path, yaw: float | None = None
) -> float:
    """Open above ``box``, fingers across its narrowest side (or, for a round object, at ``yaw``), go down
    to ``height`` (fraction of its height; the palm kept above its top), close to ``squeeze`` (fraction of
    its width); returns the TCP's height above the object's bottom, m."""
    angle, width = box.narrow_axis()
    path.to_z(max(path.p[2], ctx.safe_z), "rise to travel clear of the objects")
    path.move_to(box.centre[0], box.centre[1], reason=f"above {box.name}")
    if box.shape in ("box", "mesh"):
        path.turn_to(angle, f"fingers across {box.name}'s narrowest side")
    elif yaw is not None:
        path.turn_to(yaw, f"fingers along the way {box.name} will go")
    path.grip(MAX_OPEN, "open")
    z = max(box.bottom + height * 2 * box.half[2], box.top - PALM_CLEAR, path.min_z + 0.002)
    path.to_z(z, f"fingers around {box.name}")
    path.grip(squeeze * min(width, MAX_OPEN), f"hold {box.name}")
    return z - box.bottom


def _surface(ctx: Context, onto: str | None) -> tuple[float, np.ndarray | None]:
    """Height an object is set down on (the table, another object's top, a bowl's inner floor) and, for
    ``onto``, that object's centre."""
    if onto is None:
        return 0.0, None
    b = ctx.boxes[onto]
    if b.shape == "bowl":
        return b.bottom + float(b.size[2]), b.centre
    return b.top, b.centre


def pick_builder(name: str, goal: np.ndarray | None, onto: str | None) -> Builder:
    def build(ctx: Context, v: np.ndarray) -> _Path:
        height, squeeze, lift, dx, dy, release = v
        box = ctx.boxes[name]
        path = _Path(ctx.tcp, ctx.min_z)
        above = _grasp(ctx, box, height, squeeze, path)
        others = [b.top for k, b in ctx.boxes.items() if k != name and b.collides]
        carry = max(others, default=0.0) + lift + above
        path.to_z(carry, f"lift {box.name} clear of the others")
        surface, centre = _surface(ctx, onto)
        where = centre[:2] if centre is not None else np.asarray(goal, dtype=float)[:2]
        path.move_to(where[0] + dx, where[1] + dy, reason="carry it over the goal")
        path.to_z(surface + release + above, "set it down")
        path.release("let go")
        path.to_z(max(path.p[2] + 0.08, ctx.safe_z), "rise clear")
        return path

    return build


def place_builder(name: str, goal: np.ndarray) -> Builder:
    """Set down ``name``, already in the hand (a scene whose robot starts holding it): rise to carry it
    ``lift`` (m) clear of the others, over ``goal`` (where its centre should end, m) shifted by ``dx``,
    ``dy``, down until its centre is ``release`` above the goal's height, let go, rise."""

    def build(ctx: Context, v: np.ndarray) -> _Path:
        lift, dx, dy, release = v
        box = ctx.boxes[name]
        path = _Path(ctx.tcp, ctx.min_z)
        grip = path.p[2] - box.centre[2]  # the TCP over the held object's centre; it moves with the hand
        others = [b.top for k, b in ctx.boxes.items() if k != name and b.collides]
        carry = max(others, default=0.0) + lift + grip + box.half[2]
        path.to_z(max(carry, path.p[2]), f"carry {name} clear of the others")
        path.move_to(goal[0] + dx, goal[1] + dy, reason="carry it over the goal")
        path.to_z(goal[2] + release + grip, "set it down")
        path.release("let go")
        path.to_z(max(path.p[2] + 0.08, ctx.safe_z), "rise clear")
        return path

    return build


def slide_builder(name: str, goal: np.ndarray) -> Builder:
    def build(ctx: Context, v: np.ndarray) -> _Path:
        height, squeeze, press, aim_x, aim_y, side, route = v
        box = ctx.boxes[name]
        aim = goal[:2] + np.array([aim_x, aim_y])
        c = box.centre[:2]
        via = _detour(ctx, box, aim, side, goal[:2])
        if via is None and abs(route) >= 0.5:
            via = np.array([aim[0], c[1]]) if route > 0 else np.array([c[0], aim[1]])
        legs = ([] if via is None else [via]) + [aim]
        path = _Path(ctx.tcp, ctx.min_z)
        d = _unit(legs[0] - c)
        _grasp(ctx, box, height, squeeze, path, yaw=math.atan2(d[1], d[0]))
        path.to_z(path.p[2] - press, f"press {box.name} onto the table, so it slides rather than lifts")
        for point in legs:  # a finger leads along each leg: the object is caged, not carried by friction
            d = _unit(point - c)
            if box.shape not in ("box", "mesh"):
                path.turn_to(math.atan2(d[1], d[0]), "fingers along the slide")
            hand = path.p[:2] + (point - c)
            path.push_to(hand[0], hand[1], f"slide {box.name} toward the aim")
            c = point
        path.release("let go")
        path.to_z(max(path.p[2] + 0.08, ctx.safe_z), "rise clear")
        return path

    return build


def hold_builder(name: str, height: float) -> Builder:
    def build(ctx: Context, v: np.ndarray) -> _Path:
        grip, squeeze, extra = v
        box = ctx.boxes[name]
        path = _Path(ctx.tcp, ctx.min_z)
        _grasp(ctx, box, grip, squeeze, path)
        path.to_z(path.p[2] + height + extra, f"lift {box.name} and hold it")
        return path

    return build


def turn_builder(name: str, degrees: float) -> Builder:
    """Turn ``name`` about the vertical by ``degrees`` (positive counterclockwise seen from above) plus the
    parameter ``extra`` (deg, in the same sense): grasp it from above, raise it by ``lift`` (m, a few mm:
    0 keeps it pressed on the table), turn the hand, set it down, let go, rise. The grasp's yaw (the hand
    is symmetric under a half turn) is the one that leaves the wrist room for the turn."""

    def build(ctx: Context, v: np.ndarray) -> _Path:
        height, squeeze, extra, lift = v
        box = ctx.boxes[name]
        sign = 1.0 if degrees >= 0 else -1.0
        turn = math.radians(degrees) + sign * math.radians(extra)
        angle, _ = box.narrow_axis()
        path = _Path(ctx.tcp, ctx.min_z)
        options = [angle + k * math.pi for k in range(-3, 4) if abs(angle + k * math.pi) <= _MAX_YAW]
        room = [a for a in options if abs(a + turn) <= _MAX_YAW] or options
        start = min(room, key=lambda a: (abs(a + turn / 2), abs(a - path.yaw)))
        path.to_z(max(path.p[2], ctx.safe_z), "rise to travel clear of the objects")
        path.move_to(box.centre[0], box.centre[1], reason=f"above {box.name}")
        path.turn_to(start, f"fingers across {box.name}, the wrist with room to turn")
        _grasp(ctx, box, height, squeeze, path)
        path.to_z(path.p[2] + lift, f"hold {box.name} on (or just above) the table")
        path._add("ROTATE", f"turn {box.name} about the vertical", dyaw=turn)
        path.yaw += turn
        path.to_z(path.p[2] - lift, f"set {box.name} down")
        path.release("let go")
        path.to_z(max(path.p[2] + 0.08, ctx.safe_z), "rise clear")
        return path

    return build


# --- pivot -------------------------------------------------------------------------------------------------


def pivot_builder(name: str, support: str) -> Builder:
    def build(ctx: Context, v: np.ndarray) -> _Path:
        z0, lateral, overshoot, into, above, t_end = v
        box, wall = ctx.boxes[name], ctx.boxes[support]
        d = _axis_toward(wall.centre - box.centre)
        n = _perp(d)
        length = 2 * box.extent(d)
        thick = 2 * float(box.half[2])
        face = float(wall.centre[:2] @ d) - wall.extent(d)
        near = float(box.centre[:2] @ d) - length / 2
        side = float(box.centre[:2] @ n) + lateral
        path = _Path(ctx.tcp, ctx.min_z)
        path.to_z(max(path.p[2], ctx.safe_z), "rise to travel clear of the objects")
        path.turn_to(math.atan2(d[1], d[0]) + math.pi / 2, "fingers across the push")
        path.grip(0.0, "close the fingers")
        start = d * (near - 0.03) + n * side
        path.move_to(start[0], start[1], reason=f"behind {box.name}'s near end")
        path.to_z(z0, "fingertips low behind it")
        pushed = d * (face - length - 0.0055 + overshoot) + n * side
        path.push_to(pushed[0], pushed[1], f"slide {box.name} against {wall.name}")
        for deg in (15.0, 35.0, 55.0, 72.0, math.degrees(t_end)):
            t = math.radians(deg)
            along = face - thick * math.sin(t) - length * math.cos(t) - FINGER_FRONT + into
            p = d * along + n * side
            path.move_to(p[0], p[1], length * math.sin(t) + above, f"turn it up ({deg:.0f} deg)")
        path.to_z(path.p[2] + 0.03, "off its top edge")
        back = path.p[:2] - d * 0.06
        path.move_to(back[0], back[1], reason="back away")
        path.to_z(path.p[2] + 0.07, "leave it")
        return path

    return build


def _axis_toward(v: np.ndarray) -> np.ndarray:
    """The horizontal world axis (+-x or +-y) closest to ``v``."""
    k = int(np.argmax(np.abs(v[:2])))
    out = np.zeros(2)
    out[k] = 1.0 if v[k] >= 0 else -1.0
    return out


# --- sweep with a tool, retreat --------------------------------------------------------------------------


def sweep_builder(tool: str, items: Sequence[str], goal: np.ndarray) -> Builder:
    def build(ctx: Context, v: np.ndarray) -> _Path:
        height, squeeze, low, standoff, overshoot, lateral = v
        box = ctx.boxes[tool]
        group = [ctx.boxes[k] for k in items]
        centroid = np.mean([b.centre[:2] for b in group], axis=0)
        d = _unit(np.asarray(goal[:2]) - centroid)
        path = _Path(ctx.tcp, ctx.min_z)
        path.to_z(max(path.p[2], box.top + 0.03), f"above {tool}")
        path.move_to(box.centre[0], box.centre[1], reason=f"above {tool}")
        angle, width = box.narrow_axis()
        path.turn_to(angle, f"fingers across {tool}'s narrow side")
        path.grip(min(width + 0.01, MAX_OPEN), f"straddle {tool}")
        above = max(height * 2 * float(box.half[2]), 0.005)
        path.to_z(box.bottom + above, f"fingers around {tool}")
        path.grip(squeeze * width, f"hold {tool}")
        items_top = max(b.top for b in group)
        path.to_z(items_top + 0.01 + above, f"lift {tool} above the objects")
        path.turn_to(math.atan2(d[1], d[0]), f"{tool} across the sweep")
        back = min(float(b.centre[:2] @ d) - b.extent(d) for b in group)
        start = d * (back - standoff - 0.012) + _perp(d) * (float(centroid @ _perp(d)) + lateral)
        path.move_to(start[0], start[1], reason=f"{tool} behind the objects")
        path.to_z(low + above, f"{tool} down to the table")
        end = start + d * (float(np.asarray(goal[:2]) @ d) - float(start @ d) + overshoot)
        path.push_to(end[0], end[1], "sweep toward the goal")
        retreat = end - d * 0.05
        path.move_to(retreat[0], retreat[1], reason="back off")
        path.to_z(path.p[2] + 0.1, "lift the tool away")
        return path

    return build


def squeeze_builder(name: str, axis: float, point: np.ndarray | None) -> Builder:
    """Squeeze ``name`` into a bar along ``axis`` (rad from x) centred ``shift`` (m) across the axis from
    ``point`` (default: the object's centre): the fingers' opening axis across the bar, the plates lowered
    around the object to :data:`SQUEEZE_TCP_Z`, closed to ``width`` (m, the gripper command), opened,
    raised."""

    def build(ctx: Context, v: np.ndarray) -> _Path:
        width, shift = v
        box = ctx.boxes[name]
        across = axis + math.pi / 2
        centre = (box.centre[:2] if point is None else np.asarray(point[:2], dtype=float)) + shift * np.array(
            [math.cos(across), math.sin(across)]
        )
        path = _Path(ctx.tcp, ctx.min_z)
        path.to_z(max(path.p[2], ctx.safe_z + 0.03), "rise so the plates clear the objects")
        path.turn_to(across, f"the plates along the bar {box.name} should become")
        path.move_to(centre[0], centre[1], reason=f"above where {box.name}'s bar should lie")
        path.to_z(SQUEEZE_TCP_Z, f"the plates around {box.name}, their lower edges at the table")
        path.grip(width, f"squeeze {box.name} between the plates")
        path.release("open the plates")
        path.to_z(path.p[2] + 0.06, "rise clear")
        return path

    return build


def retreat(ctx: Context, v: np.ndarray) -> _Path:
    path = _Path(ctx.tcp, ctx.min_z)
    path.release("let go")
    path.to_z(max(path.p[2] + 0.1, ctx.safe_z), "rise clear")
    return path
