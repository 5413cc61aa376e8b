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
  fixed point: 5 of them keep a hanging rope's shape (see :func:`_iterate`);
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

import functools
import math
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

from simpact.core.rotations import quat_rotate
from simpact.core.scene import Scene, SceneError, SceneObject
from solvers.deformable import Colliders, capture, held_positions

__all__ = ["RopeParams", "RopeSolver", "rope_points", "rope_solver"]

GRAVITY = np.array([0.0, 0.0, -9.81])
"""m/s^2."""
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
    """Local/global iterations per step. Started from ``x0 + h v0`` (see :func:`_iterate`), 5 keep a hanging
    rope's rest shape exactly and the ``shape_rope`` reference's end shape within 0.1 mm of 20 iterations'."""
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
        bad = [k for k, ok in checks.items() if not ok or not math.isfinite(float(getattr(self, k)))]
        if bad:
            raise SceneError(
                f"rope parameters out of range: {', '.join(f'{k}={getattr(self, k)}' for k in bad)}"
            )

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

        Torch runs on one thread during the step (restored after): these small products gain nothing from
        threads, and the floats then do not depend on the machine's core count."""
        threads = torch.get_num_threads()
        if threads != 1:
            torch.set_num_threads(1)
        try:
            self._step(float(dt), colliders)
        finally:
            if threads != 1:
                torch.set_num_threads(threads)

    def _step(self, h: float, colliders: Colliders | None) -> None:
        """One step. The iterations lay positions out (N, 3, B), so that one iteration of the members sharing
        a constrained set is one (N, N - 1) x (N - 1, 3 B) product (4x a batched product's speed at B = 64)
        and a particle's length is a reduction over a leading axis."""
        p = self.params
        x0, v0 = self._x, self._v
        constrained, targets = self._constraints(colliders)
        near = _near_boxes(colliders, x0.numpy(), p.radius)
        boxes = np.flatnonzero(near.any(axis=0))
        moved = (constrained != self._last_constrained) | (
            constrained & (targets != self._last_targets).any(-1)
        )
        disturbed = near.any(axis=1) | moved.any(axis=1)
        self._last_constrained, self._last_targets = constrained, targets
        resting = self._asleep & ~disturbed
        if resting.all():
            return
        first = (x0 + h * v0).permute(1, 2, 0).contiguous()  # (N, 3, B): the first iterate (see _iterate)
        y = first + _fall(h)
        floor = (0.0 if colliders is None else colliders.table_z) + p.radius
        mu = max(p.friction, self.table_friction if colliders is None else colliders.table_friction)
        z0 = x0[..., 2].T  # (N, B)
        on_table = z0 <= floor + _CONTACT_SLOP
        if constrained.any():
            on_table &= ~torch.from_numpy(constrained.T)
        budget = None
        if bool(on_table.any()):  # else the table's friction does nothing (an exact no-op): skipped
            approach = (z0 - y[:, 2]).clamp_min(0.0) - (z0 - floor).clamp_min(0.0)
            budget = torch.where(on_table, mu * approach.clamp_min(0.0), 0.0)[:, None]
        start = x0.permute(1, 2, 0)
        xc = torch.from_numpy(targets).permute(1, 2, 0)
        omegas = _omegas(p.iterations, p.chebyshev_rho)
        groups = self._operators(h, constrained)
        if len(groups) == 1:
            base, gather = groups[0].base(y, xc), groups[0].gather
        else:  # one product per member (a batched one): as exact as the shared product (a test checks)
            base, which = torch.empty_like(first), np.empty(len(constrained), dtype=np.int64)
            for k, group in enumerate(groups):
                g = group.members
                assert g is not None
                base[..., g] = group.base(y[..., g], xc[..., g])
                which[g.numpy()] = k
            gather = torch.stack([group.gather for group in groups])[torch.from_numpy(which)]
        x = _iterations()(first, base, gather, omegas, floor, start, budget)
        x = x.permute(2, 0, 1)
        cmask = None
        if constrained.any():  # held and pinned particles exactly at their targets (the table may move them)
            cmask = torch.from_numpy(constrained)[..., None]
            x = torch.where(cmask, torch.from_numpy(targets), x)
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
            push, *contact = _box_push(x, colliders, boxes, p.radius, slop=_CONTACT_SLOP)
            x = x + (push if cmask is None else torch.where(cmask, 0.0, push))
        v = (x - x0) / h
        if contact is not None:
            assert colliders is not None
            v = self._friction(v, v0, h, cmask, contact, colliders.friction[boxes])  # (not on held particles)
        damped = v * max(0.0, 1.0 - p.damping * h)
        if cmask is not None:
            v = torch.where(cmask, v, damped)
            x = torch.where(cmask, x, x0 + h * damped)
        else:
            v, x = damped, x0 + h * damped
        x, v = x.contiguous(), v.contiguous()
        still = (v == 0.0).view(len(resting), -1).all(1)  # then x == x0: x0 + h 0, or x - x0 == 0
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
            closed = grip.opening <= self.capture_width
            fresh = closed & ~self._closed
            if fresh.any():
                x = self._x.numpy()
                self._held[fresh] = capture(x, grip, self.radius)[fresh]
                self._local[fresh] = grip.to_local(x)[fresh]
            self._held[~closed] = False
            self._closed = closed
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

    def _operators(self, h: float, constrained: np.ndarray) -> list[_Group]:
        """The members grouped by constrained set (one group of all members when they share one), each with
        its operators (see :class:`_Group`), cached per (step, constrained set)."""
        if len(constrained) == 1 or (constrained == constrained[0]).all():
            return [self._group(h, constrained[0], None)]
        rows: dict[bytes, list[int]] = {}
        for b, row in enumerate(constrained):
            rows.setdefault(row.tobytes(), []).append(b)
        return [self._group(h, constrained[m[0]], torch.tensor(m)) for m in rows.values()]

    def _group(self, h: float, row: np.ndarray, members: torch.Tensor | None) -> _Group:
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
        return _Group(members, *self._inverses[key])

    def _friction(
        self,
        v: torch.Tensor,
        v0: torch.Tensor,
        h: float,
        cmask: torch.Tensor | None,
        contact: list[torch.Tensor],
        friction: np.ndarray,
    ) -> torch.Tensor:
        """Coulomb friction on the velocities of particles touching a box (``contact``: its normals,
        velocities and touch mask from :func:`_box_push`, taken before the push: the push is along the
        normal; ``friction`` (K,) the boxes' coefficients): the tangential velocity relative to the box loses
        up to ``mu`` times the normal velocity the contact removed."""
        n, vel, touch = contact
        predicted = v0 + h * torch.from_numpy(GRAVITY)
        mu_box = torch.from_numpy(np.maximum(friction, self.params.friction))
        for k in range(len(friction)):
            hit = touch[:, k, :, None] if cmask is None else touch[:, k, :, None] & ~cmask
            v = _coulomb(v, vel[:, k], n[:, k], predicted, hit, mu_box[k])
        return v


