"""The ``World`` protocol every solver implements, and :func:`make_world`, which picks the implementation from
a scene's object kinds.

Layers above the solvers (SimuGuard, the planner, real2sim, the robot loop, the benches) use a World only
through this protocol, so a new solver (rope: projective dynamics in PyTorch; MPM on Warp) is added by
implementing it, without touching the planner. An engine's own objects are offered to auditing through one
documented accessor per engine (MuJoCo: :meth:`solvers.mujoco.world.MujocoWorld.mujoco`, or
:func:`solvers.mujoco.world.mujoco_access` for a value typed ``World``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from simpact.core.actions import Plan, StartPose
from simpact.core.frame import Frame
from simpact.core.rollout import Rollout, Trace, WorldState
from simpact.core.scene import Scene
from solvers.composite import CompositeWorld
from solvers.mujoco.world import MujocoWorld

__all__ = ["World", "make_world"]


@runtime_checkable
class World(Protocol):
    """A scene in a simulator with the robot, ready for rollouts from its initial (settled) snapshot.

    Frames and units: world = robot base frame, metres, seconds, radians; quaternions (w, x, y, z).
    Snapshots are opaque to the caller (each engine has its own).
    """

    scene: Scene
    """The scene the world was built from."""
    initial_snapshot: Any
    """The settled state every rollout starts from by default (the state-locked branching point)."""

    def snapshot(self) -> Any:
        """The world's exact state now, restorable bit for bit."""

    def restore(self, snapshot: Any) -> None:
        """Put the world back into ``snapshot`` exactly."""

    def state(self) -> WorldState:
        """The planner's view of the world now: tool pose, gripper opening, every object's pose."""

    def start_pose(self, snapshot: Any = None) -> StartPose:
        """Where a plan from ``snapshot`` (default: the initial one) begins: the commanded tool pose and
        gripper opening."""

    def rollouts(self, plans: Sequence[Plan], *, snapshot: Any = None, tail_s: float = 0.0) -> list[Rollout]:
        """Roll every plan out from ``snapshot`` (default: the initial one), each then held still for
        ``tail_s`` s; deterministic (parallel or not), and the world's own state is left untouched."""

    def rollout(self, plan: Plan, *, snapshot: Any = None, tail_s: float = 0.0) -> Rollout:
        """``rollouts([plan], snapshot=snapshot, tail_s=tail_s)[0]``."""

    def render(self, camera: Any = None) -> Frame:
        """An RGB-D frame (with object masks) of the world now, from ``camera`` (default: the world's)."""

    def render_trace(self, trace: Trace, row: int = -1) -> Frame:
        """An RGB-D frame (with object masks) of a rollout's recorded state at ``row`` of its trace."""

    def write_video(self, trace: Trace, path: str | Path, *, fps: float = 20.0) -> Path:
        """An mp4 of a rollout's trace at ``path``, ``fps`` frames per second of simulated time."""


def make_world(scene: Scene, **options: Any) -> World:
    """The World for ``scene``: MuJoCo when every object is rigid; with ``pd`` or ``mpm`` objects the
    composite World (:class:`solvers.composite.CompositeWorld`: MuJoCo and the deformable solvers in
    lockstep). ``options`` go to the MuJoCo World (``options``, ``limits``, ``camera``). Raises
    :class:`SceneError` when a deformable's solver cannot be built (e.g. its package is missing)."""
    if any(o.kind != "rigid" for o in scene.objects):
        return CompositeWorld(scene, **options)
    return MujocoWorld(scene, **options)
