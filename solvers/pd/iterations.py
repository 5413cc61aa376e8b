"""The rope's local/global iterations (:mod:`solvers.pd.rope`), laid out (N, 3, B): one matrix product per
iteration for a batch, the table and its friction inside every iteration, compiled by TorchScript.

This module imports torch at its top, so it is itself on the lazy-import list (pyproject)."""

from __future__ import annotations

import functools
import warnings
from typing import Any, NamedTuple

import numpy as np
import torch  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

from solvers.pd.contact import table_friction  # noqa: TID253  (lazy, as this module)

__all__ = ["CHEBYSHEV_START", "GRAVITY", "Group", "compiled_iterate", "fall", "iterate", "omegas"]

GRAVITY = np.array([0.0, 0.0, -9.81])
"""m/s^2."""


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
            table_friction(solved, start, budget, axis=1)
        previous, x = x, solved
    return x


@functools.cache
def compiled_iterate() -> Any:
    """:func:`iterate` compiled by TorchScript (the same floats; per-op overhead ~40 % less on a single
    rope, whose small products it is bound by), or itself where TorchScript is unavailable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # torch.jit.script is deprecated (torch.compile is not cheaper here)
            return torch.jit.script(iterate)
    except Exception:  # noqa: BLE001  (any failure to compile: run it eagerly)
        return iterate


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
