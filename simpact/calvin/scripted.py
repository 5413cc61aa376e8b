"""Scripted motions for the 34 CALVIN subtasks, to check the rebuilt environment against its own checks.

Each script drives the robot through CALVIN's absolute action interface (TCP position, euler, gripper) from
the current state; with ``achieve=False`` it performs a near miss (too short, too little, or not letting
go) that must not satisfy the subtask. The scripts read object poses from the simulator (privileged): they
test the environment and the checks, not a policy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from simpact.calvin.env import CalvinEnv
from simpact.core.errors import SimpactError

__all__ = ["SCRIPTS", "Mover", "script_for"]

_DOWN = np.pi  # roll of a TCP pointing down
_SPEED = 0.012  # m per control step (0.36 m/s) for waypoint interpolation
_HOVER = 0.10  # m above a grasp point
_SAFE_Z = 0.60  # m: TCP height for moves across the table, above blocks, handles and the lever
_SHELF_Y = -0.02  # m: behind this the sliding cabinet's shelf is overhead
_TABLE_FRONT_Y = -0.182  # m: the table top's front edge (the open drawer lies in front of it)
_SLIDER_AXIS = np.array([-1.0, 0.0, 0.0])  # the door moves along -x as its joint grows
_SWITCH_AXIS = np.array([0.0, 0.5, 0.866])  # the switch lever slides up the slanted panel


class Mover:
    """Moves the TCP (pointing down, yaw in rad) through straight-line waypoints at 30 Hz."""

    def __init__(self, env: CalvinEnv) -> None:
        self.env = env
        pos, euler = env.robot.tcp_pose()
        self.pos = pos
        self.yaw = float(euler[2])
        self.grip = int(env.robot.gripper_action)
        self.steps = 0
        self.roll, self.pitch = _DOWN, 0.0  # scripts tilt the hand to reach far targets
        self.on_step: Callable[[], None] | None = None

    def to(self, pos: ArrayLike, yaw: float | None = None, hold: int = 4) -> None:
        """Go to ``pos`` (m) turning to ``yaw`` (rad), then hold for ``hold`` control steps."""
        target = np.asarray(pos, dtype=float)
        new_yaw = self.yaw if yaw is None else yaw
        span = max(float(np.linalg.norm(target - self.pos)) / _SPEED, abs(new_yaw - self.yaw) / 0.06)
        n = max(1, int(np.ceil(span)))
        for k in range(1, n + 1):
            s = k / n
            self._act(self.pos + s * (target - self.pos), self.yaw + s * (new_yaw - self.yaw))
        self.pos, self.yaw = target, new_yaw
        for _ in range(hold):
            self._act(self.pos, self.yaw)

    def travel(self, pos: ArrayLike, yaw: float | None = None, hold: int = 4) -> None:
        """Go to ``pos`` over the top: out from under the shelf, up to a safe height, across, then down."""
        target = np.asarray(pos, dtype=float)
        high = max(_SAFE_Z, float(target[2]))
        if self.pos[1] > _SHELF_Y and self.pos[2] < high:
            self.to([self.pos[0], _SHELF_Y - 0.06, self.pos[2]], hold=0)
        if self.pos[2] < high:
            self.to([self.pos[0], self.pos[1], high], hold=0)
        self.to([target[0], target[1], high], yaw, hold=0)
        self.to(target, hold=hold)

    def by(self, delta: ArrayLike, yaw: float | None = None, hold: int = 4) -> None:
        self.to(self.pos + np.asarray(delta, dtype=float), yaw, hold)

    def gripper(self, action: int, steps: int = 20) -> None:
        """Open (1) or close (-1) the gripper and wait ``steps`` control steps."""
        self.grip = action
        for _ in range(steps):
            self._act(self.pos, self.yaw)

    def _act(self, pos: np.ndarray, yaw: float) -> None:
        self.env.step(np.array([*pos, self.roll, self.pitch, yaw, self.grip]))
        self.steps += 1
        if self.on_step is not None:
            self.on_step()


# --- reading the scene (privileged) -------------------------------------------------------------------


def _block(env: CalvinEnv, color: str, prefer: int = 0) -> tuple[np.ndarray, float]:
    """Block position (m) and the gripper yaw (rad) that closes the fingers across a narrow horizontal side.

    Works for a block lying on any face: of its axes that are nearly horizontal, the narrowest (the one
    most along world axis ``prefer`` on a tie) closes the fingers; at yaw 0 they close along world y.
    """
    pb, uid = env.pb, env.table.blocks[color]
    pos, quat = pb.getBasePositionAndOrientation(uid, physicsClientId=env.cid)
    axes = np.asarray(pb.getMatrixFromQuaternion(quat)).reshape(3, 3)
    size = np.asarray(pb.getCollisionShapeData(uid, -1, physicsClientId=env.cid)[0][3])
    flat = [k for k in range(3) if abs(axes[2, k]) < 0.5]
    k = min(flat, key=lambda k: (round(float(size[k]), 3), -abs(axes[prefer, k])))
    yaw = float(np.arctan2(axes[1, k], axes[0, k])) - np.pi / 2
    grip_yaw = min((yaw + j * np.pi for j in range(-2, 3)), key=lambda a: abs(a - np.pi / 2))
    return np.array(pos), float(grip_yaw)


def _held(env: CalvinEnv) -> str:
    """The block the robot touches now (the one it holds)."""
    touching = {body for body, _ in env.snapshot().robot_contacts}
    held = [color for color, uid in env.table.blocks.items() if uid in touching]
    if len(held) != 1:
        raise SimpactError(f"the robot holds {len(held)} blocks; a place or stack script needs exactly one")
    return held[0]


# --- the scripts (each: env, subtask, achieve) --------------------------------------------------------


def _grasp(m: Mover, color: str, lift: float, approach: np.ndarray | None = None, prefer: int = 0) -> None:
    """Open above the block (or come in along ``approach``), close on it, raise by ``lift`` (m)."""
    pos, yaw = _block(m.env, color, prefer)
    grasp = pos + np.array([0.0, 0.0, 0.005])
    m.gripper(1, 5)
    if approach is None:
        m.travel(grasp + [0, 0, _HOVER], yaw)
    else:
        m.travel(grasp + approach + [0, 0, 0.03], yaw)
        m.to(grasp + approach, yaw)
    m.to(grasp, yaw, hold=8)
    m.gripper(-1, 20)
    m.by([0, 0, lift], hold=10)


def _lift(m: Mover, task: str, achieve: bool) -> None:
    color, surface = task.split("_")[1], task.split("_")[3]
    approach = np.array([0.0, -0.12, 0.0]) if surface == "slider" else None
    prefer = 0  # fingers closing along x
    if surface == "drawer":  # along y keeps them off the side walls, unless the back finger would go under
        prefer = 1 if _block(m.env, color)[0][1] + 0.05 < _TABLE_FRONT_Y else 0  # the table's front edge
    _grasp(m, color, (0.10 if surface != "slider" else 0.06) if achieve else 0.015, approach, prefer)


def _rotate(m: Mover, task: str, achieve: bool) -> None:
    color, side = task.split("_")[1], task.split("_")[3]
    _grasp(m, color, 0.02)
    turn = (np.pi / 2 if achieve else np.pi / 6) * (1 if side == "left" else -1)
    m.by([0, 0, 0], yaw=m.yaw + turn, hold=6)
    m.by([0, 0, -0.015], hold=6)
    m.gripper(1, 15)
    m.by([0, 0, _HOVER])


def _push(m: Mover, task: str, achieve: bool) -> None:
    color, side = task.split("_")[1], task.split("_")[3]
    sign = 1.0 if side == "right" else -1.0
    pos, _ = _block(m.env, color)
    start = pos + np.array([-sign * 0.075, 0.0, 0.0])
    m.gripper(-1, 5)
    m.travel(start + [0, 0, _HOVER], np.pi / 2)
    m.to(start + [0, 0, 0.005], hold=6)
    m.by([sign * (0.19 if achieve else 0.07), 0, 0], hold=6)
    m.by([0, 0, _HOVER])


def _slider(m: Mover, task: str, achieve: bool) -> None:
    q = m.env.table.joint("base__slide")
    x_handle = 0.05 - q  # the handle's x (m) when the door is at q
    sign = 1.0 if task.endswith("left") else -1.0  # left: the door moves along -x
    start = np.array([x_handle + sign * 0.045, 0.0, 0.56])
    m.gripper(-1, 5)
    m.travel(start + [0, -0.12, 0.04], np.pi / 2)
    m.to(start, hold=6)
    m.by(_SLIDER_AXIS * sign * (0.20 if achieve else 0.08), hold=8)
    m.by([0, -0.12, 0.0])


def _drawer(m: Mover, task: str, achieve: bool) -> None:
    q = m.env.table.joint("base__drawer")
    bar = np.array([0.18, -0.251 - q, 0.36])  # the handle bar's centre (m) when the drawer is at q
    m.gripper(1, 5)
    if task == "open_drawer":
        m.travel(bar + [0, 0, 0.12], 0.0)
        m.to(bar + [0, 0, 0.01], hold=8)
        m.gripper(-1, 20)
        m.by([0, -(0.17 if achieve else 0.07), 0], hold=8)
        m.gripper(1, 10)
    else:
        m.gripper(-1, 5)
        m.travel(bar + [0, -0.06, 0.10], np.pi / 2)
        m.to(bar + [0, -0.05, 0.0], hold=6)
        m.by([0, 0.17 if achieve else 0.07, 0], hold=8)
        m.by([0, -0.08, 0.0])
    m.by([0, 0, 0.12])


def _button(m: Mover, task: str, achieve: bool) -> None:
    top = np.array([-0.12, -0.12, 0.485])
    m.gripper(-1, 5)
    m.travel(top + [0, 0, 0.08], np.pi / 2)
    m.to(top + [0, 0, -0.02 if achieve else 0.03], hold=10)
    m.by([0, 0, 0.10], hold=10)


def _switch(m: Mover, task: str, achieve: bool) -> None:
    q = m.env.table.joint("base__switch")
    along = _SWITCH_AXIS * q / np.linalg.norm(_SWITCH_AXIS)  # how far the lever is up its slot (m)
    if task == "turn_on_lightbulb":  # fingertips under the knob, hand tilted forward to reach
        m.roll, start, sign = _DOWN - 0.5, np.array([0.30, -0.002, 0.47]) + along, 1.0
    else:  # fingertips on top of the knob
        m.roll, start, sign = _DOWN - 0.8, np.array([0.30, 0.016, 0.563]) + along, -1.0
    m.gripper(-1, 5)
    m.travel(start + [0, -0.10, 0], np.pi / 2)
    m.to(start, hold=6)
    m.by(_SWITCH_AXIS * sign * (0.10 if achieve else 0.02), hold=8)
    m.by([0, -0.10, 0])


def _place(m: Mover, task: str, achieve: bool) -> None:
    _held(m.env)
    if task == "place_in_drawer":
        q = m.env.table.joint("base__drawer")
        goal = np.array([0.18, -0.28 - (0.22 - q), 0.36])
        m.by([0, 0, 0.12 - m.pos[2] + 0.5 if m.pos[2] < 0.5 else 0.0])
        m.travel(goal + [0, 0, 0.15])
        m.to(goal + [0, 0, 0.02], hold=8)
    else:
        q = m.env.table.joint("base__slide")
        x = 0.04 if q > 0.14 else -0.24
        goal = np.array([x, 0.085, 0.475])
        m.to(np.array([m.pos[0], -0.10, 0.50]))
        m.to(np.array([x, -0.10, 0.50]))
        m.to(goal, hold=8)
    if achieve:
        m.gripper(1, 20)
    m.by([0, -0.15, 0.0] if task == "place_in_slider" else [0, 0, 0.12])


def _stack(m: Mover, task: str, achieve: bool) -> None:
    color = _held(m.env)
    others = [c for c in m.env.table.blocks if c != color]
    below = min(others, key=lambda c: _block(m.env, c)[0][2])
    pos, yaw = _block(m.env, below)
    offset = np.array([0.0, 0.0, 0.05]) if achieve else np.array([0.0, -0.09, 0.005])
    m.travel(pos + offset + [0, 0, 0.08], yaw)
    m.to(pos + offset, hold=10)
    m.gripper(1, 25)
    m.by([0, 0, _HOVER], hold=10)


def _unstack(m: Mover, task: str, achieve: bool) -> None:
    top = max(m.env.table.blocks, key=lambda c: _block(m.env, c)[0][2])
    if achieve:  # lift it off, set it down beside the stack
        _grasp(m, top, 0.08)
        m.by([0.0, -0.10, 0.0])
        m.by([0, 0, -0.075], hold=8)
    else:  # squeeze it where it stands
        _grasp(m, top, 0.0)
    m.gripper(1, 20)
    m.by([0, 0, _HOVER])


def _push_into(m: Mover, task: str, achieve: bool) -> None:
    on_table = [c for c in m.env.table.blocks if _on_table_over_drawer(m.env, c)]
    if not on_table:
        raise SimpactError("push_into_drawer needs a block on the table in front of the drawer")
    color = min(on_table, key=lambda c: _block(m.env, c)[0][1])
    pos, _ = _block(m.env, color)
    start = pos + np.array([0.0, 0.07, 0.0])
    m.gripper(-1, 5)
    m.travel(start + [0, 0, _HOVER], 0.0)
    m.to(start + [0, 0, 0.005], hold=6)
    m.by([0, -(pos[1] + 0.30 if achieve else 0.04) - 0.0, 0], hold=6)
    m.by([0, 0, 0.15], hold=30)


def _on_table_over_drawer(env: CalvinEnv, color: str) -> bool:
    pos, _ = _block(env, color)
    touching = env.snapshot().blocks[color].contacts
    return bool(0.02 < pos[0] < 0.34 and touching == {(env.table.uid, -1)})


Script = Callable[[Mover, str, bool], None]

#: Subtask prefix → its script.
SCRIPTS: dict[str, Script] = {
    "lift_": _lift,
    "rotate_": _rotate,
    "push_into_drawer": _push_into,
    "push_": _push,
    "move_slider_": _slider,
    "open_drawer": _drawer,
    "close_drawer": _drawer,
    "turn_on_led": _button,
    "turn_off_led": _button,
    "turn_on_lightbulb": _switch,
    "turn_off_lightbulb": _switch,
    "place_in_": _place,
    "stack_block": _stack,
    "unstack_block": _unstack,
}


def script_for(task: str) -> Script:
    """The scripted motion for ``task``."""
    for prefix, script in SCRIPTS.items():
        if task.startswith(prefix):
            return script
    raise SimpactError(f"no scripted motion for CALVIN subtask {task!r}")
