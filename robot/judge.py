"""Judging an execution from what the camera saw: real2sim's scenes before and after become a two-sample
rollout that the task's own check can score (boxes' axes matched through their symmetries), or a VLM's
TaskSuccess on the same outcome with the two frames."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np

from simpact.core.rollout import DeformableState, ObjectState, RobotState, Rollout, Trace, WorldState
from simpact.core.rotations import matrix_to_quat, quat_to_matrix
from simpact.vlm import VLM
from simpact.vlm.answers import evaluation_schema, parse_evaluation
from simpact.vlm.ask import ask
from simpact.vlm.context import scene_context
from simpact.vlm.prompts import render_prompt

__all__ = ["align_orientation", "observed_rollout", "vlm_judge"]


def _signed_permutations() -> list[np.ndarray]:
    """The 24 rotations that map the coordinate axes onto themselves."""
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            P = np.zeros((3, 3))
            for row, (col, sign) in enumerate(zip(perm, signs)):
                P[row, col] = sign
            if np.linalg.det(P) > 0:
                out.append(P)
    return out


def align_orientation(
    q_before: np.ndarray, size_before: np.ndarray, q_after: np.ndarray, size_after: np.ndarray
) -> np.ndarray:
    """The after-orientation of an object expressed in the body axes it had before.

    real2sim gives each frame's object an oriented bounding box whose axes are only known up to the box's
    symmetries (a carton lying down is an upright box with other extents). Among the 24 relabellings of the
    after-box's axes, keep those whose extents match the before-box's axis for axis (within 1.5 cm of the
    best match), and of these the one closest to the before-orientation."""
    R_before, R_after = quat_to_matrix(q_before), quat_to_matrix(q_after)
    size_before, size_after = np.asarray(size_before, float), np.asarray(size_after, float)
    scored = []
    for P in _signed_permutations():
        mismatch = float(np.abs(np.abs(P) @ size_before - size_after).max())
        R = R_after @ P
        angle = math.acos(float(np.clip((np.trace(R_before.T @ R) - 1.0) / 2.0, -1.0, 1.0)))
        scored.append((mismatch, angle, R))
    best = min(m for m, _, _ in scored)
    _, _, R = min((s for s in scored if s[0] <= best + 0.015), key=lambda s: s[1])
    return matrix_to_quat(R)


def _particles(obj: Any) -> DeformableState:
    """A deformable scene object's particles (its ``particles`` file, (N, 3) m)."""
    if not obj.particles:
        raise ValueError(f"object '{obj.name}' is deformable but has no particles file to judge it by")
    return DeformableState(np.asarray(np.load(obj.particles), dtype=np.float64))


def observed_rollout(
    plan: Any,
    before: Any,
    after: Any,
    robot_before: tuple[np.ndarray, np.ndarray, float],
    robot_after: tuple[np.ndarray, np.ndarray, float],
    duration_s: float,
) -> Any:
    """A :class:`simpact.core.rollout.Rollout` of what the camera saw: the objects of scene ``before`` and of
    scene ``after`` (real2sim's, with the task's names) as a trace of two samples ``duration_s`` apart,
    deformables as their particles in the two states, the robot's measured tool poses (position m,
    quaternion, gripper width m), no contacts. Objects missing
    from ``after`` (markers, fixtures) keep their ``before`` pose; after-orientations are expressed in the
    before-boxes' axes (:func:`align_orientation`)."""
    found = {o.name: o for o in after.objects}
    zero = np.zeros(3)
    objects_before: dict[str, Any] = {}
    objects_after: dict[str, Any] = {}
    qpos_before: list[float] = []
    qpos_after: list[float] = []
    address: dict[str, int] = {}
    deformables_before: dict[str, DeformableState] = {}
    deformables_after: dict[str, DeformableState] = {}
    for obj in before.objects:
        if obj.kind != "rigid":  # seen as its particles (real2sim's fill of what the camera saw)
            deformables_before[obj.name] = _particles(obj)
            deformables_after[obj.name] = _particles(found.get(obj.name, obj))
            continue
        p0, q0 = np.asarray(obj.position, float), np.asarray(obj.quaternion, float)
        if obj.name in found:
            o = found[obj.name]
            p1 = np.asarray(o.position, float)
            q1 = align_orientation(
                q0, np.asarray(obj.size), np.asarray(o.quaternion, float), np.asarray(o.size)
            )
        else:
            p1, q1 = p0, q0
        objects_before[obj.name] = ObjectState(p0, q0, zero, zero)
        objects_after[obj.name] = ObjectState(p1, q1, zero, zero)
        address[obj.name] = 7 * len(address)
        qpos_before += [*p0, *q0]
        qpos_after += [*p1, *q1]

    def robot_state(measured: tuple[np.ndarray, np.ndarray, float]) -> Any:
        return RobotState(np.asarray(measured[0], float), np.asarray(measured[1], float), float(measured[2]))

    initial = WorldState(0.0, robot_state(robot_before), objects_before, deformables=deformables_before)
    final = WorldState(
        float(duration_s), robot_state(robot_after), objects_after, deformables=deformables_after
    )
    trace = Trace(
        time=np.array([0.0, float(duration_s)]),
        qpos=np.array([qpos_before, qpos_after]),
        qvel=np.zeros((2, 0)),
        ctrl=np.zeros((2, 0)),
        tcp_position=np.array([robot_before[0], robot_after[0]], dtype=float),
        tcp_quaternion=np.array([robot_before[1], robot_after[1]], dtype=float),
        gripper_width=np.array([robot_before[2], robot_after[2]], dtype=float),
        object_qpos=address,
    )
    return Rollout(plan, initial, [], final, trace, [], 0.0, 2, 0.0)


def vlm_judge(
    vlm: VLM, instruction: str, before: Any, world: Any, observed: Any, images: list[np.ndarray]
) -> dict[str, Any]:
    """The VLM's TaskSuccess on the observed outcome, with one repair round; never raises on an answer."""
    outcome = {
        "note": (
            "executed on the real robot, not simulated: the poses are what real2sim measured from the "
            "camera frames before and after; the two images are those frames"
        ),
        "plan": [str(a) for a in observed.plan.actions],
        "initial": observed.initial.to_dict()["objects"],
        "final": observed.final.to_dict()["objects"],
    }
    context = json.dumps(scene_context(before, world.state()), separators=(",", ":"))
    prompt = render_prompt(
        "evaluate", task=instruction, context=context, rollout=json.dumps(outcome, separators=(",", ":"))
    )
    asked = ask(
        vlm,
        [*images, prompt],
        evaluation_schema(),
        parse_evaluation,
        role="judge",
        temperature=0.0,
        echo=lambda text: [text],
    )
    # A failed request is recorded with the judge's prompt.
    exchanges = [
        {**e.summary(), "prompt": prompt if e.error is not None else e.prompt, "error": e.error}
        for e in asked.exchanges
    ]
    if asked.error is not None:
        return {"success": None, "reason": f"VLM error: {asked.error}", "exchanges": exchanges}
    verdict = asked.result
    if verdict is not None:
        return {"success": bool(verdict.success), "reason": verdict.reason, "exchanges": exchanges}
    return {"success": None, "reason": f"no usable verdict: {asked.verdicts[-1]}", "exchanges": exchanges}
