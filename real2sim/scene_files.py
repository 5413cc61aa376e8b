"""Reading a real2sim scene back: ``scene.json``'s objects as a :class:`simpact.core.scene.Scene` (rigid
objects with their meshes, deformables with their particles and material), and the ``material`` mapping a
deformable's physical parameters give."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from real2sim.types import PhysicalParameters, Real2SimError
from simpact.core.scene import TABLE_NEAR_X, RobotStart, Scene, SceneObject

__all__ = ["TABLE_MARGIN_M", "covering_table_size", "deformable_material", "entry_object", "load_scene"]

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
