"""SimuGuard's labelled suite: contact artifacts that MuJoCo's own contact handling makes, and hard negatives,
in scenes drawn from the five tasks (their objects, their robot, their reference plans).

An episode is a task scene with a change (objects moved, stacked, thrown; a stiffness or mass set), the
robot holding still or running a plan, and a duration. Its parameters come from
``numpy.random.default_rng(seed)``; its family is ``CYCLE[seed % 24]`` (:data:`CYCLE`). Each family's main
parameter is drawn from two of four bands of its range, the development split's bands interleaved with the
evaluation split's (:data:`SPLITS`: disjoint seeds and disjoint main-parameter values).

The family says what was set up, not the label: :mod:`simpact.guard.labels` labels every episode from an
energy audit and a rerun with the suspected cause removed (``fixed=True`` builds the same draw without it:
no overlap, equal masses; families whose suspected cause is the step take a 10x smaller one instead).

Set up to make artifacts (objects created overlapping at several depths and contact stiffnesses; a bowl's
convex pieces inside the other bowl's wall; an object inside the hand; a heavy object on a light one; a thin
wall hit at speed): :data:`SETUPS`. Hard negatives (drops, a bowl dropped into a bowl, throws, pushes low and
high (topples), released grasps, bowls placed, pivoting, rolls off the table's edge, a bowl shoved with a
bowl inside): :data:`NEGATIVES`. ``kick`` (a one-step external force through ``xfrc_applied``) is an
external impulse, kept out of the positives and reported apart (:data:`EXTERNAL`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from simpact.core.scene import Scene, SceneObject
from simpact.tasks import load_task
from solvers.world import make_world

__all__ = [
    "CYCLE",
    "EXTERNAL",
    "FAMILIES",
    "FIX_SUBSTEPS",
    "NEGATIVES",
    "SETUPS",
    "SPLITS",
    "TASKS",
    "Kick",
    "SuiteEpisode",
    "episode",
    "split_seeds",
    "suite",
]

SETUPS = ("overlap", "sunk", "bowl_in_wall", "in_hand", "mass_ratio", "thin_wall")
NEGATIVES = (
    "drop",
    "bowl_drop",
    "throw",
    "push",
    "release",
    "bowl_place",
    "pivot",
    "roll_off",
    "shove",
)
EXTERNAL = ("kick",)
FAMILIES = SETUPS + NEGATIVES + EXTERNAL
TASKS = ("avoid_obstacle", "bowl_stacking", "non_toppling_push", "pivoting")
"""The tasks whose scenes, objects and reference plans the episodes are drawn from."""
CYCLE = ("overlap",) * 5 + ("sunk",) * 3 + ("bowl_in_wall",) * 3 + SETUPS[3:] + NEGATIVES + EXTERNAL
"""Seed ``s`` is of family ``CYCLE[s % 24]``: the setups that can make artifacts take half the cycle."""
SPLITS = {"dev": 0, "eval": 120_000}
"""First seed of each split (multiples of the cycle); a split's seeds are ``first + i``, ``i < n``."""
FIX_SUBSTEPS = 10
"""Rerun with the step divided by this, for families whose suspected cause is the step's size."""
_BY_STEP = {"thin_wall", *NEGATIVES, *EXTERNAL}
"""Families whose rerun takes the smaller step (the others rebuild the draw with ``fixed=True``)."""


@dataclass(frozen=True)
class Kick:
    """A force applied to one object during one physics step (an external impulse of ``force * dt``)."""

    step: int
    body: str
    force: tuple[float, float, float]
    """World frame, N."""


