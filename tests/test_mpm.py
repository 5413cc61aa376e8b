"""The MLS-MPM solver on Warp (CPU): materials behave as their models say, state is exact and reruns are
bit-identical. Tiny scenes (a few hundred to two thousand particles) keep this file fast."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("warp")

from simpact.core.scene import SceneError  # noqa: E402
from solvers.mpm import Body, Boxes, GridSpec, Material, MPMSolver, sample_box  # noqa: E402

CUBE = 0.04
GRID = GridSpec.around((-0.06, -0.06, 0.0), (0.06, 0.06, 0.08), 0.01)


def _cube(model: str, **params: float) -> MPMSolver:
    pts = sample_box((0.0, 0.0, 0.02), (CUBE, CUBE, CUBE), 0.005)
    return MPMSolver([Body(pts, Material(model, 3.0e4, 0.3, 1000.0, **params))], GRID)


def _press(solver: MPMSolver, depth: float = 0.02, speed: float = 0.1) -> None:
    """A 3 x 3 cm plate pushes ``depth`` into the cube's top at ``speed`` and goes back up."""
    z = 0.045  # the plate's bottom face, 7.5 mm above the cube
    for sign in (-1.0, 1.0):
        for _ in range(round(depth / speed / 0.01)):
            z += sign * speed * 0.01
            solver.step(0.01, Boxes.one((0.0, 0.0, z + 0.005), (0.015, 0.015, 0.005), (0, 0, sign * speed)))


def _centre_top(solver: MPMSolver) -> float:
    x = solver.positions()
    return float(x[np.hypot(x[:, 0], x[:, 1]) < 0.01, 2].max())


def test_jelly_rebounds_and_returns_to_its_rest_shape():
    solver = _cube("jelly")
    x0 = solver.positions()
    solver.restore(solver.snapshot())
    lift = np.zeros_like(x0)
    lift[:, 2] = 0.02
    solver.set_particles(np.ones(len(x0), bool), x0 + lift, None)  # dropped from 2 cm
    vz = []
    for _ in range(40):
        solver.step(0.005)
        vz.append(float(solver.velocities()[:, 2].mean()))
    assert min(vz) < -0.3 and max(vz[int(np.argmin(vz)) :]) > 0.1, "falls, then moves back up: a rebound"
    shapes = []
    for _ in range(30):  # time-average the (undamped) vibration
        solver.step(0.01)
        x = solver.positions()
        shapes.append(x - x.mean(axis=0))
    rest = x0 - x0.mean(axis=0)
    error = np.sqrt(((np.mean(shapes, axis=0) - rest) ** 2).sum(axis=1).mean())
    assert error < 0.1 * CUBE


def test_plasticine_keeps_a_dent_where_jelly_springs_back():
    dents = {}
    for model in ("plasticine", "jelly"):
        solver = _cube(model, yield_stress=500.0)
        solver.step(0.2)
        before = _centre_top(solver)
        _press(solver)
        tops = []
        for _ in range(20):  # jelly still vibrates: average its top over 0.2 s
            solver.step(0.01)
            tops.append(_centre_top(solver))
        dents[model] = before - float(np.mean(tops))
    assert dents["plasticine"] > 0.004
    assert dents["jelly"] < 0.002


def _surface_angle(x: np.ndarray) -> tuple[float, float]:
    """Slope (deg) of a line fitted to the heap's flank: its top profile along x (5 mm bins) downhill of the
    crest, between 15 and 85% of its height."""
    bins = np.digitize(x[:, 0], np.arange(0.0, x[:, 0].max() + 0.005, 0.005))
    tops = np.array(
        [(x[bins == b, 0].mean(), x[bins == b, 2].max()) for b in np.unique(bins) if (bins == b).sum() > 3]
    )
    height = tops[:, 1].max()
    crest = tops[np.argmax(tops[:, 1]), 0]
    mid = (tops[:, 0] > crest) & (tops[:, 1] > 0.15 * height) & (tops[:, 1] < 0.85 * height)
    slope = np.polyfit(tops[mid, 0], tops[mid, 1], 1)[0]
    return math.degrees(math.atan(-slope)), float(height)


