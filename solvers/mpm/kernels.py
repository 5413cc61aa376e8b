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
_SWEEPS = 4
"""Cyclic Jacobi sweeps of the stretch decomposition (rotations below 1e-8 relative are skipped)."""

wp.set_module_options({"enable_backward": False})


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
def _rotation(app: float, aqq: float, apq: float):
    """Cosine, sine and tangent of the Jacobi rotation that zeroes ``apq`` of a symmetric 2 x 2 block."""
    if wp.abs(apq) <= 1.0e-8 * (wp.abs(app) + wp.abs(aqq)):
        return 1.0, 0.0, 0.0
    theta = 0.5 * (aqq - app) / apq
    t = 1.0 / (wp.abs(theta) + wp.sqrt(theta * theta + 1.0))
    if theta < 0.0:
        t = -t
    c = 1.0 / wp.sqrt(t * t + 1.0)
    return c, t * c, t


@wp.func
def _left_stretch(F: wp.mat33):
    """Left singular vectors (columns of ``U``) and signed singular values of ``F`` (the smallest negative
    when ``det F < 0``, as an SVD's sign convention puts it), from cyclic Jacobi sweeps on ``F F^T``."""
    b = F * wp.transpose(F)
    a00, a11, a22 = b[0, 0], b[1, 1], b[2, 2]
    a01, a02, a12 = b[0, 1], b[0, 2], b[1, 2]
    u0, u1, u2 = wp.vec3(1.0, 0.0, 0.0), wp.vec3(0.0, 1.0, 0.0), wp.vec3(0.0, 0.0, 1.0)
    for _sweep in range(_SWEEPS):
        c, s, t = _rotation(a00, a11, a01)  # (0, 1)
        a00, a11, a01 = a00 - t * a01, a11 + t * a01, 0.0
        a02, a12 = c * a02 - s * a12, s * a02 + c * a12
        u0, u1 = c * u0 - s * u1, s * u0 + c * u1
        c, s, t = _rotation(a00, a22, a02)  # (0, 2)
        a00, a22, a02 = a00 - t * a02, a22 + t * a02, 0.0
        a01, a12 = c * a01 - s * a12, s * a01 + c * a12
        u0, u2 = c * u0 - s * u2, s * u0 + c * u2
        c, s, t = _rotation(a11, a22, a12)  # (1, 2)
        a11, a22, a12 = a11 - t * a12, a22 + t * a12, 0.0
        a01, a02 = c * a01 - s * a02, s * a01 + c * a02
        u1, u2 = c * u1 - s * u2, s * u1 + c * u2
    sig = wp.vec3(wp.sqrt(wp.max(a00, 0.0)), wp.sqrt(wp.max(a11, 0.0)), wp.sqrt(wp.max(a22, 0.0)))
    if wp.determinant(F) < 0.0:
        if sig[0] <= sig[1] and sig[0] <= sig[2]:
            sig = wp.vec3(-sig[0], sig[1], sig[2])
        elif sig[1] <= sig[2]:
            sig = wp.vec3(sig[0], -sig[1], sig[2])
        else:
            sig = wp.vec3(sig[0], sig[1], -sig[2])
    return wp.matrix_from_cols(u0, u1, u2), sig


