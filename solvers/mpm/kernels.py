"""Warp kernels of an explicit MLS-MPM (Hu et al. 2018; quadratic B-splines, APIC transfer) with the five
materials of the SIMPACT paper's appendix A.1 and kinematic box colliders.

This module imports warp at its top, so it is itself on the lazy-import list (pyproject): import it inside
the function that needs it. Units: SI (m, s, kg, Pa). Grid node (i, j, k) sits at ``origin + (i, j, k) * dx``.

Materials (per particle, ``model``): 0 jelly, fixed-corotated elasticity; 1 metal and 4 plasticine,
St. Venant-Kirchhoff on Hencky strain with a von Mises yield surface (perfect plasticity); 2 sand,
Drucker-Prager on Hencky strain (Klar et al. 2016; no cohesion, volume gain on tension projected to zero);
3 foam, Hencky elasticity with a rate-dependent (Perzyna) von Mises yield surface.
"""

# mypy: ignore-errors
# (Warp's kernel language: array types are calls, vectors are indexable, which mypy cannot read.)
from __future__ import annotations

import warp as wp  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

JELLY = 0
METAL = 1
SAND = 2
FOAM = 3
PLASTICINE = 4


@wp.func
def _weights(fx: wp.vec3, a: int) -> wp.vec3:
    """Quadratic B-spline weights of the three nodes for offset ``fx`` (in cells) along axis ``a``."""
    f = fx[a]
    return wp.vec3(0.5 * (1.5 - f) * (1.5 - f), 0.75 - (f - 1.0) * (f - 1.0), 0.5 * (f - 0.5) * (f - 0.5))


@wp.func
def _hencky_stress(U: wp.mat33, eps: wp.vec3, mu: float, lam: float) -> wp.mat33:
    """Kirchhoff stress of St. Venant-Kirchhoff on Hencky strain ``eps`` (principal, left basis ``U``)."""
    tr = eps[0] + eps[1] + eps[2]
    s = wp.vec3(2.0 * mu * eps[0] + lam * tr, 2.0 * mu * eps[1] + lam * tr, 2.0 * mu * eps[2] + lam * tr)
    return U * wp.diag(s) * wp.transpose(U)


@wp.func
def _return_map(
    eps: wp.vec3, model: int, mu: float, lam: float, yield_stress: float, alpha: float, relax: float
) -> wp.vec3:
    """Principal Hencky strain ``eps`` projected onto the material's yield surface (not for jelly)."""
    tr = eps[0] + eps[1] + eps[2]
    dev = eps - wp.vec3(tr / 3.0)
    norm = wp.length(dev)
    if model == SAND:
        if tr >= 0.0:
            return wp.vec3(0.0)
        if norm < 1.0e-12:
            return eps
        gamma = norm + (3.0 * lam + 2.0 * mu) / (2.0 * mu) * tr * alpha
        if gamma <= 0.0:
            return eps
        return eps - (gamma / norm) * dev
    gamma = norm - yield_stress / (2.0 * mu)
    if gamma <= 0.0:
        return eps
    if model == FOAM:
        gamma = gamma * relax
    return eps - (gamma / norm) * dev


@wp.func
def _elastic_update(
    F: wp.mat33,
    model: int,
    mu: float,
    lam: float,
    yield_stress: float,
    alpha: float,
    relax: float,
    tau: wp.array(dtype=wp.mat33),
    p: int,
) -> wp.mat33:
    """The return-mapped ``F`` (identity map for jelly); writes its Kirchhoff stress (Pa) to ``tau[p]``.
    One SVD serves both."""
    U = wp.mat33()
    sig = wp.vec3()
    V = wp.mat33()
    wp.svd3(F, U, sig, V)
    if model == JELLY:
        R = U * wp.transpose(V)
        J = sig[0] * sig[1] * sig[2]
        tau[p] = 2.0 * mu * (F - R) * wp.transpose(F) + wp.identity(n=3, dtype=float) * (lam * (J - 1.0) * J)
        return F
    eps = wp.vec3(
        wp.log(wp.max(sig[0], 1.0e-6)), wp.log(wp.max(sig[1], 1.0e-6)), wp.log(wp.max(sig[2], 1.0e-6))
    )
    eps = _return_map(eps, model, mu, lam, yield_stress, alpha, relax)
    tau[p] = _hencky_stress(U, eps, mu, lam)
    return U * wp.diag(wp.vec3(wp.exp(eps[0]), wp.exp(eps[1]), wp.exp(eps[2]))) * wp.transpose(V)


