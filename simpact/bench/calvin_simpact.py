"""SIMPACT in the loop of CALVIN's long-horizon evaluation, per subtask: mode ``simpact-offline``.

For each subtask, from the environment's current state (the robot is never reset between subtasks):

1. **Scene.** A SIMPACT :class:`~simpact.core.scene.Scene` of the table top: the three blocks as boxes
   (:data:`SCENE_SOURCE` ``frame``: real2sim's ``masks`` back-end on the static camera's RGB-D and
   ground-truth segmentation, :func:`frame_blocks`; a block the camera does not see comes from the
   simulator, named in :data:`LAST`), the table top as the table plane, the robot's tool centre point, yaw
   and gripper opening where CALVIN's are. Frames: the scene's origin is CALVIN's Panda base in x and y
   and the table top (z = 0.44 m) in z, axes parallel to CALVIN's (its base has no rotation). SIMPACT's
   FR3 base stands at the scene origin on the table plane, so it is 0.20 m higher than CALVIN's Panda
   base; the tool centre point is where CALVIN's is. The hand's yaw: CALVIN's fingers close along y at yaw
   0, SIMPACT's open along x, so ``simpact = calvin - pi/2``. The table's fixed parts near the workspace
   are fixed boxes (:data:`FIXED`: the button's housing, the sliding cabinet's slanted front); its
   articulated parts (the sliding door's handle, the drawer's handle bar, the button's cap, the switch's
   knob) are slide-jointed scene objects at CALVIN's joint positions (:mod:`simpact.bench.calvin_parts`).
   The drawer's subtasks replace the table plane by a box of CALVIN's table top, open in front.
2. **Goal.** The subtask's success condition as goal predicates (:data:`GOALS`): privileged, as the goal
   the planner scores rollouts with is the benchmark's own condition.
3. **Plan.** The no-skeleton tree planner (:func:`simpact.planner.tree.plan_tree`, small budget) in a
   MuJoCo world of the scene.
4. **Execute.** The best proposal's symbolic actions mapped to absolute end-effector targets in CALVIN's
   frame (:func:`execute`), stepped through CALVIN's absolute action interface (its IK, 30 Hz) by the
   scripted :class:`~simpact.calvin.scripted.Mover`. CALVIN's own check judges, in the evaluation wrapper.

Per-family hints (listed in each subtask's record as ``hint``): the switch's subtasks are executed with
the hand tilted (:data:`TILT`). Families with no goal here raise :class:`Unsupported` (the subtask fails;
its record's ``policy_error`` names the family and why): see :data:`UNSUPPORTED`. The mode is privileged
(:data:`PRIVILEGED`: the ground-truth goal, ground-truth masks, ground-truth poses of unseen blocks) and
needs the rebuild back-end (it reads the simulator). The episode records say what the evaluation wrapper
records; what this mode planned for the last subtask (scene source, unseen blocks, perception error,
planner verdict, actions) is in :data:`LAST`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from real2sim.pipeline import Real2SimConfig, Real2SimError, run_real2sim
from simpact.bench.calvin_execute import TILT, execute, untilt
from simpact.bench.calvin_parts import (
    DRAWER_TASKS,
    HOUSING,
    JOINT_GOALS,
    TABLE_BOX,
    TABLE_Z,
    aabb,
    cabinet_boxes,
    drawer_boxes,
    fixed_box,
    table_parts,
    to_calvin,
    to_scene,
)
from simpact.bench.calvin_place import HAND_START, INSIDE_DRAWER, PLACE_GOALS, held_block
from simpact.core.errors import SimpactError
from simpact.core.scene import RobotStart, Scene, SceneObject
from simpact.planner.tree import plan_tree
from simpact.tasks import Task
from solvers.world import make_world

__all__ = [
    "GOALS",
    "PRIVILEGED",
    "SCENE_SOURCE",
    "TABLE_Z",
    "UNSUPPORTED",
    "Unsupported",
    "calvin_scene",
    "execute",
    "family",
    "goal_for",
    "frame_blocks",
    "hand_below_table",
    "require_supported",
    "simpact_offline_policy",
    "subtask_task",
    "to_calvin",
    "to_scene",
]

YAW_OFFSET = math.pi / 2
"""CALVIN's hand yaw minus SIMPACT's for the same finger direction, rad."""
SCENE_SOURCE = "frame"
"""Where the blocks come from: ``frame`` (real2sim's ``masks`` back-end on the static camera's RGB-D with
ground-truth segmentation; a block the camera does not see, e.g. inside the cabinet or behind the arm, is
taken from the simulator and named in :data:`LAST` ``ground_truth_blocks``) or ``ground_truth`` (every
block from the simulator's poses and collision boxes)."""
GROUND_TRUTH_BLOCKS = ("unstack_block",)
"""Subtasks whose blocks all come from the simulator, whatever :data:`SCENE_SOURCE`: with the blocks
real2sim fitted to the static camera's view, every unstack of the 40-chain run at commit bb84188 (4, each
after a stack) found no block standing on another (a stack's fit is not a block on a block: cause not
pinned down); from the simulator's poses 2 of 3 succeed (``calvin_family unstack_block``)."""
PRIVILEGED = (
    "ground-truth goal (the subtask's own success condition); ground-truth segmentation masks; ground-truth"
    " poses for blocks the static camera does not see"
)
BLOCK_FRICTION = 0.7
BLOCK_MASS = 1.0
MAX_ROLLOUTS = 150
BUDGET_S = 55.0
"""The planner's wall-clock budget per subtask, s: with the scene and the execution (1-2 s) within the 60 s
a subtask may take (issue 12)."""
TAIL_S = 0.5
"""The planner's hold after a plan, s."""


class Unsupported(SimpactError):
    """A CALVIN subtask family this mode cannot express as a goal in its scene; the subtask fails."""


# --- frames -------------------------------------------------------------------------------------------------
def _wrap_half(a: float) -> float:
    """``a`` mod pi into [-pi/2, pi/2) (the hand is symmetric under a half turn)."""
    return float((a + math.pi / 2) % math.pi - math.pi / 2)


# --- the scene ----------------------------------------------------------------------------------------------
FIXED: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "button_housing": HOUSING,
}
"""The table's fixed parts near the workspace as boxes, CALVIN frame (min, max corners, m), from ray probes
of the table's collision mesh: the LED button's housing (below its cap, a part). With them, the sliding
cabinet's slanted front with the plank's opening cut out where the door leaves it
(:func:`~simpact.bench.calvin_parts.cabinet_boxes`), and for :data:`INSIDE_DRAWER` subtasks the drawer's
inside (:func:`~simpact.bench.calvin_parts.drawer_boxes`). A box that would overlap a block by more than
:data:`_OVERLAP` (e.g. the cabinet's over a block behind the door) is left out of that scene; so is a
part (:data:`~simpact.bench.calvin_parts.PARTS`)."""
_OVERLAP = 0.003
"""A block resting on a box touches it, m: a deeper overlap leaves the box out."""

