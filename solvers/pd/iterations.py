"""The rope's local/global iterations (:mod:`solvers.pd.rope`), laid out (N, 3, B): one matrix product per
iteration for a batch, the table and its friction inside every iteration. A step's solve (:func:`solve`)
and its end (:func:`settle`) are each one call compiled by TorchScript: a single rope's step is bound by
per-operation overhead, and every eager call between them costs more than the operation.

This module imports torch at its top, so it is itself on the lazy-import list (pyproject)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import torch  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

from solvers.pd.contact import GRAVITY, scripted, table_friction  # noqa: TID253  (lazy, as this module)

__all__ = [
    "CHEBYSHEV_START",
    "GRAVITY",
    "MEMBERS_PER_PRODUCT",
    "Group",
    "compiled_settle",
    "compiled_solve",
    "fall",
    "iterate",
    "member_products",
    "omegas",
    "padded",
]


class Group(NamedTuple):
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


def _base(
    inertia: torch.Tensor,
    coupling: torch.Tensor | None,
    rows: torch.Tensor | None,
    y: torch.Tensor,
    xc: torch.Tensor,
) -> torch.Tensor:
    """The iterations' constant part (N, 3, B') from the inertial positions ``y`` and the constrained
    particles' targets ``xc`` (N, 3, B'): the solve without the stretch targets, C at its targets."""
    n = y.shape[0]
    base = torch.mm(inertia, y.reshape(n, -1))
    if coupling is not None and rows is not None:
        held = xc[rows].reshape(rows.shape[0], -1)
        base.addmm_(coupling, held)
        base[rows] = held
    return base.view(y.shape)


def solve(
    x0: torch.Tensor,
    v0: torch.Tensor,
    targets: torch.Tensor,
    constrained: torch.Tensor,
    h: float,
    fall: torch.Tensor,
    floor: float,
    mu: float,
    slop: float,
    omegas: list[float],
    inertia: torch.Tensor,
    coupling: torch.Tensor | None,
    rows: torch.Tensor | None,
    gather: torch.Tensor,
) -> torch.Tensor:
    """One step's positions (B, N, 3) of members that share a constrained set (``constrained`` (B, N), at
    ``targets`` (B, N, 3) m; the group's operators, see :class:`Group`) from ``x0``, ``v0`` (B, N, 3) over
    ``h`` s: the inertial positions (``fall``: :func:`fall`), the table's friction budget (``mu`` times how
    far a particle resting on the table, within ``slop`` m of ``floor``, was pressed into it), the
    iterations (:func:`iterate`), the constrained particles put at their targets."""
    first = (x0 + h * v0).permute(1, 2, 0).contiguous()  # (N, 3, B): the first iterate (see iterate)
    y = first + fall
    z0 = x0[..., 2].t()  # (N, B)
    on_table = z0 <= floor + slop
    held = bool(constrained.any())
    if held:
        on_table &= ~constrained.t()
    budget: torch.Tensor | None = None
    if bool(on_table.any()):  # else the table's friction does nothing (an exact no-op): skipped
        approach = (z0 - y[:, 2]).clamp_min(0.0) - (z0 - floor).clamp_min(0.0)
        budget = torch.where(on_table, mu * approach.clamp_min(0.0), 0.0)[:, None]
    start = x0.permute(1, 2, 0)
    base = _base(inertia, coupling, rows, padded(y), padded(targets.permute(1, 2, 0)))
    x = iterate(first, base, gather, omegas, floor, start, budget).permute(2, 0, 1)
    if held:  # held and pinned particles exactly at their targets (the table may move them)
        x = torch.where(constrained[..., None], targets, x)
    return x


def settle(
    x: torch.Tensor,
    v: torch.Tensor | None,
    x0: torch.Tensor,
    h: float,
    decay: float,
    constrained: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A step's end from its positions ``x`` (B, N, 3) and start ``x0``: the velocities ``(x - x0) / h``
    (``v`` when given: after the boxes' friction), scaled by ``decay`` (linear damping) except at the
    ``constrained`` particles (B, N, 1; None: none), the positions from the damped velocities; and whether
    each member is still (B,)."""
    if v is None:
        v = (x - x0) / h
    damped = v * decay
    if constrained is not None:
        v = torch.where(constrained, v, damped)
        x = torch.where(constrained, x, x0 + h * damped)
    else:
        v, x = damped, x0 + h * damped
    x, v = x.contiguous(), v.contiguous()
    still = (v == 0.0).view(v.shape[0], -1).all(1)  # then x == x0: x0 + h 0, or x - x0 == 0
    return x, v, still


