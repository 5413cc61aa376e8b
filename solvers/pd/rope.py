"""A rope simulated by projective dynamics (Bouaziz et al. 2014) in PyTorch, B ropes in one tensor.

The rope is a chain of N particles (N - 1 segments of rest length ``l0``). Per step of ``h`` seconds:

- inertia: ``y = x + h v + h^2 g``;
- local step: each segment's target ``p = l0 (x_{i+1} - x_i) / |x_{i+1} - x_i|`` (stretch); bending asks
  every second difference ``x_{i-1} - 2 x_i + x_{i+1}`` to vanish (a straight rest shape: linear, so it
  lives in the matrix only);
- global step: ``(M / h^2 + w_s S^T S + w_b D^T D) x = M y / h^2 + w_s S^T p``, the same N x N matrix for
  x, y and z and for every rope; held and pinned particles are eliminated symmetrically (their rows and
  columns replaced by the identity), so they sit exactly where the grip or the pin puts them. The matrix
  is inverted once per (step length, constrained set) and cached: a solve is one matrix product for all
  the members sharing a constrained set (``bench`` measured this against a prefactored Cholesky, a banded
  Cholesky and scipy's sparse LU). The iterations start from ``x0 + h v0``, so a rope at rest is their
  fixed point: 5 of them keep a hanging rope's shape (see :func:`solvers.pd.iterations.iterate`);
- after each global step, particles are pushed out of the table, and a particle resting on it moves
  sideways at most by the friction coefficient times how far it was pressed in (position-based Coulomb
  friction, so the global step works against it); after the last, particles are pushed out of the
  colliders' boxes (inflated by the rope's radius), their velocities ``(x - x_n) / h`` get Coulomb friction
  against the boxes they touch, relative to the box's motion, and a linear damping;
- a rope at rest that no box comes near and whose held or pinned particles stay put sleeps: its steps are
  skipped, which is exact (a step from rest that changed nothing changes nothing again).

Stiffness: ``w_s = EA / l0`` (N/m) and ``w_b = EI / l0^3`` (N/m) from the material's Young's modulus and the
rope's radius (or ``stretch_stiffness`` EA in N and ``bending_stiffness`` EI in N m^2 directly). Grasping is
:mod:`solvers.deformable`'s rule. Everything is float64 on the CPU; the same inputs give the same floats.

This module imports torch at its top, so it is itself on the lazy-import list (pyproject): build it through
:func:`solvers.deformable.build_solver`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

from simpact.core.rotations import quat_rotate
from simpact.core.scene import Scene, SceneError, SceneObject
from solvers.deformable import Colliders, check_ranges, held_positions, torch_solver_mode, update_grasp
from solvers.pd.contact import box_friction, box_push, near_boxes  # noqa: TID253  (lazy, as this)
from solvers.pd.iterations import Group, compiled_settle, compiled_solve, fall, omegas  # noqa: TID253

__all__ = ["RopeParams", "RopeSolver", "rope_points", "rope_solver"]

_CONTACT_SLOP = 1e-4
"""A particle this close to a surface (m) after the solve touches it (gets friction)."""


@dataclass(frozen=True)
class RopeParams:
    """A rope's physics. Units: m, kg, N, N m^2, 1/s."""

    length: float
    radius: float = 0.0075
    mass: float = 0.03
    """Whole rope, kg."""
    segments: int = 40
    stretch_stiffness: float = 177.0
    """EA, N (Young's modulus 1 MPa on a 7.5 mm radius)."""
    bending_stiffness: float = 2.5e-6
    """EI, N m^2."""
    friction: float = 0.5
    """Coulomb coefficient of the rope's surface (the larger of the two surfaces' coefficients is used)."""
    damping: float = 2.0
    """Linear velocity decay rate, 1/s."""
    iterations: int = 5
    """Local/global iterations per step. Started from ``x0 + h v0`` (see
    :func:`solvers.pd.iterations.iterate`), 5 keep a hanging rope's rest shape exactly and the
    ``shape_rope`` reference's end shape within 0.1 mm of 20 iterations'."""
    chebyshev_rho: float = 0.0
    """Spectral radius estimate of the Chebyshev semi-iterative acceleration (Wang 2015; 0: none). Off: with
    the table's friction inside the iterations it changed the ``shape_rope`` outcome with the iteration count
    (10 iterations failed the reference plan; 5 to 20 plain ones agree)."""

    def __post_init__(self) -> None:
        checks = {
            "length": self.length > 0,
            "radius": self.radius > 0,
            "mass": self.mass > 0,
            "segments": self.segments >= 2,
            "stretch_stiffness": self.stretch_stiffness > 0,
            "bending_stiffness": self.bending_stiffness >= 0,
            "friction": self.friction >= 0,
            "damping": self.damping >= 0,
            "iterations": self.iterations >= 1,
        }
        check_ranges("rope", self, checks)

    @property
    def rest(self) -> float:
        """Segment rest length l0, m."""
        return self.length / self.segments

    @classmethod
    def from_object(cls, obj: SceneObject, length: float, radius: float) -> RopeParams:
        """A scene object's rope: ``material`` keys ``youngs_modulus`` (Pa), or ``stretch_stiffness`` (N) and
        ``bending_stiffness`` (N m^2) directly; ``segments``, ``damping``, ``iterations``."""
        m = dict(obj.material)
        known = {
            "model",
            "youngs_modulus",
            "poissons_ratio",
            "density",
            "stretch_stiffness",
            "bending_stiffness",
            "segments",
            "damping",
            "iterations",
            "friction_angle",
            "yield_stress",
        }
        unknown = set(m) - known
        if unknown:
            raise SceneError(f"object '{obj.name}': unknown rope material keys {sorted(unknown)}")
        E = float(m.get("youngs_modulus", 1.0e6))
        area, inertia = math.pi * radius**2, math.pi * radius**4 / 4
        return cls(
            length=length,
            radius=radius,
            mass=obj.mass,
            segments=int(m.get("segments", max(2, round(length / 0.01)))),
            stretch_stiffness=float(m.get("stretch_stiffness", E * area)),
            bending_stiffness=float(m.get("bending_stiffness", E * inertia)),
            friction=obj.friction,
            damping=float(m.get("damping", cls.damping)),
            iterations=int(m.get("iterations", cls.iterations)),
        )


