"""The scene a task plans on when it starts from a real RGB-D frame (``simpact plan --frame``, robot loop)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from real2sim.datasets import read_any_frame
from real2sim.fitscore import IMAGE_EDGE_MIN_PX
from real2sim.pipeline import Real2SimError, run_real2sim
from simpact.core.errors import SimpactError
from simpact.core.rotations import matrix_to_quat, quat_to_matrix
from simpact.core.scene import Scene, SceneObject
from simpact.tasks import Task
from simpact.vlm import VLM

__all__ = ["FrameScene", "fit_warnings_for", "task_scene_from_frame"]

#: Fit verdicts passed on to the planner and the VLM (``good`` is not).
WARN_VERDICTS = ("poor", "check")


@dataclass(frozen=True)
class FrameScene(Scene):
    """A task scene real2sim built from a photo, with what its fit score says about it: one entry per scene
    object whose fit verdict is ``poor`` or ``check`` (:func:`fit_warnings_for`). The planner lists them in
    ``result.json`` (``real2sim_warnings``) and the VLM reads them beside the scene
    (:func:`simpact.vlm.context.scene_context`)."""

    real2sim_warnings: tuple[Mapping[str, Any], ...] = field(default=(), hash=False, compare=False)


def fit_warnings_for(fit: Mapping[str, Any], names: list[str] | tuple[str, ...]) -> list[dict[str, Any]]:
    """The fit warnings of the objects ``names`` from real2sim's ``fit`` (``result.fit``): per object whose
    verdict is ``poor`` or ``check``, or that did not rest where it was fitted in the settle run
    (``shifted_in_settle``), its name, verdict, silhouette IoU, median depth residual (mm, None without
    depth) and a sentence saying what may be wrong; poor fits first."""
    out = []
    scores = fit.get("objects", {})
    for name in names:
        s = scores.get(name)
        if s is None or (s.get("verdict") not in WARN_VERDICTS and "shifted_in_settle" not in s):
            continue
        res = s.get("depth_residual_m")
        res_mm = None if res is None else round(1000 * float(res), 1)
        iou = round(float(s.get("iou", 0.0)), 3)
        out.append(
            {
                "object": name,
                "verdict": s.get("verdict"),
                "iou": iou,
                "depth_residual_mm": res_mm,
                "message": _fit_message(name, s, iou, res_mm),
            }
        )
    order = (*WARN_VERDICTS, "good")
    return sorted(out, key=lambda w: order.index(w["verdict"]) if w["verdict"] in order else len(order))


def _fit_message(name: str, s: Mapping[str, Any], iou: float, res_mm: float | None) -> str:
    """What may be wrong with the simulated object ``name`` whose fit score is ``s``."""
    res_txt = "no depth under it" if res_mm is None else f"median depth residual {res_mm} mm"
    if res_mm is not None and s.get("table_nearby_residual_m") is not None:
        res_txt += f", the table's beside it {1000 * float(s['table_nearby_residual_m']):.1f} mm"
    if s.get("note"):  # fitted to its silhouette: no depth measured on it (glass)
        res_txt = str(s["note"])
    if s.get("image_edge_px", 0) >= IMAGE_EDGE_MIN_PX:
        res_txt += "; it runs off the photo's edge, so its part outside the photo is a guess"
    how = {"poor": "poorly", "check": "only roughly"}.get(s.get("verdict", ""), "well")
    text = f"the simulated '{name}' matches the photo {how} (silhouette IoU {iou:.2f}, {res_txt})"
    if s.get("verdict") in WARN_VERDICTS:
        text += ": its size or pose may be off"
    shifted = s.get("shifted_in_settle")
    if shifted:
        text += (
            f"{';' if s.get('verdict') in WARN_VERDICTS else ', but'} it does not rest where it was fitted: "
            f"left alone in simulation it moved {100 * shifted['moved_m']:.1f} cm and turned "
            f"{shifted['turned_deg']:.0f}° (it tipped, rolled or was pushed by a neighbour)"
        )
    return text


def task_scene_from_frame(
    task: Task, frame_path: str | Path, out: str | Path, vlm: VLM | None = None
) -> FrameScene:
    """The scene ``task`` plans on when it starts from a real frame: real2sim on the frame with the task's
    object names as labels (written under ``out``; errors are ``Real2SimError``), plus what a frame cannot
    show: the task's markers (non-colliding target regions), its robot start and table friction, and each
    object's mass and friction where no VLM or user gave them (:func:`_unseen_physics`). The result is a
    :class:`FrameScene`: it carries the fit warnings of the objects it holds.

    Objects the task fixes (a wall) stay fixed where they were found. A task's plans and success check read
    its objects' sizes and origins in the terms of their shapes (a bowl's ``size`` is rim radius, height and
    wall; its origin is its base), so an object the task gives a primitive shape is simulated as that
    primitive with the pose and dimensions real2sim measured (its reconstructed mesh stays in ``out``); an
    object the task gives as a mesh keeps the reconstruction. A movable task object that is not found is an
    error naming it.
    """
    try:
        frame = read_any_frame(frame_path)
        result = run_real2sim(frame, task=task, vlm=vlm, out=out)
    except SimpactError as exc:
        raise Real2SimError(f"--frame {frame_path}: {exc}") from None
    for name, score in result.fit.get("objects", {}).items():
        if score.get("verdict") == "poor":  # passed on: the plan is made on a scene that may be wrong here
            print(
                f"simpact plan: warning: real2sim fit of '{name}' is poor (IoU {score.get('iou', 0.0):.2f}); "
                f"see {Path(out) / 'overlay.png'}",
                file=sys.stderr,
            )
    nominal = task.nominal_scene
    found = {o.name: o for o in result.scene.objects}
    source = {n: n for n in found}  # task name -> the real2sim object that is it
    if result.frame_info.get("world_frame") == "T_base_cam":
        source = _look_alikes_by_place(found, nominal)
        found = {n: replace(found[m], name=n) for n, m in source.items()}
    missing = [o.name for o in nominal.objects if o.collides and not o.fixed and o.name not in found]
    if missing:
        raise Real2SimError(
            f"task {task.name}: real2sim did not find {missing} in {frame_path} as rigid objects "
            f"(found {sorted(found)}; see {Path(out) / 'masks.png'})"
        )
    objects = []
    for o in nominal.objects:
        if o.name in found:
            obj = _unseen_physics(
                replace(found[o.name], fixed=o.fixed), o, result.parameters.get(source[o.name])
            )
            objects.append(_in_task_shape(obj, o))
        elif not o.collides or o.fixed:
            objects.append(o)  # markers and fixtures come from the task config
    scene = replace(
        result.scene, objects=tuple(objects), robot=nominal.robot, table_friction=nominal.table_friction
    )
    warnings = fit_warnings_for(result.fit, [o.name for o in objects])
    kept = {f.name: getattr(scene, f.name) for f in fields(Scene)}
    return FrameScene(**kept, real2sim_warnings=tuple(warnings))


def _look_alikes_by_place(found: Mapping[str, SceneObject], nominal: Scene) -> dict[str, str]:
    """Task object name → the name of the found object that is it. Task objects of one shape, size and colour
    (two walls) are told apart by where the task puts them, in a calibrated frame: each takes the found one
    nearest its place (Hungarian assignment over the distances, m); plain labels matched them by chance."""
    out = {n: n for n in found}
    groups: dict[tuple[Any, ...], list[str]] = {}
    for o in nominal.objects:
        if o.name in found:
            groups.setdefault(o.look, []).append(o.name)
    for names in groups.values():
        if len(names) < 2:
            continue
        place = np.array([nominal.object(n).position for n in names], dtype=float)
        seen = np.array([found[n].position for n in names], dtype=float)
        rows, cols = linear_sum_assignment(np.linalg.norm(place[:, None] - seen[None], axis=2))
        out.update({names[r]: names[c] for r, c in zip(rows, cols)})
    return out


#: Sources of a physical parameter (:attr:`real2sim.types.PhysicalParameters.sources`) that come from
#: looking at or knowing the object; the others are the material table's guesses for its kind.
INFORMED_SOURCES = ("vlm", "user")


def _unseen_physics(obj: SceneObject, task_obj: SceneObject, params: Any) -> SceneObject:
    """``obj`` with the task object's mass and friction in place of real2sim's where those were only the
    material table's guess (offline, no VLM): a photo shows neither, and the task says what it was written
    for (a shape_rope rope estimated at 18 g instead of its 30 g is too light to be dragged into the U)."""
    sources = getattr(params, "sources", None) or {}
    mass = obj.mass if sources.get("mass_kg") in INFORMED_SOURCES else task_obj.mass
    friction = obj.friction if sources.get("friction") in INFORMED_SOURCES else task_obj.friction
    return replace(obj, mass=mass, friction=friction)


def _quarter_turned_like(obj: SceneObject, task_obj: SceneObject) -> SceneObject:
    """The box ``obj`` with its frame turned about its z by the quarter turn (its x and y sizes swapped for an
    odd one) that brings it nearest the task object's orientation: a box's edges name its axes only up to
    quarter turns, and a task's goals read them (``back_wall.sx``: the wall's thickness along x)."""
    R, R_task = quat_to_matrix(np.asarray(obj.quaternion)), quat_to_matrix(np.asarray(task_obj.quaternion))
    turns = [
        np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) for c, s in ((1, 0), (0, 1), (-1, 0), (0, -1))
    ]
    k = int(np.argmax([np.trace(R_task.T @ R @ turn) for turn in turns]))  # the smallest rotation between
    if k == 0:
        return obj
    size = tuple(float(v) for v in obj.size)
    if k % 2:
        size = (size[1], size[0], *size[2:])
    w, x, y, z = (float(v) for v in matrix_to_quat(R @ turns[k]))
    return replace(obj, quaternion=(w, x, y, z), size=size)


def _in_task_shape(obj: SceneObject, task_obj: SceneObject) -> SceneObject:
    """``obj`` (a reconstructed mesh object: origin at its box centre, ``size`` = box extent) as the task
    object's primitive, with the measured pose and dimensions: box → the extent; cylinder and sphere → radius
    from the horizontal extent (m); bowl → rim radius and height measured, the wall thickness the task's, the
    origin moved to the base. A deformable keeps its particles; a rope (``pd``, a task cylinder) takes
    half its box's thicker side as its radius (the particles' spread underestimates it)."""
    extent = np.asarray(obj.size, dtype=float)
    if obj.kind != "rigid":  # a deformable is its particles; a rope's radius is half its thicker side
        if obj.kind == "pd" and task_obj.shape == "cylinder":
            _, thick, length = sorted(float(v) for v in extent)
            return replace(obj, shape="cylinder", size=(thick / 2, length))
        return obj
    radius = float(extent[:2].mean() / 2)
    if task_obj.shape == "box":
        return replace(_quarter_turned_like(obj, task_obj), shape="box", mesh=None, convex_decomposition=None)
    if task_obj.shape == "cylinder":
        return replace(
            obj, shape="cylinder", size=(radius, float(extent[2])), mesh=None, convex_decomposition=None
        )
    if task_obj.shape == "sphere":
        return replace(
            obj, shape="sphere", size=(float(extent.mean() / 2),), mesh=None, convex_decomposition=None
        )
    if task_obj.shape == "bowl":
        down = quat_to_matrix(np.asarray(obj.quaternion)) @ np.array([0.0, 0.0, extent[2] / 2])
        p = np.asarray(obj.position) - down
        return replace(
            obj,
            shape="bowl",
            size=(radius, float(extent[2]), float(task_obj.size[2])),
            position=(float(p[0]), float(p[1]), float(p[2])),
            mesh=None,
            convex_decomposition=None,
        )
    return obj