def iterate(
    x: torch.Tensor,
    base: torch.Tensor,
    gather: torch.Tensor,
    omegas: list[float],
    floor: float,
    start: torch.Tensor,
    budget: torch.Tensor | None,
) -> torch.Tensor:
    """The local/global iterations from ``x`` (N, 3, B): each is ``base + gather @ directions`` (one matrix
    product, ``gather`` (N, N - 1) shared by the members, ``base`` (N, 3, B') padded: see :func:`padded`),
    the Chebyshev weight ``omegas[k]``, the table (``floor`` m) and its friction (``budget`` (N, 1, B) None:
    no particle on the table). Started from ``x0 + h v0`` rather than from the inertial ``y``: the two
    differ only at the held and pinned particles, and from there a rope at rest is a fixed point of the
    iterations, so few of them keep its shape (from ``y`` it sagged a few mm further)."""
    n, members = x.shape[0], x.shape[2]
    flat = base.view(n, -1)
    directions = torch.zeros((n - 1, 3, base.shape[2]), dtype=x.dtype)  # padded as ``base``
    previous = x
    for w in omegas:
        e = x[1:] - x[:-1]
        # unit edge directions (vector_norm is not batch-exact)
        directions[..., :members] = e / (e * e).sum(1, keepdim=True).sqrt_().clamp_min_(1e-12)
        solved = torch.addmm(flat, gather, directions.view(n - 1, -1)).view(base.shape)[..., :members]
        if w != 1.0:
            solved = torch.lerp(previous, solved, w)
        solved[:, 2].clamp_(min=floor)
        if budget is not None:
            table_friction(solved, start, budget, axis=1)
        previous, x = x, solved
    return x


MEMBERS_PER_PRODUCT = 4
"""The matrix products of the iterations and of :meth:`Group.base` see the members' columns in blocks of
this many members. A BLAS product's column is not always computed the same way for every column count: on
an AVX-512 CPU, MKL gave a member's column different last bits alone (3 columns) than beside others (6, 9,
15 ...), but the same for every multiple of 4 members (12, 24, ... 600 columns): padded to a multiple of 4,
a member's floats do not depend on the batch it is in (tests check it on the machine they run on; 8 members
cost a single rope's iterations 14 % more, 4 nothing measurable)."""


def padded(t: torch.Tensor) -> torch.Tensor:
    """``t`` (..., B) with zero members appended to a multiple of :data:`MEMBERS_PER_PRODUCT` (4)."""
    extra = -t.shape[-1] % 4  # MEMBERS_PER_PRODUCT, a literal for TorchScript
    return torch.nn.functional.pad(t, [0, extra]) if extra > 0 else t


def member_products(matrix: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``matrix`` (N, M) times each member's ``x[b]`` (M, 3), for ``x`` (B, M, 3): one product over the
    members' columns, padded (:func:`padded`), so that a member's floats do not depend on the others."""
    columns = padded(x.permute(1, 2, 0))  # (M, 3, B')
    out = torch.mm(matrix, columns.reshape(columns.shape[0], -1))
    return out.view(matrix.shape[0], 3, -1)[..., : x.shape[0]].permute(2, 0, 1)


def compiled_solve() -> Any:
    """:func:`solve` compiled by TorchScript (:func:`~solvers.pd.contact.scripted`)."""
    return scripted(solve)


def compiled_settle() -> Any:
    """:func:`settle` compiled by TorchScript (:func:`~solvers.pd.contact.scripted`)."""
    return scripted(settle)


@functools.cache
def fall(h: float) -> torch.Tensor:
    """``h^2`` times :data:`GRAVITY`, laid out (1, 3, 1) for positions laid out (N, 3, B), m."""
    return (h * h) * torch.from_numpy(GRAVITY)[None, :, None]


CHEBYSHEV_START = 5
"""Plain iterations before the acceleration starts."""


@functools.cache
def omegas(iterations: int, rho: float) -> list[float]:
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
