"""The ``actuate`` primitive: drive an articulated part (a scene object with a slide joint: a drawer, a
sliding door's handle, a button, a switch's lever) to a joint position by pushing it along its joint axis
with the fingers closed.

The push starts at the part's face opposite the motion: for a motion mostly downward (a button, a lever
pushed down its slot) from above its top, descending; otherwise from beside it, the fingertips at a height
on its face, having come down a little behind that point and moved onto it. The hand then moves along the
joint's world axis by the joint change still needed plus a margin (in 3D: a lever in a slanted slot moves up
and back at once), backs off along the axis and rises. Units: metres, radians.
"""

from __future__ import annotations

import math

import numpy as np

from simpact.planner.primitives import FINGER_FRONT, Builder, Context, Primitive, _Path, _perp, _unit

__all__ = ["actuate_builder", "actuate_primitive"]

_DOWN = -0.7
"""A motion whose unit direction has a z component below this is a press from above."""
_ABOVE = 0.01
"""Gap above a part's top the fingertips stop at before pressing, m."""
_BACK_OFF = 0.03
"""How far the hand backs off along the motion after it, m."""


def actuate_builder(name: str, target: float) -> Builder:
    """Push ``name`` along its joint axis until its joint reaches ``target`` (m), with parameters
    ``height`` (fingertips' height on the face, a fraction of the part's height), ``lateral`` (offset across
    the motion, a fraction of the part's half extent), ``extra`` (m past the needed change) and ``back``
    (m behind the contact point the hand comes down at)."""

    def build(ctx: Context, v: np.ndarray) -> _Path:
        height, lateral, extra, back = (float(x) for x in v)
        box = ctx.boxes[name]
        path = _Path(ctx.tcp, ctx.min_z)
        path.to_z(max(path.p[2], ctx.safe_z), "rise to travel clear of the objects")
        if box.axis is None or box.joint is None:
            return path
        need = target - box.joint
        d = box.axis * (1.0 if need >= 0.0 else -1.0)
        dist = abs(need) + extra
        path.grip(0.0, "close the fingers to push")
        if d[2] < _DOWN:
            x = box.centre[0] + lateral * box.half[0]
            y = box.centre[1]
            path.move_to(x, y, reason=f"above {name}")
            path.to_z(box.top + _ABOVE, f"fingertips just above {name}")
            dist += _ABOVE / -d[2]
        else:
            h = _unit(d)
            across = _perp(h)
            xy = box.centre[:2] - h * (box.extent(h) + FINGER_FRONT)  # the fingertips touching its face
            xy = xy + across * lateral * box.extent(np.array([across[0], across[1], 0.0]))
            path.turn_to(math.atan2(across[1], across[0]), f"fingers across the push of {name}")
            behind = xy - h * back
            path.move_to(behind[0], behind[1], reason=f"behind {name}")
            z = box.bottom + height * (box.top - box.bottom)
            if z >= path.min_z:
                path.to_z(z, f"down beside {name}")
            else:  # below the table plane (a drawer's handle under the table top)
                _by(path, np.array([0.0, 0.0, z - path.p[2]]), f"down beside {name}")
            path.move_to(xy[0], xy[1], reason=f"fingertips onto {name}")
        _by(path, d * dist, f"push {name} along its joint")
        _by(path, -d * _BACK_OFF, f"off {name}")
        path.to_z(max(path.p[2] + 0.05, ctx.safe_z), "rise clear")
        return path

    return build


def _by(path: _Path, delta: np.ndarray, reason: str) -> None:
    """Move the tool by ``delta`` (m) in straight MOVE steps, to heights below the table plane too (a part
    under a table top: a drawer's handle)."""
    n = max(1, math.ceil(float(np.abs(delta).max()) / 0.45))
    if float(np.abs(delta).max()) < 1e-4:
        return
    for _ in range(n):
        path._add("MOVE", reason, dx=delta[0] / n, dy=delta[1] / n, dz=delta[2] / n)
    path.p = path.p + delta


def actuate_primitive(name: str, target: float) -> Primitive:
    """The ``actuate`` primitive of part ``name`` to joint position ``target``, with its parameter ranges."""
    return Primitive(
        "actuate",
        name,
        f"joint {target:.3f}",
        ("height", "lateral", "extra", "back"),
        (0.3, -0.6, 0.0, 0.02),
        (0.7, 0.6, 0.04, 0.08),
        actuate_builder(name, target),
    )