class _Group(NamedTuple):
    """Members (indices; None: all) that share a constrained set C, and its operators, from the global
    matrix A with C eliminated and inverted (A_e^-1): ``inertia`` = A_e^-1 M / h^2 with C's columns zeroed
    (N, N), ``coupling`` = -A_e^-1 A[:, C] with C's rows zeroed (N, |C|) (None when C is empty), ``rows``
    (C's indices) and ``gather`` = A_e^-1 S^T EA (N, N - 1), so that one iteration is ``x = base + gather @
    directions``."""

    members: torch.Tensor | None
    inertia: torch.Tensor
    coupling: torch.Tensor | None
    rows: torch.Tensor | None
    gather: torch.Tensor

    def base(self, y: torch.Tensor, xc: torch.Tensor) -> torch.Tensor:
        """The iterations' constant part (N, 3, b) from the inertial positions ``y`` and the constrained
        particles' targets ``xc`` (N, 3, b): the solve without the stretch targets, C at its targets."""
        n = y.shape[0]
        base = torch.mm(self.inertia, y.reshape(n, -1))
        if self.coupling is not None:
            assert self.rows is not None
            held = xc[self.rows].reshape(len(self.rows), -1)
            base.addmm_(self.coupling, held)
            base[self.rows] = held
        return base.view(y.shape)