_RGBA = {"red": (0.8, 0.1, 0.1, 1.0), "blue": (0.1, 0.2, 0.8, 1.0), "pink": (0.9, 0.4, 0.7, 1.0)}


def frame_blocks(env: Any) -> dict[str, SceneObject]:
    """The blocks real2sim finds in the static camera's RGB-D frame with its ground-truth masks (``masks``
    back-end), as boxes of the fitted extents and poses in the scene frame (real2sim's frame: the camera's
    pose relative to the robot base in x and y, the table plane it finds at z = 0). CALVIN's block mass
    and friction. Blocks the camera does not see are absent (all of them: none is seen)."""
    frame = env.frame("static")
    labels = [f"block_{color}" for color in env.table.blocks]
    names = frame.mask_names or {}
    if frame.masks is None or not any(names.get(int(i)) in labels for i in np.unique(frame.masks)):
        return {}  # no block in view (e.g. one in the drawer, two in the cabinet)
    config = Real2SimConfig(segmenter="masks", settle_s=0.0, render=False, overlays=False)
    try:
        result = run_real2sim(frame, labels=labels, config=config)
    except Real2SimError as exc:  # a few pixels of a block in the masks, too few to fit
        if str(exc).startswith("no object found"):
            return {}
        raise
    out = {}
    for name, g in result.geometries.items():
        if name not in labels:
            continue
        color = name.removeprefix("block_")
        out[name] = SceneObject(
            name=name,
            shape="box",
            size=tuple(float(v) for v in g.extent),
            position=tuple(float(v) for v in g.position),  # type: ignore[arg-type]
            quaternion=tuple(float(v) for v in g.quaternion),  # type: ignore[arg-type]
            mass=BLOCK_MASS,
            friction=BLOCK_FRICTION,
            rgba=_RGBA.get(color, (0.7, 0.7, 0.7, 1.0)),
        )
    return out


