"""A cloth simulated by projective dynamics (Bouaziz et al. 2014) in PyTorch, B sheets in one tensor: the
rope's method (:mod:`solvers.pd.rope`) on a grid of particles.

The sheet is an ``nx`` x ``ny`` grid of particles of spacing ``l0``. Stretch constraints hold every
structural edge (along rows and columns, rest length ``l0``) and every shear edge (both diagonals,
``l0 sqrt 2``) at its rest length; bending asks every second difference along rows and columns to vanish
(a flat rest shape: linear, so it lives in the matrix only). Per step of ``h`` seconds:

- inertia: ``y = x + h v + h^2 g``;
- local step: each edge's target ``p_e = l_e (x_j - x_i) / |x_j - x_i|``;
- global step: ``(M / h^2 + sum_e w_e S_e^T S_e + w_b D^T D) x = M y / h^2 + sum_e w_e S_e^T p_e`` with
  ``w_e = EA / l_e``, so ``w_e l_e = EA`` for every edge: one iteration is ``x = base + G @ d`` with ``d``
  the edges' unit directions and ``G`` the inverted matrix times the scatter, cached per (step, held set)
  as the rope's is; held particles are eliminated and sit where the grip puts them;
- the table: particles are pushed out of it and get position-based Coulomb friction inside every iteration
  (the rope's rule); rigid boxes (fingers, hand, objects) push particles out after the iterations through
  the face they came in by (the one the particle was furthest outside of at the step's start; a sheet
  draped over a box is pulled deep into it, and the nearest face would then be a side or the bottom), with
  Coulomb friction on the velocities (the rope's rule).

The cloth does not collide with itself (a fold passes through). Stiffness: ``stretch_stiffness`` EA (N, per
edge) and ``bending_stiffness`` (N m^2) from the material's Young's modulus and the sheet's thickness, or
given directly. Grasping is :mod:`solvers.deformable`'s rule. Float64 on the CPU; the same inputs give the
same floats, and a member's floats do not depend on the batch (one padded product per group of members
sharing their held and touching particles: :func:`solvers.pd.iterations.member_products`).

This module imports torch at its top, so it is on the lazy-import list (pyproject): build it through
:func:`solvers.deformable.build_solver`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

from simpact.core.rotations import quat_rotate
from simpact.core.scene import Scene, SceneError, SceneObject
from solvers.deformable import Colliders, check_ranges, held_positions, torch_solver_mode, update_grasp
from solvers.pd.contact import GRAVITY, box_friction, box_push, near_boxes, table_friction  # noqa: TID253
from solvers.pd.iterations import member_products  # noqa: TID253

__all__ = ["ClothParams", "ClothSolver", "cloth_grid", "cloth_solver"]

_CONTACT_SLOP = 1e-4
"""A particle this close to a box after the solve touches it (gets friction), m."""
_CONTACT_MARGIN = 0.003
"""A particle this close to a box at the step's start or its inertial target gets a contact constraint, m."""


@dataclass(frozen=True)
class ClothParams:
    """A sheet's physics. Units: m, kg, N, N m^2, 1/s."""

    nx: int
    ny: int
    spacing: float
    """Rest distance between neighbouring particles, m."""
    thickness: float = 0.003
    mass: float = 0.05
    """Whole sheet, kg."""
    stretch_stiffness: float = 300.0
    """EA per edge, N."""
    bending_stiffness: float = 1.0e-6
    """N m^2."""
    friction: float = 0.6
    damping: float = 2.0
    """Linear velocity decay rate, 1/s."""
    iterations: int = 10

    def __post_init__(self) -> None:
        checks = {
            "nx": self.nx >= 2,
            "ny": self.ny >= 2,
            "spacing": self.spacing > 0,
            "thickness": self.thickness > 0,
            "mass": self.mass > 0,
            "stretch_stiffness": self.stretch_stiffness > 0,
            "bending_stiffness": self.bending_stiffness >= 0,
            "friction": self.friction >= 0,
            "damping": self.damping >= 0,
            "iterations": self.iterations >= 1,
        }
        check_ranges("cloth", self, checks)

    @property
    def count(self) -> int:
        return self.nx * self.ny


