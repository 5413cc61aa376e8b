"""Images of a World and videos of its rollouts, rendered offscreen from the world's camera."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from simpact.core.frame import Frame
from simpact.core.rollout import Trace
from solvers.mujoco.render import Renderer, VideoWriter, object_masks
from solvers.mujoco.world import VIDEO_CAMERA, MujocoWorld

__all__ = ["render_frame", "write_rollout_video"]


def render_frame(world: MujocoWorld, data: mujoco.MjData | None = None) -> Frame:
    """RGB, metric depth and per-object masks (ids 1.. in scene order) of ``data`` (default: the world's)."""
    data = world.data if data is None else data
    mujoco.mj_forward(world.model, data)
    ids = {name: i + 1 for i, name in enumerate(world.objects)}
    with Renderer(world.model, camera=world.camera) as renderer:
        view = renderer.render(data)
    masks = object_masks(view.segmentation, world.model, {world.objects[n]: i for n, i in ids.items()})
    return view.to_frame(masks, {i: n for n, i in ids.items()})


def write_rollout_video(world: MujocoWorld, trace: Trace, path: str | Path, fps: float = 20.0) -> Path:
    """An mp4 of the rollout at ``fps`` frames per second of simulated time."""
    data = mujoco.MjData(world.model)
    times = np.arange(trace.time[0], trace.time[-1] + 1e-9, 1.0 / fps)
    rows = np.minimum(np.searchsorted(trace.time, times), len(trace) - 1)
    with (
        Renderer(world.model, "simpact_video", VIDEO_CAMERA) as renderer,
        VideoWriter(path, fps=fps) as video,
    ):
        for row in rows:
            data.qpos[:] = trace.qpos[row]
            mujoco.mj_kinematics(world.model, data)
            mujoco.mj_camlight(world.model, data)
            video.append(renderer.render_rgb(data, shadows=False))
    return Path(path)
