"""The 34 CALVIN subtask checks, judged between a subtask's start snapshot and the current one.

Each check follows the official task oracle (``new_playtable_tasks.yaml`` and ``calvin_env.envs.tasks``) as
``../shared/CALVIN.md`` states it; the task table is read from the data file, so the thresholds are the
official ones. A :class:`Snapshot` is plain data (no PyBullet), so the checks can be tested on their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from simpact.calvin.data import task_table
from simpact.core.errors import SimpactError

__all__ = ["BlockState", "Snapshot", "achieved", "check"]

Contact = tuple[int, int]
"""(body id, link id) of the other body in a contact; link -1 is a body's base."""


@dataclass(frozen=True)
class BlockState:
    """A block at one instant: position (m), quaternion xyzw, velocities (m/s, rad/s), its contacts."""

    uid: int
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]
    lin_vel: tuple[float, float, float]
    ang_vel: tuple[float, float, float]
    contacts: frozenset[Contact]


@dataclass(frozen=True)
class Snapshot:
    """What the checks read at one instant: joints (m), lights (0/1), blocks and the robot's contacts."""

    robot_uid: int
    table_uid: int
    table_links: dict[str, int]
    doors: dict[str, float]
    lights: dict[str, int]
    blocks: dict[str, BlockState]
    robot_contacts: frozenset[Contact] = field(default_factory=frozenset)


def _bodies(contacts: Iterable[Contact]) -> set[int]:
    return {body for body, _ in contacts}


def _rotate(name: str, degrees: float, start: Snapshot, end: Snapshot, xy_max: float = 30.0) -> bool:
    a, b = start.blocks[name], end.blocks[name]
    x, y, z = (Rotation.from_quat(b.quat) * Rotation.from_quat(a.quat).inv()).as_euler("xyz", degrees=True)
    if np.linalg.norm(np.subtract(b.pos, a.pos)) > 0.1:
        return False
    if not _bodies(b.contacts) - {start.robot_uid}:
        return False
    turned = degrees < z < 180.0 if degrees > 0 else -180.0 < z < degrees
    return bool(turned and abs(x) < xy_max and abs(y) < xy_max)


def _push(name: str, dx: float, dy: float, start: Snapshot, end: Snapshot) -> bool:
    a, b = start.blocks[name], end.blocks[name]
    before = {c for c in a.contacts if c[0] != start.robot_uid}
    after = {c for c in b.contacts if c[0] != start.robot_uid}
    if not (before and after and before <= after):
        return False
    delta = np.subtract(b.pos, a.pos)
    along, threshold = (delta[0], dx) if dx != 0 else (delta[1], dy)
    return bool(along > threshold if threshold > 0 else along < threshold)


def _move_door(joint: str, threshold: float, start: Snapshot, end: Snapshot) -> bool:
    change = end.doors[joint] - start.doors[joint]
    return bool(0 < threshold < change or 0 > threshold > change)


def _lift(name: str, dz: float, body: str, link: str, start: Snapshot, end: Snapshot) -> bool:
    a, b = start.blocks[name], end.blocks[name]
    on_surface = (start.table_uid, start.table_links[link]) in a.contacts
    touching = _bodies(b.contacts)
    return bool(b.pos[2] - a.pos[2] > dz and touching == {start.robot_uid} and on_surface)


def _held_block(start: Snapshot) -> str | None:
    """The block the robot alone holds at the start (the robot touches exactly that one body)."""
    held = _bodies(start.robot_contacts)
    if len(held) != 1:
        return None
    names = [n for n, blk in start.blocks.items() if blk.uid in held]
    return names[0] if len(names) == 1 else None


def _place(body: str, link: str, start: Snapshot, end: Snapshot) -> bool:
    name = _held_block(start)
    if name is None or start.blocks[name].uid in _bodies(end.robot_contacts):
        return False
    return bool(
        _bodies(start.blocks[name].contacts) == {start.robot_uid}
        and (end.table_uid, end.table_links[link]) in end.blocks[name].contacts
    )


def _push_into(
    names: Any, body: str, src: str, body2: str, dest: str, start: Snapshot, end: Snapshot
) -> bool:
    for name in [names] if isinstance(names, str) else list(names):
        a, b = start.blocks[name].contacts, end.blocks[name].contacts
        if (
            start.robot_uid not in _bodies(a | b)
            and len(a) == 1
            and (start.table_uid, start.table_links[src]) in a
            and (end.table_uid, end.table_links[dest]) in b
        ):
            return True
    return False


def _slow(block: BlockState, max_vel: float) -> bool:
    return bool(np.all(np.abs(block.lin_vel) < max_vel) and np.all(np.abs(block.ang_vel) < max_vel))


def _stack(start: Snapshot, end: Snapshot, max_vel: float = 1.0) -> bool:
    uids = {blk.uid for blk in start.blocks.values()}
    for name, a in start.blocks.items():
        before, after = _bodies(a.contacts), _bodies(end.blocks[name].contacts)
        if not before & uids and after & uids and not after - uids and _slow(end.blocks[name], max_vel):
            return True
    return False


def _unstack(start: Snapshot, end: Snapshot, max_vel: float = 1.0) -> bool:
    uids = {blk.uid for blk in start.blocks.values()}
    for name, a in start.blocks.items():
        before, after = _bodies(a.contacts), _bodies(end.blocks[name].contacts)
        if before & uids and not before - uids and not after & uids and _slow(a, max_vel):
            return True
    return False


def _toggle(light: str, was: int, becomes: int, start: Snapshot, end: Snapshot) -> bool:
    return start.lights[light] == was and end.lights[light] == becomes


def _block_name(obj: str) -> str:
    """The task file says ``block_red``; snapshots name blocks by colour (``red``)."""
    return obj.removeprefix("block_")


def check(task: str, start: Snapshot, end: Snapshot) -> bool:
    """Whether ``task`` (one of the 34 subtasks) is achieved between ``start`` and ``end``."""
    try:
        family, args = task_table()[task]
    except KeyError:
        raise SimpactError(f"unknown CALVIN subtask {task!r}; see simpact.calvin.data.SUBTASKS") from None
    if family == "rotate_object":
        return _rotate(_block_name(args[0]), float(args[1]), start, end)
    if family == "push_object":
        return _push(_block_name(args[0]), float(args[1]), float(args[2]), start, end)
    if family == "move_door_rel":
        return _move_door(str(args[0]), float(args[1]), start, end)
    if family == "lift_object":
        return _lift(_block_name(args[0]), float(args[1]), str(args[2]), str(args[3]), start, end)
    if family == "place_object":
        return _place(str(args[0]), str(args[1]), start, end)
    if family == "push_object_into":
        names = [_block_name(n) for n in args[0]]
        return _push_into(names, str(args[1]), str(args[2]), str(args[3]), str(args[4]), start, end)
    if family == "stack_objects":
        return _stack(start, end)
    if family == "unstack_objects":
        return _unstack(start, end)
    if family == "toggle_light":
        return _toggle(str(args[0]), int(args[1]), int(args[2]), start, end)
    raise SimpactError(f"CALVIN task family {family!r} of {task!r} is not known to simpact.calvin.checks")


def achieved(start: Snapshot, end: Snapshot, tasks: Iterable[str] | None = None) -> set[str]:
    """The subtasks (of ``tasks``, default all 34) achieved between ``start`` and ``end``."""
    names = list(task_table()) if tasks is None else list(tasks)
    return {name for name in names if check(name, start, end)}
