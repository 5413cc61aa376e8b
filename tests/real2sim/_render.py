"""Rendered task frames with known ground truth, shared by the perception tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from simpact.core.frame import Frame


def render_task(name: str, seed: int = 0) -> tuple[Frame, Any]:
    """The task's scene and its rendered frame (ground-truth masks and T_base_cam)."""
    from simpact.tasks import load_task
    from solvers.mujoco.playback import render_frame
    from solvers.mujoco.render import CameraSpec
    from solvers.mujoco.world import MujocoWorld

    task = load_task(name)
    scene = task.scene(seed)
    raw = task.raw.get("camera")
    world = MujocoWorld(scene, camera=None if raw is None else CameraSpec.from_dict(raw))
    return render_frame(world), scene


def render_objects(objects: tuple[Any, ...], camera: Any = None) -> Frame:
    """The frame of ``objects`` (scene objects) alone on a task's table, robot and all, rendered from
    ``camera`` (a :class:`solvers.mujoco.render.CameraSpec`; default: the default camera)."""
    import dataclasses

    from simpact.tasks import load_task
    from solvers.mujoco.playback import render_frame
    from solvers.mujoco.world import MujocoWorld

    scene = dataclasses.replace(load_task("bowl_stacking").scene(0), objects=objects)
    return render_frame(MujocoWorld(scene, camera=camera))


def ground_truth(obj: Any) -> tuple[np.ndarray, np.ndarray]:
    """World bounding-box centre (m) and (sorted x/y, z) extents (m) of an upright scene object."""
    p, s = np.array(obj.position, float), obj.size
    if obj.shape == "box":
        return p, np.r_[np.sort(s[:2]), s[2]]
    if obj.shape == "cylinder":
        return p, np.array([2 * s[0], 2 * s[0], s[1]])
    assert obj.shape == "bowl", obj.shape  # its base is at the body origin
    return p + [0.0, 0.0, s[1] / 2], np.array([2 * s[0], 2 * s[0], s[1]])


def without_calibration(frame: Frame) -> Frame:
    """The same frame with no T_base_cam."""
    return Frame(frame.rgb, frame.depth, frame.K, None, frame.masks, dict(frame.mask_names))


def plus_outline(arm: float, width: float) -> np.ndarray:
    """A plus sign's outline (12 x 2, counter-clockwise, m): arms ``arm`` long end to end, ``width`` wide."""
    a, b = arm / 2, width / 2
    quarter = np.array([(-b, -a), (b, -a), (b, -b)])  # an arm's end and the corner after it
    turn = np.array([[0.0, 1.0], [-1.0, 0.0]])  # a quarter turn counter-clockwise (row vectors)
    return np.vstack([quarter @ np.linalg.matrix_power(turn, k) for k in range(4)])


def seen_on_table(
    obj: Any, T_world_cam: np.ndarray, K: np.ndarray, h: int, w: int
) -> tuple[Any, np.ndarray, np.ndarray]:
    """The frame (``K`` and depth only) of the trimesh ``obj`` on a table seen from ``T_world_cam``, its mask
    and its points in the world (m)."""
    import types

    import trimesh

    from real2sim.fitscore import render_depth

    table = trimesh.creation.box((1.5, 1.5, 0.01))
    table.apply_translation((0, 0, -0.005))
    meshes = [(np.asarray(m.vertices), np.asarray(m.faces)) for m in (obj, table)]
    depth, index, _ = render_depth(meshes, T_world_cam, K, h, w)
    mask = index == 0
    v, u = np.nonzero(mask)
    cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones(len(u))], 1) * depth[v, u, None]
    points = cam @ T_world_cam[:3, :3].T + T_world_cam[:3, 3]
    return types.SimpleNamespace(K=K, depth=depth.astype(np.float32)), mask, points


def best_region_iou(task: str, seed: int, name: str, noise: Any = None) -> float:
    """The best IoU of any region :func:`real2sim.regions.find_clusters` finds on the task scene's rendered
    frame (through ``noise``, a :class:`simpact.bench.sensor_noise.SensorNoise` or True for the default
    camera model, when given) with object ``name``'s true mask."""
    from real2sim.regions import find_clusters
    from real2sim.table import fit_table
    from simpact.bench.sensor_noise import SensorNoise, add_sensor_noise
    from simpact.tasks import load_task
    from solvers.world import make_world

    frame = make_world(load_task(task).scene(seed)).render()
    truth = frame.masks == {n: i for i, n in frame.mask_names.items()}[name]
    if noise is not None:
        frame = add_sensor_noise(frame, seed, SensorNoise() if noise is True else noise)
    clusters = find_clusters(frame, fit_table(frame))
    return max((int((c.mask & truth).sum()) / int((c.mask | truth).sum()) for c in clusters), default=0.0)