def _iterate(
    x: torch.Tensor,
    base: torch.Tensor,
    gather: torch.Tensor,
    omegas: list[float],
    floor: float,
    start: torch.Tensor,
    budget: torch.Tensor | None,
) -> torch.Tensor:
    """The local/global iterations from ``x`` (N, 3, B): each is ``base + gather @ directions`` (one matrix
    product, ``gather`` (N, N - 1) shared or (B, N, N - 1) per member; a column's floats depend neither on
    how many columns there are nor on which of the two, so a member's do not depend on the batch: a test
    checks), the Chebyshev weight ``omegas[k]``, the table (``floor`` m) and its friction
    (``budget`` (N, 1, B) None: no particle on the table). Started from ``x0 + h v0`` rather than from the
    inertial ``y``: the two differ only at the held and pinned particles, and from there a rope at rest is a
    fixed point of the iterations, so few of them keep its shape (from ``y`` it sagged a few mm further)."""
    n = x.shape[0]
    shared = gather.dim() == 2
    flat = base.view(n, -1) if shared else base.permute(2, 0, 1).contiguous()
    previous = x
    for w in omegas:
        e = x[1:] - x[:-1]
        e = e / (e * e).sum(1, keepdim=True).sqrt_().clamp_min_(1e-12)  # (vector_norm: not batch-exact)
        if shared:
            solved = torch.addmm(flat, gather, e.view(n - 1, -1)).view(x.shape)
        else:
            solved = (
                torch.baddbmm(flat, gather, e.permute(2, 0, 1).contiguous()).permute(1, 2, 0).contiguous()
            )
        if w != 1.0:
            solved = torch.lerp(previous, solved, w)
        solved[:, 2].clamp_(min=floor)
        if budget is not None:
            _table_friction(solved, start, budget, axis=1)
        previous, x = x, solved
    return x