def test_sand_slumps_to_an_angle_of_repose_near_its_friction_angle():
    """A half column (3 x 2 x 5 cm against the grid's slip wall at x = 0; plane strain between the y walls)
    collapses to a heap whose flank lies near the Drucker-Prager friction angle (30 degrees)."""
    dx, h = 0.005, 0.05
    pts = sample_box((0.015, 0.0, h / 2), (0.03, 0.02, h), dx / 2)
    grid = GridSpec.around((0.0, -0.01, 0.0), (0.15, 0.01, h + 0.005), dx)
    sand = Material("sand", 3.0e4, 0.3, 1600.0, friction_angle=30.0)
    solver = MPMSolver([Body(pts, sand)], grid, table_friction=2.0)
    solver.step(0.6)
    angle, height = _surface_angle(solver.positions())
    assert height < 0.8 * h, "the column collapsed"
    assert 22.0 < angle < 36.0, angle
    assert np.abs(solver.velocities()).max() < 0.05, "at rest (the collapse ran at about 0.5 m/s)"


def test_snapshot_restore_is_exact_and_reruns_are_bit_identical():
    runs = []
    for _ in range(2):
        solver = _cube("plasticine")
        solver.step(0.05)
        snap = solver.snapshot()
        _press(solver, depth=0.01)
        first = solver.positions()
        solver.restore(snap)
        _press(solver, depth=0.01)
        assert np.array_equal(solver.positions(), first)
        assert np.array_equal(solver.deformation_gradients(), solver.deformation_gradients())
        clone = solver.copy()
        clone.step(0.02)
        solver.step(0.02)
        assert np.array_equal(clone.positions(), solver.positions())
        runs.append(solver.positions())
    assert np.array_equal(runs[0], runs[1])


def test_the_cpu_grid_pass_matches_the_per_thread_kernels_bit_for_bit():
    """The CPU's serial grid pass (bounding box only) and the per-thread kernels CUDA runs give the same
    particles: same arithmetic, same scatter order, nodes outside the box never touched."""
    runs = []
    for serial in (True, False):
        solver = _cube("plasticine", yield_stress=500.0)
        solver._serial_grid = serial
        _press(solver, depth=0.01)
        runs.append((solver.positions(), solver.deformation_gradients()))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])


def test_the_stretch_decomposition_matches_numpy():
    """Jacobi on F F^T: U orthonormal, U diag(sig^2) U^T = F F^T, the stretches are the singular values, the
    smallest negative when det F < 0."""
    import warp as wp

    from solvers.mpm import kernels as k

    @wp.kernel
    def decompose(F: wp.array(dtype=wp.mat33), U: wp.array(dtype=wp.mat33), S: wp.array(dtype=wp.vec3)):
        p = wp.tid()
        u, s = k._left_stretch(F[p])
        U[p] = u
        S[p] = s

    rng = np.random.default_rng(0)
    F = np.concatenate([np.eye(3)[None] + s * rng.standard_normal((200, 3, 3)) for s in (1e-4, 0.05, 0.3)])
    F[0] = np.eye(3)
    F[1] = np.diag([1.0, 1.0, 1.0 + 1e-4])
    Fw = wp.array(F.astype(np.float32), dtype=wp.mat33)
    Uw, Sw = wp.zeros(len(F), dtype=wp.mat33), wp.zeros(len(F), dtype=wp.vec3)
    wp.launch(decompose, dim=len(F), inputs=[Fw, Uw, Sw])
    U, S = Uw.numpy().astype(float), Sw.numpy().astype(float)
    F32 = F.astype(np.float32).astype(float)
    assert np.abs(np.einsum("nji,njk->nik", U, U) - np.eye(3)).max() < 1e-5
    rebuilt = np.einsum("nij,nj,nkj->nik", U, S**2, U)
    assert np.abs(rebuilt - np.einsum("nij,nkj->nik", F32, F32)).max() < 1e-4
    sv = np.linalg.svd(F32, compute_uv=False)
    assert np.abs(np.sort(np.abs(S), axis=1)[:, ::-1] - sv).max() < 1e-3
    assert np.array_equal(S.min(axis=1) < 0, np.linalg.det(F32) < 0)


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(SceneError, match="model"):
        Material("custard")
    with pytest.raises(SceneError, match="poissons_ratio"):
        Material("jelly", poissons_ratio=0.5)
    with pytest.raises(SceneError, match="unknown fields"):
        Material.from_mapping({"model": "sand", "angle": 3})
    with pytest.raises(SceneError, match="outside the grid"):
        MPMSolver([Body(np.array([[1.0, 0.0, 0.0]]), Material())], GRID)