def rope_points(obj: SceneObject, repo_root: Path | None = None) -> tuple[np.ndarray, float, float]:
    """The rope's centre line (end points, (2, 3) m), length and radius (m) of a scene object: a cylinder
    (``size`` = radius, length) along its local z axis, or the principal axis of its ``particles`` file."""
    if obj.particles:
        path = Path(obj.particles)
        if not path.is_absolute() and repo_root is not None:
            path = repo_root / path
        try:
            cloud = np.load(path)
        except (OSError, ValueError) as exc:
            raise SceneError(f"object '{obj.name}': cannot read particles {path}: {exc}") from None
        if cloud.ndim != 2 or cloud.shape[1] != 3 or len(cloud) < 2 or not np.isfinite(cloud).all():
            raise SceneError(f"object '{obj.name}': particles must be (N >= 2, 3) finite positions")
        centre = cloud.mean(axis=0)
        axis = np.linalg.svd(cloud - centre, full_matrices=False)[2][0]
        s = (cloud - centre) @ axis
        lateral = cloud - centre - np.outer(s, axis)
        radius = (
            float(obj.size[0])
            if obj.shape == "cylinder"
            else max(0.002, float(np.sqrt((lateral**2).sum(axis=1).mean())))
        )
        ends = centre + np.outer([s.min(), s.max()], axis)
        return ends, float(s.max() - s.min()), radius
    if obj.shape != "cylinder":
        raise SceneError(
            f"object '{obj.name}': a pd rope is a cylinder (size: radius, length) or a particles file"
        )
    radius, length = float(obj.size[0]), float(obj.size[1])
    axis = quat_rotate(np.asarray(obj.quaternion, dtype=float), np.array([0.0, 0.0, 1.0]))
    centre = np.asarray(obj.position, dtype=float)
    return centre + np.outer([-length / 2, length / 2], axis), length, radius


