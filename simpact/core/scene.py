"""Scenes: the objects on the table and where the robot starts, as plain serialisable values.

A Scene is what real2sim produces and what a task config describes; solvers build a World from it.
Frames: the robot base frame is the world frame, z up, z = 0 on the table surface. Units: metres, kilograms,
radians; quaternions are (w, x, y, z).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError
from simpact.core.rotations import quat_to_matrix
from simpact.core.vocab import OBJECT_KINDS

__all__ = [
    "JOINT_TYPES",
    "ROBOT_TOOLS",
    "RobotStart",
    "Scene",
    "SceneError",
    "SceneObject",
    "SHAPES",
    "TABLE_NEAR_X",
    "joint_axis",
]

TABLE_NEAR_X = -0.3
"""World x (m) of the table top's edge behind the robot base; the table spans ``TABLE_NEAR_X`` to
``TABLE_NEAR_X + table_size[0]`` in x, centred on y = 0."""

SHAPES = ("box", "cylinder", "sphere", "bowl", "mesh")
"""Primitive shapes, a procedural bowl, or a mesh file. Sizes: box = full edge lengths (x, y, z); cylinder =
(radius, height); sphere = (radius,); bowl = (outer radius, height, wall thickness); mesh = scale
(x, y, z)."""


class SceneError(SimpactError, ValueError):
    """A scene that cannot be built; the message names the object and the field."""


_DEFORMABLE_FIELDS = ("particles", "material")
_OPTIONAL_FIELDS = (*_DEFORMABLE_FIELDS, "joint")
"""Fields a dict carries only when set (a rigid object's dict is unchanged by them)."""

JOINT_TYPES = ("slide", "hinge")
"""An articulated part's joint: ``slide`` (prismatic, position in m) or ``hinge`` (revolute, rad)."""
_JOINT_KEYS = frozenset({"type", "axis", "range", "position", "damping", "frictionloss", "anchor"})


def _check_joint(label: str, joint: Mapping[str, Any]) -> None:
    """A part's joint: ``type`` (slide / hinge), ``axis`` (3, body frame, normalised when built),
    ``range`` ([lo, hi] m or rad), ``position`` (its value in the pose the object is given at, within the
    range; default lo), ``damping`` (N s/m or N m s/rad), ``frictionloss`` (N or N m), and for a hinge
    ``anchor`` (3, a point of its axis in the body frame, m; default the body origin)."""
    unknown = set(joint) - _JOINT_KEYS
    if unknown:
        raise SceneError(f"{label}: joint has unknown keys {sorted(unknown)}; takes {sorted(_JOINT_KEYS)}")
    if joint.get("type") not in JOINT_TYPES:
        raise SceneError(f"{label}: joint type must be one of {JOINT_TYPES}, got {joint.get('type')!r}")
    axis = np.asarray(joint.get("axis", ()), dtype=float)
    if axis.shape != (3,) or not np.isfinite(axis).all() or np.linalg.norm(axis) < 1e-9:
        raise SceneError(
            f"{label}: joint axis must be 3 finite numbers, not all zero, got {joint.get('axis')}"
        )
    lo, hi = (float(v) for v in joint.get("range", (np.nan, np.nan)))
    if not lo < hi:
        raise SceneError(f"{label}: joint range must be [lo, hi] with lo < hi, got {joint.get('range')}")
    q0 = float(joint.get("position", lo))
    if not lo - 1e-9 <= q0 <= hi + 1e-9:
        raise SceneError(f"{label}: joint position {q0} outside its range [{lo}, {hi}]")
    for key in ("damping", "frictionloss"):
        if not float(joint.get(key, 0.0)) >= 0:
            raise SceneError(f"{label}: joint {key} must be non-negative, got {joint.get(key)}")
    anchor = np.asarray(joint.get("anchor", (0.0, 0.0, 0.0)), dtype=float)
    if anchor.shape != (3,) or not np.isfinite(anchor).all():
        raise SceneError(f"{label}: joint anchor must be 3 finite numbers, got {joint.get('anchor')}")


def joint_axis(obj: SceneObject) -> np.ndarray:
    """A jointed object's unit joint axis in the world frame (its body axis turned by its quaternion)."""
    axis = quat_to_matrix(obj.quaternion) @ np.asarray(obj.joint["axis"], dtype=float)
    return axis / np.linalg.norm(axis)


@dataclass(frozen=True)
class SceneObject:
    """One object: geometry, pose in the world frame and physical parameters."""

    name: str
    shape: str
    size: tuple[float, ...]
    position: tuple[float, float, float]
    quaternion: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    mass: float = 0.1
    """kg; ignored for fixed objects."""
    friction: float = 0.5
    """Sliding friction coefficient."""
    rgba: tuple[float, float, float, float] = (0.7, 0.7, 0.7, 1.0)
    kind: str = "rigid"
    """Solver: rigid (MuJoCo), pd (projective dynamics) or mpm."""
    fixed: bool = False
    """Welded to the world (a wall, a fixture)."""
    collides: bool = True
    """False for markers (target regions, reference lines) that are seen but not touched."""
    mesh: str | None = None
    """Mesh file (OBJ/STL/PLY) for shape 'mesh'."""
    convex_decomposition: bool | None = None
    """Split a concave mesh into convex parts (coacd) for contact; default: on for bowls and meshes."""
    particles: str | None = None
    """Particle file (``.npy``, (N, 3) positions in the world frame, m) of a ``pd`` or ``mpm`` object."""
    material: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """A deformable's material: ``model`` (e.g. ``plasticine``, ``sand``), ``youngs_modulus`` (Pa),
    ``poissons_ratio``, ``density`` (kg/m^3), ``friction_angle`` (deg), ``yield_stress`` (Pa)."""
    joint: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """An articulated part of the fixed table (a drawer, a sliding door, a button, a switch), with
    ``fixed`` true: one joint instead of a free one (see :func:`_check_joint` for its keys); empty for a
    free or welded object. Its ``mass`` (kg) is the moving part's."""

    def __post_init__(self) -> None:
        label = f"object '{self.name}'"
        if self.shape not in SHAPES:
            raise SceneError(f"{label}: unknown shape {self.shape!r}; expected one of {SHAPES}")
        if self.shape == "mesh" and not self.mesh:
            raise SceneError(f"{label}: shape 'mesh' needs a 'mesh' file")
        need = {"box": 3, "cylinder": 2, "sphere": 1, "bowl": 3, "mesh": 3}[self.shape]
        if len(self.size) != need or not all(np.isfinite(self.size)) or min(self.size) <= 0:
            raise SceneError(
                f"{label}: size must be {need} positive numbers for a {self.shape}, got {self.size}"
            )
        if len(self.position) != 3 or not all(np.isfinite(self.position)):
            raise SceneError(f"{label}: position must be 3 finite numbers, got {self.position}")
        q = np.asarray(self.quaternion, dtype=float)
        if q.shape != (4,) or not np.isfinite(q).all() or abs(np.linalg.norm(q) - 1) > 1e-3:
            raise SceneError(f"{label}: quaternion must be 4 numbers of unit norm, got {self.quaternion}")
        if not self.fixed and self.collides and not self.mass > 0:
            raise SceneError(f"{label}: mass must be positive, got {self.mass}")
        if not self.friction >= 0:
            raise SceneError(f"{label}: friction must be non-negative, got {self.friction}")
        if self.kind not in OBJECT_KINDS:
            raise SceneError(f"{label}: kind must be rigid, pd or mpm, got {self.kind!r}")
        if self.joint:
            _check_joint(label, self.joint)
            if not self.fixed or self.kind != "rigid" or not self.collides or not self.mass > 0:
                raise SceneError(
                    f"{label}: a jointed part must be fixed (part of the table), rigid, colliding and of "
                    "positive mass"
                )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SceneObject:
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise SceneError(f"object '{raw.get('name', '?')}': unknown fields {sorted(unknown)}")
        values = dict(raw)
        for key in ("size", "position", "quaternion", "rgba"):
            if key in values:
                values[key] = tuple(float(v) for v in values[key])
        try:
            return cls(**values)
        except TypeError as exc:
            raise SceneError(f"object '{raw.get('name', '?')}': {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """Every field; the deformable ones and the joint only when set, so a rigid object's dict is
        unchanged."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in _OPTIONAL_FIELDS:
            if not out[key]:
                del out[key]
        for key in ("material", "joint"):
            if key in out:
                out[key] = dict(out[key])
        return out

    def moved(self, **changes: Any) -> SceneObject:
        return replace(self, **changes)

    @property
    def look(self) -> tuple[Any, ...]:
        """What a photo shows of it (shape, sorted size in mm, colour): objects alike in it (two walls) cannot
        be told apart by their names."""
        size = tuple(np.round(np.sort(np.asarray(self.size, dtype=float)) * 1000).astype(int).tolist())
        return (self.shape, size, tuple(round(float(v), 3) for v in self.rgba))


ROBOT_TOOLS = ("squeeze_plates",)
"""Tools a task may fit to the hand (``robot: {tool: ...}``): ``squeeze_plates``, a flat plate on each
fingertip for squeezing dough (see :func:`solvers.mujoco.robot.add_squeeze_plates`)."""


@dataclass(frozen=True)
class RobotStart:
    """The robot's start: tool-centre-point position (m), yaw about z from the home orientation (rad,
    gripper pointing down), gripper opening (m), the tool fitted to the hand (``None``: the bare hand), and
    the object it starts holding (``holding``: a movable object's name, ``None``: none)."""

    position: tuple[float, float, float] = (0.45, 0.0, 0.25)
    yaw: float = 0.0
    gripper_width: float = 0.08
    tool: str | None = None
    holding: str | None = None
    """An object the scene places between the fingers (its width across them ``gripper_width``): the
    fingers start at that opening with the gripper commanded closed, so they squeeze it (e.g. a subtask
    that follows a lift, the robot never reset between them)."""

    def __post_init__(self) -> None:
        if self.tool is not None and self.tool not in ROBOT_TOOLS:
            raise SceneError(f"robot: unknown tool {self.tool!r}; expected one of {ROBOT_TOOLS}")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RobotStart:
        tool, holding = raw.get("tool"), raw.get("holding")
        return cls(
            tuple(float(v) for v in raw.get("position", cls.position)),  # type: ignore[arg-type]
            float(raw.get("yaw", cls.yaw)),
            float(raw.get("gripper_width", cls.gripper_width)),
            None if tool is None else str(tool),
            None if holding is None else str(holding),
        )


@dataclass(frozen=True)
class Scene:
    """Objects on a table whose surface is the plane z = 0, and the robot's start."""

    objects: tuple[SceneObject, ...]
    robot: RobotStart = field(default_factory=RobotStart)
    table_size: tuple[float, float] = (1.4, 1.4)
    """Table top extent in x and y, m; it spans x from :data:`TABLE_NEAR_X`, centred on y = 0."""
    table_friction: float = 0.5

    def __post_init__(self) -> None:
        names = [o.name for o in self.objects]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SceneError(f"object names must be unique, repeated: {dupes}")
        held = self.robot.holding
        if held is not None:
            if held not in names:
                raise SceneError(f"robot: holding {held!r}, which is not an object of the scene ({names})")
            obj = self.objects[names.index(held)]
            if obj.fixed or obj.kind != "rigid" or not obj.collides:
                raise SceneError(f"robot: holding {held!r}, which must be a movable, colliding rigid object")

    def object(self, name: str) -> SceneObject:
        for obj in self.objects:
            if obj.name == name:
                return obj
        raise SceneError(f"no object named '{name}' (have {[o.name for o in self.objects]})")

    def replace_object(self, obj: SceneObject) -> Scene:
        return replace(self, objects=tuple(obj if o.name == obj.name else o for o in self.objects))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Scene:
        objects = tuple(SceneObject.from_dict(o) for o in raw.get("objects", ()))
        robot = RobotStart.from_dict(raw.get("robot", {}))
        extra = {k: raw[k] for k in ("table_size", "table_friction") if k in raw}
        if "table_size" in extra:
            extra["table_size"] = tuple(float(v) for v in extra["table_size"])
        return cls(objects, robot, **extra)

    def to_dict(self) -> dict[str, Any]:
        return {
            "objects": [o.to_dict() for o in self.objects],
            "robot": {
                "position": list(self.robot.position),
                "yaw": self.robot.yaw,
                "gripper_width": self.robot.gripper_width,
                **({"tool": self.robot.tool} if self.robot.tool else {}),
                **({"holding": self.robot.holding} if self.robot.holding else {}),
            },
            "table_size": list(self.table_size),
            "table_friction": self.table_friction,
        }
