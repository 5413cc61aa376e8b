"""Build a MuJoCo model of a Scene: the FR3 on a table and the scene's objects.

Objects become bodies named after the object with a free joint of the same name (fixed objects are welded);
primitives map to MuJoCo geoms, bowls and meshes to convex parts for contact plus one visual mesh. A fixed
object with a ``joint`` (an articulated part of the table) gets that slide or hinge joint, of the same name,
instead: its body is at the object's pose when the joint is at its ``position`` (MuJoCo's ``ref``),
gravity-compensated (its guides carry it) and not in contact with the table or the fixed objects (its
joint's range is its guide).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
import trimesh

from simpact.core.rollout import ObjectState
from simpact.core.rotations import quat_mul, quat_rotate
from simpact.core.scene import TABLE_NEAR_X, Scene, SceneError, SceneObject, joint_axis
from solvers.mujoco.meshes import bowl_mesh, convex_parts, load_mesh
from solvers.mujoco.robot import add_squeeze_plates, load_fr3_spec

__all__ = ["PhysicsOptions", "build_spec", "object_mesh", "part_state"]

TABLE_THICKNESS = 0.05
TABLE_X0 = TABLE_NEAR_X
"""The table's edge behind the robot base, m."""


@dataclass(frozen=True)
class PhysicsOptions:
    """Simulator settings."""

    timestep: float = 0.002
    """Physics step, s."""
    impratio: float = 10.0
    """Frictional-to-normal impedance ratio; high values stop grasped objects from creeping."""
    iterations: int = 50
    """Constraint solver iterations."""
    torsional_friction: float = 0.005
    """Torsional friction of objects, m (contact patch radius)."""


def object_mesh(obj: SceneObject) -> trimesh.Trimesh | None:
    """The triangle mesh of a bowl or mesh object in its body frame; None for primitives."""
    if obj.shape == "bowl":
        radius, height, wall = obj.size
        return bowl_mesh(radius, height, wall)
    if obj.shape == "mesh":
        assert obj.mesh is not None
        return load_mesh(obj.mesh, obj.size)  # type: ignore[arg-type]
    return None


def _add_object(spec: mujoco.MjSpec, obj: SceneObject, options: PhysicsOptions) -> None:
    if obj.kind != "rigid":
        raise SceneError(
            f"object '{obj.name}' is of kind '{obj.kind}': the MuJoCo world simulates rigid objects only"
        )
    body = spec.worldbody.add_body(name=obj.name, pos=list(obj.position), quat=list(obj.quaternion))
    if not obj.fixed and obj.collides:
        body.add_freejoint(name=obj.name)
    moving = not obj.fixed or bool(obj.joint)
    if obj.joint:
        _add_joint(body, obj)
    contact = {"contype": 1, "conaffinity": 1} if obj.collides else {"contype": 0, "conaffinity": 0}
    common = {
        "rgba": list(obj.rgba),
        "friction": [obj.friction, options.torsional_friction, 0.0001],
        "condim": 4,
        **contact,
    }
    mesh = object_mesh(obj)
    if mesh is None:
        kind, size = {
            "box": (mujoco.mjtGeom.mjGEOM_BOX, [s / 2 for s in obj.size]),
            "cylinder": (mujoco.mjtGeom.mjGEOM_CYLINDER, [obj.size[0], obj.size[1] / 2, 0]),
            "sphere": (mujoco.mjtGeom.mjGEOM_SPHERE, [obj.size[0], 0, 0]),
        }[obj.shape]
        geom = body.add_geom(name=obj.name, type=kind, size=size, **common)
        if obj.collides and moving:
            geom.mass = obj.mass
        return
    visual = spec.add_mesh(name=f"{obj.name}_visual")
    visual.uservert = np.asarray(mesh.vertices, dtype=np.float32).ravel().tolist()
    visual.userface = np.asarray(mesh.faces, dtype=np.int32).ravel().tolist()
    body.add_geom(
        name=obj.name,
        type=mujoco.mjtGeom.mjGEOM_MESH,
        meshname=visual.name,
        rgba=list(obj.rgba),
        contype=0,
        conaffinity=0,
        group=2,
        density=0,
        mass=0,
    )
    if not obj.collides:
        return
    decompose = obj.convex_decomposition if obj.convex_decomposition is not None else True
    parts = convex_parts(mesh) if decompose else None
    pieces = zip(parts.vertices, parts.faces) if parts else [(mesh.vertices, mesh.faces)]
    for i, (verts, faces) in enumerate(pieces):
        part = spec.add_mesh(name=f"{obj.name}_part{i}")
        part.uservert = np.asarray(verts, dtype=np.float32).ravel().tolist()
        part.userface = np.asarray(faces, dtype=np.int32).ravel().tolist()
        body.add_geom(
            name=f"{obj.name}_part{i}",
            type=mujoco.mjtGeom.mjGEOM_MESH,
            meshname=part.name,
            group=3,
            density=0,
            mass=0,
            **{**common, "rgba": [0, 0, 0, 0]},
        )
    if moving:
        # Inertia of the whole (watertight) mesh, scaled to the object's mass.
        props = mesh.copy()
        props.density = obj.mass / props.volume
        body.explicitinertial = True
        body.mass = obj.mass
        body.ipos = props.center_mass.tolist()
        inertia = props.moment_inertia
        body.fullinertia = [
            inertia[0, 0],
            inertia[1, 1],
            inertia[2, 2],
            inertia[0, 1],
            inertia[0, 2],
            inertia[1, 2],
        ]