def _blocks(env: Any, source: str, held: str | None) -> list[SceneObject]:
    """The blocks from ``source`` (see :data:`SCENE_SOURCE`); an unseen block and the ``held`` one (the
    hand hides it) from the simulator's poses and collision boxes."""
    pb, cid = env.pb, env.cid
    if source not in ("frame", "ground_truth"):
        raise SimpactError(f"unknown scene source {source!r}; expected frame or ground_truth")
    seen = frame_blocks(env) if source == "frame" else {}
    objects = []
    for color, uid in env.table.blocks.items():
        if f"block_{color}" in seen and color != held:
            objects.append(seen[f"block_{color}"])
            continue
        pos, quat = pb.getBasePositionAndOrientation(uid, physicsClientId=cid)
        size = pb.getCollisionShapeData(uid, -1, physicsClientId=cid)[0][3]
        x, y, z, w = quat
        objects.append(
            SceneObject(
                name=f"block_{color}",
                shape="box",
                size=tuple(float(s) for s in size),
                position=tuple(float(v) for v in to_scene(pos)),  # type: ignore[arg-type]
                quaternion=(float(w), float(x), float(y), float(z)),
                mass=BLOCK_MASS,
                friction=BLOCK_FRICTION,
                rgba=_RGBA.get(color, (0.7, 0.7, 0.7, 1.0)),
            )
        )
    return objects


def _fixed(env: Any, drawer_inside: bool) -> list[SceneObject]:
    """The fixed boxes of :data:`FIXED` in the scene frame."""
    boxes = {**FIXED, **cabinet_boxes(float(env.table.joint("base__slide")))}
    if drawer_inside:
        boxes.update(drawer_boxes(float(env.table.joint("base__drawer"))))
    return [fixed_box(n, to_scene(low), to_scene(high), friction=0.5, rgba=(0.6, 0.5, 0.4, 1.0))
            for n, (low, high) in boxes.items()]  # fmt: skip


