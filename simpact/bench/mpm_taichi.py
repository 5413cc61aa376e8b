"""The plain MLS-MPM plasticine squeeze in Taichi that ``mpm_vs_taichi`` compares with (benchmark only).

The same algorithm as :mod:`solvers.mpm.kernels` for plasticine: quadratic B-splines, APIC transfer, St.
Venant-Kirchhoff on Hencky strain with a von Mises return mapping, the table (z <= 0, Coulomb 0.5), an
axis-aligned plate (nearest-face contact, Coulomb 0.5) moving down at 5 cm/s, slip walls three cells in.
The same arithmetic too: one stretch decomposition per particle and substep, four cyclic Jacobi sweeps on
``F F^T`` (here 1.4x faster than a port with ``ti.svd``), ``F`` rescaled only when it yields, the APIC
affine term accumulated per stencil axis.

How it runs: one Taichi kernel call per substep (the plate height its argument), its four loops parallel
over the CPU threads: clear the whole grid, P2G with atomic adds, update every node, G2P. The Warp side
(``solvers.mpm``) runs one process per rollout, each on one thread, a substep being a serial kernel over
the particles' bounding box of the grid (clear, P2G with plain adds, node update) and a G2P kernel.
Taichi is passed in (imported by the caller), so importing this module needs no Taichi.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from solvers.mpm import GridSpec

__all__ = ["build_taichi_squeeze"]


def build_taichi_squeeze(
    ti: Any,
    pts: np.ndarray,
    grid: GridSpec,
    dt: float,
    mu: float,
    lam: float,
    yield_stress: float,
    p_mass: float,
    p_vol: float,
) -> Callable[[float, int], None]:
    """``step(top, s)``: one substep with the plate's bottom at ``top - 0.05 * s * dt`` (m); ``step.state()``
    the particles' positions and velocities (numpy copies)."""
    n = len(pts)
    nx, ny, nz = grid.shape
    dx, inv_dx = grid.dx, 1.0 / grid.dx
    origin = ti.Vector(list(grid.origin))
    x = ti.Vector.field(3, ti.f32, n)
    v = ti.Vector.field(3, ti.f32, n)
    C = ti.Matrix.field(3, 3, ti.f32, n)
    F = ti.Matrix.field(3, 3, ti.f32, n)
    T = ti.Matrix.field(3, 3, ti.f32, n)  # Kirchhoff stress of F, Pa (one SVD per substep, as in Warp)
    gm = ti.field(ti.f32, (nx, ny, nz))
    gv = ti.Vector.field(3, ti.f32, (nx, ny, nz))
    x.from_numpy(pts.astype(np.float32))
    F.from_numpy(np.tile(np.eye(3, dtype=np.float32), (n, 1, 1)))

    @ti.func
    def left_stretch(Fm):
        """U and the singular values of Fm from cyclic Jacobi sweeps on Fm Fm^T (as the Warp kernels: four
        sweeps, rotations of relative size below 1e-8 skipped)."""
        S = Fm @ Fm.transpose()
        U = ti.Matrix.identity(ti.f32, 3)
        for _ in ti.static(range(4)):
            for p, q in ti.static(((0, 1), (0, 2), (1, 2))):
                r = 3 - p - q
                apq = S[p, q]
                if ti.abs(apq) > 1.0e-8 * (ti.abs(S[p, p]) + ti.abs(S[q, q])):
                    theta = 0.5 * (S[q, q] - S[p, p]) / apq
                    t = 1.0 / (ti.abs(theta) + ti.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                    c = 1.0 / ti.sqrt(t * t + 1.0)
                    sn = t * c
                    S[p, p] -= t * apq
                    S[q, q] += t * apq
                    arp = c * S[r, p] - sn * S[r, q]
                    arq = sn * S[r, p] + c * S[r, q]
                    S[r, p], S[p, r], S[r, q], S[q, r] = arp, arp, arq, arq
                    for i in ti.static(range(3)):
                        uip = U[i, p]
                        uiq = U[i, q]
                        U[i, p] = c * uip - sn * uiq
                        U[i, q] = sn * uip + c * uiq
                S[p, q] = 0.0
                S[q, p] = 0.0
        sig = ti.sqrt(ti.max(ti.Vector([S[0, 0], S[1, 1], S[2, 2]]), 0.0))
        if Fm.determinant() < 0.0:  # an SVD's sign convention: the smallest singular value negative
            if sig[0] <= sig[1] and sig[0] <= sig[2]:
                sig[0] = -sig[0]
            elif sig[1] <= sig[2]:
                sig[1] = -sig[1]
            else:
                sig[2] = -sig[2]
        return U, sig

    def substep(plate_z):  # the plate's bottom, m: a kernel argument, not a field written per substep
        for i, j, k in gm:
            gm[i, j, k] = 0.0
            gv[i, j, k] = ti.Vector([0.0, 0.0, 0.0])
        for p in x:
            xg = (x[p] - origin) * inv_dx
            base = ti.cast(xg - 0.5, ti.i32)
            fx = xg - base
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            affine = (-dt * p_vol * 4.0 * inv_dx * inv_dx * T[p] + p_mass * C[p]) * dx
            mv0 = p_mass * v[p] - affine @ fx
            for a, b, c in ti.static(ti.ndrange(3, 3, 3)):
                off = ti.Vector([a, b, c])
                weight = w[a][0] * w[b][1] * w[c][2]
                gm[base + off] += weight * p_mass
                gv[base + off] += weight * (mv0 + affine @ off)
        for i, j, k in gm:
            if gm[i, j, k] > 0:
                vel = gv[i, j, k] / gm[i, j, k] + dt * ti.Vector([0.0, 0.0, -9.81])
                pos = origin + ti.Vector([i, j, k]) * dx
                q = pos - ti.Vector([0.0, 0.0, plate_z + 0.01])
                d = ti.abs(q) - ti.Vector([0.04, 0.04, 0.01])
                if d.max() <= 0.0:
                    n_ = ti.Vector([ti.math.sign(q[0]), 0.0, 0.0])
                    if d[1] > d[0] and d[1] >= d[2]:
                        n_ = ti.Vector([0.0, ti.math.sign(q[1]), 0.0])
                    elif d[2] > d[0] and d[2] > d[1]:
                        n_ = ti.Vector([0.0, 0.0, ti.math.sign(q[2])])
                    vc = ti.Vector([0.0, 0.0, -0.05])
                    rel = vel - vc
                    vn = rel.dot(n_)
                    if vn < 0:
                        tang = rel - vn * n_
                        tn = tang.norm()
                        vel = vc if tn <= -0.5 * vn else vc + tang * (1.0 + 0.5 * vn / tn)
                if pos[2] <= 0.0 and vel[2] < 0:
                    tang = ti.Vector([vel[0], vel[1], 0.0])
                    tn = tang.norm()
                    vel = (
                        ti.Vector([0.0, 0.0, 0.0])
                        if tn <= -0.5 * vel[2]
                        else tang * (1.0 + 0.5 * vel[2] / tn)
                    )
                for a in ti.static(range(3)):
                    idx = ti.Vector([i, j, k])[a]
                    top = ti.static([nx, ny, nz][a])
                    if (idx < 3 and vel[a] < 0) or (idx > top - 4 and vel[a] > 0):
                        vel[a] = 0.0
                gv[i, j, k] = vel
            else:
                gv[i, j, k] = ti.Vector([0.0, 0.0, 0.0])
        for p in x:
            xg = (x[p] - origin) * inv_dx
            base = ti.cast(xg - 0.5, ti.i32)
            fx = xg - base
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            nv = ti.Vector.zero(ti.f32, 3)
            M = ti.Matrix.zero(ti.f32, 3, 3)  # sum w g node^T (node offsets in cells)
            for a, b, c in ti.static(ti.ndrange(3, 3, 3)):
                off = ti.Vector([a, b, c])
                weight = w[a][0] * w[b][1] * w[c][2]
                g = gv[base + off]
                nv += weight * g
                M += weight * g.outer_product(off)
            nc = 4.0 * inv_dx * (M - nv.outer_product(fx))
            v[p], C[p] = nv, nc
            x[p] += dt * nv
            Fn = (ti.Matrix.identity(ti.f32, 3) + dt * nc) @ F[p]
            U, sig = left_stretch(Fn)
            eps = ti.Vector([ti.log(ti.max(sig[d], 1e-6)) for d in ti.static(range(3))])
            dev = eps - eps.sum() / 3.0
            gamma = dev.norm() - yield_stress / (2.0 * mu)
            if gamma > 0:
                eps -= gamma / dev.norm() * dev
                k = ti.exp(eps) / sig
                Fn = U @ ti.Matrix([[k[0], 0, 0], [0, k[1], 0], [0, 0, k[2]]]) @ U.transpose() @ Fn
            sv = 2.0 * mu * eps + lam * eps.sum()
            T[p] = U @ ti.Matrix([[sv[0], 0.0, 0.0], [0.0, sv[1], 0.0], [0.0, 0.0, sv[2]]]) @ U.transpose()
            F[p] = Fn

    substep.__annotations__ = {"plate_z": ti.f32}  # (this module's annotations are strings)
    substep = ti.kernel(substep)

    def step(top: float, s: int) -> None:
        substep(top - 0.05 * s * dt)

    step.state = lambda: (x.to_numpy(), v.to_numpy())  # type: ignore[attr-defined]
    return step