@dataclass(frozen=True)
class SuiteEpisode:
    """One episode: the scene, what the robot does, and the changes to the built model (SI units)."""

    name: str
    family: str
    seed: int
    split: str
    task: str
    """The task the scene and plan are drawn from."""
    scene: Scene
    seconds: float
    """Duration after the plan's last action (the whole episode without a plan), s."""
    actions: tuple[dict[str, Any], ...] = ()
    """The robot's plan (empty: the robot holds its start pose)."""
    created: bool = True
    """Start from the objects' created poses (else from the task world's settled state, as rollouts do)."""
    qvel: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Initial velocity of objects (linear, then angular in the body frame), m/s and rad/s."""
    solref: dict[str, float] = field(default_factory=dict)
    """Contact time constant of an object's geoms, s (critically damped)."""
    kicks: tuple[Kick, ...] = ()
    params: dict[str, float] = field(default_factory=dict)
    fixed: bool = False
    """Built with the suspected cause removed (the rerun's scene)."""

    @property
    def substep_fix(self) -> bool:
        """The rerun takes a smaller step (else it is the ``fixed=True`` draw)."""
        return self.family in _BY_STEP

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "seed": self.seed,
            "split": self.split,
            "task": self.task,
            "seconds": self.seconds,
            "actions": list(self.actions),
            "created": self.created,
            "qvel": {k: list(v) for k, v in self.qvel.items()},
            "solref": dict(self.solref),
            "kicks": [{"step": k.step, "body": k.body, "force": list(k.force)} for k in self.kicks],
            "params": {k: round(v, 5) for k, v in self.params.items()},
        }