def rope_solver(obj: SceneObject, scene: Scene) -> RopeSolver:
    """The batch-1 rope solver of a ``pd`` scene object, lying straight where the scene puts it (its lowest
    point raised to rest on the table)."""
    ends, length, radius = rope_points(obj)
    params = RopeParams.from_object(obj, length, radius)
    points = ends[0] + np.linspace(0.0, 1.0, params.segments + 1)[:, None] * (ends[1] - ends[0])
    points[:, 2] += max(0.0, radius - points[:, 2].min())
    return RopeSolver(obj.name, params, points, table_friction=scene.table_friction)


class RopeSolver:
    """B ropes stepped together (a :class:`solvers.deformable.DeformableSolver`).

    ``points`` (N, 3) m: the start (every member); ``pinned``: indices of particles fixed where they start
    (a rope hung from its ends)."""

    def __init__(
        self,
        name: str,
        params: RopeParams,
        points: np.ndarray,
        *,
        batch: int = 1,
        pinned: tuple[int, ...] = (),
        table_friction: float = 0.5,
    ) -> None:
        points = np.asarray(points, dtype=np.float64)
        if points.shape != (params.segments + 1, 3):
            raise SceneError(f"rope '{name}': {params.segments + 1} points expected, got {points.shape}")
        self.name = name
        self.params = params
        self.radius = params.radius
        self.capture_width = 2.0 * params.radius
        self.table_friction = table_friction
        self.pinned = tuple(int(i) for i in pinned)
        n = len(points)
        self._x = torch.from_numpy(np.repeat(points[None], batch, axis=0).copy())
        self._v = torch.zeros_like(self._x)
        self._held = np.zeros((batch, n), dtype=bool)
        self._local = np.zeros((batch, n, 3))
        self._closed = np.zeros(batch, dtype=bool)
        self._asleep = np.zeros(batch, dtype=bool)
        self._last_constrained = np.zeros((batch, n), dtype=bool)
        self._last_targets = np.zeros((batch, n, 3))
        self._pin_mask = np.zeros(n, dtype=bool)
        self._pin_mask[list(self.pinned)] = True
        self._pin_pos = points.copy()
        self._inverses: dict[tuple[float, bytes], tuple[Any, ...]] = {}
        self._matrices: dict[float, np.ndarray] = {}

    # --- protocol ------------------------------------------------------------------------------------------
    @property
    def batch(self) -> int:
        return int(self._x.shape[0])

    def positions(self) -> np.ndarray:
        return self._x.numpy().copy()

    def velocities(self) -> np.ndarray:
        """Particle velocities (B, N, 3), m/s."""
        return self._v.numpy().copy()

    def held(self) -> np.ndarray:
        """Which particles (B, N) the gripper holds."""
        return self._held.copy()

    def snapshot(self) -> tuple[np.ndarray, ...]:
        """Positions, velocities, the held set and its grip coordinates, the grip's closed flag, and
        whether each rope sleeps (at rest, untouched: its steps change nothing), and the constrained set
        and targets of the last step (a held rope wakes up when they change)."""
        return (
            self.positions(),
            self.velocities(),
            self._held.copy(),
            self._local.copy(),
            self._closed.copy(),
            self._asleep.copy(),
            self._last_constrained.copy(),
            self._last_targets.copy(),
        )

    def restore(self, snapshot: Any) -> None:
        x, v, held, local, closed, asleep, last_constrained, last_targets = snapshot
        if x.shape != tuple(self._x.shape):
            raise ValueError(
                f"rope snapshot of shape {x.shape} does not fit this solver ({tuple(self._x.shape)})"
            )
        self._x = torch.from_numpy(x.copy())
        self._v = torch.from_numpy(v.copy())
        self._held, self._local, self._closed = held.copy(), local.copy(), closed.copy()
        self._asleep = asleep.copy()
        self._last_constrained, self._last_targets = last_constrained.copy(), last_targets.copy()

    def replicate(self, batch: int) -> RopeSolver:
        if self.batch != 1:
            raise ValueError("replicate() needs a batch-1 rope")
        other = RopeSolver.__new__(RopeSolver)
        other.__dict__.update(self.__dict__)
        other._inverses = self._inverses  # shared: a held set's operators are built once for all copies
        other._matrices = self._matrices
        other._x = torch.zeros((batch, *self._x.shape[1:]), dtype=torch.float64)
        other.restore(tuple(np.repeat(a, batch, axis=0) for a in self.snapshot()))
        return other

    def with_params(self, **changes: Any) -> RopeSolver:
        """The same rope (batch 1, at its current state) with some parameters changed."""
        return RopeSolver(
            self.name,
            replace(self.params, **changes),
            self.positions()[0],
            pinned=self.pinned,
            table_friction=self.table_friction,
        )

    # --- the step ------------------------------------------------------------------------------------------
    def step(self, dt: float, colliders: Colliders | None = None) -> None:
        """Advance every rope by ``dt`` s (see the module docstring); ``colliders`` None: only the table.

        Torch runs as :func:`~solvers.deformable.torch_solver_mode` sets it during the step (one thread,
        inference mode; restored after): the floats then do not depend on the machine's core count."""
        with torch_solver_mode():
            self._step(float(dt), colliders)

    def _step(self, h: float, colliders: Colliders | None) -> None:
        """One step. The iterations lay positions out (N, 3, B), so that one iteration of the members sharing
        a constrained set is one (N, N - 1) x (N - 1, 3 B) product (4x a batched product's speed at B = 64;
        B padded, see :func:`~solvers.pd.iterations.padded`) and a particle's length is a reduction over a
        leading axis."""
        p = self.params
        x0, v0 = self._x, self._v
        constrained, targets = self._constraints(colliders)
        near = near_boxes(colliders, x0.numpy(), p.radius)
        boxes = np.flatnonzero(near.any(axis=0))
        moved = (constrained != self._last_constrained) | (
            constrained & (targets != self._last_targets).any(-1)
        )
        disturbed = near.any(axis=1) | moved.any(axis=1)
        self._last_constrained, self._last_targets = constrained, targets
        resting = self._asleep & ~disturbed
        if resting.all():
            return
        floor = (0.0 if colliders is None else colliders.table_z) + p.radius
        mu = max(p.friction, self.table_friction if colliders is None else colliders.table_friction)
        xc, cm = torch.from_numpy(targets), torch.from_numpy(constrained)
        weights = omegas(p.iterations, p.chebyshev_rho)
        groups = self._operators(h, constrained)

        def solved(group: Group) -> torch.Tensor:  # one shared product per group, padded (see padded)
            m = slice(None) if group.members is None else group.members
            operators = (group.inertia, group.coupling, group.rows, group.gather)
            return compiled_solve()(x0[m], v0[m], xc[m], cm[m], h, fall(h), floor, mu, _CONTACT_SLOP, weights,
                                    *operators)  # fmt: skip

        if len(groups) == 1:
            x = solved(groups[0])
        else:
            x = torch.empty_like(x0)
            for group in groups:
                x[group.members] = solved(group)
        cmask = cm[..., None] if constrained.any() else None
        self._finish(x, h, cmask, colliders, boxes, resting, disturbed)

    def _finish(
        self,
        x: torch.Tensor,
        h: float,
        cmask: torch.Tensor | None,
        colliders: Colliders | None,
        boxes: np.ndarray,
        resting: np.ndarray,
        disturbed: np.ndarray,
    ) -> None:
        """After the iterations (``x`` (B, N, 3); held and pinned particles at their targets): the boxes' push
        and friction, damping, the new state, and which members sleep."""
        p = self.params
        x0, v0 = self._x, self._v
        contact = None
        if len(boxes):
            assert colliders is not None
            push, *contact = box_push(x, colliders, boxes, p.radius, slop=_CONTACT_SLOP)
            x = x + (push if cmask is None else torch.where(cmask, 0.0, push))
        v = None
        if contact is not None:
            assert colliders is not None
            mu = np.maximum(colliders.friction[boxes], p.friction)
            free = None if cmask is None else ~cmask  # (not on held ones)
            v = box_friction((x - x0) / h, v0, h, contact, mu, free)
        x, v, still = compiled_settle()(x, v, x0, h, max(0.0, 1.0 - p.damping * h), cmask)
        if resting.any():
            keep = torch.from_numpy(resting)[:, None, None]
            x, v = torch.where(keep, x0, x), torch.where(keep, v0, v)
        self._x, self._v = x, v
        self._asleep = resting | (still.numpy() & ~disturbed)

    def _constraints(self, colliders: Colliders | None) -> tuple[np.ndarray, np.ndarray]:
        """Update the held set (grasp rule) and return the constrained mask (B, N) and targets (B, N, 3)."""
        targets = np.repeat(self._pin_pos[None], self.batch, axis=0)
        if colliders is not None:
            grip = colliders.grip
            self._closed = update_grasp(
                self._x.numpy(), grip, self.radius, self.capture_width, self._held, self._local, self._closed
            )
            if self._held.any():
                targets = np.where(self._held[..., None], held_positions(self._local, grip), targets)
        constrained = self._held | self._pin_mask[None]
        return constrained, targets

    def _matrix(self, h: float) -> np.ndarray:
        """The global step's matrix (N, N) for step ``h`` (no constraints eliminated)."""
        if h not in self._matrices:
            p = self.params
            n = p.segments + 1
            S = np.diff(np.eye(n), axis=0)  # (n-1, n): x_{i+1} - x_i
            D = np.diff(np.eye(n), n=2, axis=0)  # (n-2, n): second differences
            mass = p.mass / n
            w_s, w_b = p.stretch_stiffness / p.rest, p.bending_stiffness / p.rest**3
            self._matrices[h] = (mass / h**2) * np.eye(n) + w_s * S.T @ S + w_b * D.T @ D
        return self._matrices[h]

    def _operators(self, h: float, constrained: np.ndarray) -> list[Group]:
        """The members grouped by constrained set (one group of all members when they share one), each with
        its operators (see :class:`Group`), cached per (step, constrained set)."""
        if len(constrained) == 1 or (constrained == constrained[0]).all():
            return [self._group(h, constrained[0], None)]
        rows: dict[bytes, list[int]] = {}
        for b, row in enumerate(constrained):
            rows.setdefault(row.tobytes(), []).append(b)
        return [self._group(h, constrained[m[0]], torch.tensor(m)) for m in rows.values()]

    def _group(self, h: float, row: np.ndarray, members: torch.Tensor | None) -> Group:
        key = (h, row.tobytes())
        if key not in self._inverses:
            p = self.params
            a = self._matrix(h).copy()
            mass = p.mass / (p.segments + 1) / (h * h)
            a[row, :] = 0.0
            a[:, row] = 0.0
            a[row, row] = 1.0
            inverse = np.linalg.inv(a)
            scatter = np.diff(np.eye(p.segments + 1), axis=0).T  # S^T: (N, N - 1)
            scatter[row, :] = 0.0
            gather = inverse @ scatter * p.stretch_stiffness  # w_s * l0 = EA
            t = torch.from_numpy
            inertia = inverse * mass
            inertia[:, row] = 0.0
            coupling = rows = None
            if row.any():
                coupling = t(-(inverse @ self._matrix(h)[:, row]))
                coupling[row] = 0.0
                rows = t(np.flatnonzero(row))
            self._inverses[key] = (t(inertia), coupling, rows, t(gather))
        return Group(members, *self._inverses[key])
