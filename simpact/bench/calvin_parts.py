"""CALVIN's articulated table in the SIMPACT scene of mode ``simpact-offline``: the slider door's handle, the
LED button, the lightbulb switch's lever (and the drawer's handle bar) as scene objects with slide joints,
and the goals of the subtasks that move them.

Geometry (CALVIN's world frame, m) from the table's collision mesh in the rebuild (ray probes of
``calvin_table_D`` at global scaling 0.8, chain 0's state); the joint axes in the world frame from moving
each joint in PyBullet; the ranges are the URDF's scaled by 0.8; the joint positions are the environment's
now (``scene_obs``). Each part is the piece the hand touches, its box at its current joint position:

* ``slider``: the sliding door's handle, 5 cm wide (x), from 2 cm in front of the door's slanted face to
  its face (y -0.02..0.05), z 0.525..0.61 (above the fixed ``cabinet_front`` box), centred at x = 0.04 - q;
  joint ``base__slide`` along -x, 0..0.28 (the door moves left as it grows). The door's face is the fixed
  ``cabinet_back`` box.
* ``button``: the LED button's cap, 7 x 7 cm, z 0.457..0.487 at q = 0; joint ``base__button`` along -z,
  0..0.02. Its housing (:data:`HOUSING`) is lowered to the cap's bottom.
* ``switch``: the lightbulb switch's knob, x 0.24..0.36, y 0.052..0.10, z 0.585..0.616 at q = 0.088;
  joint ``base__switch`` along (0, 0.5, 0.866) (up its slanted slot), 0..0.088. Its front face is where
  CALVIN's rounded knob meets a fingertip: at q = 0 the mesh's face is at y 0.003..0.017 over z 0.51..0.546
  and its top edge is rounded; with the face 7 mm farther forward and the top 12 mm higher (the box
  probed first), the plans pushed up the slot from a height CALVIN's rounded fingertip slid over or
  never reached (``turn_on_lightbulb`` 0/2 in ``calvin_family``, chains 4 and 9; 2/2 with this box).
* ``drawer``: the drawer's handle bar, x 0.058..0.302, z 0.34..0.381 (below the table top), y from
  -0.262 - q to -0.24 - q, 5.8 cm in front of the drawer's front (which is not in the scene: the bar is
  what the hand pushes, from that gap to open it, from in front to close it); joint ``base__drawer``
  along -y, 0..0.22. Under the table top, it needs the scene's table open in front of CALVIN's table
  (:data:`TABLE_BOX`).

CALVIN's joints are held by 4 N motors (velocity motors acting as friction on the doors and the switch, a
position motor returning the button to 0): here ``frictionloss`` 4 N on each, and no return spring for the
button (it stays pressed in the planner's world, so the goal can judge its end state).

How CALVIN decides the lights (``simpact.calvin.table.PlayTable.step``): the LED toggles on each press of
the button past half its travel (q > 0.01 m after being at or below it); the lightbulb is on while the
switch is past half its travel (q > 0.044 m). ``turn_on_led`` and ``turn_off_led`` are both a press past
0.01; ``turn_on_lightbulb`` / ``turn_off_lightbulb`` put the switch above / below 0.044.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.transform import Rotation

from simpact.core.scene import Scene, SceneObject

__all__ = [
    "DRAWER_INSIDE",
    "DRAWER_TASKS",
    "HOUSING",
    "JOINT_GOALS",
    "PARTS",
    "PLANK",
    "TABLE_BOX",
    "TABLE_Z",
    "aabb",
    "Part",
    "cabinet_boxes",
    "drawer_boxes",
    "fixed_box",
    "slider_openings",
    "table_parts",
    "to_calvin",
    "to_scene",
]

Box = tuple[tuple[float, float, float], tuple[float, float, float]]

TABLE_Z = 0.44
"""CALVIN's table top height, m (the blocks, 0.04 m high, rest with their centres at 0.46)."""
BASE_XY = (-0.34, -0.46)
"""CALVIN's Panda base in x and y, m (scene D, no rotation): the scene frame's origin."""


def to_scene(p: ArrayLike) -> np.ndarray:
    """A CALVIN world point (m) in the scene frame (origin at the Panda base's x, y and the table top)."""
    return np.asarray(p, dtype=float) - np.array([BASE_XY[0], BASE_XY[1], TABLE_Z])


def to_calvin(p: ArrayLike) -> np.ndarray:
    """A scene point (m) in CALVIN's world frame (inverse of :func:`to_scene`)."""
    return np.asarray(p, dtype=float) + np.array([BASE_XY[0], BASE_XY[1], TABLE_Z])


def aabb(obj: SceneObject) -> tuple[np.ndarray, np.ndarray]:
    """A box object's axis-aligned bounds in the scene frame, m."""
    w, x, y, z = obj.quaternion
    half = np.abs(Rotation.from_quat([x, y, z, w]).as_matrix()) @ (np.asarray(obj.size) / 2)
    centre = np.asarray(obj.position, dtype=float)
    return centre - half, centre + half


