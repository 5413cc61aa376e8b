"""Contact of projective-dynamics particles (the rope's, :mod:`solvers.pd.rope`; the cloth's) with the table
and the colliders' boxes (:class:`solvers.deformable.Colliders`): position-based Coulomb friction on the
table, the boxes' push and Coulomb friction on the velocities. Units: m, s.

This module imports torch at its top, so it is itself on the lazy-import list (pyproject)."""

from __future__ import annotations

import numpy as np
import torch  # noqa: TID253  (this module is lazy itself: see the list in pyproject)

from solvers.deformable import Colliders

__all__ = ["NEAR", "box_push", "coulomb", "near_boxes", "table_friction"]


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


NEAR = 0.01
"""Margin (m, beyond the radius) within which a box counts as near a particle (the rope wakes up)."""


def near_boxes(colliders: Colliders | None, x: np.ndarray, radius: float) -> np.ndarray:
    """(B, K): whether any particle of rope b comes within ``radius + NEAR`` of box k (numpy)."""
    if colliders is None or not len(colliders.half):
        return np.zeros((len(x), 0), dtype=bool)
    arm = x[:, None, :, :] - colliders.centre[:, :, None, :]  # (B, K, N, 3)
    local = np.matmul(arm, colliders.rotation)
    reach = colliders.half[None, :, None, :] + radius + NEAR
    return np.asarray((np.abs(local) <= reach).all(axis=-1).any(axis=-1))


def box_push(
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
