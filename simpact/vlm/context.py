"""What a VLM is told about a scene and a rollout (paper §3.2, Supp. A.2), as compact JSON-ready values built
from the core's types alone, so the planner and the robot's judge describe the world the same way.

- :func:`scene_context`: robot proprioception (tool xyz, roll/pitch/yaw, gripper width) and, per object, its
  6-DoF pose and bounding-box dimensions, in the robot base frame (metres, radians); for a scene real2sim
  built from a photo, the objects whose fit to the photo is ``poor`` or ``check`` (:func:`real2sim_warnings`).
- :func:`state_context`: one instant's tool pose, gripper width and object poses.
- :func:`rollout_context`: one rollout as the plan, the state at the end of every action (tool pose,
  objects' 6-DoF poses), the final state after settling, its score and any SimuGuard flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simpact.core.rollout import ObjectState, RobotState, Rollout, WorldState
from simpact.core.rotations import quat_to_rpy
from simpact.core.scene import Scene, SceneObject

__all__ = ["bbox_size", "real2sim_warnings", "rollout_context", "scene_context", "state_context"]

_DIGITS = 4


def _r(values: Any) -> list[float]:
    return [round(float(v), _DIGITS) for v in np.asarray(values, dtype=float).ravel()]


def bbox_size(obj: SceneObject) -> list[float] | None:
    """Axis-aligned bounding-box edge lengths (x, y, z) in the object's own frame, m; None for meshes (their
    ``size`` is a scale)."""
    s = obj.size
    if obj.shape == "box":
        return _r(s)
    if obj.shape == "cylinder":
        return _r([2 * s[0], 2 * s[0], s[1]])
    if obj.shape == "sphere":
        return _r([2 * s[0]] * 3)
    if obj.shape == "bowl":
        return _r([2 * s[0], 2 * s[0], s[1]])
    return None


def _robot(robot: RobotState) -> dict[str, Any]:
    return {
        "ee_xyz": _r(robot.tcp_position),
        "ee_rpy": _r(robot.tcp_rpy),
        "gripper_width": round(float(robot.gripper_width), _DIGITS),
    }


def _object(state: ObjectState) -> dict[str, Any]:
    return {"xyz": _r(state.position), "rpy": _r(quat_to_rpy(state.quaternion))}


def state_context(state: WorldState) -> dict[str, Any]:
    """One instant: tool pose and gripper width, every object's 6-DoF pose (xyz m, rpy rad), and each
    deformable's voxel-downsampled keypoints and bounding box (m)."""
    out = {
        "t": round(state.time, 3),
        "robot": _robot(state.robot),
        "objects": {k: _object(v) for k, v in state.objects.items()},
    }
    if state.deformables:
        out["deformables"] = {k: v.to_dict() for k, v in state.deformables.items()}
    return out


def real2sim_warnings(scene: Scene) -> list[dict[str, Any]]:
    """The fit warnings a scene built from a photo carries (``real2sim.task_scene.FrameScene``: per object
    whose fit verdict is ``poor`` or ``check``, ``object``, ``verdict``, ``iou``, ``depth_residual_mm``,
    ``message``); none for any other scene."""
    return [dict(w) for w in getattr(scene, "real2sim_warnings", ())]


def scene_context(scene: Scene, initial: WorldState) -> dict[str, Any]:
    """The scene before any action: the robot's proprioception and, per object, pose, bounding box, shape and
    whether it is fixed. ``initial`` is the settled state the plans start from (poses come from it; objects
    absent from it keep their scene pose). A scene real2sim built from a photo adds, per object it fitted
    poorly or roughly, ``real2sim_fit`` (the verdict) and a top-level ``real2sim_warnings`` list saying that
    the object's simulated size or pose may be off."""
    warnings = real2sim_warnings(scene)
    fit = {w["object"]: w["verdict"] for w in warnings}
    objects: dict[str, Any] = {}
    for obj in scene.objects:
        state = initial.objects.get(obj.name)
        pose = (
            _object(state)
            if state is not None
            else {"xyz": _r(obj.position), "rpy": _r(quat_to_rpy(np.asarray(obj.quaternion)))}
        )
        entry: dict[str, Any] = {**pose, "shape": obj.shape, "bbox_size": bbox_size(obj)}
        if obj.shape == "mesh":
            entry["scale"] = _r(obj.size)
        if obj.fixed:
            entry["fixed"] = True
        if not obj.collides:
            entry["marker"] = True
        if obj.name in initial.deformables:
            entry.update(kind=obj.kind, **initial.deformables[obj.name].to_dict())
        if obj.name in fit:
            entry["real2sim_fit"] = fit[obj.name]
        objects[obj.name] = entry
    out: dict[str, Any] = {"robot": _robot(initial.robot), "objects": objects}
    if warnings:
        out["real2sim_warnings"] = [w["message"] for w in warnings]
    return out


def rollout_context(
    rollout: Rollout,
    *,
    score: float | None = None,
    flags: Sequence[str] = (),
    label: str | None = None,
) -> dict[str, Any]:
    """One rollout: each action with the state at its end, the settled final state, ``score``, ``flags``."""
    steps = []
    for action, state in zip(rollout.plan.actions, rollout.states):
        step = {"action": action.to_dict(), "end_state": state_context(state)}
        step["action"].pop("reason", None)
        steps.append(step)
    out: dict[str, Any] = {}
    if label is not None:
        out["plan"] = label
    out["steps"] = steps
    out["final_state"] = state_context(rollout.final)
    if score is not None:
        out["score"] = round(float(score), 3)
    if flags:
        out["flags"] = list(flags)
    return out