def calvin_scene(
    env: Any,
    source: str = "ground_truth",
    open_front: bool = False,
    drawer_inside: bool = False,
    hand: bool = False,
) -> Scene:
    """The SIMPACT scene of ``env``'s current state (rebuild back-end): the blocks from ``source``
    (``ground_truth`` or ``frame``, see :data:`SCENE_SOURCE`), the articulated parts at their joint
    positions, the fixed boxes (``drawer_inside``: the drawer's too), the robot (``hand``: holding the
    block it alone touches, :func:`~simpact.bench.calvin_place.held_block`). ``open_front``: CALVIN's
    table top is a fixed box (:data:`~simpact.bench.calvin_parts.TABLE_BOX`) and the scene's table plane
    shrinks to a 5 cm square behind the robot, so the drawer under the table's front edge is free to
    reach."""
    held = held_block(env) if hand else None
    objects = _blocks(env, source, held)
    spans = [aabb(o) for o in objects]
    for part in [*table_parts(env, to_scene), *_fixed(env, drawer_inside)]:
        lo, hi = aabb(part)
        lo, hi = lo + _OVERLAP, hi - _OVERLAP
        if not any(np.all(lo < b_hi) and np.all(b_lo < hi) for b_lo, b_hi in spans):
            objects.append(part)  # unless it would overlap a block
    tcp, euler = env.robot.tcp_pose()
    width = float(env.robot_obs()[6])
    robot = RobotStart(
        tuple(float(v) for v in to_scene(tcp)),  # type: ignore[arg-type]
        _wrap_half(float(euler[2]) - YAW_OFFSET),
        float(np.clip(width, 0.0, 0.08)),
        holding=None if held is None else f"block_{held}",
    )
    if not open_front:
        return Scene(tuple(objects), robot, table_size=(1.4, 1.4), table_friction=0.7)
    low, high = to_scene(TABLE_BOX[0]), to_scene(TABLE_BOX[1])
    top = fixed_box("table_top", low, high, friction=0.7, rgba=(0.76, 0.66, 0.52, 1.0))
    return Scene((*objects, top), robot, table_size=(0.05, 0.05), table_friction=0.7)


def hand_below_table(env: Any) -> bool:
    """Whether the tool centre point is below CALVIN's table top (e.g. left at the drawer's handle by a
    drawer subtask): the scene's table plane would trap the hand under it, so the subtask is planned
    with the table open in front, as the drawer's are."""
    tcp, _ = env.robot.tcp_pose()
    return bool(tcp[2] < TABLE_Z + _BELOW_TOP)


_BELOW_TOP = 0.005
"""A tool centre point less than this above the table top counts as below it, m (the fingertips)."""


# --- goals per family ---------------------------------------------------------------------------------------
def _lift(color: str, scene: Scene) -> list[dict[str, Any]]:
    return [{"lifted": {"object": f"block_{color}", "dz": 0.06, "held": True}}]


TABLE_TOP = ((-0.41, -0.155), (0.41, 0.02))
"""Where a pushed block's centre may go on CALVIN's table top, CALVIN frame (x, y min and max corners, m):
the top spans x +-0.44 and y from its front edge (-0.18) to the cabinet's slanted front (from y = 0); the
SIMPACT table is larger, so pushes are kept on it by this region over the whole rollout."""


def _push(color: str, sign: float, scene: Scene) -> list[dict[str, Any]]:
    name = f"block_{color}"
    x0, y0, _ = scene.object(name).position
    low = to_scene([*TABLE_TOP[0], 0.0])
    high = to_scene([*TABLE_TOP[1], 0.0])
    low[:2] = np.minimum(low[:2], [x0, y0])
    high[:2] = np.maximum(high[:2], [x0, y0])
    region = {"min": [round(float(v), 4) for v in low[:2]], "max": [round(float(v), 4) for v in high[:2]]}
    return [
        {"at": {"object": name, "x": round(x0 + sign * 0.15, 4), "tolerance": 0.03}},
        {"in_region": {"object": name, **region, "during": "rollout"}},
        {"stays_on_table": {"object": name}},
    ]


def _unstack(scene: Scene) -> list[dict[str, Any]]:
    """The highest block standing on another lifted 4 cm above where its bottom is, held (CALVIN: the
    block-to-block contact disappears, both blocks slower than 1 m/s and 1 rad/s)."""
    blocks = [o for o in scene.objects if o.name.startswith("block_")]
    top = max(blocks, key=lambda o: o.position[2])
    bottom = top.position[2] - top.size[2] / 2
    if bottom < 0.02:
        raise SimpactError("unstack_block: no block stands on another")
    return [{"lifted": {"object": top.name, "dz": round(bottom + 0.04, 4), "held": True}}]