@wp.kernel
def clear_grid(grid_m: wp.array3d(dtype=float), grid_mv: wp.array3d(dtype=wp.vec3)):
    i, j, k = wp.tid()
    grid_m[i, j, k] = 0.0
    grid_mv[i, j, k] = wp.vec3(0.0)


@wp.kernel
def p2g(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    C: wp.array(dtype=wp.mat33),
    tau: wp.array(dtype=wp.mat33),
    mass: wp.array(dtype=float),
    vol: wp.array(dtype=float),
    origin: wp.vec3,
    dx: float,
    dt: float,
    grid_m: wp.array3d(dtype=float),
    grid_mv: wp.array3d(dtype=wp.vec3),
):
    """Particle to grid: APIC momentum plus the MLS stress impulse ``-dt * vol * 4/dx^2 * tau`` (``tau``: the
    Kirchhoff stress the last grid-to-particle pass stored)."""
    p = wp.tid()
    inv_dx = 1.0 / dx
    xg = (x[p] - origin) * inv_dx
    base = wp.vec3i(int(xg[0] - 0.5), int(xg[1] - 0.5), int(xg[2] - 0.5))
    fx = xg - wp.vec3(float(base[0]), float(base[1]), float(base[2]))
    wx = _weights(fx, 0)
    wy = _weights(fx, 1)
    wz = _weights(fx, 2)
    affine = (-dt * vol[p] * 4.0 * inv_dx * inv_dx) * tau[p] + mass[p] * C[p]
    mv = mass[p] * v[p]
    nx = grid_m.shape[0]
    ny = grid_m.shape[1]
    nz = grid_m.shape[2]
    for a in range(3):
        for b in range(3):
            for c in range(3):
                gi = base[0] + a
                gj = base[1] + b
                gk = base[2] + c
                if gi >= 0 and gi < nx and gj >= 0 and gj < ny and gk >= 0 and gk < nz:
                    w = wx[a] * wy[b] * wz[c]
                    dpos = (wp.vec3(float(a), float(b), float(c)) - fx) * dx
                    wp.atomic_add(grid_m, gi, gj, gk, w * mass[p])
                    wp.atomic_add(grid_mv, gi, gj, gk, w * (mv + affine * dpos))


@wp.func
def _box_contact(
    pos: wp.vec3,
    vel: wp.vec3,
    center: wp.vec3,
    rot: wp.mat33,
    half: wp.vec3,
    lin: wp.vec3,
    ang: wp.vec3,
    mu: float,
) -> wp.vec3:
    """Velocity of a node at ``pos`` after contact with a moving box (``rot``: world from box; Coulomb
    friction ``mu``) through its nearest face, or ``vel`` when the node is outside it or separating."""
    q = wp.transpose(rot) * (pos - center)
    d = wp.vec3(wp.abs(q[0]) - half[0], wp.abs(q[1]) - half[1], wp.abs(q[2]) - half[2])
    if d[0] > 0.0 or d[1] > 0.0 or d[2] > 0.0:
        return vel
    n_local = wp.vec3(wp.sign(q[0]), 0.0, 0.0)
    if d[1] > d[0] and d[1] >= d[2]:
        n_local = wp.vec3(0.0, wp.sign(q[1]), 0.0)
    elif d[2] > d[0] and d[2] > d[1]:
        n_local = wp.vec3(0.0, 0.0, wp.sign(q[2]))
    n = rot * n_local
    vc = lin + wp.cross(ang, pos - center)
    rel = vel - vc
    vn = wp.dot(rel, n)
    if vn >= 0.0:
        return vel
    tang = rel - vn * n
    tn = wp.length(tang)
    if tn <= -mu * vn:
        return vc
    return vc + tang * (1.0 + mu * vn / tn)


