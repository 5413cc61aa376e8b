"""The contract between the composite World (:mod:`solvers.composite`) and a deformable solver (projective
dynamics rope :mod:`solvers.pd`, MPM :mod:`solvers.mpm`), and the grasp rule both solvers share.

Coupling (one-way, from the robot and rigid bodies to the deformables): MuJoCo steps the robot and the rigid
objects; once per control period ``dt`` (the robot's ``control_dt``, 0.01 s) the composite World reads the
colliders from MuJoCo's state at the END of that period and calls ``solver.step(dt, colliders)``. The
deformable never pushes back on MuJoCo (the fingers close through a rope; a pushed carton does not feel the
rope), so the MuJoCo trajectory of a rollout is the same with or without deformables and SimuGuard's MuJoCo
audit applies to it unchanged. A solver substeps inside ``step`` as its stability needs.

Batches: a solver holds ``batch`` independent copies of one deformable object (B >= 1; candidate plans rolled
out together). Every array a solver takes or returns has that leading batch axis; member ``b`` is driven by
member ``b`` of the colliders. ``replicate(B)`` makes a new solver whose B members all start from this
(batch-1) solver's current state, exactly.

Colliders (:class:`Colliders`): the table top, the plane ``z = table_z`` (normal +z) with its friction, and
kinematic oriented boxes: each collidable geom of the hand, the fingers and every rigid object, as its
bounding box in the geom's frame (MuJoCo ``geom_aabb``), with its centre velocity and angular velocity over
the last period. A particle inside a box is pushed out through the nearest face; friction acts on the
particle's velocity relative to the box (Coulomb, coefficient ``friction``).

Grasping (:class:`Grip`, :func:`capture`, :func:`held_positions`), the same in both solvers:

- the grip frame sits midway between the two fingertip pads; its x axis runs from the right pad to the
  left one (the finger axis); ``half`` are the pads' half extents along the frame's y and z axes;
  ``opening`` is the distance between the pads' inner faces, m;
- at the first step where ``opening <= capture_width`` (the solver's thickness at the pads: a rope's
  diameter; for MPM a parameter, default two grid cells) the particles inside the grip region -- ``|x| <=
  opening / 2 + radius``, ``|y| <= half[0] + radius``, ``|z| <= half[1] + radius`` in the grip frame,
  ``radius`` the particle radius -- are captured, and their grip-frame coordinates are frozen;
- while ``opening <= capture_width`` captured particles follow the grip frame rigidly (a hard constraint
  at :func:`held_positions`; their x coordinate is clamped into the opening, so closing further squeezes
  them to the middle); no new particles are captured;
- when ``opening > capture_width`` they are released (with the velocity they had while held).

A solver's ``snapshot()`` holds everything that defines its future (positions, velocities, the held set
and its grip coordinates, any plastic state): ``restore(snapshot)`` then stepping reproduces the same
floats bit for bit. Stepping is deterministic on the CPU (same inputs, same floats).

Units: metres, seconds, kilograms; world frame = robot base frame, z up, z = 0 on the table.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from simpact.core.scene import Scene, SceneError, SceneObject

__all__ = [
    "SOLVERS",
    "Colliders",
    "DeformableSolver",
    "Grip",
    "build_solver",
    "capture",
    "check_ranges",
    "update_grasp",
    "held_positions",
    "point_velocity",
]


@dataclass(frozen=True)
class Grip:
    """The gripper's grasp region, batched over B members (see the module docstring).

    ``centre`` (B, 3) m, ``rotation`` (B, 3, 3) world-from-grip (column 0: the finger axis), ``half`` (2,) m,
    ``opening`` (B,) m, ``velocity`` (B, 3) m/s and ``angular_velocity`` (B, 3) rad/s of the frame."""

    centre: np.ndarray
    rotation: np.ndarray
    half: np.ndarray
    opening: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray

    def to_local(self, points: np.ndarray) -> np.ndarray:
        """World points (B, N, 3) in each member's grip frame."""
        return np.einsum("bij,bni->bnj", self.rotation, points - self.centre[:, None, :])

    def to_world(self, local: np.ndarray) -> np.ndarray:
        """Grip-frame points (B, N, 3) in the world."""
        return np.einsum("bij,bnj->bni", self.rotation, local) + self.centre[:, None, :]


@dataclass(frozen=True)
class Colliders:
    """What a deformable collides with during one control period, batched over B members.

    ``table_z`` m and ``table_friction``; K oriented boxes: ``centre`` (B, K, 3) m, ``rotation`` (B, K, 3, 3)
    world-from-box, ``half`` (K, 3) half extents m, ``velocity`` (B, K, 3) m/s of the centre,
    ``angular_velocity`` (B, K, 3) rad/s, ``friction`` (K,), ``owner`` (K,) names ("left_finger",
    "right_finger", "hand", or the rigid object's name); ``grip`` the grasp region."""

    table_z: float
    table_friction: float
    centre: np.ndarray
    rotation: np.ndarray
    half: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray
    friction: np.ndarray
    owner: tuple[str, ...]
    grip: Grip

    @property
    def batch(self) -> int:
        return int(self.grip.centre.shape[0])


