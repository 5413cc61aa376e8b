"""Neighbours' guessed hidden sides cut apart where the camera saw each object, not pushed apart.

A shape completed from one view guesses its hidden side: a box's depth, a mirrored hull's back, a can's far
half. Two such guesses can reach into each other where objects stand close together. Pushing the objects
apart (what :func:`real2sim.placement.place_objects` does) moves the sides the camera did see off the
measured depth, by as much as the guesses overlap (5 cm on UOIS frame 0006). :func:`trim_overlaps` instead
cuts each pair that overlaps at the plane that best separates their observed points (the widest gap
between them over a sphere of directions, a hard-margin separating plane after the outermost
:data:`OUTLIER_SHARE` of points is set aside), each mesh keeping its own side. What the camera saw stays where
it was measured; only unseen volume is removed. Mesh booleans are manifold3d's (exact, watertight).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import trimesh

from real2sim.types import ObjectGeometry
from simpact.core.rotations import quat_to_matrix

__all__ = ["GAP_M", "OVERLAP_M3", "separating_plane", "trim_overlaps"]

OVERLAP_M3 = 1e-7
"""Two meshes overlapping by less than this volume (m³, 0.1 cm³) are left as they are."""
GAP_M = 0.0005
"""Gap (m) left between the two cut faces."""
OUTLIER_SHARE = 0.02
"""Share of each object's points, the farthest towards the other, that may lie past the plane (mask noise)."""
MAX_POINTS = 1500
"""Points per object the plane search uses (every k-th, deterministic)."""
MIN_KEEP = 0.25
"""A cut that would leave less than this share of an object's volume is not made (the plane is not a
boundary between the two then, e.g. one object seen through the other)."""