@wp.kernel
def grid_update(
    grid_m: wp.array3d(dtype=float),
    grid_mv: wp.array3d(dtype=wp.vec3),
    grid_v: wp.array3d(dtype=wp.vec3),
    origin: wp.vec3,
    dx: float,
    dt: float,
    gravity: wp.vec3,
    table_z: float,
    table_mu: float,
    box_center: wp.array(dtype=wp.vec3),
    box_rot: wp.array(dtype=wp.mat33),
    box_half: wp.array(dtype=wp.vec3),
    box_lin: wp.array(dtype=wp.vec3),
    box_ang: wp.array(dtype=wp.vec3),
    box_mu: wp.array(dtype=float),
    n_boxes: int,
):
    """Grid velocities: momentum / mass + gravity, then the boxes, the table (z <= table_z, Coulomb) and
    sticky-free slip walls three cells from the grid's edge."""
    i, j, k = wp.tid()
    m = grid_m[i, j, k]
    if m <= 0.0:
        grid_v[i, j, k] = wp.vec3(0.0)
        return
    vel = grid_mv[i, j, k] / m + dt * gravity
    pos = origin + wp.vec3(float(i), float(j), float(k)) * dx
    for b in range(n_boxes):
        vel = _box_contact(
            pos, vel, box_center[b], box_rot[b], box_half[b], box_lin[b], box_ang[b], box_mu[b]
        )
    if pos[2] <= table_z and vel[2] < 0.0:
        vn = vel[2]
        tang = wp.vec3(vel[0], vel[1], 0.0)
        tn = wp.length(tang)
        if tn <= -table_mu * vn:
            vel = wp.vec3(0.0)
        else:
            vel = tang * (1.0 + table_mu * vn / tn)
    nx = grid_m.shape[0]
    ny = grid_m.shape[1]
    nz = grid_m.shape[2]
    if (i < 3 and vel[0] < 0.0) or (i > nx - 4 and vel[0] > 0.0):
        vel = wp.vec3(0.0, vel[1], vel[2])
    if (j < 3 and vel[1] < 0.0) or (j > ny - 4 and vel[1] > 0.0):
        vel = wp.vec3(vel[0], 0.0, vel[2])
    if (k < 3 and vel[2] < 0.0) or (k > nz - 4 and vel[2] > 0.0):
        vel = wp.vec3(vel[0], vel[1], 0.0)
    grid_v[i, j, k] = vel


@wp.kernel
def g2p(
    grid_v: wp.array3d(dtype=wp.vec3),
    origin: wp.vec3,
    dx: float,
    dt: float,
    model: wp.array(dtype=int),
    mu: wp.array(dtype=float),
    lam: wp.array(dtype=float),
    yield_stress: wp.array(dtype=float),
    alpha: wp.array(dtype=float),
    viscosity: wp.array(dtype=float),
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    C: wp.array(dtype=wp.mat33),
    F: wp.array(dtype=wp.mat33),
    tau: wp.array(dtype=wp.mat33),
):
    """Grid to particle: APIC velocity and affine field, advection, ``F <- (I + dt C) F``, return mapping,
    and the Kirchhoff stress of the new ``F`` for the next particle-to-grid pass."""
    p = wp.tid()
    inv_dx = 1.0 / dx
    xg = (x[p] - origin) * inv_dx
    base = wp.vec3i(int(xg[0] - 0.5), int(xg[1] - 0.5), int(xg[2] - 0.5))
    fx = xg - wp.vec3(float(base[0]), float(base[1]), float(base[2]))
    wx = _weights(fx, 0)
    wy = _weights(fx, 1)
    wz = _weights(fx, 2)
    nv = wp.vec3(0.0)
    nc = wp.mat33(0.0)
    nx = grid_v.shape[0]
    ny = grid_v.shape[1]
    nz = grid_v.shape[2]
    for a in range(3):
        for b in range(3):
            for c in range(3):
                gi = base[0] + a
                gj = base[1] + b
                gk = base[2] + c
                if gi >= 0 and gi < nx and gj >= 0 and gj < ny and gk >= 0 and gk < nz:
                    w = wx[a] * wy[b] * wz[c]
                    gv = grid_v[gi, gj, gk]
                    dpos = wp.vec3(float(a), float(b), float(c)) - fx
                    nv = nv + w * gv
                    nc = nc + (4.0 * inv_dx * w) * wp.outer(gv, dpos)
    v[p] = nv
    C[p] = nc
    x[p] = x[p] + dt * nv
    Fn = (wp.identity(n=3, dtype=float) + dt * nc) * F[p]
    relax = 1.0
    if viscosity[p] > 0.0:
        relax = 1.0 / (1.0 + viscosity[p] / (2.0 * mu[p] * dt))
    F[p] = _elastic_update(Fn, model[p], mu[p], lam[p], yield_stress[p], alpha[p], relax, tau, p)
