"""An explicit MLS-MPM solver on Warp (CPU here, CUDA when present): particle bodies of the five materials,
the table (the plane ``z = table_z``) and kinematic boxes (gripper fingers, a squeezing plate) as colliders.

Deterministic: on the CPU, Warp runs each kernel on one thread in a fixed order, so the same inputs give
bit-identical particles; :meth:`MPMSolver.snapshot` / :meth:`MPMSolver.restore` are exact (float32 copies).
Units: SI; quaternions (w, x, y, z); frames: world (z up, table at ``table_z``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simpact.core.scene import SceneError
from solvers.mpm.materials import Material

__all__ = ["Body", "Boxes", "GridSpec", "MPMSnapshot", "MPMSolver"]


@dataclass(frozen=True)
class Body:
    """A set of particles of one material; ``particle_volume`` (m^3) defaults to the volume their
    ``dx / 2`` voxels occupy, shared equally."""

    positions: np.ndarray
    """(N, 3) m, world frame."""
    material: Material
    particle_volume: float | None = None


@dataclass(frozen=True)
class GridSpec:
    """A regular background grid: node (i, j, k) at ``origin + (i, j, k) * dx``."""

    origin: tuple[float, float, float]
    shape: tuple[int, int, int]
    dx: float
    """Cell size, m."""

    @classmethod
    def around(cls, lo: Sequence[float], hi: Sequence[float], dx: float) -> GridSpec:
        """The grid covering the box [lo, hi] (m) plus the three boundary cells on every side."""
        lo_a = np.asarray(lo, dtype=float) - 3.0 * dx
        n = np.ceil((np.asarray(hi, dtype=float) + 3.0 * dx - lo_a) / dx).astype(int) + 1
        return cls(tuple(float(v) for v in lo_a), tuple(int(v) for v in n), float(dx))  # type: ignore[arg-type]

    def contains(self, points: np.ndarray, cells: float = 1.0) -> np.ndarray:
        """Whether each point lies more than ``cells`` cells inside the grid."""
        g = (points - np.asarray(self.origin)) / self.dx
        return np.all((g >= cells) & (g <= np.asarray(self.shape) - 1 - cells), axis=1)


@dataclass(frozen=True)
class Boxes:
    """K kinematic oriented boxes, posed at the END of a step and moving with constant velocity during it:
    ``centre`` (K, 3) m, ``rotation`` (K, 3, 3) world from box, ``half`` (K, 3) half extents m,
    ``velocity`` (K, 3) m/s, ``angular_velocity`` (K, 3) rad/s, ``friction`` (K,)."""

    centre: np.ndarray
    rotation: np.ndarray
    half: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray
    friction: np.ndarray

    @classmethod
    def one(
        cls,
        centre: Sequence[float],
        half: Sequence[float],
        velocity: Sequence[float] = (0.0, 0.0, 0.0),
        friction: float = 0.5,
    ) -> Boxes:
        """A single axis-aligned box."""
        return cls(
            np.array([centre], float),
            np.eye(3)[None],
            np.array([half], float),
            np.array([velocity], float),
            np.zeros((1, 3)),
            np.array([friction], float),
        )

    @classmethod
    def none(cls) -> Boxes:
        z = np.zeros((0, 3))
        return cls(z, np.zeros((0, 3, 3)), z, z, z, np.zeros(0))

    def __len__(self) -> int:
        return int(self.centre.shape[0])


@dataclass(frozen=True)
class MPMSnapshot:
    """The solver's exact state: particle arrays (float32) and the simulated time."""

    x: np.ndarray
    v: np.ndarray
    C: np.ndarray
    F: np.ndarray
    tau: np.ndarray
    """Kirchhoff stress of ``F`` (Pa), kept so a restore needs no recomputation."""
    time: float
    steps: int


_MIN_HALF_CELLS = 1.0
"""Boxes are at least two cells thick on the grid: contact takes the nearest face's normal, so material
pressed by a thinner box can reach nodes nearer its far face and pass through (a resolution limit)."""


def _occupied_volume(points: np.ndarray, h: float) -> float:
    cells = np.unique(np.floor(points / h).astype(np.int64), axis=0)
    return float(len(cells)) * h**3