@functools.cache
def _iterations() -> Any:
    """:func:`_iterate` compiled by TorchScript (the same floats; per-op overhead ~40 % less on a single
    rope, whose small products it is bound by), or itself where TorchScript is unavailable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # torch.jit.script is deprecated (torch.compile is not cheaper here)
            return torch.jit.script(_iterate)
    except Exception:  # noqa: BLE001  (any failure to compile: run it eagerly)
        return _iterate


def _table_friction(x: torch.Tensor, start: torch.Tensor, budget: torch.Tensor, axis: int = -1) -> None:
    """Position-based Coulomb friction with the table (Macklin et al. 2014), inside every iteration so that
    the global step works against it: a particle that rests on the table moves sideways from its ``start``
    by its slide less ``budget`` m (friction coefficient times how far gravity and its velocity pressed it
    into the table this step; 0 for a particle off the table, which is then left exactly as it is); a slide
    under the budget sticks. Coordinates along ``axis`` of ``x`` and ``start`` (``budget``: 1 there). In
    place."""
    xy = x.narrow(axis, 0, 2)
    slide = xy - start.narrow(axis, 0, 2)
    length = (slide * slide).sum(axis, keepdim=True).sqrt_().clamp_min_(1e-300)
    xy.sub_(slide.mul_(torch.div(budget, length).clamp_max_(1.0)))


@functools.cache
def _fall(h: float) -> torch.Tensor:
    """``h^2`` times :data:`GRAVITY`, laid out (1, 3, 1) for positions laid out (N, 3, B), m."""
    return (h * h) * torch.from_numpy(GRAVITY)[None, :, None]


CHEBYSHEV_START = 5
"""Plain iterations before the acceleration starts."""


@functools.cache
def _omegas(iterations: int, rho: float) -> list[float]:
    """The Chebyshev weight of each iteration (Wang 2015, eq. 12; 1: plain). Shared: do not change it."""
    out, omega = [], 1.0
    for k in range(iterations):
        if rho <= 0.0 or k < CHEBYSHEV_START:
            omega = 1.0
        elif k == CHEBYSHEV_START:
            omega = 2.0 / (2.0 - rho * rho)
        else:
            omega = 4.0 / (4.0 - rho * rho * omega)
        out.append(omega)
    return out


def _coulomb(
    v: torch.Tensor,
    surface_v: torch.Tensor,
    normal: torch.Tensor,
    predicted: torch.Tensor,
    hit: torch.Tensor,
    mu: float | torch.Tensor,
) -> torch.Tensor:
    """``v`` (B, N, 3) after Coulomb friction where ``hit`` (B, N, 1): relative normal velocity no longer
    negative; tangential relative velocity reduced by ``mu`` times the normal velocity change."""
    rel = v - surface_v
    vn = (rel * normal).sum(-1, keepdim=True)
    dvn = (vn - ((predicted - surface_v) * normal).sum(-1, keepdim=True)).clamp_min(0.0)
    vn = vn.clamp_min(0.0)
    tangential = rel - (rel * normal).sum(-1, keepdim=True) * normal
    speed = torch.linalg.vector_norm(tangential, dim=-1, keepdim=True)
    scale = (1.0 - mu * dvn / speed.clamp_min(1e-12)).clamp_min(0.0)
    out = surface_v + vn * normal + scale * tangential
    return torch.where(hit, out, v)


_NEAR = 0.01
"""Margin (m, beyond the radius) within which a box counts as near a particle (the rope wakes up)."""


def _near_boxes(colliders: Colliders | None, x: np.ndarray, radius: float) -> np.ndarray:
    """(B, K): whether any particle of rope b comes within ``radius + _NEAR`` of box k (numpy)."""
    if colliders is None or not len(colliders.half):
        return np.zeros((len(x), 0), dtype=bool)
    arm = x[:, None, :, :] - colliders.centre[:, :, None, :]  # (B, K, N, 3)
    local = np.matmul(arm, colliders.rotation)
    reach = colliders.half[None, :, None, :] + radius + _NEAR
    return np.asarray((np.abs(local) <= reach).all(axis=-1).any(axis=-1))


def _box_push(
    x: torch.Tensor, colliders: Colliders, boxes: np.ndarray, r: float, slop: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For boxes ``boxes``: the push (B, N, 3) out of every box a particle is inside (inflated by ``r``),
    and per box (B, K, N, ...) the outward face normal, the box's velocity at the particle, and whether the
    particle is within ``slop`` of the inflated box."""
    c = torch.from_numpy(colliders.centre[:, boxes])  # (B, K, 3)
    R = torch.from_numpy(colliders.rotation[:, boxes])  # (B, K, 3, 3)
    half = torch.from_numpy(colliders.half[boxes] + r)[None, :, None, :]  # (1, K, 1, 3)
    arm = x[:, None] - c[:, :, None]  # (B, K, N, 3)
    local = torch.matmul(arm, R)
    depth, axis = (half - local.abs()).min(-1, keepdim=True)  # > 0: inside along every axis; the nearest face
    inside = (depth > -slop)[..., 0]  # (B, K, N)
    sign = torch.where(local.gather(-1, axis) >= 0, 1.0, -1.0).to(x.dtype)
    onehot = torch.zeros_like(local).scatter_(-1, axis, 1.0)
    normal = torch.matmul(onehot * sign, R.transpose(-1, -2))
    push = torch.where(depth > 0, normal * depth, 0.0).sum(1)
    lin = torch.from_numpy(colliders.velocity[:, boxes])[:, :, None]
    ang = torch.from_numpy(colliders.angular_velocity[:, boxes])[:, :, None]
    vel = lin + torch.cross(ang.expand_as(arm), arm, dim=-1)
    return push, normal, vel, inside
