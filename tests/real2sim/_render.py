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
