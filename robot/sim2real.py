"""A stand-in for the real world: a second, independent MuJoCo simulation of a task's scene whose physics
differs from the planner's the way a real set-up does, so plans can be "executed" without hardware.

The planner sees the nominal scene of a task seed; the stand-in world is built from the same scene with a
seeded :class:`Perturbation` drawn from a :class:`RealityGap`:

* every movable object's mass and friction scaled by independent factors in ``1 ± gap.mass`` and
  ``1 ± gap.friction`` (the table's friction too): real objects are never weighed exactly;
* every movable object displaced by up to ``gap.position_m`` in x and y and turned by up to ``gap.yaw_rad``
  about z: the pose error of perception;
* the arm's joint servo stiffness and damping, and the gripper servo's, scaled per joint by ``1 ± gap.gains``:
  the real controller tracks differently;
* a different physics step (``gap.timestep``, default 1 ms against the planner's 2 ms) and solver iteration
  count, so even unperturbed contacts resolve differently.

Fixed objects (walls, fixtures) and markers (target regions) are left as they are: the task's geometry is
known. Drawing is deterministic in (task name, seed, gap). franky-sim's own scene was not used: it runs the
arm in real time behind the libfranka network protocol (one plan takes its duration in wall time) and builds
its scene from MJCF text, so the task's convex-decomposed objects would need a second exporter.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, fields, replace
from typing import Any

import mujoco
import numpy as np

from simpact.core.rotations import quat_about_z, quat_mul
from simpact.core.scene import Scene
from solvers.composite import CompositeWorld, rigid_part
from solvers.mujoco.robot import ARM_JOINTS
from solvers.mujoco.scene_builder import PhysicsOptions
from solvers.mujoco.world import SETTLE_S, MujocoWorld

__all__ = [
    "Perturbation",
    "PerturbedWorld",
    "RealityGap",
    "draw_perturbation",
    "perturb_scene",
    "stand_in_world",
]

GRIPPER_ACTUATOR = "hand"


@dataclass(frozen=True)
class RealityGap:
    """How far the stand-in real world may differ from the planner's (uniform ranges, drawn per seed)."""

    mass: float = 0.2
    """Relative mass error of movable objects (0.2: factors in [0.8, 1.2])."""
    friction: float = 0.2
    """Relative sliding-friction error of movable objects and the table."""
    gains: float = 0.2
    """Relative error of each arm joint's and the gripper's servo stiffness and damping."""
    position_m: float = 0.003
    """Largest object position error in x and y, m."""
    yaw_rad: float = 0.035
    """Largest object heading error about the vertical, rad (0.035 rad = 2 degrees)."""
    timestep: float = 0.001
    """Physics step of the real world, s (a divisor of the 10 ms control period)."""
    iterations: int = 100
    """Constraint-solver iterations of the real world."""

    def __post_init__(self) -> None:
        for name in ("mass", "friction", "gains"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"reality gap {name} must be in [0, 1), got {value}")
        if self.position_m < 0 or self.yaw_rad < 0:
            raise ValueError("reality gap position_m and yaw_rad must be non-negative")
        if not self.timestep > 0 or self.iterations < 1:
            raise ValueError("reality gap timestep must be positive and iterations at least 1")

    def scaled(self, factor: float) -> RealityGap:
        """The same gap with every range (not the step or iterations) multiplied by ``factor``."""
        if factor < 0:
            raise ValueError(f"reality gap scale must be non-negative, got {factor}")
        return replace(
            self,
            mass=self.mass * factor,
            friction=self.friction * factor,
            gains=self.gains * factor,
            position_m=self.position_m * factor,
            yaw_rad=self.yaw_rad * factor,
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Perturbation:
    """The drawn differences of one stand-in world (factors multiply the planner's values)."""

    mass: dict[str, float]
    """Object name -> mass factor."""
    friction: dict[str, float]
    """Object name -> friction factor."""
    table_friction: float
    offset: dict[str, tuple[float, float, float]]
    """Object name -> (dx m, dy m, dyaw rad)."""
    kp: tuple[float, ...]
    """Stiffness factor per arm joint (7) and the gripper (last)."""
    kv: tuple[float, ...]
    """Damping factor per arm joint (7) and the gripper (last)."""
    timestep: float
    iterations: int

    def to_dict(self) -> dict[str, Any]:
        def r(x: float) -> float:
            return round(float(x), 6)

        return {
            "mass": {k: r(v) for k, v in self.mass.items()},
            "friction": {k: r(v) for k, v in self.friction.items()},
            "table_friction": r(self.table_friction),
            "offset": {k: [r(x) for x in v] for k, v in self.offset.items()},
            "kp": [r(x) for x in self.kp],
            "kv": [r(x) for x in self.kv],
            "timestep": self.timestep,
            "iterations": self.iterations,
        }


def _movable(scene: Scene) -> list[str]:
    return [o.name for o in scene.objects if not o.fixed and o.collides]


def draw_perturbation(scene: Scene, gap: RealityGap, task: str, seed: int) -> Perturbation:
    """The perturbation of ``task`` seed ``seed``: a generator seeded by (crc32 of the task name, seed)."""
    rng = np.random.default_rng([zlib.crc32(task.encode()), seed, 0x51A])
    names = _movable(scene)
    n = len(ARM_JOINTS) + 1

    def factors(rel: float, k: int) -> np.ndarray:
        return 1.0 + rng.uniform(-rel, rel, k)

    mass = factors(gap.mass, len(names))
    friction = factors(gap.friction, len(names))
    table = float(factors(gap.friction, 1)[0])
    xy = rng.uniform(-gap.position_m, gap.position_m, (len(names), 2))
    yaw = rng.uniform(-gap.yaw_rad, gap.yaw_rad, len(names))
    kp, kv = factors(gap.gains, n), factors(gap.gains, n)
    return Perturbation(
        mass={k: float(v) for k, v in zip(names, mass)},
        friction={k: float(v) for k, v in zip(names, friction)},
        table_friction=table,
        offset={k: (float(d[0]), float(d[1]), float(a)) for k, d, a in zip(names, xy, yaw)},
        kp=tuple(float(v) for v in kp),
        kv=tuple(float(v) for v in kv),
        timestep=gap.timestep,
        iterations=gap.iterations,
    )


def perturb_scene(scene: Scene, p: Perturbation) -> Scene:
    """``scene`` with the perturbation's masses, frictions and pose errors applied."""
    objects = []
    for obj in scene.objects:
        if obj.name in p.mass:
            dx, dy, dyaw = p.offset[obj.name]
            quat: tuple[float, ...] = obj.quaternion
            if dyaw:
                turned = quat_mul(quat_about_z(dyaw), np.asarray(quat))
                quat = tuple(float(v) for v in turned / np.linalg.norm(turned))
            obj = obj.moved(
                mass=obj.mass * p.mass[obj.name],
                friction=obj.friction * p.friction[obj.name],
                position=(obj.position[0] + dx, obj.position[1] + dy, obj.position[2]),
                quaternion=quat,
            )
        objects.append(obj)
    return replace(scene, objects=tuple(objects), table_friction=scene.table_friction * p.table_friction)


class PerturbedWorld(MujocoWorld):
    """The stand-in real world: a :class:`MujocoWorld` of ``perturb_scene(scene, perturbation)`` with the
    perturbation's physics step, solver iterations and servo gains; it settles like the planner's world and
    rolls plans out through the same interface."""

    def __init__(self, scene: Scene, perturbation: Perturbation) -> None:
        self.perturbation = perturbation
        self.nominal_scene = scene
        """The scene the planner believes in."""
        base = PhysicsOptions()
        options = replace(base, timestep=perturbation.timestep, iterations=perturbation.iterations)
        super().__init__(perturb_scene(scene, perturbation), options=options)
        actuators = [*ARM_JOINTS, GRIPPER_ACTUATOR]
        for i, name in enumerate(actuators):
            a = self.model.actuator(name).id
            kp = -self.model.actuator_biasprm[a, 1] * perturbation.kp[i]
            kv = -self.model.actuator_biasprm[a, 2] * perturbation.kv[i]
            # Position servos: force = gain * ctrl - kp * q - kv * qdot, with gain = kp (the gripper's
            # gain also carries its ctrl-to-tendon ratio, so it scales with kp).
            self.model.actuator_gainprm[a, 0] *= perturbation.kp[i]
            self.model.actuator_biasprm[a, 1] = -kp
            self.model.actuator_biasprm[a, 2] = -kv
        # Settle again with the perturbed controllers, from the same placement as the planner's world.
        mujoco.mj_resetData(self.model, self.data)
        self._place_robot(self.scene.robot)
        mujoco.mj_step(self.model, self.data, round(SETTLE_S / self.options.timestep))
        self.initial_snapshot = self.snapshot()


def stand_in_world(scene: Scene, perturbation: Perturbation) -> PerturbedWorld | CompositeWorld:
    """The stand-in real world of ``scene``: a :class:`PerturbedWorld`, or for a scene with deformables the
    composite World of the perturbed scene around a :class:`PerturbedWorld` of its rigid part (the
    deformables' masses, frictions and poses perturbed like the rigid objects')."""
    if all(o.kind == "rigid" for o in scene.objects):
        return PerturbedWorld(scene, perturbation)
    rigid = PerturbedWorld(rigid_part(scene), perturbation)
    return CompositeWorld(perturb_scene(scene, perturbation), rigid=rigid)
