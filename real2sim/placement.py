"""Where real2sim's objects go in the world: the frame turned to face a robot when the photo has no
calibration (:func:`robot_facing_transform`), and every rigid object set down on the table and cut or pushed
apart from its neighbours (:func:`place_objects`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import mujoco
import numpy as np

from real2sim.scene_files import column_parts
from real2sim.separate import trim_overlaps
from real2sim.types import ObjectGeometry
from real2sim.workers import process_pool, run_all
from simpact.core.rotations import matrix_to_quat, quat_to_matrix

__all__ = [
    "MAX_SEPARATION_ROUNDS",
    "REST_TOLERANCE_M",
    "ROBOT_REACH_X",
    "SEPARATION_M",
    "place_objects",
    "robot_facing_transform",
    "transformed",
]

ROBOT_REACH_X = 0.5
"""Distance (m) in front of the robot base where the objects' centre goes when the frame is uncalibrated."""
REST_TOLERANCE_M = 0.03
"""An object whose lowest point is within this of the table (m) is set down on it; higher ones are left
where they are (stacked or held) with a warning."""
SEPARATION_M = 0.0005
"""Gap (m) left between objects pushed apart."""
MAX_SEPARATION_ROUNDS = 20
"""Rounds of pushing pairs apart before giving up with a warning."""


def _moved(g: ObjectGeometry, shift: np.ndarray) -> ObjectGeometry:
    """``g`` and its observed points shifted by ``shift`` (3,), m."""
    return dataclasses.replace(
        g,
        position=np.asarray(g.position, dtype=float) + shift,
        points_world=np.asarray(g.points_world, dtype=float) + shift,
    )


def transformed(g: ObjectGeometry, T: np.ndarray) -> ObjectGeometry:
    """``g`` with its pose and points moved by the world-to-world transform ``T`` (4x4)."""
    R = T[:3, :3]
    return dataclasses.replace(
        g,
        position=R @ np.asarray(g.position, dtype=float) + T[:3, 3],
        quaternion=matrix_to_quat(R @ quat_to_matrix(g.quaternion)),
        points_world=np.asarray(g.points_world, dtype=float) @ R.T + T[:3, 3],
    )