class Part:
    """One articulated part: its CALVIN joint, world axis, range (m), box at a reference joint position
    ``q_ref`` (CALVIN frame, min and max corners, m), mass (kg)."""

    def __init__(self, joint: str, axis: tuple[float, float, float], span: tuple[float, float], box: Box,
                 q_ref: float, mass: float) -> None:  # fmt: skip
        self.joint, self.axis, self.span, self.box, self.q_ref, self.mass = (
            joint,
            axis,
            span,
            box,
            q_ref,
            mass,
        )

    def corners(self, q: float) -> tuple[np.ndarray, np.ndarray]:
        """The part's box at joint position ``q`` (CALVIN frame, m)."""
        shift = np.asarray(self.axis) * (q - self.q_ref)
        return np.asarray(self.box[0]) + shift, np.asarray(self.box[1]) + shift


PARTS: dict[str, Part] = {
    "slider": Part(
        "base__slide", (-1.0, 0.0, 0.0), (0.0, 0.28), ((-0.025, -0.02, 0.525), (0.025, 0.05, 0.61)), 0.04, 1.0
    ),
    "button": Part(
        "base__button",
        (0.0, 0.0, -1.0),
        (0.0, 0.02),
        ((-0.155, -0.155, 0.457), (-0.085, -0.085, 0.487)),
        0.0,
        0.1,
    ),
    "switch": Part(
        "base__switch",
        (0.0, 0.5, 0.866),
        (0.0, 0.088),
        ((0.24, 0.052, 0.585), (0.36, 0.10, 0.616)),
        0.088,
        0.2,
    ),
    "drawer": Part(
        "base__drawer",
        (0.0, -1.0, 0.0),
        (0.0, 0.22),
        ((0.058, -0.262, 0.34), (0.302, -0.24, 0.381)),
        0.0,
        1.0,
    ),
}
"""Part name in the scene → its joint and geometry (see the module docstring)."""
HOUSING: Box = ((-0.16, -0.16, 0.44), (-0.08, -0.08, 0.457))
"""The button's housing below its cap, CALVIN frame (m)."""
TABLE_BOX: Box = ((-0.44, -0.182, 0.39), (0.44, 0.30, 0.44))
"""CALVIN's table top as a fixed box (CALVIN frame, m) for the scenes of :data:`DRAWER_TASKS`, whose
table plane is shrunk away: the scene's table is centred on the robot base's y and would cover the drawer
under CALVIN's front edge (y = -0.182)."""
DRAWER_TASKS = ("open_drawer", "close_drawer")
"""Subtasks planned with the table open in front (:data:`TABLE_BOX`); so are those that reach into the
drawer, with its inside in the scene (:func:`drawer_boxes`)."""
PLANK: Box = ((-0.364, 0.016, 0.416), (0.164, 0.164, 0.441))
"""The sliding cabinet's shelf (``plank_link``), CALVIN frame (m): its top is level with the table top
(0.44); the half the sliding door does not cover is open from above (:func:`slider_openings`)."""
_DOOR_X = (-0.105, 0.185)
"""The sliding door's x span at joint position 0, m (it moves along -x as the joint grows)."""
_CABINET: dict[str, Box] = {
    "cabinet_front": ((-0.44, 0.0, 0.44), (0.44, 0.08, 0.52)),
    "cabinet_back": ((-0.44, 0.08, 0.44), (0.44, 0.18, 0.65)),
}
"""The sliding cabinet's slanted front in two steps (its top rises from the table at y = 0 to 0.65 m at
y = 0.14), CALVIN frame (m), before the opening over the plank is cut out."""
DRAWER_INSIDE: Box = ((0.004, -0.376, 0.342), (0.356, -0.183, 0.402))
"""The open drawer's inside at joint position 0.22, CALVIN frame (m): floor at z = 0.342, walls' tops at
0.402 (ray probes of ``drawer_link``); it moves along -y with the joint."""
_DRAWER_WALL = 0.025
"""The drawer's walls' and floor's thickness, m."""
_FRICTION = 4.0
"""CALVIN's joint motors' force, N (here the joints' friction)."""


def fixed_box(name: str, lo: np.ndarray, hi: np.ndarray, **fields: Any) -> SceneObject:
    """A fixed box spanning the corners ``lo`` .. ``hi`` (m, scene frame); ``fields``: the rest (friction,
    rgba, mass, joint)."""
    return SceneObject(
        name=name,
        shape="box",
        size=tuple(float(v) for v in hi - lo),
        position=tuple(float(v) for v in (lo + hi) / 2),  # type: ignore[arg-type]
        fixed=True,
        **fields,
    )