def _add_joint(body: mujoco.MjsBody, obj: SceneObject) -> None:
    """The part's slide or hinge joint (see :class:`~simpact.core.scene.SceneObject` ``joint``)."""
    j = obj.joint
    lo, hi = (float(v) for v in j["range"])
    axis = np.asarray(j["axis"], dtype=float)
    joint = body.add_joint(
        name=obj.name,
        type=mujoco.mjtJoint.mjJNT_SLIDE if j["type"] == "slide" else mujoco.mjtJoint.mjJNT_HINGE,
        axis=(axis / np.linalg.norm(axis)).tolist(),
        pos=[float(v) for v in j.get("anchor", (0.0, 0.0, 0.0))],
        range=[lo, hi],
        limited=mujoco.mjtLimited.mjLIMITED_TRUE,
        ref=float(j.get("position", lo)),
        damping=float(j.get("damping", 0.0)),
        frictionloss=float(j.get("frictionloss", 0.0)),
    )
    joint.springref = joint.ref
    joint.solref_limit = [0.004, 1.0]  # a stiff end stop: the arm pushes hard (default 0.02 s gives cm)
    joint.solimp_limit = [0.95, 0.99, 0.001, 0.5, 2.0]
    body.gravcomp = 1.0


def build_spec(scene: Scene, options: PhysicsOptions = PhysicsOptions()) -> mujoco.MjSpec:
    """An uncompiled MjSpec with the robot, the table (top at z = 0) and every object of ``scene``."""
    spec = load_fr3_spec()
    if scene.robot.tool == "squeeze_plates":
        add_squeeze_plates(spec)
    spec.modelname = "simpact"
    spec.option.timestep = options.timestep
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = options.impratio
    spec.option.iterations = options.iterations
    spec.visual.global_.offwidth = 1280
    spec.visual.global_.offheight = 960
    sx, sy = scene.table_size
    spec.worldbody.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[sx / 2, sy / 2, TABLE_THICKNESS / 2],
        pos=[TABLE_X0 + sx / 2, 0, -TABLE_THICKNESS / 2],
        rgba=[0.76, 0.66, 0.52, 1],
        friction=[scene.table_friction, 0.005, 0.0001],
    )
    spec.worldbody.add_light(pos=[0.5, 0, 1.5], dir=[0, 0, -1], diffuse=[0.7, 0.7, 0.7])
    spec.worldbody.add_light(pos=[1.5, -1.0, 1.5], dir=[-1, 0.7, -1], diffuse=[0.3, 0.3, 0.3])
    spec.add_exclude(bodyname1="world", bodyname2="fr3_link0")
    for obj in scene.objects:
        _add_object(spec, obj, options)
    welded = ["world", *(o.name for o in scene.objects if o.fixed and not o.joint)]
    for part in (o for o in scene.objects if o.joint):
        for other in welded:
            spec.add_exclude(bodyname1=part.name, bodyname2=other)
    return spec


def part_state(obj: SceneObject, q: float, qdot: float) -> ObjectState:
    """An articulated part's pose and velocity (m, m/s, rad/s) at joint position ``q`` and speed ``qdot``:
    its scene pose moved along (slide) or turned about (hinge) its world axis by ``q`` minus the joint's
    ``position`` in the scene."""
    axis = joint_axis(obj)
    dq = q - float(obj.joint.get("position", obj.joint["range"][0]))
    pos, quat = np.array(obj.position, dtype=float), np.array(obj.quaternion, dtype=float)
    zero = np.zeros(3)
    if obj.joint["type"] == "slide":
        return ObjectState(pos + axis * dq, quat, axis * qdot, zero, q)
    anchor = pos + quat_rotate(quat, np.asarray(obj.joint.get("anchor", (0.0, 0.0, 0.0)), dtype=float))
    turn = np.array([math.cos(dq / 2), *(math.sin(dq / 2) * axis)])
    position = anchor + quat_rotate(turn, pos - anchor)
    velocity = np.cross(axis * qdot, position - anchor)
    return ObjectState(position, quat_mul(turn, quat), velocity, axis * qdot, q)