def _rotate(color: str, sign: float, scene: Scene) -> list[dict[str, Any]]:
    """The block's yaw changed by 80 deg (CALVIN: more than 60; the margin because the block slips in
    CALVIN's grip: a plan turning it 66 deg in SIMPACT fell short in CALVIN on chain 0) clockwise (``sign``
    -1, ``right``) or counterclockwise (+1, ``left``) seen from above, tipped by at most 20 deg (CALVIN:
    its x and y Euler angles under 30), its centre within 5 cm of its start (CALVIN: 10 cm). Both frames
    have the same z axis, so the block's yaw change is the same in each."""
    direction = "ccw" if sign > 0 else "cw"
    name = f"block_{color}"
    return [
        {
            "turned": {
                "object": name,
                "min_deg": 80,
                "direction": direction,
                "max_tilt_deg": 20,
                "max_move": 0.05,
            }
        }
    ]


GoalMaker = Callable[[Scene], list[dict[str, Any]]]


def _goals() -> dict[str, GoalMaker]:
    out: dict[str, GoalMaker] = {}
    for color in ("red", "blue", "pink"):
        out[f"lift_{color}_block_table"] = lambda s, c=color: _lift(c, s)  # type: ignore[misc]
        out[f"lift_{color}_block_slider"] = lambda s, c=color: _lift(c, s)  # type: ignore[misc]
        out[f"push_{color}_block_right"] = lambda s, c=color: _push(c, 1.0, s)  # type: ignore[misc]
        out[f"push_{color}_block_left"] = lambda s, c=color: _push(c, -1.0, s)  # type: ignore[misc]
        out[f"rotate_{color}_block_right"] = lambda s, c=color: _rotate(c, -1.0, s)  # type: ignore[misc]
        out[f"rotate_{color}_block_left"] = lambda s, c=color: _rotate(c, 1.0, s)  # type: ignore[misc]
    out["unstack_block"] = _unstack
    out.update(JOINT_GOALS)
    out.update(PLACE_GOALS)
    return out


GOALS: dict[str, GoalMaker] = _goals()
"""CALVIN subtask → its success condition as goal predicates in the scene frame. ``lift_C_block_table``
and ``lift_C_block_slider``: the block's lowest point 6 cm above the table (CALVIN: its height rises 5 cm
from the table, 3 cm from the slider's plank, which is level with the table top), held. The cabinet's
opening is open from above where the door is not (a block the door covers is not seen by the camera
either, and fails). ``push_C_block_left``
/ ``right``: the block's centre within 3 cm of 15 cm along -x / +x (CALVIN: x changes by more than 10 cm),
on CALVIN's table top (:data:`TABLE_TOP`) throughout and never lifted off the table (CALVIN: its non-robot
contacts are kept). ``unstack_block``: the highest
block (if it stands on another) lifted 4 cm above its bottom, held. ``rotate_C_block_right`` / ``left``:
the block's yaw changed by 80 deg clockwise / counterclockwise seen from above (CALVIN: its Euler z
changes by more than -60 / 60 deg), nearly level and in place (see :func:`_rotate`)."""

UNSUPPORTED: dict[str, str] = {}
"""Subtask family (prefix, ``*`` for a colour) → why this mode does not attempt it."""


def family(task: str) -> str:
    """The subtask's family: its name with the colour replaced by ``*``."""
    for color in ("red", "blue", "pink"):
        task = task.replace(f"_{color}_", "_*_")
    return task


def goal_for(task: str, scene: Scene) -> list[dict[str, Any]]:
    """The subtask's goal predicates in ``scene``, or :class:`Unsupported` naming why not."""
    require_supported(task)
    return GOALS[task](scene)


