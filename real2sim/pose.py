"""Pose estimation back-ends, chosen by name: ``icp`` (default) and ``foundationpose``.

``icp`` registers the completed mesh to the object's observed points with open3d (point-to-plane, then
point-to-point if that fails), keeping the object upright: the result is projected onto a yaw about the
table normal, and the mesh's bottom stays on the table. Without an initial pose it starts from the points'
principal horizontal axis (PCA) at four yaws 90° apart and keeps the best. A refinement is kept only when it
lowers the RMS distance of the points to the mesh surface. Open3D's registration sums in parallel threads in
no fixed order (two runs differed in the last bits), so it runs on one thread: the same pose every run.

``foundationpose`` runs NVlabs FoundationPose from a local checkout with its weights
(``$SIMPACT_FOUNDATIONPOSE_DIR``) on the frame, the object's mask and the mesh.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import trimesh

from simpact.core.errors import SimpactError

__all__ = [
    "POSE_BACKENDS",
    "PoseError",
    "PoseEstimate",
    "estimate_pose",
    "foundationpose_dir",
    "pose_backend",
    "surface_rmse",
]


class PoseError(SimpactError, ValueError):
    """Pose estimation cannot run (missing package or weights, bad input); the message says which."""


@dataclasses.dataclass(eq=False)
class PoseEstimate:
    T_world_obj: np.ndarray
    """(4, 4) object-to-world transform (m)."""
    rmse_m: float
    """RMS distance of the observed points to the posed mesh surface (m)."""
    source: str


def surface_rmse(mesh: trimesh.Trimesh, T_world_obj: np.ndarray, points_world: np.ndarray) -> float:
    """RMS distance (m) of world points to the surface of ``mesh`` posed at ``T_world_obj``."""
    import open3d as o3d

    local = (np.asarray(points_world) - T_world_obj[:3, 3]) @ T_world_obj[:3, :3]
    scene = o3d.t.geometry.RaycastingScene()
    tensor: Any = o3d.core.Tensor  # its stubs reject numpy arrays, which it accepts
    scene.add_triangles(
        tensor(np.asarray(mesh.vertices, dtype=np.float32)), tensor(np.asarray(mesh.faces, dtype=np.uint32))
    )
    dist = scene.compute_distance(tensor(local.astype(np.float32))).numpy()
    return float(np.sqrt(np.mean(dist.astype(np.float64) ** 2)))


def _upright(T: np.ndarray) -> np.ndarray:
    """Keep only the yaw of ``T``'s rotation."""
    x = T[:3, 0]
    yaw = np.arctan2(x[1], x[0]) if np.hypot(x[0], x[1]) > 1e-6 else np.arctan2(-T[0, 1], T[1, 1])
    c, s = np.cos(yaw), np.sin(yaw)
    out = T.copy()
    out[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    return out


@contextmanager
def _one_thread() -> Iterator[None]:
    """Open3D on a single thread inside this block (its parallel reductions are not reproducible)."""
    import open3d as o3d

    saved = o3d.utility.get_max_threads()
    o3d.utility.set_max_threads(1)
    try:
        yield
    finally:
        o3d.utility.set_max_threads(saved)


def _icp(
    mesh: trimesh.Trimesh,
    points_world: np.ndarray,
    *,
    init: np.ndarray | None = None,
    symmetry: str = "none",
    upright: bool = True,
    max_distance_m: float = 0.02,
    iterations: int = 30,
    samples: int = 4000,
    icp_points: int = 1500,
    seed: int = 0,
    **_unused: Any,
) -> PoseEstimate:
    import open3d as o3d

    pts = np.asarray(points_world, dtype=np.float64)
    rest_z = -float(mesh.bounds[0, 2])  # object-frame origin height when the mesh rests on the table
    if init is not None:
        starts = [np.asarray(init, dtype=np.float64)]
    else:
        xy = pts[:, :2] - pts[:, :2].mean(axis=0)
        _, _, vt = np.linalg.svd(xy, full_matrices=False)
        yaw0 = float(np.arctan2(vt[0, 1], vt[0, 0]))
        n_yaw = 1 if symmetry == "rotational" else (2 if symmetry == "box" else 4)
        starts = []
        for k in range(n_yaw):
            T = np.eye(4)
            c, s = np.cos(yaw0 + k * np.pi / 2), np.sin(yaw0 + k * np.pi / 2)
            T[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
            T[:3, 3] = [*pts[:, :2].mean(axis=0), rest_z if upright else pts[:, 2].mean()]
            starts.append(T)

    sampled, face_idx = trimesh.sample.sample_surface(mesh, samples, seed=seed)
    model = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(sampled)))
    model.normals = o3d.utility.Vector3dVector(np.asarray(mesh.face_normals)[face_idx])
    # Registered from every ``stride``-th point (at most about ``icp_points``); scored on all of them.
    stride = max(1, -(-len(pts) // icp_points))
    observed = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(pts[::stride]))
    criteria = o3d.pipelines.registration.ICPConvergenceCriteria(max_iteration=iterations)

    best: tuple[float, np.ndarray] | None = None
    for T0 in starts:
        candidates = [T0]
        for estimator in (
            o3d.pipelines.registration.TransformationEstimationPointToPlane(),
            o3d.pipelines.registration.TransformationEstimationPointToPoint(),
        ):
            # Register the observed points onto the model (object frame): T maps world -> object.
            with _one_thread():
                result = o3d.pipelines.registration.registration_icp(
                    observed, model, max_distance_m, np.linalg.inv(T0), estimator, criteria
                )
            T = np.linalg.inv(np.asarray(result.transformation))
            if upright:
                T = _upright(T)
                T[2, 3] = rest_z
            candidates.append(T)
        for T in candidates:
            rmse = surface_rmse(mesh, T, pts)
            if best is None or rmse < best[0] - 1e-6:
                best = (rmse, T)
    assert best is not None
    return PoseEstimate(best[1], best[0], "icp")


#: Environment variable naming a local FoundationPose checkout (with its ``weights/`` folder).
FOUNDATIONPOSE_ENV = "SIMPACT_FOUNDATIONPOSE_DIR"
_FP_CACHE: dict[str, Any] = {}


def foundationpose_dir(repo: str | None = None) -> str:
    """The local FoundationPose checkout (``repo``, else ``$SIMPACT_FOUNDATIONPOSE_DIR``) with its weights;
    a :class:`PoseError` naming the setting when it is unset or holds no weights."""
    path = repo or os.environ.get(FOUNDATIONPOSE_ENV)
    if not path:
        raise PoseError(
            f"pose back-end 'foundationpose' needs a FoundationPose checkout: set ${FOUNDATIONPOSE_ENV}"
        )
    weights = os.path.join(path, "weights")
    if not os.path.isdir(weights) or not os.listdir(weights):
        raise PoseError(
            f"pose back-end 'foundationpose': no weights in {weights} (${FOUNDATIONPOSE_ENV}); "
            "put the released refiner and scorer folders there"
        )
    return path


def _foundationpose(
    mesh: trimesh.Trimesh,
    points_world: np.ndarray,
    *,
    frame: Any = None,
    mask: np.ndarray | None = None,
    T_world_cam: np.ndarray | None = None,
    repo: str | None = None,
    iterations: int = 5,
    **_unused: Any,
) -> PoseEstimate:
    path = foundationpose_dir(repo)
    if frame is None or mask is None or T_world_cam is None:
        raise PoseError("pose back-end 'foundationpose' needs the frame, the object's mask and T_world_cam")
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        import nvdiffrast.torch as dr
        from estimater import FoundationPose, PoseRefinePredictor, ScorePredictor
    except ImportError as err:
        raise PoseError(
            f"pose back-end 'foundationpose' needs FoundationPose's estimater (in {path}) "
            f"and nvdiffrast: {err}"
        ) from None
    if "models" not in _FP_CACHE:
        _FP_CACHE["models"] = (ScorePredictor(), PoseRefinePredictor(), dr.RasterizeCudaContext())
    scorer, refiner, glctx = _FP_CACHE["models"]
    est = FoundationPose(
        model_pts=np.asarray(mesh.vertices),
        model_normals=np.asarray(mesh.vertex_normals),
        mesh=mesh,
        scorer=scorer,
        refiner=refiner,
        glctx=glctx,
    )
    T_cam_obj = est.register(
        K=frame.K, rgb=frame.rgb, depth=frame.depth, ob_mask=mask.astype(bool), iteration=iterations
    )
    T = np.asarray(T_world_cam) @ np.asarray(T_cam_obj, dtype=np.float64)
    return PoseEstimate(T, surface_rmse(mesh, T, points_world), "foundationpose")


POSE_BACKENDS: dict[str, Callable[..., PoseEstimate]] = {"icp": _icp, "foundationpose": _foundationpose}


def pose_backend(name: str) -> Callable[..., PoseEstimate]:
    """The pose back-end called ``name``; a :class:`PoseError` naming the known ones if there is none."""
    if name not in POSE_BACKENDS:
        raise PoseError(f"unknown pose back-end {name!r}; expected one of {sorted(POSE_BACKENDS)}")
    return POSE_BACKENDS[name]


def estimate_pose(
    mesh: trimesh.Trimesh, points_world: np.ndarray, backend: str = "icp", **options: Any
) -> PoseEstimate:
    """Pose of ``mesh`` (object frame) that best explains the observed points (N, 3, world frame, m).

    ``icp`` options: ``init`` (4x4 starting pose), ``symmetry``, ``upright`` (default True),
    ``max_distance_m``; ``foundationpose``: ``frame``, ``mask``, ``T_world_cam``, ``repo``.
    """
    estimate = pose_backend(backend)
    pts = np.asarray(points_world, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) < 3:
        raise PoseError(f"pose estimation needs (N >= 3, 3) points, got shape {pts.shape}")
    return estimate(mesh, pts, **options)