def _cap(n: int, angle: float = np.pi) -> np.ndarray:
    """(n, 3) unit directions spread evenly within ``angle`` (rad) of +z (a Fibonacci lattice; π: the whole
    sphere)."""
    k = np.arange(n) + 0.5
    z = 1.0 - (1.0 - np.cos(angle)) * k / n
    r = np.sqrt(1.0 - z * z)
    phi = np.pi * (3.0 - np.sqrt(5.0)) * k
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def _subsample(points: np.ndarray) -> np.ndarray:
    step = max(1, len(points) // MAX_POINTS)
    return np.asarray(points, dtype=np.float64)[::step]


def _gaps(a: np.ndarray, b: np.ndarray, dirs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per direction d: the gap (m) between ``a``'s far quantile and ``b``'s near quantile along d, and the
    two quantiles."""
    a_far = np.quantile(a @ dirs.T, 1.0 - OUTLIER_SHARE, axis=0)
    b_near = np.quantile(b @ dirs.T, OUTLIER_SHARE, axis=0)
    return b_near - a_far, a_far, b_near


def separating_plane(points_a: np.ndarray, points_b: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The plane ``n · x = offset`` (unit ``n`` from ``a`` towards ``b``, m) through the middle of the widest
    gap between two point sets (N, 3) m, and that gap (m; negative when no plane parts them, its least
    overlap then). Directions: 1200 over the sphere, then 400 within 6° of the best."""
    a, b = _subsample(points_a), _subsample(points_b)
    centre = 0.5 * (a.mean(axis=0) + b.mean(axis=0))
    a, b = a - centre, b - centre
    dirs = _cap(1200)
    gaps, _, _ = _gaps(a, b, dirs)
    best = dirs[int(np.argmax(gaps))]
    fine = np.vstack([best, _cap(400, np.radians(6.0)) @ _rotation_onto(best).T])
    gaps, a_far, b_near = _gaps(a, b, fine)
    i = int(np.argmax(gaps))
    normal = fine[i] / np.linalg.norm(fine[i])
    offset = 0.5 * float(a_far[i] + b_near[i]) + float(normal @ centre)
    return normal, offset, float(gaps[i])


def _rotation_onto(d: np.ndarray) -> np.ndarray:
    """A rotation (3x3) taking +z onto the unit vector ``d``."""
    z = np.array([0.0, 0.0, 1.0])
    v, c = np.cross(z, d), float(z @ d)
    if np.linalg.norm(v) < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    vx = np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    return np.eye(3) + vx + vx @ vx / (1.0 + c)


def _manifold(vertices: np.ndarray, faces: np.ndarray) -> Any:
    import manifold3d

    return manifold3d.Manifold(
        manifold3d.Mesh(
            vert_properties=np.ascontiguousarray(vertices, dtype=np.float32),
            tri_verts=np.ascontiguousarray(faces, dtype=np.uint32),
        )
    )


def _cut(g: ObjectGeometry, normal: np.ndarray, offset: float) -> ObjectGeometry | None:
    """``g`` with the part of its mesh on the far side of ``normal · x = offset`` (world, m) removed, its mesh
    re-centred on its bounding box; None when the cut would leave less than :data:`MIN_KEEP` of it."""
    R = quat_to_matrix(g.quaternion)
    p = np.asarray(g.position, dtype=float)
    # The plane in the object frame: n_obj · y >= off_obj keeps the side ``-normal`` points to.
    n_obj = -(R.T @ normal)
    off_obj = -(offset - float(normal @ p))
    kept = _manifold(g.mesh.vertices, g.mesh.faces).trim_by_plane(n_obj.tolist(), off_obj)
    return _recentred(g, kept.to_mesh(), R, p)


def _overlap_m3(a: ObjectGeometry, b: ObjectGeometry) -> float:
    va, vb = a.world_vertices(), b.world_vertices()
    if np.any(va.max(axis=0) < vb.min(axis=0)) or np.any(vb.max(axis=0) < va.min(axis=0)):
        return 0.0
    both = _manifold(va, a.mesh.faces) ^ _manifold(vb, b.mesh.faces)
    return float(both.volume())


def _hollowed(vessel: ObjectGeometry, inner: ObjectGeometry) -> ObjectGeometry | None:
    """``vessel`` without what lies over ``inner``'s footprint (the convex hull of its top view) from
    :data:`GAP_M` under ``inner``'s bottom up: the room an object standing in it (a can in a bowl) takes,
    which the vessel's completion guessed full. None when that would leave less than :data:`MIN_KEEP` of
    it."""
    v = inner.world_vertices()
    bottom = float(v[:, 2].min()) - GAP_M
    top = float(max(v[:, 2].max(), vessel.world_vertices()[:, 2].max())) + 1.0
    xy = v[:, :2]
    prism = trimesh.convex.convex_hull(np.vstack([np.c_[xy, np.full(len(xy), z)] for z in (bottom, top)]))
    R = quat_to_matrix(vessel.quaternion)
    p = np.asarray(vessel.position, dtype=float)
    room = (np.asarray(prism.vertices) - p) @ R  # the prism in the vessel's frame
    kept = (_manifold(vessel.mesh.vertices, vessel.mesh.faces) - _manifold(room, prism.faces)).to_mesh()
    return _recentred(vessel, kept, R, p)


def _recentred(g: ObjectGeometry, out: Any, R: np.ndarray, p: np.ndarray) -> ObjectGeometry | None:
    """``g`` with its mesh replaced by the manifold mesh ``out`` (its frame: rotation ``R``, origin ``p``),
    re-centred on its bounding box; None when it keeps less than :data:`MIN_KEEP` of ``g``'s volume."""
    mesh = trimesh.Trimesh(np.asarray(out.vert_properties, np.float64)[:, :3], np.asarray(out.tri_verts))
    if len(mesh.faces) == 0 or mesh.volume < MIN_KEEP * max(float(g.mesh.volume), 1e-12):
        return None
    lo, hi = mesh.bounds
    centre = 0.5 * (lo + hi)
    mesh.apply_translation(-centre)
    return dataclasses.replace(g, mesh=mesh, position=p + R @ centre, extent=hi - lo)


def trim_overlaps(
    geometries: Sequence[ObjectGeometry], names: Sequence[str], standing: Mapping[int, int] | None = None
) -> tuple[list[ObjectGeometry], dict[str, list[dict[str, Any]]]]:
    """The objects (world frame) with every pair overlapping by more than :data:`OVERLAP_M3` cut apart at
    their observed points' separating plane (pairs in index order), and per object name its cuts: the
    other object, the volume removed (cm³) and the gap between the two point sets along the plane's normal
    (cm; negative: the points themselves overlap that much and the cut takes the outermost of them).
    ``standing``: object index -> index of the object it stands on or in; such a pair is not cut in two,
    the room the standing one takes is taken out of the other (:func:`_hollowed`; its gap: None)."""
    out = list(geometries)
    cuts: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    standing = standing or {}
    for i in range(len(out)):
        for j in range(i + 1, len(out)):
            if _overlap_m3(out[i], out[j]) <= OVERLAP_M3:
                continue
            vessel = i if standing.get(j) == i else j if standing.get(i) == j else None
            if vessel is not None:
                inner = i + j - vessel
                new = _hollowed(out[vessel], out[inner])
                if new is not None:
                    removed = float(out[vessel].mesh.volume - new.mesh.volume)
                    cuts[names[vessel]].append(
                        {"with": names[inner], "removed_cm3": round(1e6 * removed, 3), "gap_cm": None}
                    )
                    out[vessel] = new
                continue
            normal, offset, gap = separating_plane(out[i].points_world, out[j].points_world)
            a = _cut(out[i], normal, offset - 0.5 * GAP_M)
            b = _cut(out[j], -normal, -offset - 0.5 * GAP_M)
            if a is None or b is None:
                continue
            for k, other, new in ((i, j, a), (j, i, b)):
                removed = float(out[k].mesh.volume - new.mesh.volume)
                cuts[names[k]].append(
                    {
                        "with": names[other],
                        "removed_cm3": round(1e6 * removed, 3),
                        "gap_cm": round(100 * gap, 3),
                    }
                )
                out[k] = new
    return out, cuts
