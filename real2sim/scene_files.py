"""A real2sim scene's files: the convex parts a concave object's mesh file is simulated with
(:func:`cache_convex_parts`), and reading a scene back: ``scene.json``'s objects as a
:class:`simpact.core.scene.Scene` (rigid objects with their meshes, deformables with their particles and
material), the ``material`` mapping a deformable's physical parameters give, and where the robot starts
(:func:`robot_start_above`: above the tallest object)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import trimesh

from real2sim.types import PhysicalParameters, Real2SimError
from simpact.core.scene import TABLE_NEAR_X, RobotStart, Scene, SceneObject
from solvers.mujoco import meshes

__all__ = [
    "COLUMN_CELLS",
    "TABLE_MARGIN_M",
    "cache_convex_parts",
    "column_parts",
    "covering_table_size",
    "deformable_material",
    "entry_object",
    "load_scene",
]

TABLE_MARGIN_M = 0.15
"""Table (m) a real2sim scene keeps beyond its outermost object."""


def covering_table_size(
    objects: tuple[SceneObject, ...], margin_m: float = TABLE_MARGIN_M
) -> tuple[float, float]:
    """The table extent (x, y; m) of a scene of ``objects`` (sizes: full extents): the default table, made
    larger where an object's bounding sphere comes within ``margin_m`` of its far or side edges, so nothing
    the frame shows standing on the table is placed off it."""
    sx, sy = Scene((), RobotStart()).table_size
    for o in objects:
        r = 0.5 * float(np.linalg.norm(o.size))
        sx = max(sx, o.position[0] + r + margin_m - TABLE_NEAR_X)
        sy = max(sy, 2.0 * (abs(o.position[1]) + r + margin_m))
    return float(sx), float(sy)


#: How far (m) above the tallest object a real2sim scene's robot starts (its tool centre point, between the
#: fingertips).
ROBOT_CLEARANCE_M = 0.05


def robot_start_above(top_m: float) -> RobotStart:
    """The default robot start, raised where needed so that its fingertips are :data:`ROBOT_CLEARANCE_M`
    above the tallest object (``top_m``, m above the table): a scene's robot never starts inside an object
    (a 28 cm bottle under the default start, 25 cm up, did on UOIS frame 8)."""
    default = RobotStart()
    x, y, z = default.position
    return dataclasses.replace(default, position=(x, y, max(z, top_m + ROBOT_CLEARANCE_M)))


def deformable_material(p: PhysicalParameters, spacing_m: float) -> dict[str, Any]:
    """A ``pd`` / ``mpm`` object's ``material`` mapping (:class:`simpact.core.scene.SceneObject`) from its
    physical parameters; an MPM grid of two particle spacings per cell (two particles per cell per axis)."""
    values = {
        "model": p.material,
        "youngs_modulus": p.young_modulus_pa,
        "poissons_ratio": p.poisson_ratio,
        "density": p.density_kg_m3,
    }
    if p.kind == "mpm":
        values.update(
            friction_angle=p.friction_angle_deg, yield_stress=p.yield_stress_pa, grid_dx=2.0 * spacing_m
        )
    else:
        values.pop("model")
    return {k: v for k, v in values.items() if v is not None}


def entry_object(entry: Mapping[str, Any], root: Path) -> SceneObject:
    """The scene object of a ``scene.json`` entry, paths made absolute: a rigid object's mesh (``size`` its
    scale), or a deformable's particles file and material (a box of its extent, for what reads a size)."""
    common: dict[str, Any] = {
        "name": entry["name"],
        "position": tuple(float(v) for v in entry["position"]),
        "quaternion": tuple(float(v) for v in entry["quaternion"]),
        "mass": float(entry["mass"]),
        "friction": float(entry["friction"]),
        "rgba": tuple(float(v) for v in entry.get("rgba", (0.7, 0.7, 0.7, 1.0))),
    }
    if entry["kind"] == "rigid":
        return SceneObject(
            shape="mesh",
            size=tuple(float(v) for v in entry["mesh_scale"]),
            mesh=str((root / entry["mesh"]).resolve()),
            convex_decomposition=bool(entry.get("concave", False)),
            **common,
        )
    return SceneObject(
        shape="box",
        size=tuple(float(v) for v in entry["extent"]),
        kind=entry["kind"],
        particles=str((root / entry["particles"]).resolve()),
        material=dict(entry.get("material", {})),
        **common,
    )


def load_scene(directory: str | Path) -> Any:
    """The :class:`simpact.core.scene.Scene` in ``directory/scene.json``: rigid objects with their meshes,
    deformables (``pd``, ``mpm``) with their particles and material (paths made absolute)."""
    root = Path(directory)
    path = root / "scene.json"
    if not path.is_file():
        raise Real2SimError(f"{path}: missing (write it with `simpact real2sim FRAME --out {root}`)")
    try:
        raw = json.loads(path.read_text())
        objects = [entry_object(o, root) for o in raw["objects"]]
        robot = RobotStart.from_dict(raw.get("robot", {}))
        table = tuple(float(v) for v in raw.get("table_size", covering_table_size(tuple(objects))))
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise Real2SimError(f"{path}: not a real2sim scene ({type(exc).__name__}: {exc})") from None
    return Scene(tuple(objects), robot, table_size=(table[0], table[1]))


COLUMN_CELLS = 8
"""A concave object is split into up to this many columns along each horizontal axis of its frame."""
SURFACE_SAMPLES = 10_000
"""Surface samples a concave mesh is cut into columns from."""


def column_parts(
    mesh: Any, cells: int = COLUMN_CELLS, seed: int = 0
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Convex parts of a concave mesh in well under a second: the surface (vertices and ``SURFACE_SAMPLES``
    seeded samples) cut into ``cells`` x ``cells`` vertical columns of the object frame, each column's points
    wrapped in their convex hull. A bowl's floor and walls stay separate, so its cavity stays open (CoACD
    takes tens of seconds on a reconstructed bowl). Returns (vertices list, faces list)."""
    samples, _ = trimesh.sample.sample_surface(mesh, SURFACE_SAMPLES, seed=seed)
    pts = np.concatenate([np.asarray(mesh.vertices, dtype=float), np.asarray(samples, dtype=float)])
    lo, hi = pts[:, :2].min(axis=0), pts[:, :2].max(axis=0)
    size = np.maximum(hi - lo, 1e-9)
    idx = np.minimum((((pts[:, :2] - lo) / size) * cells).astype(np.int64), cells - 1)
    key = idx[:, 0] * cells + idx[:, 1]
    verts, faces = [], []
    for k in np.unique(key):
        col = pts[key == k]
        if len(col) < 4:
            continue
        try:
            hull = trimesh.convex.convex_hull(col)
        except Exception:  # degenerate (flat) column: qhull refuses it
            continue
        if hull.volume <= 1e-12:
            continue
        verts.append(np.asarray(hull.vertices, dtype=np.float64))
        faces.append(np.asarray(hull.faces, dtype=np.int32))
    return verts, faces


def cache_convex_parts(mesh_file: Path, scale: Sequence[float] | np.ndarray) -> int:
    """Store :func:`column_parts` of the mesh as loaded by the scene builder (file, per-axis scale) as its
    convex decomposition, so building the MuJoCo scene does not run CoACD. Returns the part count."""
    mesh = meshes.load_mesh(mesh_file, tuple(float(v) for v in scale))  # type: ignore[arg-type]
    verts, faces = column_parts(mesh)
    if verts:
        meshes.store_convex_parts(mesh, meshes.ConvexParts(tuple(verts), tuple(faces)))
    return len(verts)
