"""Executing a SIMPACT plan in CALVIN (mode ``simpact-offline``, :mod:`simpact.bench.calvin_simpact`): the
plan's symbolic actions as absolute end-effector targets in CALVIN's frame, stepped through its absolute
action interface (its IK, 30 Hz) by the scripted :class:`~simpact.calvin.scripted.Mover`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simpact.calvin.scripted import Mover
from simpact.core.errors import SimpactError

__all__ = ["TILT", "execute", "untilt"]

_HOLD_GRIP = 12
"""Control steps to wait after opening or closing the gripper."""
_GRIP_OPEN = 0.06
"""A GRASP width at or above this opens CALVIN's (binary) gripper, below it closes it, m."""
_TRAVEL = 0.1
"""A displacement longer than this is a travel the robot catches up with, m."""
_CAUGHT_UP = 0.01
"""The tool centre point is at its target within this, m."""
_CATCH_UP = 15
"""Control steps at most to wait for it."""
_UNTILT = (0.0, -0.10, 0.0)
"""How far a hand left tilted moves back toward the robot as it turns to point down again, m."""


def execute(env: Any, actions: Sequence[Mapping[str, Any]], tilt: float = 0.0) -> Mover:
    """Step ``env`` through ``actions`` (symbolic, SIMPACT's vocabulary) from the current TCP pose: each
    becomes an absolute end-effector target in CALVIN's frame (displacements are the same in both frames,
    whose axes are parallel), reached in straight lines at the Mover's speed; GRASP below
    ``_GRIP_OPEN`` closes CALVIN's binary gripper, at or above it (and RELEASE) opens it. After a travel
    (a displacement over ``_TRAVEL``) the robot catches up with its target (:func:`_catch_up`). ``tilt``:
    the hand's roll away from pointing down (rad; CALVIN's TCP stays where the plan puts it), see
    :data:`TILT`."""
    m = Mover(env)
    m.roll -= tilt
    for a in actions:
        kind = str(a["type"]).upper()
        if kind in ("MOVE", "PUSH", "LIFT", "DESCEND"):
            if kind in ("MOVE", "PUSH"):
                dz = float(a.get("dz", 0.0)) if kind == "MOVE" else 0.0
                delta = [float(a.get("dx", 0.0)), float(a.get("dy", 0.0)), dz]
            else:
                delta = [0.0, 0.0, float(a["dz"]) * (1.0 if kind == "LIFT" else -1.0)]
            m.by(delta, hold=0)
            if float(np.linalg.norm(delta)) > _TRAVEL:
                _catch_up(env, m)
        elif kind == "ROTATE":
            m.by([0.0, 0.0, 0.0], yaw=m.yaw + float(a["dyaw"]), hold=0)
        elif kind == "GRASP":
            m.gripper(1 if float(a["d"]) >= _GRIP_OPEN else -1, _HOLD_GRIP)
        elif kind == "RELEASE":
            m.gripper(1, _HOLD_GRIP)
        else:
            raise SimpactError(f"unknown action type {kind!r}")
    return m


def untilt(env: Any) -> None:
    """A hand left tilted (CALVIN's check stopped a tilted execution, :data:`TILT`) points down again,
    ``_UNTILT`` back toward the robot: the scene of the next subtask starts SIMPACT's FR3 at this pose, and
    the tilted one lies up to 6 mm beyond its reach with the hand pointing down."""
    _, euler = env.robot.tcp_pose()
    off_down = abs((float(euler[0]) % (2 * math.pi)) - math.pi) + abs(float(euler[1]))
    if off_down > 0.1:
        m = Mover(env)
        m.by(_UNTILT, hold=0)
        _catch_up(env, m)


def _catch_up(env: Any, m: Mover) -> None:
    """Hold the target until the tool centre point is within ``_CAUGHT_UP`` of it (at most ``_CATCH_UP``
    control steps): at the Mover's speed CALVIN's arm trails a long travel by up to 0.1 m, and the next
    motion (a descent beside a switch's knob) would start from there."""
    for _ in range(_CATCH_UP):
        tcp, _ = env.robot.tcp_pose()
        if float(np.linalg.norm(np.asarray(tcp) - m.pos)) < _CAUGHT_UP:
            return
        m.by([0.0, 0.0, 0.0], hold=0)


TILT = {"turn_on_lightbulb": 0.5, "turn_off_lightbulb": 0.8}
"""Per-family hint of execution: the hand's roll from pointing down, rad (CALVIN's scripts' values). The
switch's knob, high on the slanted panel 0.9 m from CALVIN's Panda base, is out of reach of a hand
pointing down (SIMPACT's FR3 stands 0.20 m higher and reaches it), and a tilted hand's fingertips reach
its face below the knob."""