class MPMSolver:
    """Particles of ``bodies`` on ``grid``, stepped with substeps of ``dt`` (default: ``cfl`` times the cell
    over the fastest P-wave speed)."""

    def __init__(
        self,
        bodies: Sequence[Body],
        grid: GridSpec,
        *,
        dt: float | None = None,
        cfl: float = 0.4,
        gravity: tuple[float, float, float] = (0.0, 0.0, -9.81),
        table_z: float = 0.0,
        table_friction: float = 0.5,
        device: str = "cpu",
    ) -> None:
        import warp as wp

        if not bodies:
            raise SceneError("MPM: no particle bodies")
        # No banner on stdout, where the command line reports (Warp >= 1.10 reads log_level, earlier quiet).
        wp.config.log_level = wp.LOG_WARNING
        wp.config.quiet = True  # type: ignore[attr-defined]
        wp.init()
        self.grid = grid
        self.device = device
        self.gravity = gravity
        self.table_z = float(table_z)
        self.table_friction = float(table_friction)
        speed = max(b.material.wave_speed() for b in bodies)
        self.dt = float(dt) if dt is not None else cfl * grid.dx / speed
        if not (self.dt > 0 and math.isfinite(self.dt)):
            raise SceneError(f"MPM: step must be positive, got {self.dt}")
        arrays = self._particle_arrays(bodies)
        self.n = len(arrays["x"])
        if not grid.contains(arrays["x"], cells=3.0).all():
            raise SceneError("MPM: some particles start outside the grid (or in its three boundary cells)")
        self.body_slices = arrays.pop("slices")
        self._a: dict[str, Any] = {
            k: wp.array(val, dtype=self._dtype(k), device=device) for k, val in arrays.items()
        }
        self._serial_grid = wp.get_device(device).is_cpu
        # grid phases in one serial launch over the particles' bounding box (CPU), else per-thread kernels
        self._build_structs()
        self.time = 0.0
        self.steps = 0

    def _build_structs(self) -> None:
        """The kernels' views of the particle arrays (``self._a``), a fresh grid and the colliders."""
        import warp as wp

        from solvers.mpm import kernels as k

        a, names = self._a, {"yield": "yield_stress", "visc": "viscosity"}
        self._particles = k.Particles()
        for key, arr in a.items():
            setattr(self._particles, names.get(key, key), arr)
        self._grid = k.Grid()
        shape, dev = self.grid.shape, self.device
        self._grid.m = wp.zeros(shape, dtype=float, device=dev)
        self._grid.mv = wp.zeros(shape, dtype=wp.vec3, device=dev)
        self._grid.v = wp.zeros(shape, dtype=wp.vec3, device=dev)
        self._grid.origin = wp.vec3(*self.grid.origin)
        self._grid.dx = float(self.grid.dx)
        self._colliders = k.Colliders()
        self._colliders.gravity = wp.vec3(*self.gravity)
        self._box_count = -1

    @staticmethod
    def _dtype(key: str) -> Any:
        import warp as wp

        return {"x": wp.vec3, "v": wp.vec3, "C": wp.mat33, "F": wp.mat33, "tau": wp.mat33, "model": int}.get(
            key, float
        )

    def _particle_arrays(self, bodies: Sequence[Body]) -> dict[str, Any]:
        cols: dict[str, list[np.ndarray]] = {
            k: [] for k in ("x", "model", "mu", "lam", "mass", "vol", "yield", "alpha", "visc")
        }
        slices, start = [], 0
        for b in bodies:
            pts = np.asarray(b.positions, dtype=float)
            if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0 or not np.isfinite(pts).all():
                raise SceneError(f"MPM: particles must be a non-empty finite (N, 3) array, got {pts.shape}")
            n = len(pts)
            vol = b.particle_volume or _occupied_volume(pts, self.grid.dx / 2.0) / n
            mu, lam = b.material.lame()
            m = b.material
            viscosity = m.viscosity if m.model == "foam" else 0.0
            for key, value in (
                ("model", m.code),
                ("mu", mu),
                ("lam", lam),
                ("mass", vol * m.density),
                ("vol", vol),
                ("yield", m.yield_stress),
                ("alpha", m.dp_alpha()),
                ("visc", viscosity),
            ):
                cols[key].append(np.full(n, value))
            cols["x"].append(pts)
            slices.append(slice(start, start + n))
            start += n
        out: dict[str, Any] = {k: np.concatenate(v) for k, v in cols.items()}
        out["x"] = out["x"].astype(np.float32)
        out["model"] = out["model"].astype(np.int32)
        for k in ("mu", "lam", "mass", "vol", "yield", "alpha", "visc"):
            out[k] = out[k].astype(np.float32)
        out["v"] = np.zeros((start, 3), np.float32)
        out["C"] = np.zeros((start, 3, 3), np.float32)
        out["F"] = np.tile(np.eye(3, dtype=np.float32), (start, 1, 1))
        out["tau"] = np.zeros((start, 3, 3), np.float32)  # the Kirchhoff stress of F = I
        out["slices"] = slices
        return out

    # -- state ------------------------------------------------------------------------------------------
    def positions(self) -> np.ndarray:
        """(N, 3) particle positions, m (float32 copy)."""
        return np.asarray(self._a["x"].numpy(), dtype=np.float32).copy()

    def velocities(self) -> np.ndarray:
        """(N, 3) particle velocities, m/s."""
        return np.asarray(self._a["v"].numpy(), dtype=np.float32).copy()

    def deformation_gradients(self) -> np.ndarray:
        """(N, 3, 3) elastic deformation gradients."""
        return np.asarray(self._a["F"].numpy(), dtype=np.float32).copy()

    def snapshot(self) -> MPMSnapshot:
        a = self._a
        return MPMSnapshot(
            a["x"].numpy().copy(),
            a["v"].numpy().copy(),
            a["C"].numpy().copy(),
            a["F"].numpy().copy(),
            a["tau"].numpy().copy(),
            self.time,
            self.steps,
        )

    def restore(self, snap: MPMSnapshot) -> None:
        for key in ("x", "v", "C", "F", "tau"):
            self._a[key].assign(getattr(snap, key))
        self.time, self.steps = snap.time, snap.steps

    def set_particles(self, mask: np.ndarray, x: np.ndarray | None, v: np.ndarray | None) -> None:
        """Overwrite the positions and/or velocities of the particles selected by the bool ``mask`` (N,)."""
        for key, value in (("x", x), ("v", v)):
            if value is not None:
                data = self._a[key].numpy().copy()
                data[mask] = value
                self._a[key].assign(data.astype(np.float32))

    def copy(self) -> MPMSolver:
        """An independent solver in exactly this one's state (same grid, materials and step)."""
        import warp as wp

        out = copy.copy(self)
        out._a = {k: wp.clone(a) for k, a in self._a.items()}
        out._build_structs()
        return out

    # -- stepping ---------------------------------------------------------------------------------------
    def step(self, duration: float, boxes: Boxes | None = None) -> int:
        """Advance by ``duration`` s (whole substeps, at least one) against ``boxes`` (posed at the end of the
        step, moving with their velocity during it). Returns the number of substeps taken. On the CPU a
        substep is two recorded launches (grid phases, then grid-to-particle); on CUDA four kernels."""
        import warp as wp

        from solvers.mpm import kernels as k

        n_sub = max(1, int(math.ceil(duration / self.dt - 1e-9)))
        self._set_colliders(boxes if boxes is not None else Boxes.none())
        P, G, K, dt, dev = self._particles, self._grid, self._colliders, float(self.dt), self.device
        if self._serial_grid:
            grid = wp.launch(k.p2g_grid, dim=1, inputs=[P, G, K, dt, 0.0], device=dev, record_cmd=True)
            g2p = wp.launch(k.g2p, dim=self.n, inputs=[P, G, dt], device=dev, record_cmd=True)
            for s in range(n_sub):
                grid.set_param_at_index(4, (n_sub - 1 - s) * dt)
                grid.launch()
                g2p.launch()
        else:
            for s in range(n_sub):
                back = (n_sub - 1 - s) * dt
                wp.launch(k.clear_grid, dim=self.grid.shape, inputs=[G], device=dev)
                wp.launch(k.p2g, dim=self.n, inputs=[P, G, dt], device=dev)
                wp.launch(k.grid_update, dim=self.grid.shape, inputs=[G, K, dt, back], device=dev)
                wp.launch(k.g2p, dim=self.n, inputs=[P, G, dt], device=dev)
        self.time += n_sub * self.dt
        self.steps += n_sub
        wp.synchronize_device(self.device)
        return n_sub

    def _set_colliders(self, boxes: Boxes) -> None:
        """Write the table and ``boxes`` into the colliders struct (its arrays are reused while the box count
        stays the same)."""
        import warp as wp

        K, n = self._colliders, len(boxes)
        K.table_z, K.table_mu, K.n_boxes = self.table_z, self.table_friction, n
        values = {
            "center": (boxes.centre, (3,), wp.vec3),
            "rot": (boxes.rotation, (3, 3), wp.mat33),
            "half": (np.maximum(boxes.half, _MIN_HALF_CELLS * self.grid.dx), (3,), wp.vec3),
            "lin": (boxes.velocity, (3,), wp.vec3),
            "ang": (boxes.angular_velocity, (3,), wp.vec3),
            "mu": (boxes.friction, (), float),
        }
        rows = max(n, 1)
        for name, (value, shape, dtype) in values.items():
            data = np.zeros((rows, *shape), np.float32)
            data[:n] = np.asarray(value, dtype=np.float32).reshape(-1, *shape)
            if self._box_count != rows:
                setattr(K, name, wp.array(data, dtype=dtype, device=self.device))
            else:
                getattr(K, name).assign(data)
        self._box_count = rows