def robot_facing_transform(T_world_cam: np.ndarray, centre_world: np.ndarray) -> np.ndarray:
    """World-to-world transform (4x4) that puts ``centre_world`` at (:data:`ROBOT_REACH_X`, 0, z) with the
    camera on the +x side beyond it (looking back at the robot), turning only about z."""
    cam = T_world_cam[:3, 3]
    d = cam[:2] - centre_world[:2]
    if np.linalg.norm(d) < 1e-6:  # camera straight above: keep the camera's own heading
        d = -T_world_cam[:2, 2] if np.linalg.norm(T_world_cam[:2, 2]) > 1e-6 else np.array([1.0, 0.0])
    yaw = -np.arctan2(d[1], d[0])
    c, s = np.cos(yaw), np.sin(yaw)
    T = np.eye(4)
    T[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    rotated = T[:3, :3] @ centre_world
    T[:3, 3] = [ROBOT_REACH_X - rotated[0], -rotated[1], 0.0]
    return T


def _resting_on(
    g: ObjectGeometry, others: Sequence[ObjectGeometry], names: Sequence[str], name: str
) -> str | None:
    """The name of the object whose height range holds ``g``'s bottom (from its own bottom to
    :data:`REST_TOLERANCE_M` over its top: ``g`` lies on its top or stands in it, a can in a bowl) and whose
    top-view bounding box overlaps ``g``'s most, or None."""
    v = g.world_vertices()
    bottom = float(v[:, 2].min())
    best, most = None, 0.0
    for h, other in zip(others, names):
        w = h.world_vertices()
        if other == name or not float(w[:, 2].min()) <= bottom <= float(w[:, 2].max()) + REST_TOLERANCE_M:
            continue
        side = np.minimum(v[:, :2].max(axis=0), w[:, :2].max(axis=0)) - np.maximum(
            v[:, :2].min(axis=0), w[:, :2].min(axis=0)
        )
        area = float(np.prod(np.clip(side, 0.0, None)))
        if area > most:
            best, most = other, area
    return best


def place_objects(
    geometries: Sequence[ObjectGeometry], names: Sequence[str], table_z: float = 0.0
) -> tuple[list[ObjectGeometry], dict[str, dict[str, Any]], list[str]]:
    """Set every object whose lowest vertex is within :data:`REST_TOLERANCE_M` of the table down on it (not
    one fitted standing on another, ``support_m``), cut overlapping pairs apart where their observed points
    part (:func:`real2sim.separate.trim_overlaps`: only unseen volume goes; an object standing on or in
    another is carved out of it instead), then push pairs still interpenetrating apart horizontally, or an
    object standing on another up off it (the parts each is simulated with, MuJoCo's collision test) until
    none overlaps by more than :data:`SEPARATION_M`. Returns the moved geometries, what moved and cut each
    (``lift_m``, ``cuts``, ``push_m``; ``on``: for one left above the table, the object it stands on or in,
    or None), warnings. Masses were estimated before the cuts, from the uncut extents."""
    out = list(geometries)
    info: dict[str, dict[str, Any]] = {n: {"lift_m": 0.0, "cuts": [], "push_m": [0.0, 0.0]} for n in names}
    warnings: list[str] = []
    for i, (g, name) in enumerate(zip(out, names)):
        low = float(g.world_vertices()[:, 2].min()) - table_z
        if low < 0 or (abs(low) <= REST_TOLERANCE_M and g.support_m <= 0.0):
            out[i] = _moved(g, np.array([0.0, 0.0, -low]))
            info[name]["lift_m"] = round(-low, 6)
        else:
            under = info[name]["on"] = _resting_on(g, out, names, name)
            warnings.append(
                f"'{name}' floats {low:.3f} m above the table: left in place (stacked or held?)"
                if under is None
                else f"'{name}' stands on or in '{under}', {low:.3f} m above the table"
            )
    if len(out) < 2:
        return out, info, warnings
    index = {n: i for i, n in enumerate(names)}  # fitted standing on another: carved out of it, lifted off it
    standing = {
        i: index[info[n]["on"]] for i, n in enumerate(names) if out[i].support_m > 0 and info[n].get("on")
    }
    out, cuts = trim_overlaps(out, names, standing)
    for name, made in cuts.items():
        info[name]["cuts"] = made
    parts = run_all(_collision_parts, [(g,) for g in out], process_pool(), costs=[g.concave for g in out])
    for _ in range(MAX_SEPARATION_ROUNDS):
        pushes = _overlap_pushes(out, parts, standing)
        if not pushes:
            break
        for i, push in pushes.items():
            out[i] = _moved(out[i], push)
            total = np.asarray(info[names[i]]["push_m"]) + push[:2]
            info[names[i]]["push_m"] = [round(float(v), 6) for v in total]
            info[names[i]]["lift_m"] = round(info[names[i]]["lift_m"] + float(push[2]), 6)
    else:
        warnings.append("objects still overlap after pushing them apart; see the settle report")
    return out, info, warnings


def _collision_parts(g: ObjectGeometry) -> list[tuple[np.ndarray, np.ndarray]]:
    """The convex parts (vertices, faces; object frame, m) ``g`` collides with in the simulation: its convex
    hull, or a concave object's columns (:func:`real2sim.scene_files.column_parts`: a bowl's cavity stays
    open, so what stands in it is not pushed out)."""
    if g.concave:
        verts, faces = column_parts(g.mesh)
        if verts:
            return list(zip(verts, faces))
    hull = g.mesh.convex_hull
    return [(np.asarray(hull.vertices), np.asarray(hull.faces))]


def _overlap_pushes(
    geoms: Sequence[ObjectGeometry],
    parts: Sequence[list[tuple[np.ndarray, np.ndarray]]],
    standing: Mapping[int, int],
) -> dict[int, np.ndarray]:
    """Pushes (3,), m, that separate overlapping objects (``parts``: each one's :func:`_collision_parts`):
    horizontal, each pair's depth split by mass proxy (hull volume) so the smaller object moves more, except
    that an object standing on or in another (``standing``: its index -> the other's) is lifted off it."""
    spec = mujoco.MjSpec()
    for i, g in enumerate(geoms):
        body = spec.worldbody.add_body(name=f"b{i}", pos=list(g.position), quat=list(g.quaternion))
        body.add_freejoint()
        for j, (verts, faces) in enumerate(parts[i]):
            mesh = spec.add_mesh(name=f"m{i}_{j}")
            mesh.uservert = np.asarray(verts, dtype=np.float32).ravel().tolist()
            mesh.userface = np.asarray(faces, dtype=np.int32).ravel().tolist()
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"m{i}_{j}", margin=SEPARATION_M)
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    volumes = np.array([max(float(g.mesh.convex_hull.volume), 1e-9) for g in geoms])
    pushes: dict[int, np.ndarray] = {}
    for k in range(data.ncon):
        c = data.contact[k]
        if c.dist >= -SEPARATION_M:
            continue
        a, b = (int(model.geom_bodyid[g]) - 1 for g in c.geom)
        depth = -float(c.dist) + SEPARATION_M
        if standing.get(a) == b or standing.get(b) == a:
            steps = [(a if standing.get(a) == b else b, np.array([0.0, 0.0, depth]))]
        else:
            normal = np.asarray(c.frame[:3])  # from geom 0 towards geom 1
            horizontal = normal[:2]
            if np.linalg.norm(horizontal) < 1e-6:
                horizontal = np.asarray(geoms[b].position[:2]) - np.asarray(geoms[a].position[:2])
            horizontal = np.append(horizontal / max(np.linalg.norm(horizontal), 1e-9), 0.0)
            share_a = volumes[b] / (volumes[a] + volumes[b])
            steps = [(a, -share_a * depth * horizontal), (b, (1.0 - share_a) * depth * horizontal)]
        for idx, step in steps:
            prev = pushes.get(idx)
            if prev is None or np.linalg.norm(step) > np.linalg.norm(prev):
                pushes[idx] = step
    return pushes