def cloth_grid(obj: SceneObject, spacing: float) -> tuple[np.ndarray, int, int]:
    """The sheet's rest particles (nx * ny, 3) m (row-major: index ``i * ny + j``) in the box's x-y plane
    (its quaternion applied) at the box's centre height, and ``nx``, ``ny``."""
    nx = max(2, round(obj.size[0] / spacing) + 1)
    ny = max(2, round(obj.size[1] / spacing) + 1)
    u = (np.arange(nx) - (nx - 1) / 2) * spacing
    w = (np.arange(ny) - (ny - 1) / 2) * spacing
    local = np.stack([*np.meshgrid(u, w, indexing="ij"), np.zeros((nx, ny))], axis=-1).reshape(-1, 3)
    q = np.asarray(obj.quaternion, dtype=float)
    points = np.stack([quat_rotate(q, p) for p in local]) + np.asarray(obj.position, dtype=float)
    return points, nx, ny


def cloth_solver(obj: SceneObject, scene: Scene) -> ClothSolver:
    """The batch-1 cloth of a ``pd`` sheet (a thin box: ``size`` = side, side, thickness), lying flat where
    the scene puts it (raised to rest on the table). ``material``: ``youngs_modulus`` (Pa) or
    ``stretch_stiffness`` (N) and ``bending_stiffness`` (N m^2); ``spacing`` (m, default 2 cm),
    ``damping``, ``iterations``."""
    m = dict(obj.material)
    known = {"model", "youngs_modulus", "poissons_ratio", "density", "stretch_stiffness", "bending_stiffness",
             "spacing", "damping", "iterations"}  # fmt: skip
    if set(m) - known:
        raise SceneError(f"object '{obj.name}': unknown cloth material keys {sorted(set(m) - known)}")
    if obj.shape != "box":
        raise SceneError(f"object '{obj.name}': a pd cloth is a thin box (size: side, side, thickness)")
    spacing = float(m.get("spacing", 0.02))
    points, nx, ny = cloth_grid(obj, spacing)
    thickness = float(obj.size[2])
    E = float(m.get("youngs_modulus", 1.0e5))
    params = ClothParams(
        nx=nx,
        ny=ny,
        spacing=spacing,
        thickness=thickness,
        mass=obj.mass,
        stretch_stiffness=float(m.get("stretch_stiffness", E * spacing * thickness)),
        bending_stiffness=float(m.get("bending_stiffness", E * spacing * thickness**3 / 12)),
        friction=obj.friction,
        damping=float(m.get("damping", ClothParams.damping)),
        iterations=int(m.get("iterations", ClothParams.iterations)),
    )
    points[:, 2] += max(0.0, thickness / 2 - points[:, 2].min())
    return ClothSolver(obj.name, params, points, table_friction=scene.table_friction)


def _entry_push(
    x: torch.Tensor, x0: torch.Tensor, colliders: Colliders, boxes: np.ndarray, r: float
) -> torch.Tensor:
    """The push (B, N, 3) that puts particles ``x`` out of the boxes ``boxes`` (inflated by ``r``) through the
    face they entered by: the axis along which the particle at ``x0`` was furthest outside the box (the
    nearest face for one already inside at ``x0``), on ``x0``'s side."""
    c = torch.from_numpy(colliders.centre[:, boxes])[:, :, None]  # (B, K, 1, 3)
    R = torch.from_numpy(colliders.rotation[:, boxes])  # (B, K, 3, 3)
    half = torch.from_numpy(colliders.half[boxes])[None, :, None, :] + r  # (1, K, 1, 3)
    local = torch.matmul(x[:, None] - c, R)  # (B, K, N, 3)
    local0 = torch.matmul(x0[:, None] - c, R)
    outside0 = local0.abs() - half
    was_out = (outside0 > 0).any(-1, keepdim=True)
    axis = torch.where(
        was_out, outside0.argmax(-1, keepdim=True), (half - local.abs()).argmin(-1, keepdim=True)
    )
    side = torch.where(was_out, local0, local).gather(-1, axis).sign().clamp_min(0.0) * 2.0 - 1.0
    move = side * half.expand_as(local).gather(-1, axis) - local.gather(-1, axis)
    inside = (local.abs() < half).all(-1, keepdim=True)
    shift = torch.zeros_like(local).scatter_(-1, axis, torch.where(inside, move, 0.0))
    return torch.matmul(shift, R.transpose(-1, -2)).sum(1)