# --- drawing ------------------------------------------------------------------------------------------------
class _Draw:
    """One episode's seeded draws; :meth:`main` draws the family's main parameter in its split's bands."""

    def __init__(self, seed: int, split: str) -> None:
        self.rng = np.random.default_rng(seed)
        self.odd = split == "eval"
        self.seed = seed

    def main(self, lo: float, hi: float) -> float:
        band = 2 * int(self.rng.integers(2)) + int(self.odd)
        return float(lo + (hi - lo) * (band + self.rng.uniform()) / 4.0)

    def u(self, lo: float, hi: float) -> float:
        return float(self.rng.uniform(lo, hi))

    def pick(self, options: tuple[Any, ...]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def tilt(self, deg: float) -> tuple[float, float, float, float]:
        x, y, z, w = Rotation.from_euler("xyz", self.rng.uniform(-deg, deg, 3), degrees=True).as_quat()
        return (float(w), float(x), float(y), float(z))


def _scene(task: str, d: _Draw) -> Scene:
    return load_task(task).scene(int(d.rng.integers(1_000_000)))


def _at(
    obj: SceneObject, x: float | None = None, y: float | None = None, z: float | None = None
) -> SceneObject:
    p = obj.position
    return obj.moved(position=(p[0] if x is None else x, p[1] if y is None else y, p[2] if z is None else z))


def _half_height(obj: SceneObject) -> float:
    """Height of the body origin above the table when resting upright (bowls: origin at the base), m."""
    if obj.shape == "box":
        return obj.size[2] / 2
    if obj.shape == "cylinder":
        return obj.size[1] / 2
    return obj.size[0] if obj.shape == "sphere" else 0.0


Spec = tuple[str, Scene, dict[str, Any], dict[str, float]]
"""(task, scene, SuiteEpisode fields, drawn parameters)."""
_STIFFNESS = (0.002, 0.006)
"""Range of the contact time constant of objects created overlapping, s (MuJoCo's default is 0.02)."""
_PAIRS = (
    ("avoid_obstacle", "can", "mug"),
    ("non_toppling_push", "blue_box", "carton"),
    ("pivoting", "box", "wall"),
)
_SOLID = (("avoid_obstacle", "can"), ("avoid_obstacle", "mug"), ("non_toppling_push", "carton"),
          ("non_toppling_push", "blue_box"), ("pivoting", "box"))  # fmt: skip


def _x_extent(obj: SceneObject) -> float:
    """Half extent along x, m."""
    return obj.size[0] if obj.shape in ("cylinder", "sphere") else obj.size[0] / 2


def _overlap(d: _Draw, fixed: bool) -> Spec:
    task, mover, other = d.pick(_PAIRS)
    depth, stiff = d.main(0.01, 0.04), d.u(*_STIFFNESS)
    scene = _scene(task, d)
    a, b = scene.object(mover), scene.object(other)
    gap = _x_extent(a) + _x_extent(b)
    x = b.position[0] - gap + (-0.002 if fixed else depth)
    scene = scene.replace_object(_at(a, x=x, y=b.position[1], z=_half_height(a) + 0.0005))
    fields = {"solref": {mover: stiff, other: stiff}}
    return task, scene, fields, {"overlap": depth, "solref_s": stiff}


def _sunk(d: _Draw, fixed: bool) -> Spec:
    task, name = d.pick(_SOLID)
    depth, stiff = d.main(0.015, 0.045), d.u(*_STIFFNESS)
    scene = _scene(task, d)
    obj = scene.object(name)
    z = _half_height(obj) + (0.001 if fixed else -depth)
    return (
        task,
        scene.replace_object(_at(obj, z=z)),
        {"solref": {name: stiff}},
        {"depth": depth, "solref_s": stiff},
    )


def _bowl_in_wall(d: _Draw, fixed: bool) -> Spec:
    offset, height, heading = d.main(0.025, 0.05), d.u(0.0, 0.035), d.u(0.0, 2 * np.pi)
    stiff = d.u(*_STIFFNESS)
    scene = _scene("bowl_stacking", d)
    green, white = scene.object("green_bowl"), scene.object("white_bowl")
    r = 0.0 if fixed else offset
    x, y = white.position[0] + r * np.cos(heading), white.position[1] + r * np.sin(heading)
    z = white.position[2] + white.size[2] + (0.002 if fixed else height)
    scene = scene.replace_object(_at(green, x=float(x), y=float(y), z=z))
    fields = {"solref": {"green_bowl": stiff, "white_bowl": stiff}}
    return "bowl_stacking", scene, fields, {"offset": offset, "height": height, "solref_s": stiff}


_HANDS = (("avoid_obstacle", "can"), ("non_toppling_push", "blue_box"), ("bowl_stacking", "green_bowl"))


def _in_hand(d: _Draw, fixed: bool) -> Spec:
    task, name = d.pick(_HANDS)
    rise, side, stiff = d.main(0.02, 0.12), d.u(-0.03, 0.03), d.u(*_STIFFNESS)
    scene = _scene(task, d)
    obj, tcp = scene.object(name), scene.robot.position
    z = _half_height(obj) + 0.001 if fixed else tcp[2] - _half_height(obj) + rise
    scene = scene.replace_object(_at(obj, x=tcp[0] + side, y=tcp[1], z=z))
    return task, scene, {"solref": {name: stiff}}, {"rise": rise, "side": side, "solref_s": stiff}


def _mass_ratio(d: _Draw, fixed: bool) -> Spec:
    ratio, light = d.main(30.0, 1000.0), d.u(0.02, 0.1)
    push = _scene("non_toppling_push", d)
    piv = _scene("pivoting", d)
    cube = push.object("blue_box").moved(mass=light, position=(0.55, 0.0, 0.0255))
    top = piv.object("box")
    heavy = light if fixed else light * ratio
    top = top.moved(mass=heavy, position=(0.55, 0.0, 0.051 + top.size[2] / 2))
    scene = Scene((cube, top), push.robot, push.table_size, push.table_friction)
    return "non_toppling_push+pivoting", scene, {}, {"mass_ratio": ratio, "light_kg": light}


def _thin_wall(d: _Draw, fixed: bool) -> Spec:
    speed, wall, name = d.main(2.0, 8.0), d.u(0.002, 0.006), d.pick(("can", "box"))
    task = "avoid_obstacle" if name == "can" else "pivoting"
    scene = _scene(task, d)
    obj = scene.object(name)
    w = _scene("pivoting", d).object("wall").moved(name="thin_wall", size=(wall, 0.36, 0.16))
    w = _at(w, x=0.75, y=0.0, z=0.08)
    start = 0.75 - wall / 2 - _x_extent(obj) - 0.06
    objects = tuple(o for o in scene.objects if o.name == name) + (w,)
    objects = (_at(obj, x=start, y=0.0, z=_half_height(obj) + 0.001),) + objects[1:]
    scene = Scene(objects, scene.robot, scene.table_size, scene.table_friction)
    return task, scene, {"qvel": {name: (speed, 0.0, 0.0)}}, {"speed": speed, "wall": wall}


_DROPS = _SOLID + (("bowl_stacking", "green_bowl"), ("bowl_stacking", "white_bowl"))


def _drop(d: _Draw, fixed: bool) -> Spec:
    task, name = d.pick(_DROPS)
    height, quat = d.main(0.02, 0.3), d.tilt(30.0)
    scene = _scene(task, d)
    obj = scene.object(name)
    z = _half_height(obj) + height + 0.03
    return (
        task,
        scene.replace_object(_at(obj, z=z).moved(quaternion=quat)),
        {"seconds": 1.5},
        {"height": height},
    )


def _bowl_drop(d: _Draw, fixed: bool) -> Spec:
    height, r, heading = d.main(0.01, 0.12), d.u(0.0, 0.015), d.u(0.0, 2 * np.pi)
    scene = _scene("bowl_stacking", d)
    green, white = scene.object("green_bowl"), scene.object("white_bowl")
    x, y = white.position[0] + r * np.cos(heading), white.position[1] + r * np.sin(heading)
    scene = scene.replace_object(_at(green, x=float(x), y=float(y), z=white.size[2] + height))
    return "bowl_stacking", scene, {"seconds": 1.5}, {"height": height, "offset": r}


def _throw(d: _Draw, fixed: bool) -> Spec:
    task, name = d.pick(_DROPS)
    speed, height, up = d.main(0.8, 3.0), d.u(0.03, 0.25), d.u(0.0, 1.5)
    heading, spin = d.u(-0.5, 0.5), d.rng.uniform(-10.0, 10.0, 3)
    scene = _scene(task, d)
    obj = scene.object(name)
    scene = scene.replace_object(
        _at(obj, x=0.45, y=0.0, z=_half_height(obj) + height).moved(quaternion=d.tilt(20))
    )
    v = (speed * np.cos(heading), speed * np.sin(heading), up, *spin)
    return task, scene, {"qvel": {name: tuple(float(x) for x in v)}, "seconds": 1.5}, {"speed": speed}


def _reference(task: str, d: _Draw) -> tuple[Scene, list[dict[str, Any]]]:
    t = load_task(task)
    seed = int(d.rng.integers(1_000_000))
    scene = t.scene(seed)
    plan = t.reference_plan(scene, make_world(scene).start_pose(), seed)
    return scene, [a.to_dict() for a in plan.actions]


def _push(d: _Draw, fixed: bool) -> Spec:
    height = d.main(0.01, 0.16)
    scene, actions = _reference("non_toppling_push", d)
    for a in actions:
        if a["type"] == "DESCEND":
            a["dz"] = scene.robot.position[2] - height
    return "non_toppling_push", scene, {"actions": tuple(actions), "created": False}, {"push_height": height}


def _release(d: _Draw, fixed: bool) -> Spec:
    lift = d.main(0.01, 0.15)
    scene, actions = _reference("avoid_obstacle", d)
    cut = next(i for i, a in enumerate(actions) if a["type"] == "GRASP")
    actions = actions[: cut + 1] + [
        {"type": "LIFT", "dz": lift},
        {"type": "RELEASE"},
        {"type": "LIFT", "dz": 0.05},
    ]
    return "avoid_obstacle", scene, {"actions": tuple(actions), "created": False}, {"release_height": lift}


def _bowl_place(d: _Draw, fixed: bool) -> Spec:
    scale = d.main(0.0, 1.0)
    scene, actions = _reference("bowl_stacking", d)
    last = max(i for i, a in enumerate(actions) if a["type"] == "DESCEND")
    actions[last]["dz"] = float(actions[last]["dz"]) * scale
    return "bowl_stacking", scene, {"actions": tuple(actions), "created": False}, {"lowering": scale}


def _pivot(d: _Draw, fixed: bool) -> Spec:
    scale = d.main(0.8, 1.2)
    scene, actions = _reference("pivoting", d)
    for a in actions:
        if a["type"] == "MOVE" and a.get("dz", 0.0) > 0:
            a["dz"] = float(a["dz"]) * scale
    return "pivoting", scene, {"actions": tuple(actions), "created": False}, {"arc_scale": scale}


def _roll_off(d: _Draw, fixed: bool) -> Spec:
    speed = d.main(0.3, 1.5)
    scene = _scene("avoid_obstacle", d)
    can = scene.object("can")
    r = can.size[0]
    edge = -0.3 + scene.table_size[0]
    lying = (float(np.cos(np.pi / 4)), float(np.sin(np.pi / 4)), 0.0, 0.0)  # axis along y: rolls along x
    scene = scene.replace_object(_at(can, x=edge - 0.12, y=0.0, z=r + 0.0005).moved(quaternion=lying))
    v = (speed, 0.0, 0.0, 0.0, 0.0, 0.0)
    return "avoid_obstacle", scene, {"qvel": {"can": v}, "seconds": 1.5}, {"speed": speed}


def _shove(d: _Draw, fixed: bool) -> Spec:
    distance = d.main(0.05, 0.25)
    scene = _scene("bowl_stacking", d)
    green, white = scene.object("green_bowl"), scene.object("white_bowl")
    scene = scene.replace_object(
        _at(green, x=white.position[0], y=white.position[1], z=white.size[2] + 0.002)
    )
    ee = scene.robot.position
    behind = white.position[0] - white.size[0] - 0.104 - 0.03
    actions = (
        {"type": "GRASP", "d": 0.0},
        {"type": "MOVE", "dx": behind - ee[0], "dy": white.position[1] - ee[1], "dz": 0.0},
        {"type": "DESCEND", "dz": ee[2] - 0.03},
        {"type": "PUSH", "dx": distance, "dy": 0.0},
        {"type": "LIFT", "dz": 0.1},
    )
    return "bowl_stacking", scene, {"actions": actions, "seconds": 0.5}, {"distance": distance}


def _kick(d: _Draw, fixed: bool) -> Spec:
    task, name = d.pick(_SOLID)
    dv, at = d.main(1.0, 4.0), d.u(0.2, 0.4)
    elevation, heading = d.u(0.3, 1.0), d.u(0, 2 * np.pi)
    scene = _scene(task, d)
    obj = scene.object(name)
    direction = np.array(
        [np.cos(heading) * np.cos(elevation), np.sin(heading) * np.cos(elevation), np.sin(elevation)]
    )
    force = tuple(float(x) for x in obj.mass * dv / 0.002 * direction)
    kick = Kick(int(round(at / 0.002)), name, force)  # type: ignore[arg-type]
    return task, scene, {"kicks": (kick,)}, {"kick_dv": dv}


_BUILDERS: dict[str, Callable[[_Draw, bool], Spec]] = {
    "overlap": _overlap,
    "sunk": _sunk,
    "bowl_in_wall": _bowl_in_wall,
    "in_hand": _in_hand,
    "mass_ratio": _mass_ratio,
    "thin_wall": _thin_wall,
    "drop": _drop,
    "bowl_drop": _bowl_drop,
    "throw": _throw,
    "push": _push,
    "release": _release,
    "bowl_place": _bowl_place,
    "pivot": _pivot,
    "roll_off": _roll_off,
    "shove": _shove,
    "kick": _kick,
}


def split_seeds(split: str, n: int) -> list[int]:
    """The first ``n`` seeds of ``split`` (``dev`` or ``eval``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    return [SPLITS[split] + i for i in range(n)]


def episode(seed: int, fixed: bool = False) -> SuiteEpisode:
    """The episode of ``seed`` (family ``CYCLE[seed % len(CYCLE)]``; split ``eval`` from seed 120000);
    ``fixed``: the same draw with the suspected cause removed. Deterministic in ``seed``."""
    family = CYCLE[seed % len(CYCLE)]
    split = "eval" if seed >= SPLITS["eval"] else "dev"
    task, scene, extra, params = _BUILDERS[family](_Draw(seed, split), fixed)
    fields = {"seconds": 1.0, **extra}
    return SuiteEpisode(
        name=f"{family}-{seed:06d}",
        family=family,
        seed=seed,
        split=split,
        task=task,
        scene=scene,
        params={k: float(v) for k, v in params.items()},
        fixed=fixed,
        **fields,
    )


def suite(seeds: list[int] | range) -> list[SuiteEpisode]:
    """The episodes of ``seeds``."""
    return [episode(s) for s in seeds]


def fixed_episode(ep: SuiteEpisode) -> SuiteEpisode:
    """``ep`` with its suspected cause removed (the rerun's episode; for step-size families, ``ep`` itself:
    the runner divides the step)."""
    return ep if ep.substep_fix else replace(episode(ep.seed, fixed=True))
