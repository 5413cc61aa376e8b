"""Images of a MuJoCo world and videos of its rollouts (kept for callers that hold a :class:`MujocoWorld`;
layers above the solvers call the World's own ``render()`` / ``render_trace()`` / ``write_video()``)."""

from __future__ import annotations

from pathlib import Path

import mujoco

from simpact.core.frame import Frame
from simpact.core.rollout import Trace
from solvers.mujoco.world import MujocoWorld

__all__ = ["render_frame", "write_rollout_video"]


def render_frame(world: MujocoWorld, data: mujoco.MjData | None = None) -> Frame:
    """RGB, metric depth and per-object masks (ids 1.. in scene order) of ``data`` (default: the world's)."""
    return world.render() if data is None else world.mujoco().render(data)


def write_rollout_video(world: MujocoWorld, trace: Trace, path: str | Path, fps: float = 20.0) -> Path:
    """An mp4 of the rollout at ``fps`` frames per second of simulated time."""
    return world.write_video(trace, path, fps=fps)
