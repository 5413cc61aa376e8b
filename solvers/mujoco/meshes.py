"""Object meshes for MuJoCo: procedural shapes and convex decomposition cached on disk.

MuJoCo collides with the convex hull of a mesh, so a concave object (a bowl, a mug) is split into convex
parts with CoACD. Decomposition takes seconds, so parts are cached under ``$SIMPACT_CACHE/convex`` (default
``~/.cache/simpact/convex``) by a hash of the mesh's vertices and faces and the CoACD settings.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh

__all__ = ["ConvexParts", "bowl_mesh", "cache_dir", "convex_parts", "load_mesh", "store_convex_parts"]

COACD_THRESHOLD = 0.04
"""CoACD concavity threshold: lower gives more, tighter parts."""
COACD_SEED = 0
COACD_MAX_PARTS = 16


def cache_dir() -> Path:
    """Folder for cached decompositions: ``$SIMPACT_CACHE/convex`` or ``~/.cache/simpact/convex``."""
    root = os.environ.get("SIMPACT_CACHE") or Path.home() / ".cache" / "simpact"
    return Path(root) / "convex"


def bowl_mesh(radius: float, height: float, wall: float, sections: int = 48) -> trimesh.Trimesh:
    """A watertight bowl: outer rim radius, height and wall thickness in metres; flat foot of 0.6 x radius;
    the base is at z = 0, the axis along z."""
    foot = 0.6 * radius
    profile = np.array(
        [
            [0.0, wall],
            [foot - wall, wall],
            [radius - wall, height],
            [radius, height],
            [foot, 0.0],
            [0.0, 0.0],
        ]
    )
    mesh = trimesh.creation.revolve(profile[::-1], sections=sections)
    if mesh.volume < 0:
        mesh.invert()
    return mesh


def load_mesh(path: str | Path, scale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> trimesh.Trimesh:
    """Load a mesh file as one Trimesh, scaled per axis."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"mesh file {path} does not exist")
    mesh = trimesh.load(path, force="mesh")
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise ValueError(f"mesh file {path} holds no triangle mesh")
    mesh.apply_scale(np.asarray(scale, dtype=float))
    return mesh


@dataclass(frozen=True)
class ConvexParts:
    """Convex pieces of a mesh: lists of vertices (n, 3) m and triangle faces (m, 3)."""

    vertices: tuple[np.ndarray, ...]
    faces: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.vertices)


def _mesh_key(mesh: trimesh.Trimesh) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(mesh.vertices, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(mesh.faces, dtype=np.int64).tobytes())
    h.update(f"coacd:{COACD_THRESHOLD}:{COACD_SEED}:{COACD_MAX_PARTS}".encode())
    return h.hexdigest()[:32]


def convex_parts(mesh: trimesh.Trimesh) -> ConvexParts:
    """Convex decomposition of ``mesh`` with CoACD, read from the disk cache when present."""
    path = cache_dir() / f"{_mesh_key(mesh)}.npz"
    if path.exists():
        with np.load(path) as data:
            n = int(data["count"])
            return ConvexParts(tuple(data[f"v{i}"] for i in range(n)), tuple(data[f"f{i}"] for i in range(n)))
    import coacd

    coacd.set_log_level("error")
    result = coacd.run_coacd(
        coacd.Mesh(np.asarray(mesh.vertices), np.asarray(mesh.faces)),
        threshold=COACD_THRESHOLD,
        max_convex_hull=COACD_MAX_PARTS,
        seed=COACD_SEED,
    )
    parts = ConvexParts(
        tuple(np.asarray(v, dtype=np.float64) for v, _ in result),
        tuple(np.asarray(f, dtype=np.int32) for _, f in result),
    )
    store_convex_parts(mesh, parts)
    return parts


def store_convex_parts(mesh: trimesh.Trimesh, parts: ConvexParts) -> None:
    """Cache ``parts`` as the decomposition of ``mesh`` (e.g. one computed faster than CoACD would), so that
    :func:`convex_parts` and the scene builder use it."""
    path = cache_dir() / f"{_mesh_key(mesh)}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {"count": np.array(len(parts))}
    for i, (v, f) in enumerate(zip(parts.vertices, parts.faces)):
        arrays[f"v{i}"], arrays[f"f{i}"] = v, f
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez_compressed(tmp, **arrays)  # type: ignore[arg-type]
    tmp.replace(path)  # atomic: parallel builders never read half a file
