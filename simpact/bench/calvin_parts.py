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
* ``switch``: the lightbulb switch's knob, x 0.24..0.36, y 0.045..0.10, z 0.585..0.628 at q = 0.088;
  joint ``base__switch`` along (0, 0.5, 0.866) (up its slanted slot), 0..0.088.
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

from simpact.core.scene import Scene, SceneObject

__all__ = ["DRAWER_TASKS", "HOUSING", "JOINT_GOALS", "PARTS", "TABLE_BOX", "Part", "fixed_box", "table_parts"]

Box = tuple[tuple[float, float, float], tuple[float, float, float]]


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
        ((0.24, 0.045, 0.585), (0.36, 0.10, 0.628)),
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
"""Subtasks planned with the table open in front (:data:`TABLE_BOX`)."""
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