def _topology(nx: int, ny: int) -> tuple[np.ndarray, np.ndarray]:
    """Edges (E, 2) (structural, then shear) and bending triples (T, 3) of a row-major nx x ny grid."""
    idx = np.arange(nx * ny).reshape(nx, ny)
    pairs = [
        (idx[:-1, :], idx[1:, :]),
        (idx[:, :-1], idx[:, 1:]),
        (idx[:-1, :-1], idx[1:, 1:]),
        (idx[1:, :-1], idx[:-1, 1:]),
    ]
    edges = np.concatenate([np.stack([a.ravel(), b.ravel()], axis=1) for a, b in pairs])
    triples = np.concatenate(
        [
            np.stack([idx[:-2, :].ravel(), idx[1:-1, :].ravel(), idx[2:, :].ravel()], axis=1),
            np.stack([idx[:, :-2].ravel(), idx[:, 1:-1].ravel(), idx[:, 2:].ravel()], axis=1),
        ]
    )
    return edges, triples


class ClothSolver:
    """B sheets stepped together (a :class:`solvers.deformable.DeformableSolver`); ``points`` (N, 3) m: the
    rest shape and start of every member."""

    def __init__(
        self,
        name: str,
        params: ClothParams,
        points: np.ndarray,
        *,
        batch: int = 1,
        table_friction: float = 0.5,
    ) -> None:
        points = np.asarray(points, dtype=np.float64)
        if points.shape != (params.count, 3):
            raise SceneError(f"cloth '{name}': {params.count} points expected, got {points.shape}")
        self.name = name
        self.params = params
        self.radius = params.thickness / 2
        self.capture_width = max(params.thickness, 0.01)
        self.table_friction = table_friction
        self.edges, self.triples = _topology(params.nx, params.ny)
        rest = np.linalg.norm(points[self.edges[:, 1]] - points[self.edges[:, 0]], axis=1)
        self._rest = torch.from_numpy(rest)[None, :, None]
        self._head = torch.from_numpy(self.edges[:, 0])
        self._tail = torch.from_numpy(self.edges[:, 1])
        self._x = torch.from_numpy(np.repeat(points[None], batch, axis=0).copy())
        self._v = torch.zeros_like(self._x)
        self._held = np.zeros((batch, params.count), dtype=bool)
        self._local = np.zeros((batch, params.count, 3))
        self._closed = np.zeros(batch, dtype=bool)
        self._operators: dict[tuple[float, bytes], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    @property
    def batch(self) -> int:
        return int(self._x.shape[0])

    @property
    def render_edges(self) -> np.ndarray:
        """The structural edges (E, 2): the grid lines a picture draws."""
        p = self.params
        return self.edges[: (p.nx - 1) * p.ny + p.nx * (p.ny - 1)]

    def positions(self) -> np.ndarray:
        return self._x.numpy().copy()

    def velocities(self) -> np.ndarray:
        """Particle velocities (B, N, 3), m/s."""
        return self._v.numpy().copy()

    def held(self) -> np.ndarray:
        """Which particles (B, N) the gripper holds."""
        return self._held.copy()

    def edge_lengths(self) -> np.ndarray:
        """Current over rest length of every edge (B, E)."""
        e = self._x[:, self._tail] - self._x[:, self._head]
        return (torch.linalg.vector_norm(e, dim=-1) / self._rest[..., 0]).numpy()

    def snapshot(self) -> tuple[np.ndarray, ...]:
        """Positions, velocities, the held set, its grip coordinates and the grip's closed flag."""
        return (
            self.positions(),
            self.velocities(),
            self._held.copy(),
            self._local.copy(),
            self._closed.copy(),
        )

    def restore(self, snapshot: Any) -> None:
        x, v, held, local, closed = snapshot
        if x.shape != tuple(self._x.shape):
            raise ValueError(
                f"cloth snapshot of shape {x.shape} does not fit this solver ({tuple(self._x.shape)})"
            )
        self._x, self._v = torch.from_numpy(x.copy()), torch.from_numpy(v.copy())
        self._held, self._local, self._closed = held.copy(), local.copy(), closed.copy()

    def replicate(self, batch: int) -> ClothSolver:
        if self.batch != 1:
            raise ValueError("replicate() needs a batch-1 cloth")
        other = ClothSolver.__new__(ClothSolver)
        other.__dict__.update(self.__dict__)
        other._operators = dict(self._operators)
        other._x = torch.zeros((batch, *self._x.shape[1:]), dtype=torch.float64)
        other.restore(tuple(np.repeat(a, batch, axis=0) for a in self.snapshot()))
        return other

    def step(self, dt: float, colliders: Colliders | None = None) -> None:
        """Advance every sheet by ``dt`` s (module docstring); ``colliders`` None: only the table. Torch
        runs on one thread during the step, as the rope's does."""
        with torch_solver_mode():
            self._step(float(dt), colliders)

    def _step(self, h: float, colliders: Colliders | None) -> None:
        p = self.params
        x0, v0 = self._x, self._v
        held, targets = self._constraints(colliders)
        mass = p.mass / p.count
        y = x0 + h * v0 + (h * h) * torch.from_numpy(GRAVITY)
        cmask = torch.from_numpy(held)[..., None]
        xc = torch.from_numpy(targets) * cmask
        boxes, touching = self._contacts(colliders, x0, y, held)
        groups = self._operator_groups(h, held, touching)

        def times(k: int, x: torch.Tensor) -> torch.Tensor:  # operator k (inverse, gather, matrix) times x
            if len(groups) == 1:
                return member_products(groups[0][1][k], x)
            out = torch.empty((len(x), p.count, 3), dtype=x.dtype)
            for members, operators in groups:
                out[members] = member_products(operators[k], x[members])
            return out

        shift = (mass / (h * h)) * y - times(2, xc)
        base = times(0, torch.where(cmask, xc, shift))
        floor = (0.0 if colliders is None else colliders.table_z) + self.radius
        mu = max(p.friction, self.table_friction if colliders is None else colliders.table_friction)
        approach = (x0[..., 2] - y[..., 2]).clamp_min(0.0) - (x0[..., 2] - floor).clamp_min(0.0)
        on_table = (x0[..., 2] <= floor + _CONTACT_SLOP) & ~cmask[..., 0]
        budget = torch.where(on_table, mu * approach.clamp_min(0.0), 0.0)[..., None]
        x = torch.where(cmask, xc, y)
        weight = torch.from_numpy(touching)[..., None] * self._contact_weight
        for _ in range(p.iterations):
            e = x[:, self._tail] - x[:, self._head]
            d = e / (e * e).sum(-1, keepdim=True).sqrt_().clamp_min_(1e-12)  # (vector_norm: not batch-exact)
            solved = base + times(1, d)
            if len(
                boxes
            ):  # contact constraints: touching particles pulled to their projection out of the boxes
                assert colliders is not None
                projected = x + _entry_push(x, x0, colliders, boxes, self.radius)
                solved = solved + times(0, weight * projected)
            x = solved
            x[..., 2].clamp_(min=floor)
            table_friction(x, x0, budget)
        if len(boxes):  # and no particle ends inside a box
            assert colliders is not None
            x = x + torch.where(cmask, 0.0, _entry_push(x, x0, colliders, boxes, self.radius))
        x = torch.where(cmask, xc, x)
        v = (x - x0) / h
        if len(boxes):
            assert colliders is not None
            _, *contact = box_push(x, colliders, boxes, self.radius, slop=_CONTACT_SLOP)
            v = box_friction(v, v0, h, contact, np.maximum(colliders.friction[boxes], p.friction), ~cmask)
        v = v * max(0.0, 1.0 - p.damping * h)
        v = torch.where(cmask, (x - x0) / h, v)
        self._x = torch.where(cmask, x, x0 + h * v).contiguous()
        self._v = v.contiguous()

    @property
    def _contact_weight(self) -> float:
        """Weight of a contact constraint, N/m: a structural edge's."""
        return self.params.stretch_stiffness / self.params.spacing

    def _contacts(
        self, colliders: Colliders | None, x0: torch.Tensor, y: torch.Tensor, held: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The boxes near the sheet and which free particles (B, N) touch one (within ``_CONTACT_MARGIN`` of
        it at the step's start or at their inertial target ``y``)."""
        near = near_boxes(colliders, x0.numpy(), self.radius) | near_boxes(colliders, y.numpy(), self.radius)
        boxes = np.flatnonzero(near.any(axis=0))
        touching = np.zeros(held.shape, dtype=bool)
        if len(boxes):
            assert colliders is not None
            for x in (x0, y):
                inside = box_push(x, colliders, boxes, self.radius, slop=_CONTACT_MARGIN)[3]
                touching |= inside.any(1).numpy()
        return boxes, touching & ~held

    def _constraints(self, colliders: Colliders | None) -> tuple[np.ndarray, np.ndarray]:
        """Update the held set (grasp rule); the held mask (B, N) and their targets (B, N, 3)."""
        targets = np.zeros((self.batch, self.params.count, 3))
        if colliders is not None:
            grip = colliders.grip
            self._closed = update_grasp(
                self._x.numpy(), grip, self.radius, self.capture_width, self._held, self._local, self._closed
            )
            targets = np.where(self._held[..., None], held_positions(self._local, grip), targets)
        return self._held.copy(), targets

    def _operator_groups(
        self, h: float, held: np.ndarray, touching: np.ndarray
    ) -> list[tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]:
        """The members (indices) grouped by their ``held`` and ``touching`` sets, each with its operators:
        the global matrix with the contact constraints of the touching particles added and the held ones
        eliminated, inverted (N, N); that inverse times the edges' scatter times EA (N, E); the plain matrix
        (N, N)."""
        groups: dict[int, tuple[list[int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}
        for b, (a, t) in enumerate(zip(held, touching, strict=True)):
            operators = self._operator(h, a, t)
            groups.setdefault(id(operators), ([], operators))[0].append(b)
        return [(torch.tensor(members), operators) for members, operators in groups.values()]

    def _operator(
        self, h: float, held: np.ndarray, touching: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        key = (h, np.packbits(held).tobytes() + np.packbits(touching).tobytes())
        if key not in self._operators:
            p = self.params
            n, m = p.count, len(self.edges)
            S = np.zeros((m, n))
            S[np.arange(m), self.edges[:, 1]] = 1.0
            S[np.arange(m), self.edges[:, 0]] = -1.0
            D = np.zeros((len(self.triples), n))
            for col, weight in enumerate((1.0, -2.0, 1.0)):
                D[np.arange(len(self.triples)), self.triples[:, col]] = weight
            w_e = p.stretch_stiffness / self._rest[0, :, 0].numpy()
            matrix = (p.mass / n / h**2) * np.eye(n) + S.T @ (w_e[:, None] * S)
            matrix += (p.bending_stiffness / p.spacing**3) * D.T @ D
            a = matrix + np.diag(touching * self._contact_weight)
            a[held, :] = 0.0
            a[:, held] = 0.0
            a[held, held] = 1.0
            inverse = np.linalg.inv(a)
            scatter = S.T.copy()
            scatter[held, :] = 0.0
            gather = inverse @ scatter * p.stretch_stiffness  # w_e l_e = EA
            self._operators[key] = (
                torch.from_numpy(inverse),
                torch.from_numpy(gather),
                torch.from_numpy(matrix),
            )
        return self._operators[key]
