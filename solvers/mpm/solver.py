"""The MPM object of a scene as a :class:`solvers.deformable.DeformableSolver`: B copies of one ``mpm``
object, each an :class:`solvers.mpm.mls.MPMSolver` on its own grid, driven by the composite World's
colliders (the table, MuJoCo's hand, finger and rigid-object boxes) and the shared grasp rule.

Solver settings a scene may give in the object's ``material`` next to the physical parameters: ``grid_dx``
(cell size, m; default 0.01: fast, but ``simpact bench mpm`` finds a plate squeeze's footprint not yet
converged at 1 cm, since grid-node contact starts about a cell before the particles touch),
``capture_width`` (m; default two cells) and ``grid_margin`` (m; default 0.12 sideways and 0.10 above: how
far the grid reaches beyond the object's start box, sideways and, up to 0.10, above; every substep clears
and updates every node, so the grid's size costs time even where no particle is).

Sleeping: a member whose particles are all slower than :data:`REST_SPEED` after at least :data:`AWAKE_S` of
simulated time, and which no collider box comes near (within :data:`NEAR_CELLS` cells of a particle, its
motion over the period added), is not stepped: its particles keep their state exactly
until a box comes near. The rule reads only the state and the colliders, so reruns and restored snapshots
sleep and wake at the same steps.

Members step in parallel on the CPU, one thread per core: Warp's CPU back-end runs a kernel on one thread
and releases the GIL while it runs, and each member has its own engine and arrays, so the floats are those of
stepping them one by one. Units: SI.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simpact.core.scene import Scene, SceneError, SceneObject
from solvers.deformable import Colliders, capture, held_positions, point_velocity
from solvers.mpm.materials import Material
from solvers.mpm.mls import Body, Boxes, GridSpec, MPMSnapshot, MPMSolver
from solvers.mpm.shapes import sample_box, sample_cylinder

__all__ = ["MPMObject", "MPMObjectSnapshot", "mpm_solver", "object_particles"]

DEFAULT_DX = 0.01
"""Grid cell, m (see the module docstring for what it resolves)."""
_SETTINGS = ("grid_dx", "capture_width", "grid_margin")
_MARGIN = (0.12, 0.12, 0.10)
"""Grid extent beyond the object's start box (x, y, z above), m: room to flow, spread and be lifted."""
REST_SPEED = 0.005
"""A member whose particles are all slower than this (m/s) and that no box comes near sleeps."""
AWAKE_S = 0.3
"""Simulated time a member runs before it may first sleep (it settles under gravity), s."""
NEAR_CELLS = 2.0
"""A box within this many cells of a particle (its motion over the period added) wakes a member."""


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The threads that step members on the CPU, one per core."""
    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="simpact-mpm")


def object_particles(obj: SceneObject, spacing: float) -> np.ndarray:
    """(N, 3) particle positions of ``obj``: its ``particles`` file, else its box / cylinder / sphere shape
    filled on a lattice of ``spacing`` m (axis-aligned; the shape's quaternion is not applied)."""
    if obj.particles:
        try:
            pts = np.load(Path(obj.particles))
        except (OSError, ValueError) as exc:
            raise SceneError(f"object '{obj.name}': cannot read particles {obj.particles}: {exc}") from None
        pts = np.asarray(pts, dtype=float)
        if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0 or not np.isfinite(pts).all():
            raise SceneError(f"object '{obj.name}': particles must be a finite (N, 3) array, got {pts.shape}")
        return pts
    c = np.asarray(obj.position, dtype=float)
    if obj.shape == "box":
        return sample_box(c, obj.size, spacing)
    if obj.shape == "cylinder":
        r, h = obj.size
        return sample_cylinder(c - [0.0, 0.0, h / 2.0], r, h, spacing)
    if obj.shape == "sphere":
        (r,) = obj.size
        pts = sample_box(c, (2 * r, 2 * r, 2 * r), spacing)
        return pts[np.linalg.norm(pts - c, axis=1) <= r]
    raise SceneError(f"object '{obj.name}': an mpm object is a box, cylinder, sphere or a particles file")


def mpm_solver(obj: SceneObject, scene: Scene) -> MPMObject:
    """The batch-1 MPM solver of an ``mpm`` scene object, at rest where the scene puts it."""
    raw: Mapping[str, Any] = obj.material or {}
    settings = {k: float(raw[k]) for k in _SETTINGS if raw.get(k) is not None}
    material = Material.from_mapping({k: v for k, v in raw.items() if k not in _SETTINGS})
    dx = settings.get("grid_dx", DEFAULT_DX)
    if not 1e-4 <= dx <= 0.1:
        raise SceneError(f"object '{obj.name}': grid_dx must be within 0.0001 ... 0.1 m, got {dx}")
    pts = object_particles(obj, dx / 2.0)
    pts[:, 2] += max(0.0, dx / 4.0 - pts[:, 2].min())
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    side = settings.get("grid_margin", _MARGIN[0])
    if not 2.0 * dx <= side <= 1.0:
        raise SceneError(f"object '{obj.name}': grid_margin must be within 2 cells ... 1 m, got {side}")
    grid = GridSpec.around(
        (lo[0] - side, lo[1] - side, min(lo[2], 0.0)),
        (hi[0] + side, hi[1] + side, hi[2] + min(side, _MARGIN[2])),
        dx,
    )
    engine = MPMSolver([Body(pts, material)], grid, table_friction=scene.table_friction)
    return MPMObject(obj.name, [engine], capture_width=settings.get("capture_width", 2.0 * dx))


@dataclass(frozen=True)
class MPMObjectSnapshot:
    """Every member's engine state and grasp state."""

    members: tuple[MPMSnapshot, ...]
    held: np.ndarray
    local: np.ndarray
    closed: np.ndarray


class MPMObject:
    """B copies of one MPM object (see :mod:`solvers.deformable`); member b runs on its own engine."""

    def __init__(self, name: str, engines: list[MPMSolver], *, capture_width: float) -> None:
        self.name = name
        self.engines = engines
        self.radius = engines[0].grid.dx / 4.0
        self.capture_width = float(capture_width)
        n, b = engines[0].n, len(engines)
        self._held = np.zeros((b, n), dtype=bool)
        self._local = np.zeros((b, n, 3))
        self._closed = np.zeros(b, dtype=bool)

    @property
    def batch(self) -> int:
        return len(self.engines)

    def positions(self) -> np.ndarray:
        return np.stack([e.positions() for e in self.engines]).astype(np.float64)

    def velocities(self) -> np.ndarray:
        """Particle velocities (B, N, 3), m/s."""
        return np.stack([e.velocities() for e in self.engines]).astype(np.float64)

    def step(self, dt: float, colliders: Colliders) -> None:
        if colliders.batch != self.batch:
            raise SceneError(
                f"MPM '{self.name}': colliders for {colliders.batch} members, solver has {self.batch}"
            )
        awake = []
        for b, engine in enumerate(self.engines):
            engine.table_z, engine.table_friction = colliders.table_z, colliders.table_friction
            if not self._asleep(engine, colliders, b, dt):
                awake.append(b)

        def advance(b: int) -> None:
            boxes = Boxes(
                colliders.centre[b],
                colliders.rotation[b],
                colliders.half,
                colliders.velocity[b],
                colliders.angular_velocity[b],
                colliders.friction,
            )
            self.engines[b].step(dt, boxes)

        if len(awake) > 1 and self.engines[0].device == "cpu":  # one core each (module docstring)
            list(_pool().map(advance, awake))
        else:
            for b in awake:
                advance(b)
        self._grasp(colliders)

    def _asleep(self, engine: MPMSolver, colliders: Colliders, b: int, dt: float) -> bool:
        """Whether member ``b`` sleeps through this period (see the module docstring)."""
        if engine.time < AWAKE_S or self._held[b].any():
            return False
        if float(np.linalg.norm(engine.velocities(), axis=1).max()) >= REST_SPEED:
            return False
        x = engine.positions().astype(np.float64)
        margin = NEAR_CELLS * engine.grid.dx
        for k in range(len(colliders.half)):
            local = (x - colliders.centre[b, k]) @ colliders.rotation[b, k]  # in the box's frame
            speed = float(np.linalg.norm(colliders.velocity[b, k]))
            reach = colliders.half[k] + margin + speed * dt
            if np.all(np.abs(local) <= reach, axis=1).any():
                return False
        return True

    def _grasp(self, colliders: Colliders) -> None:
        """The shared grasp rule, applied after each control period: capture, follow, release."""
        grip = colliders.grip
        closed = grip.opening <= self.capture_width
        if not (closed.any() or self._closed.any()):
            return
        x = self.positions()
        new = closed & ~self._closed
        if new.any():
            inside = capture(x, grip, self.radius) & new[:, None]
            local = grip.to_local(x)
            self._held[new] = inside[new]
            self._local[new] = np.where(inside[new][..., None], local[new], 0.0)
        released = ~closed & self._closed
        target = held_positions(self._local, grip)
        speed = point_velocity(target, grip)
        for b, engine in enumerate(self.engines):
            mask = self._held[b]
            if not mask.any():
                continue
            if closed[b]:
                engine.set_particles(mask, target[b][mask], speed[b][mask])
            elif released[b]:
                engine.set_particles(mask, None, point_velocity(x[b : b + 1], _one(grip, b))[0][mask])
                self._held[b] = False
        self._closed = closed.copy()

    def snapshot(self) -> MPMObjectSnapshot:
        return MPMObjectSnapshot(
            tuple(e.snapshot() for e in self.engines),
            self._held.copy(),
            self._local.copy(),
            self._closed.copy(),
        )

    def restore(self, snapshot: MPMObjectSnapshot) -> None:
        if len(snapshot.members) != self.batch:
            raise SceneError(
                f"MPM '{self.name}': snapshot of {len(snapshot.members)} members, solver has {self.batch}"
            )
        for engine, snap in zip(self.engines, snapshot.members):
            engine.restore(snap)
        self._held, self._local = snapshot.held.copy(), snapshot.local.copy()
        self._closed = snapshot.closed.copy()

    def replicate(self, batch: int) -> MPMObject:
        if self.batch != 1:
            raise SceneError(
                f"MPM '{self.name}': replicate needs a batch-1 solver, this one has {self.batch}"
            )
        engines = [self.engines[0].copy() for _ in range(batch)]
        out = MPMObject(self.name, engines, capture_width=self.capture_width)
        out._held = np.repeat(self._held, batch, axis=0)
        out._local = np.repeat(self._local, batch, axis=0)
        out._closed = np.repeat(self._closed, batch, axis=0)
        return out


def _one(grip: Any, b: int) -> Any:
    """Member ``b`` of a batched grip, as a batch of one."""
    return replace(
        grip,
        centre=grip.centre[b : b + 1],
        rotation=grip.rotation[b : b + 1],
        opening=grip.opening[b : b + 1],
        velocity=grip.velocity[b : b + 1],
        angular_velocity=grip.angular_velocity[b : b + 1],
    )