def require_supported(task: str) -> None:
    """Nothing for a subtask with a goal here; else :class:`Unsupported` naming its family and why not."""
    if task in GOALS:
        return
    fam = family(task)
    for prefix, why in UNSUPPORTED.items():
        if fam.startswith(prefix) or fam == prefix:
            raise Unsupported(f"{fam} unsupported in simpact-offline: {why}")
    raise Unsupported(f"{fam} unsupported in simpact-offline: no goal for it")


def subtask_task(task: str, instruction: str, scene: Scene) -> Task:
    """A SIMPACT :class:`Task` of the subtask in ``scene``: the scene's objects and robot, its goal."""
    raw = {
        "name": task,
        "instruction": instruction,
        "tail_s": TAIL_S,
        **scene.to_dict(),
        "goal": goal_for(task, scene),
        "reference": [],
    }
    return Task(raw)


# --- the policy ---------------------------------------------------------------------------------------------
LAST: dict[str, Any] = {}
"""What the last call of :func:`simpact_offline_policy` planned (for tests and logs): task, family,
scene source, planner success, score, rollouts, wall s, the executed actions."""


def simpact_offline_policy(env: Any, task: str, instruction: str) -> None:
    """Mode ``simpact-offline`` (privileged: see :data:`PRIVILEGED`): plan the subtask in a SIMPACT scene of
    the current state with its own success condition as the goal, then execute the best plan in CALVIN
    (even when the planner found no success in its own simulation: CALVIN's check judges). Unsupported
    families raise :class:`Unsupported`."""
    LAST.clear()
    LAST.update(task=task, family=family(task), scene_source=SCENE_SOURCE, privileged=PRIVILEGED)
    try:
        _plan_and_execute(env, task, instruction)
    finally:  # the subtask's record says how the scene was seen and what was planned (evaluate.Judged)
        notes = getattr(env, "notes", None)
        if isinstance(notes, dict):
            notes.update({k: v for k, v in LAST.items() if k != "actions"})


def _plan_and_execute(env: Any, task: str, instruction: str) -> None:
    if not hasattr(env, "table") or not hasattr(env, "pb"):
        raise SimpactError("mode simpact-offline reads the simulator: use --backend rebuild")
    require_supported(task)
    untilt(env)
    inside, hand = task in INSIDE_DRAWER, task in HAND_START
    open_front = task in DRAWER_TASKS or inside or hand_below_table(env)
    source = "ground_truth" if task in GROUND_TRUTH_BLOCKS else SCENE_SOURCE
    LAST["scene_source"] = source
    scene = calvin_scene(env, source, open_front, inside, hand)
    LAST["held_block"] = scene.robot.holding
    if source == "frame":
        truth = calvin_scene(env, "ground_truth", open_front, inside, hand)
        LAST["ground_truth_blocks"] = [
            o.name for o in scene.objects if o.name.startswith("block_") and o in truth.objects
        ]
        LAST["frame_error_m"] = {
            o.name: round(float(np.linalg.norm(np.subtract(o.position, truth.object(o.name).position))), 4)
            for o in scene.objects
            if o.name.startswith("block_") and o not in truth.objects
        }
    spec = subtask_task(task, instruction, scene)  # raises Unsupported first
    t0 = time.perf_counter()
    world = make_world(scene)
    try:
        result = plan_tree(spec, scene, world, seed=0, max_rollouts=MAX_ROLLOUTS, budget_s=BUDGET_S)
    finally:
        close = getattr(world, "close", None)
        if callable(close):
            close()
    LAST.update(planner_success=result.success, rollouts=result.rollouts,
                plan_s=round(time.perf_counter() - t0, 2))  # fmt: skip
    if result.best is None:
        raise SimpactError(f"{task}: the planner proposed no plan")
    best = result.proposals[result.best]
    actions = [a.to_dict() for a in best.plan.actions]
    LAST.update(score=round(best.score, 4), actions=actions)
    if task in TILT:
        LAST["hint"] = f"hand tilted by {TILT[task]} rad in execution"
    execute(env, actions, TILT.get(task, 0.0))