@wp.func
def _nonzero(s: float) -> float:
    if wp.abs(s) < 1.0e-12:
        return 1.0e-12
    return s


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
    One decomposition ``F = U diag(sig) V^T`` serves both; ``V`` is never formed: the return map scales the
    stretches, ``F <- U diag(exp(eps_new) / sig) U^T F``; inside the yield surface ``F`` is kept as it is."""
    U, sig = _left_stretch(F)
    if model == JELLY:
        # fixed-corotated: 2 mu (F - R) F^T = U diag(2 mu (sig^2 - sig)) U^T, R = U V^T
        J = wp.determinant(F)
        s = wp.vec3(
            2.0 * mu * (sig[0] * sig[0] - sig[0]),
            2.0 * mu * (sig[1] * sig[1] - sig[1]),
            2.0 * mu * (sig[2] * sig[2] - sig[2]),
        )
        tau[p] = U * wp.diag(s) * wp.transpose(U) + wp.identity(n=3, dtype=float) * (lam * (J - 1.0) * J)
        return F
    eps = wp.vec3(
        wp.log(wp.max(sig[0], 1.0e-6)), wp.log(wp.max(sig[1], 1.0e-6)), wp.log(wp.max(sig[2], 1.0e-6))
    )
    new = _return_map(eps, model, mu, lam, yield_stress, alpha, relax)
    tau[p] = _hencky_stress(U, new, mu, lam)
    if new[0] == eps[0] and new[1] == eps[1] and new[2] == eps[2]:
        return F
    k = wp.vec3(wp.exp(new[0]) / _nonzero(sig[0]), wp.exp(new[1]) / _nonzero(sig[1]), 0.0)
    k[2] = wp.exp(new[2]) / _nonzero(sig[2])
    return U * wp.diag(k) * (wp.transpose(U) * F)


@wp.struct
class Particles:
    """Per-particle state (x m, v m/s, C 1/s, F, tau Pa: the Kirchhoff stress of F) and parameters (mass kg,
    vol m^3, model code, Lame mu and lam Pa, yield stress Pa, Drucker-Prager alpha, viscosity Pa s)."""

    x: wp.array(dtype=wp.vec3)
    v: wp.array(dtype=wp.vec3)
    C: wp.array(dtype=wp.mat33)
    F: wp.array(dtype=wp.mat33)
    tau: wp.array(dtype=wp.mat33)
    mass: wp.array(dtype=float)
    vol: wp.array(dtype=float)
    model: wp.array(dtype=int)
    mu: wp.array(dtype=float)
    lam: wp.array(dtype=float)
    yield_stress: wp.array(dtype=float)
    alpha: wp.array(dtype=float)
    viscosity: wp.array(dtype=float)


@wp.struct
class Grid:
    """The background grid: node mass (kg), momentum (kg m/s) and velocity (m/s); node (i, j, k) at
    ``origin + (i, j, k) * dx``."""

    m: wp.array3d(dtype=float)
    mv: wp.array3d(dtype=wp.vec3)
    v: wp.array3d(dtype=wp.vec3)
    origin: wp.vec3
    dx: float


@wp.struct
class Colliders:
    """Gravity (m/s^2), the table (z <= table_z, Coulomb table_mu) and K kinematic boxes posed at the end of
    the step, moving with ``lin`` (m/s) and ``ang`` (rad/s) during it."""

    gravity: wp.vec3
    table_z: float
    table_mu: float
    center: wp.array(dtype=wp.vec3)
    rot: wp.array(dtype=wp.mat33)
    half: wp.array(dtype=wp.vec3)
    lin: wp.array(dtype=wp.vec3)
    ang: wp.array(dtype=wp.vec3)
    mu: wp.array(dtype=float)
    n_boxes: int


@wp.func
def _stencil(x: wp.vec3, origin: wp.vec3, inv_dx: float, shape: wp.vec3i):
    """The first node of a particle's 3 x 3 x 3 stencil (clamped into the grid, so a particle that escaped
    cannot write outside it) and its offset from that node, in cells."""
    xg = (x - origin) * inv_dx
    base = wp.vec3i(
        wp.clamp(int(xg[0] - 0.5), 0, shape[0] - 3),
        wp.clamp(int(xg[1] - 0.5), 0, shape[1] - 3),
        wp.clamp(int(xg[2] - 0.5), 0, shape[2] - 3),
    )
    return base, xg - wp.vec3(float(base[0]), float(base[1]), float(base[2]))


@wp.func
def _p2g_one(P: Particles, G: Grid, p: int, dt: float):
    """Particle to grid: APIC momentum plus the MLS stress impulse ``-dt * vol * 4/dx^2 * tau`` (``tau``: the
    Kirchhoff stress the last grid-to-particle pass stored). Node (a, b, c) of the stencil gets
    ``w * (m v + A (node - x))``, accumulated per axis as ``m v - A fx dx + a A_x + b A_y + c A_z``."""
    inv_dx = 1.0 / G.dx
    shape = wp.vec3i(G.m.shape[0], G.m.shape[1], G.m.shape[2])
    base, fx = _stencil(P.x[p], G.origin, inv_dx, shape)
    wx = _weights(fx, 0)
    wy = _weights(fx, 1)
    wz = _weights(fx, 2)
    m = P.mass[p]
    affine = ((-dt * P.vol[p] * 4.0 * inv_dx * inv_dx) * P.tau[p] + m * P.C[p]) * G.dx
    ax = wp.vec3(affine[0, 0], affine[1, 0], affine[2, 0])
    ay = wp.vec3(affine[0, 1], affine[1, 1], affine[2, 1])
    az = wp.vec3(affine[0, 2], affine[1, 2], affine[2, 2])
    mv0 = m * P.v[p] - affine * fx
    for a in range(3):
        mva = mv0 + float(a) * ax
        for b in range(3):
            mvb = mva + float(b) * ay
            wab = wx[a] * wy[b]
            for c in range(3):
                w = wab * wz[c]
                wp.atomic_add(G.m, base[0] + a, base[1] + b, base[2] + c, w * m)
                wp.atomic_add(G.mv, base[0] + a, base[1] + b, base[2] + c, w * (mvb + float(c) * az))


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


@wp.func
def _node_update(G: Grid, K: Colliders, i: int, j: int, k: int, dt: float, back: float):
    """Node velocity: momentum / mass + gravity, then the boxes (each ``back`` s before its end-of-step pose),
    the table (Coulomb) and slip walls three cells from the grid's edge; zero on empty nodes."""
    m = G.m[i, j, k]
    if m <= 0.0:
        G.v[i, j, k] = wp.vec3(0.0)
        return
    vel = G.mv[i, j, k] / m + dt * K.gravity
    pos = G.origin + wp.vec3(float(i), float(j), float(k)) * G.dx
    for b in range(K.n_boxes):
        centre = K.center[b] - back * K.lin[b]
        vel = _box_contact(pos, vel, centre, K.rot[b], K.half[b], K.lin[b], K.ang[b], K.mu[b])
    if pos[2] <= K.table_z and vel[2] < 0.0:
        vn = vel[2]
        tang = wp.vec3(vel[0], vel[1], 0.0)
        tn = wp.length(tang)
        if tn <= -K.table_mu * vn:
            vel = wp.vec3(0.0)
        else:
            vel = tang * (1.0 + K.table_mu * vn / tn)
    if (i < 3 and vel[0] < 0.0) or (i > G.m.shape[0] - 4 and vel[0] > 0.0):
        vel = wp.vec3(0.0, vel[1], vel[2])
    if (j < 3 and vel[1] < 0.0) or (j > G.m.shape[1] - 4 and vel[1] > 0.0):
        vel = wp.vec3(vel[0], 0.0, vel[2])
    if (k < 3 and vel[2] < 0.0) or (k > G.m.shape[2] - 4 and vel[2] > 0.0):
        vel = wp.vec3(vel[0], vel[1], 0.0)
    G.v[i, j, k] = vel


