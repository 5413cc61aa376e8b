"""Where real2sim's objects go in the world: the frame turned to face a robot when the photo has no
calibration (:func:`robot_facing_transform`), and every rigid object set down on the table and cut or pushed
apart from its neighbours (:func:`place_objects`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from real2sim.separate import trim_overlaps
from real2sim.types import ObjectGeometry
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
    """The name of the object whose top is within :data:`REST_TOLERANCE_M` of ``g``'s bottom and whose
    top-view bounding box overlaps ``g``'s most, or None."""
    v = g.world_vertices()
    best, most = None, 0.0
    for h, other in zip(others, names):
        w = h.world_vertices()
        if other == name or abs(float(v[:, 2].min()) - float(w[:, 2].max())) > REST_TOLERANCE_M:
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
    """Set every object whose lowest vertex is within :data:`REST_TOLERANCE_M` of the table down on it, cut
    overlapping pairs apart where their observed points part (:func:`real2sim.separate.trim_overlaps`: only
    unseen volume goes), then push pairs still interpenetrating apart horizontally (convex hulls, MuJoCo's
    collision test) until none overlaps by more than :data:`SEPARATION_M`. Returns the moved geometries,
    what moved and cut each (``lift_m``, ``cuts``, ``push_m``; ``on``: for one left above the table, the
    object it lies on, or None), warnings. Masses were estimated before the cuts, from the uncut extents."""
    out = list(geometries)
    info: dict[str, dict[str, Any]] = {n: {"lift_m": 0.0, "cuts": [], "push_m": [0.0, 0.0]} for n in names}
    warnings: list[str] = []
    for i, (g, name) in enumerate(zip(out, names)):
        low = float(g.world_vertices()[:, 2].min()) - table_z
        if abs(low) <= REST_TOLERANCE_M or low < 0:
            out[i] = _moved(g, np.array([0.0, 0.0, -low]))
            info[name]["lift_m"] = round(-low, 6)
        else:
            under = info[name]["on"] = _resting_on(g, out, names, name)
            warnings.append(
                f"'{name}' floats {low:.3f} m above the table: left in place (stacked or held?)"
                if under is None
                else f"'{name}' lies on '{under}', {low:.3f} m above the table"
            )
    if len(out) < 2:
        return out, info, warnings
    out, cuts = trim_overlaps(out, names)
    for name, made in cuts.items():
        info[name]["cuts"] = made
    for _ in range(MAX_SEPARATION_ROUNDS):
        pushes = _overlap_pushes(out)
        if not pushes:
            break
        for i, push in pushes.items():
            out[i] = _moved(out[i], np.array([push[0], push[1], 0.0]))
            total = np.asarray(info[names[i]]["push_m"]) + push
            info[names[i]]["push_m"] = [round(float(v), 6) for v in total]
    else:
        warnings.append("objects still overlap after pushing them apart; see the settle report")
    return out, info, warnings


def _overlap_pushes(geoms: Sequence[ObjectGeometry]) -> dict[int, np.ndarray]:
    """Horizontal pushes (m) that separate overlapping convex hulls; each pair's depth split by mass proxy
    (hull volume) so the smaller object moves more."""
    spec = mujoco.MjSpec()
    hulls = [g.mesh.convex_hull for g in geoms]
    for i, (g, hull) in enumerate(zip(geoms, hulls)):
        mesh = spec.add_mesh(name=f"m{i}")
        mesh.uservert = np.asarray(hull.vertices, dtype=np.float32).ravel().tolist()
        mesh.userface = np.asarray(hull.faces, dtype=np.int32).ravel().tolist()
        body = spec.worldbody.add_body(name=f"b{i}", pos=list(g.position), quat=list(g.quaternion))
        body.add_freejoint()
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"m{i}", margin=SEPARATION_M)
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    volumes = np.array([max(float(h.volume), 1e-9) for h in hulls])
    pushes: dict[int, np.ndarray] = {}
    for k in range(data.ncon):
        c = data.contact[k]
        if c.dist >= -SEPARATION_M:
            continue
        a, b = (int(model.geom_bodyid[g]) - 1 for g in c.geom)
        normal = np.asarray(c.frame[:3])  # from geom 0 towards geom 1
        horizontal = normal[:2]
        if np.linalg.norm(horizontal) < 1e-6:
            horizontal = np.asarray(geoms[b].position[:2]) - np.asarray(geoms[a].position[:2])
        horizontal = horizontal / max(np.linalg.norm(horizontal), 1e-9)
        depth = -float(c.dist) + SEPARATION_M
        share_a = volumes[b] / (volumes[a] + volumes[b])
        for idx, sign, share in ((a, -1.0, share_a), (b, 1.0, 1.0 - share_a)):
            step = sign * share * depth * horizontal
            prev = pushes.get(idx)
            if prev is None or np.linalg.norm(step) > np.linalg.norm(prev):
                pushes[idx] = step
    return pushes
