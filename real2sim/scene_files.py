"""Reading a real2sim scene back: ``scene.json``'s objects as a :class:`simpact.core.scene.Scene` (rigid
objects with their meshes, deformables with their particles and material), and the ``material`` mapping a
deformable's physical parameters give."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from real2sim.types import PhysicalParameters, Real2SimError
from simpact.core.scene import RobotStart, Scene, SceneObject

__all__ = ["deformable_material", "deformable_object", "load_scene"]


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


def deformable_object(entry: Mapping[str, Any], root: Path) -> SceneObject:
    """The scene object of a ``scene.json`` deformable entry: its particles file (made absolute) and
    material; ``size`` is its extent (a box), for what reads an object's size."""
    return SceneObject(
        name=entry["name"],
        shape="box",
        size=tuple(float(v) for v in entry["extent"]),
        position=tuple(float(v) for v in entry["position"]),  # type: ignore[arg-type]
        quaternion=tuple(float(v) for v in entry["quaternion"]),  # type: ignore[arg-type]
        mass=float(entry["mass"]),
        friction=float(entry["friction"]),
        rgba=tuple(float(v) for v in entry.get("rgba", (0.7, 0.7, 0.7, 1.0))),  # type: ignore[arg-type]
        kind=entry["kind"],
        particles=str((root / entry["particles"]).resolve()),
        material=dict(entry.get("material", {})),
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
        objects = []
        for o in raw["objects"]:
            if o["kind"] != "rigid":
                objects.append(deformable_object(o, root))
                continue
            objects.append(
                SceneObject(
                    name=o["name"],
                    shape="mesh",
                    size=tuple(float(v) for v in o["mesh_scale"]),
                    position=tuple(float(v) for v in o["position"]),  # type: ignore[arg-type]
                    quaternion=tuple(float(v) for v in o["quaternion"]),  # type: ignore[arg-type]
                    mass=float(o["mass"]),
                    friction=float(o["friction"]),
                    rgba=tuple(float(v) for v in o.get("rgba", (0.7, 0.7, 0.7, 1.0))),  # type: ignore[arg-type]
                    mesh=str((root / o["mesh"]).resolve()),
                    convex_decomposition=bool(o.get("concave", False)),
                )
            )
        robot = RobotStart.from_dict(raw.get("robot", {}))
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise Real2SimError(f"{path}: not a real2sim scene ({type(exc).__name__}: {exc})") from None
    return Scene(tuple(objects), robot)