def slider_openings(q: float, min_width: float = 0.06) -> list[tuple[float, float]]:
    """The x spans (CALVIN frame, m) of the plank the sliding door leaves open at joint position ``q``
    (m), at least ``min_width`` wide: open from above, a block can be set on the plank there."""
    lo, hi = PLANK[0][0], PLANK[1][0]
    door = (_DOOR_X[0] - q, _DOOR_X[1] - q)
    spans = [(lo, min(hi, door[0])), (max(lo, door[1]), hi)]
    return [(a, b) for a, b in spans if b - a >= min_width]


def cabinet_boxes(q: float) -> dict[str, Box]:
    """The sliding cabinet's front as fixed boxes (CALVIN frame, m) with the plank's opening at the door's
    joint position ``q`` cut out: the boxes left and right of each opening, and above it only the back
    wall behind the plank."""
    cuts = slider_openings(q)
    edges = [(-np.inf, -np.inf)] + cuts + [(np.inf, np.inf)]
    out: dict[str, Box] = {}
    for name, (low, high) in _CABINET.items():
        for k in range(len(edges) - 1):
            x0, x1 = max(low[0], edges[k][1]), min(high[0], edges[k + 1][0])
            if x1 - x0 > 1e-3:
                out[f"{name}_{k}"] = ((x0, low[1], low[2]), (x1, high[1], high[2]))
    for k, (x0, x1) in enumerate(cuts):
        back = _CABINET["cabinet_back"]
        out[f"cabinet_over_plank_{k}"] = ((x0, PLANK[1][1], back[0][2]), (x1, back[1][1], back[1][2]))
    return out


def drawer_boxes(q: float) -> dict[str, Box]:
    """The drawer's floor and four walls as fixed boxes (CALVIN frame, m) at its joint position ``q`` (m):
    a block can be set in it, lifted out or pushed in; the scene is built anew for each subtask, so the
    receptacle stays where the drawer is when the subtask starts."""
    (x0, y0, z0), (x1, y1, z1) = DRAWER_INSIDE
    dy, t = -(q - 0.22), _DRAWER_WALL
    y0, y1 = y0 + dy, y1 + dy
    return {
        "drawer_floor": ((x0 - t, y0 - t, z0 - t), (x1 + t, y1 + t, z0)),
        "drawer_wall_left": ((x0 - t, y0 - t, z0), (x0, y1 + t, z1)),
        "drawer_wall_right": ((x1, y0 - t, z0), (x1 + t, y1 + t, z1)),
        "drawer_wall_front": ((x0, y0 - t, z0), (x1, y0, z1)),
        "drawer_wall_back": ((x0, y1, z0), (x1, y1 + t, z1)),
    }


def table_parts(env: Any, to_scene: Callable[[Any], np.ndarray]) -> list[SceneObject]:
    """The articulated parts at ``env``'s joint positions, in the scene frame (``to_scene`` maps a CALVIN
    point there; both frames have the same axes)."""
    out = []
    for name, part in PARTS.items():
        q = float(np.clip(env.table.joint(part.joint), *part.span))
        low, high = part.corners(q)
        out.append(
            fixed_box(
                name,
                to_scene(low),
                to_scene(high),
                mass=part.mass,
                friction=0.7,
                rgba=(0.3, 0.3, 0.3, 1.0),
                joint={
                    "type": "slide",
                    "axis": list(part.axis),
                    "range": list(part.span),
                    "position": q,
                    "damping": 1.0,
                    "frictionloss": _FRICTION,
                },
            )
        )
    return out


def _moved(name: str, change: float) -> Callable[[Scene], list[dict[str, Any]]]:
    return lambda scene: [{"joint_at": {"object": name, "moved": change}}]


def _past(name: str, side: str, value: float) -> Callable[[Scene], list[dict[str, Any]]]:
    return lambda scene: [{"joint_at": {"object": name, side: value}}]


JOINT_GOALS: dict[str, Callable[[Scene], list[dict[str, Any]]]] = {
    "move_slider_left": _moved("slider", 0.15),
    "move_slider_right": _moved("slider", -0.15),
    "turn_on_led": _past("button", "above", 0.01),
    "turn_off_led": _past("button", "above", 0.01),
    "turn_on_lightbulb": _past("switch", "above", 0.044),
    "turn_off_lightbulb": _past("switch", "below", 0.044),
    "open_drawer": _moved("drawer", 0.12),
    "close_drawer": _moved("drawer", -0.12),
}
"""CALVIN subtask → ``joint_at`` goals with CALVIN's own thresholds: the slider's joint changed by more
than +-0.15 m (left: +); the button pressed past half its travel (0.01 m), which toggles the LED whichever
way; the switch past / short of half its travel (0.044 m), which turns the lightbulb on / off; the
drawer's joint changed by more than +-0.12 m (open: +)."""