@wp.func
def _g2p_one(P: Particles, G: Grid, p: int, dt: float):
    """Grid to particle: APIC velocity and affine field, advection, ``F <- (I + dt C) F``, return mapping,
    and the Kirchhoff stress of the new ``F`` for the next particle-to-grid pass."""
    inv_dx = 1.0 / G.dx
    shape = wp.vec3i(G.v.shape[0], G.v.shape[1], G.v.shape[2])
    base, fx = _stencil(P.x[p], G.origin, inv_dx, shape)
    wx = _weights(fx, 0)
    wy = _weights(fx, 1)
    wz = _weights(fx, 2)
    # nv = sum w g; C = 4/dx sum w g (node - fx)^T = 4/dx ([sum w g a, sum w g b, sum w g c] - nv fx^T)
    nv = wp.vec3(0.0)
    ga = wp.vec3(0.0)
    gb = wp.vec3(0.0)
    gc = wp.vec3(0.0)
    for a in range(3):
        for b in range(3):
            g0 = G.v[base[0] + a, base[1] + b, base[2]]
            g1 = G.v[base[0] + a, base[1] + b, base[2] + 1]
            g2 = G.v[base[0] + a, base[1] + b, base[2] + 2]
            wab = wx[a] * wy[b]
            line = wab * (wz[0] * g0 + wz[1] * g1 + wz[2] * g2)
            nv = nv + line
            ga = ga + float(a) * line
            gb = gb + float(b) * line
            gc = gc + wab * (wz[1] * g1 + 2.0 * wz[2] * g2)
    nc = (4.0 * inv_dx) * (wp.matrix_from_cols(ga, gb, gc) - wp.outer(nv, fx))
    P.v[p] = nv
    P.C[p] = nc
    P.x[p] = P.x[p] + dt * nv
    Fn = (wp.identity(n=3, dtype=float) + dt * nc) * P.F[p]
    mu = P.mu[p]
    relax = 1.0
    if P.viscosity[p] > 0.0:
        relax = 1.0 / (1.0 + P.viscosity[p] / (2.0 * mu * dt))
    P.F[p] = _elastic_update(Fn, P.model[p], mu, P.lam[p], P.yield_stress[p], P.alpha[p], relax, P.tau, p)


