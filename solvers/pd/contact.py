"""Contact of projective-dynamics particles (the rope's, :mod:`solvers.pd.rope`; the cloth's) with the table
and the colliders' boxes (:class:`solvers.deformable.Colliders`): position-based Coulomb friction on the
table, the boxes' push and Coulomb friction on the velocities. Units: m, s.

This module imports torch at its top, so it is itself on the lazy-import list (pyproject)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

from solvers.deformable import Colliders

__all__ = ["NEAR", "box_friction", "box_push", "coulomb", "near_boxes", "scripted", "table_friction"]

GRAVITY = np.array([0.0, 0.0, -9.81])
"""m/s^2."""


@functools.cache
def scripted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` compiled by TorchScript on first use (the same floats; per-op overhead ~30-40 % less on a
    single rope, whose small tensors it is bound by), or ``fn`` itself where TorchScript is unavailable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.jit.script is deprecated; torch.compile: no cheaper
            return torch.jit.script(fn)
    except Exception:  # noqa: BLE001  (any failure to compile: run it eagerly)
        return fn


def table_friction(x: torch.Tensor, start: torch.Tensor, budget: torch.Tensor, axis: int = -1) -> None:
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


def coulomb(
    v: torch.Tensor,
    surface_v: torch.Tensor,
    normal: torch.Tensor,
    predicted: torch.Tensor,
    hit: torch.Tensor,
    mu: torch.Tensor,
) -> torch.Tensor:
    """``v`` (B, N, 3) after Coulomb friction where ``hit`` (B, N, 1): relative normal velocity no longer
    negative; tangential relative velocity reduced by ``mu`` (a 0-d tensor) times the normal velocity
    change."""
    rel = v - surface_v
    vn = (rel * normal).sum(-1, keepdim=True)
    dvn = (vn - ((predicted - surface_v) * normal).sum(-1, keepdim=True)).clamp_min(0.0)
    vn = vn.clamp_min(0.0)
    tangential = rel - (rel * normal).sum(-1, keepdim=True) * normal
    speed = torch.linalg.vector_norm(tangential, dim=-1, keepdim=True)
    scale = (1.0 - mu * dvn / speed.clamp_min(1e-12)).clamp_min(0.0)
    out = surface_v + vn * normal + scale * tangential
    return torch.where(hit, out, v)


def _frictions(
    v: torch.Tensor,
    predicted: torch.Tensor,
    normal: torch.Tensor,
    surface_v: torch.Tensor,
    touch: torch.Tensor,
    mu: torch.Tensor,
    free: torch.Tensor | None,
) -> torch.Tensor:
    """:func:`coulomb` against each box k in turn (``normal``, ``surface_v`` (B, K, N, 3), ``touch`` (B, K,
    N), ``mu`` (K,)), on the ``free`` particles (B, N, 1; None: all); a box no free particle touches is
    skipped (an exact no-op)."""
    for k in range(mu.shape[0]):
        hit = touch[:, k, :, None]
        if free is not None:
            hit = hit & free
        if bool(hit.any()):
            v = coulomb(v, surface_v[:, k], normal[:, k], predicted, hit, mu[k])
    return v


def box_friction(
    v: torch.Tensor,
    v0: torch.Tensor,
    h: float,
    contact: list[torch.Tensor],
    mu: np.ndarray,
    free: torch.Tensor | None = None,
) -> torch.Tensor:
    """Coulomb friction on the velocities ``v`` (B, N, 3) of particles touching a box (``contact``: normals,
    box velocities at the particles and touch mask from :func:`box_push`, taken before the push, which is
    along the normal; ``mu`` (K,) the contacts' coefficients; ``free`` (B, N, 1) the particles it applies
    to, None: all): the tangential velocity relative to the box loses up to ``mu`` times the normal velocity
    the contact removed (``v0`` the step's start velocity, ``h`` s its length)."""
    normal, surface_v, touch = contact
    predicted = v0 + h * torch.from_numpy(GRAVITY)
    return scripted(_frictions)(v, predicted, normal, surface_v, touch, torch.from_numpy(mu), free)


NEAR = 0.01
"""Margin (m, beyond the radius) within which a box counts as near a particle (the rope wakes up)."""


def near_boxes(colliders: Colliders | None, x: np.ndarray, radius: float) -> np.ndarray:
    """(B, K): whether any particle of rope b comes within ``radius + NEAR`` of box k (numpy). Boxes whose
    world bounding box misses the particles' are ruled out first (exactly: the inflated box lies inside
    it), which is all a rope far from the robot needs."""
    if colliders is None or not len(colliders.half):
        return np.zeros((len(x), 0), dtype=bool)
    inflated = colliders.half + radius + NEAR  # (K, 3)
    reach = np.einsum("bkij,kj->bki", np.abs(colliders.rotation), inflated) + 1e-9  # world half extents
    low, high = x.min(axis=1)[:, None], x.max(axis=1)[:, None]  # (B, 1, 3)
    maybe = ((colliders.centre + reach >= low) & (colliders.centre - reach <= high)).all(axis=-1)
    if not maybe.any():
        return maybe
    arm = x[:, None, :, :] - colliders.centre[:, :, None, :]  # (B, K, N, 3)
    local = np.matmul(arm, colliders.rotation)
    return np.asarray((np.abs(local) <= inflated[None, :, None, :]).all(axis=-1).any(axis=-1)) & maybe


def _push(
    x: torch.Tensor,
    centre: torch.Tensor,
    rotation: torch.Tensor,
    half: torch.Tensor,
    velocity: torch.Tensor,
    angular_velocity: torch.Tensor,
    slop: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`box_push` on the boxes' tensors (centre (B, K, 3), ...; ``half`` (1, K, 1, 3) inflated)."""
    arm = x[:, None] - centre[:, :, None]  # (B, K, N, 3)
    local = torch.matmul(arm, rotation)
    depth, axis = (half - local.abs()).min(-1, keepdim=True)  # > 0: inside along every axis; the nearest face
    inside = (depth > -slop)[..., 0]  # (B, K, N)
    sign = torch.where(local.gather(-1, axis) >= 0, 1.0, -1.0).to(x.dtype)
    onehot = torch.zeros_like(local).scatter_(-1, axis, 1.0)
    normal = torch.matmul(onehot * sign, rotation.transpose(-1, -2))
    push = torch.where(depth > 0, normal * depth, 0.0).sum(1)
    spin = torch.cross(angular_velocity[:, :, None].expand_as(arm), arm, dim=-1)
    return push, normal, velocity[:, :, None] + spin, inside


def box_push(
    x: torch.Tensor, colliders: Colliders, boxes: np.ndarray, r: float, slop: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For boxes ``boxes``: the push (B, N, 3) out of every box a particle is inside (inflated by ``r``),
    and per box (B, K, N, ...) the outward face normal, the box's velocity at the particle, and whether the
    particle is within ``slop`` of the inflated box."""
    return scripted(_push)(
        x,
        torch.from_numpy(colliders.centre[:, boxes]),
        torch.from_numpy(colliders.rotation[:, boxes]),
        torch.from_numpy(colliders.half[boxes] + r)[None, :, None, :],
        torch.from_numpy(colliders.velocity[:, boxes]),
        torch.from_numpy(colliders.angular_velocity[:, boxes]),
        float(slop),
    )