@runtime_checkable
class DeformableSolver(Protocol):
    """One deformable scene object, B copies of it, stepped alongside MuJoCo (see the module docstring)."""

    name: str
    """The scene object's name."""
    radius: float
    """Particle radius, m (contact, grasp capture, rendering)."""
    capture_width: float
    """The grasp closes on the object when the pads' opening falls to this, m."""

    @property
    def batch(self) -> int:
        """B, the number of copies."""

    def step(self, dt: float, colliders: Colliders) -> None:
        """Advance every member by ``dt`` s against ``colliders`` (their state at the end of the period)."""

    def positions(self) -> np.ndarray:
        """Particle positions (B, N, 3), m, float64 (a copy)."""

    def snapshot(self) -> Any:
        """The exact state of every member (a value the caller may keep; later steps do not change it)."""

    def restore(self, snapshot: Any) -> None:
        """Put every member back into ``snapshot`` exactly (same batch size)."""

    def replicate(self, batch: int) -> DeformableSolver:
        """A new solver of ``batch`` members, each exactly this batch-1 solver's current state."""


SolverFactory = Callable[[SceneObject, Scene], DeformableSolver]

SOLVERS: dict[str, str] = {
    "pd": "solvers.pd:pd_solver",
    "mpm": "solvers.mpm.solver:mpm_solver",
}
"""Object kind -> ``module:function`` building its solver (batch 1) from the object and its scene; imported
when a scene needs it (torch and warp stay unimported otherwise)."""


def build_solver(obj: SceneObject, scene: Scene) -> DeformableSolver:
    """The deformable solver of ``obj`` (kind ``pd`` or ``mpm``), batch 1, at rest where the scene puts it."""
    target = SOLVERS.get(obj.kind)
    if target is None:
        raise SceneError(f"object '{obj.name}': no deformable solver for kind {obj.kind!r}")
    module_name, _, function = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise SceneError(
            f"object '{obj.name}' (kind {obj.kind}) needs {missing}: pip install -e '.[deformable]'"
        ) from None
    factory: SolverFactory = getattr(module, function)
    return factory(obj, scene)


def capture(points: np.ndarray, grip: Grip, radius: float) -> np.ndarray:
    """Which particles (B, N) lie in the grip region (module docstring) of each member, a bool mask."""
    local = grip.to_local(points)
    half_x = grip.opening[:, None] / 2 + radius
    return (
        (np.abs(local[..., 0]) <= half_x)
        & (np.abs(local[..., 1]) <= grip.half[0] + radius)
        & (np.abs(local[..., 2]) <= grip.half[1] + radius)
    )


def held_positions(local: np.ndarray, grip: Grip) -> np.ndarray:
    """World positions (B, N, 3) of held particles whose frozen grip-frame coordinates are ``local``
    (B, N, 3): x clamped into the opening (squeezed to the middle as the pads close)."""
    half_x = grip.opening[:, None] / 2
    squeezed = local.copy()
    squeezed[..., 0] = np.clip(local[..., 0], -half_x, half_x)
    return grip.to_world(squeezed)


def point_velocity(points: np.ndarray, grip: Grip) -> np.ndarray:
    """Velocity (B, N, 3) m/s of the grip frame at world ``points`` (B, N, 3) (release velocity)."""
    arm = points - grip.centre[:, None, :]
    return grip.velocity[:, None, :] + np.cross(grip.angular_velocity[:, None, :], arm)


def update_grasp(
    points: np.ndarray,
    grip: Grip,
    radius: float,
    capture_width: float,
    held: np.ndarray,
    local: np.ndarray,
    was_closed: np.ndarray,
) -> np.ndarray:
    """One step of the grasp rule's bookkeeping (module docstring) for particles ``points`` (B, N, 3): at the
    first step the pads are closed to ``capture_width`` the particles between them are captured (``held``
    (B, N) and their grip coordinates ``local`` (B, N, 3), updated in place); opening releases them.
    Returns whether each member's grip is closed (B,)."""
    closed = grip.opening <= capture_width
    fresh = closed & ~was_closed
    if fresh.any():
        held[fresh] = capture(points, grip, radius)[fresh]
        local[fresh] = grip.to_local(points)[fresh]
    held[~closed] = False
    return np.asarray(closed)


@contextlib.contextmanager
def torch_solver_mode() -> Iterator[None]:
    """Torch as the projective-dynamics solvers run it, inside the block (restored after; nothing when torch
    is not imported): on one intra-op thread (their small products gain nothing from threads, and their
    floats then do not depend on the core count) and in inference mode (no autograd bookkeeping per
    operation: a hanging rope's step, bound by per-operation overhead, took 22 % less; the same floats). Each
    solver's step holds it; a loop of steps holding it once costs less (switching the thread count back and
    forth cost a hanging rope's step about 50 us here, 20 %). Tensors made inside are inference tensors:
    outside the block they may be read, not changed in place."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    if threads != 1:
        torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            yield
    finally:
        if threads != 1:
            torch.set_num_threads(threads)


def check_ranges(what: str, params: Any, checks: dict[str, bool]) -> None:
    """Raise one :class:`SceneError` naming every parameter of ``params`` whose check failed or that is not
    finite (``what``: e.g. ``rope``)."""
    bad = [k for k, ok in checks.items() if not ok or not math.isfinite(float(getattr(params, k)))]
    if bad:
        listed = ", ".join(f"{k}={getattr(params, k)}" for k in bad)
        raise SceneError(f"{what} parameters out of range: {listed}")