# -- one thread per particle / node (CUDA) ---------------------------------------------------------------
@wp.kernel
def clear_grid(G: Grid):
    i, j, k = wp.tid()
    G.m[i, j, k] = 0.0
    G.mv[i, j, k] = wp.vec3(0.0)


@wp.kernel
def p2g(P: Particles, G: Grid, dt: float):
    _p2g_one(P, G, wp.tid(), dt)


@wp.kernel
def grid_update(G: Grid, K: Colliders, dt: float, back: float):
    i, j, k = wp.tid()
    _node_update(G, K, i, j, k, dt, back)


@wp.kernel
def g2p(P: Particles, G: Grid, dt: float):
    _g2p_one(P, G, wp.tid(), dt)


# -- CPU: the grid phases in one thread over the particles' bounding box --------------------------------
@wp.kernel
def p2g_grid(P: Particles, G: Grid, K: Colliders, dt: float, back: float):
    """Clear, particle-to-grid and node update in one launch, on the nodes of the box that the particles'
    stencils cover (the rest of the grid is neither read nor written). Launched with ``dim=1``: Warp runs a
    CPU kernel on one thread anyway, and serial loops skip the per-thread index arithmetic. (The
    grid-to-particle pass stays a kernel of its own: inlined into this loop it ran 1.5x slower.)"""
    n = P.x.shape[0]
    shape = wp.vec3i(G.m.shape[0], G.m.shape[1], G.m.shape[2])
    inv_dx = 1.0 / G.dx
    lo = shape
    hi = wp.vec3i(0, 0, 0)
    for p in range(n):
        base, _fx = _stencil(P.x[p], G.origin, inv_dx, shape)
        lo = wp.min(lo, base)
        hi = wp.max(hi, base)
    for i in range(lo[0], hi[0] + 3):
        for j in range(lo[1], hi[1] + 3):
            for k in range(lo[2], hi[2] + 3):
                G.m[i, j, k] = 0.0
                G.mv[i, j, k] = wp.vec3(0.0)
    for p in range(n):
        _p2g_one(P, G, p, dt)
    for i in range(lo[0], hi[0] + 3):
        for j in range(lo[1], hi[1] + 3):
            for k in range(lo[2], hi[2] + 3):
                _node_update(G, K, i, j, k, dt, back)
