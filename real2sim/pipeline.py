"""real2sim end to end: one RGB-D frame (and labels or an instruction) → a scene the planner can roll out.

Stages: labels (:mod:`real2sim.labels`) → perception (:func:`real2sim.perception.perceive`: table plane,
segments, completed meshes and poses) → physical parameters (:mod:`real2sim.physics`) → particles for
deformables (:mod:`real2sim.particles`) → placement (every rigid object rests on the table, pairs that
interpenetrate are cut apart where their observed points part, else pushed apart) → the Scene, a settle run
audited by SimuGuard (:func:`simpact.guard.settle.settle_check`) and the files.

Written to ``out`` (see :func:`real2sim.outputs.write_outputs`):

- ``scene.json``: ``objects`` (name, label, kind, position (m, world), quaternion (w, x, y, z), extent (edge
  lengths of the oriented bounding box, m), mass (kg), friction, physics (every parameter and its source),
  and ``mesh`` (file, relative to DIR; object frame, vertices in units of ``mesh_scale`` = extent, i.e. the
  mesh's bounding box is the unit cube) for rigid objects or ``particles`` (``.npy`` (N, 3) float32, world
  frame, m) for deformables); ``table`` (the plane ``z = 0`` in the world frame and its normal and offset in
  the camera frame); ``frame`` (how the world frame was chosen, ``T_world_cam``); ``robot``.
- ``scene.xml``: MJCF of the rigid objects with the FR3 (deformables are simulated by their own solvers
  from their particles and are not in it).
- ``masks.png``, ``meshes.png``, ``scene_vs_photo.png``: what was found, reconstructed and simulated.
- ``result.json``: timings per stage, labels and their source, warnings, the settle report.
- ``vlm_exchange.json`` (with a VLM): every prompt and answer text of the labels, cluster and physics
  questions.

World frame: the robot base when the frame has ``T_base_cam``. Otherwise the table plane defines it (z up,
z = 0 on the table) and real2sim turns it about z and shifts it so that the objects' centre lies
:data:`ROBOT_REACH_X` in front of the robot base, on the far side of the objects from the camera (the camera
faces the robot): recorded in ``scene.json`` ``frame``.

Where the objects go is :mod:`real2sim.placement`'s job, writing the files :mod:`real2sim.outputs`'s; the
config and result types live in :mod:`real2sim.result`.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from real2sim.fitscore import fit_warnings, score_geometries
from real2sim.labels import Labels, object_name, resolve_labels, vlm_assigner
from real2sim.outputs import write_outputs
from real2sim.particles import Particles, fill_particles
from real2sim.perception import perceive
from real2sim.physics import estimate_physics
from real2sim.placement import ROBOT_REACH_X, place_objects, robot_facing_transform, transformed
from real2sim.pose import foundationpose_dir, pose_backend
from real2sim.result import Real2SimConfig, Real2SimResult
from real2sim.scene_files import (
    cache_convex_parts,
    covering_table_size,
    deformable_material,
    entry_object,
    load_scene,
    robot_start_above,
)
from real2sim.segment import grounded_sam2_settings, segmenter
from real2sim.shape import hunyuan3d_package, hunyuan3d_path, shape_backend
from real2sim.types import ObjectGeometry, PhysicalParameters, Real2SimError
from real2sim.workers import process_pool, run_all
from simpact.core.frame import Frame
from simpact.core.jsonio import write_json
from simpact.core.scene import Scene, SceneObject
from simpact.guard.settle import settle_check
from solvers.mujoco.render import CameraSpec
from solvers.world import make_world

__all__ = [
    "ROBOT_REACH_X",
    "Real2SimConfig",
    "Real2SimError",
    "Real2SimResult",
    "check_backends",
    "load_scene",
    "place_objects",
    "run_real2sim",
]


DEFAULT_CONFIG = Real2SimConfig()
"""The settings a call without ``config`` runs with (frozen: one instance serves every call)."""


def check_backends(config: Real2SimConfig) -> None:
    """Raise, before any work, the error of a back-end ``config`` names that does not exist, whose local
    weights are not set or whose package is not installed (the learned ones run from local files only, never
    downloaded)."""
    segmenter(config.segmenter)
    shape_backend(config.shape)
    pose_backend(config.pose)
    if config.segmenter == "grounded_sam2":
        grounded_sam2_settings()
    if config.shape == "hunyuan3d":
        hunyuan3d_path()
        hunyuan3d_package()
    if config.pose == "foundationpose":
        foundationpose_dir()


def _median_rgba(rgb: np.ndarray, mask: np.ndarray | None) -> tuple[float, float, float, float]:
    if mask is None or not mask.any():
        return (0.7, 0.7, 0.7, 1.0)
    c = np.median(rgb[mask].reshape(-1, 3), axis=0) / 255.0
    return (round(float(c[0]), 3), round(float(c[1]), 3), round(float(c[2]), 3), 1.0)


def run_real2sim(
    frame: Frame,
    *,
    labels: Sequence[str] | str | None = None,
    instruction: str | None = None,
    task: Any = None,
    vlm: Any = None,
    out: str | Path | None = None,
    config: Real2SimConfig = DEFAULT_CONFIG,
    perceive_fn: Callable[..., Any] | None = None,
) -> Real2SimResult:
    """Build a scene from ``frame``; write it under ``out`` when given.

    ``labels`` (a list or ``"a, b"``), else ``task``'s objects, else ``vlm``'s answer for ``instruction``
    (or the frame's own ``instruction`` metadata) name what to look for; ``vlm`` also answers the physics
    questions and labels geometric clusters. ``perceive_fn`` replaces :func:`real2sim.perception.perceive`
    (same signature) in tests.
    """
    check_backends(config)
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    instruction = instruction or (task.instruction if task is not None else None)
    instruction = instruction or frame.metadata.get("instruction")
    t = time.perf_counter()
    resolved = resolve_labels(labels, task=task, instruction=instruction, vlm=vlm, rgb=frame.rgb)
    timings["labels"] = time.perf_counter() - t
    if perceive_fn is None:
        perceive_fn = perceive
    assign = None
    if vlm is not None and resolved.labels and config.segmenter == "geometric":
        assign = vlm_assigner(vlm, resolved.exchange)
    t = time.perf_counter()
    perception = perceive_fn(
        frame,
        resolved.labels,
        segmenter=config.segmenter,
        shape=config.shape,
        pose=config.pose,
        assign=assign,
    )
    timings["perception"] = time.perf_counter() - t
    for stage, seconds in dict(getattr(perception, "timings_s", {}) or {}).items():
        timings[f"perception.{stage}"] = float(seconds)
    result = assemble(
        frame,
        perception,
        resolved,
        vlm=vlm,
        instruction=instruction,
        config=config,
        out=out,
        timings=timings,
        task_kinds={o.name: o.kind for o in task.nominal_scene.objects} if task is not None else None,
    )
    result.timings_s["total"] = time.perf_counter() - t_all
    if out is not None:
        write_json(Path(out) / "result.json", result.to_dict())
    return result


def _named_geometries(
    perception: Any, labels: Labels, warnings: list[str]
) -> tuple[list[ObjectGeometry], list[str]]:
    """The reconstructed objects and their scene names; a label not found becomes a warning."""
    geometries: list[ObjectGeometry] = list(perception.objects)
    if not geometries:
        found = ", ".join(labels.labels) if labels.labels else "anything standing on the table"
        raise Real2SimError(f"no object found in the frame (looked for {found})")
    missing = [lab for lab in labels.labels if lab not in {g.label for g in geometries}]
    if missing:
        warnings.append(f"not found in the frame: {', '.join(missing)}")
    names = [labels.name_of(g.label) if labels.labels else object_name(g.label) for g in geometries]
    if len(set(names)) != len(names):
        raise Real2SimError(f"two reconstructed objects share a name: {names}")
    return geometries, names


def _world_frame(
    table: Any, geometries: list[ObjectGeometry]
) -> tuple[list[ObjectGeometry], np.ndarray, dict[str, Any]]:
    """The objects in the world frame, ``T_world_cam`` (4x4, m) and the record of how the frame was chosen:
    the robot base (calibrated) or the table frame turned to face a robot (uncalibrated)."""
    T_world_cam = np.asarray(table.T_world_cam, dtype=float)
    frame_info: dict[str, Any] = {"world_frame": table.world_frame}
    if table.world_frame != "T_base_cam":
        centre = np.mean([np.asarray(g.position, dtype=float) for g in geometries], axis=0)
        T = robot_facing_transform(T_world_cam, centre)
        geometries = [transformed(g, T) for g in geometries]
        T_world_cam = T @ T_world_cam
        frame_info["note"] = (
            f"no calibration: z up along the table normal, z = 0 on the table; turned about z and shifted so "
            f"the objects' centre is {ROBOT_REACH_X} m in front of the robot base, the camera beyond them"
        )
        frame_info["table_frame_to_world"] = T.tolist()
    else:
        frame_info["note"] = "robot base frame from the frame's T_base_cam; table top moved to z = 0"
    # The table top is world z = 0 already (real2sim.table); with calibration, p_base = p_world + (0, 0, h).
    frame_info["table_height_m"] = float(getattr(table, "table_height_m", 0.0))
    frame_info["T_world_cam"] = np.round(T_world_cam, 9).tolist()
    return geometries, T_world_cam, frame_info


def _particles_and_placement(
    names: list[str],
    geometries: list[ObjectGeometry],
    physics: Any,
    config: Real2SimConfig,
    warnings: list[str],
    timings: dict[str, float],
) -> tuple[dict[str, Particles], dict[str, dict[str, Any]]]:
    """Particles for the deformables (their mass follows from density × particle volume) and the placement of
    the rigid objects (``geometries`` updated in place); returns the particles and the placement record."""
    t = time.perf_counter()
    particles: dict[str, Particles] = {}
    for n, g in zip(names, geometries):
        p = physics.parameters[n]
        if p.kind == "rigid":
            continue
        particles[n] = fill_particles(np.asarray(g.points_world), config.particle_spacing_m)
        if p.density_kg_m3 is not None:
            p.mass_kg = float(p.density_kg_m3 * particles[n].volume_m3)
    timings["particles"] = time.perf_counter() - t

    t = time.perf_counter()
    rigid = [i for i, n in enumerate(names) if physics.parameters[n].kind == "rigid"]
    placed, placement, place_warnings = place_objects(
        [geometries[i] for i in rigid], [names[i] for i in rigid]
    )
    for i, g in zip(rigid, placed):
        geometries[i] = g
    warnings.extend(place_warnings)
    timings["placement"] = time.perf_counter() - t
    return particles, placement


def _simulate(result: Real2SimResult, frame: Frame, T_world_cam: np.ndarray, config: Real2SimConfig) -> None:
    """The scene's world (rendering with the frame's camera) and its settle run, into ``result``."""
    timings, warnings = result.timings_s, result.warnings
    t = time.perf_counter()
    camera = CameraSpec(width=frame.width, height=frame.height, K=frame.K, T_base_cam=T_world_cam)
    result.world = make_world(result.scene, camera=camera)
    timings["world"] = time.perf_counter() - t
    if config.settle_s > 0:
        t = time.perf_counter()
        result.settle = settle_check(result.world, config.settle_s)
        timings["settle"] = time.perf_counter() - t
        if not result.settle.clean:
            fallen = (
                f", fell off the table: {', '.join(result.settle.fallen)}" if result.settle.fallen else ""
            )
            warnings.append(
                f"settle run: {len(result.settle.artifacts)} artifact(s), deepest initial overlap "
                f"{result.settle.max_overlap * 1000:.1f} mm{fallen}"
            )
        _note_shifted(result)


def _note_shifted(result: Real2SimResult) -> None:
    """Each object that did not rest where it was fitted in the settle run (``SettleReport.shifted``; fallen
    ones aside, the settle warning names them): a warning, and ``shifted_in_settle`` (``moved_m``,
    ``turned_deg``) in its fit score, which the planner passes on
    (:func:`real2sim.task_scene.fit_warnings_for`)."""
    assert result.settle is not None
    fallen = set(result.settle.fallen)
    for name in result.settle.shifted:
        if name in fallen:
            continue
        m = result.settle.motion[name]
        moved = {"moved_m": round(m.displacement, 4), "turned_deg": round(float(np.degrees(m.rotation)), 1)}
        if name in result.fit.get("objects", {}):
            result.fit["objects"][name]["shifted_in_settle"] = moved
        result.warnings.append(
            f"{name!r} does not rest where it was fitted: the settle run moved it {100 * m.displacement:.1f} "
            f"cm and turned it {moved['turned_deg']:.0f}° (it tipped, rolled or was pushed by a neighbour); "
            "the simulated scene differs from the photo there"
        )


def assemble(
    frame: Frame,
    perception: Any,
    labels: Labels,
    *,
    vlm: Any = None,
    instruction: str | None = None,
    config: Real2SimConfig = DEFAULT_CONFIG,
    out: str | Path | None = None,
    timings: dict[str, float] | None = None,
    task_kinds: Mapping[str, str] | None = None,
) -> Real2SimResult:
    """The stages after perception: parameters, particles, placement, Scene, settle run, files.
    ``task_kinds``: solvers a task config sets per object name (source ``task``; ``config.kinds`` wins)."""
    timings = timings if timings is not None else {}
    task_kinds = dict(task_kinds or {})
    warnings = list(labels.warnings) + [str(w) for w in getattr(perception, "warnings", [])]
    geometries, names = _named_geometries(perception, labels, warnings)
    masks = {s.label: s.seen for s in getattr(perception, "segments", [])}
    table = perception.table
    geometries, T_world_cam, frame_info = _world_frame(table, geometries)

    # Physical parameters.
    t = time.perf_counter()
    extents = {n: [float(v) for v in g.extent] for n, g in zip(names, geometries)}
    label_of = {n: g.label for n, g in zip(names, geometries)}
    physics = estimate_physics(
        extents,
        vlm=vlm,
        image=frame.rgb,
        instruction=instruction,
        labels=label_of,
        kinds={**task_kinds, **config.kinds},
        kind_sources={n: "task" for n in task_kinds if n not in config.kinds},
    )
    warnings.extend(physics.warnings)
    timings["physics"] = time.perf_counter() - t
    particles, placement = _particles_and_placement(names, geometries, physics, config, warnings, timings)

    result = Real2SimResult(
        scene=None,
        objects=[],
        geometries=dict(zip(names, geometries)),
        parameters=dict(physics.parameters),
        particles=particles,
        labels=labels,
        physics=physics,
        perception=perception,
        frame_info=frame_info,
        table={
            "plane_world": {"normal": [0.0, 0.0, 1.0], "offset_m": 0.0},
            "normal_cam": [float(v) for v in np.asarray(table.normal_cam)],
            "offset_cam_m": float(table.offset_m),
        },
        placement=placement,
        timings_s=timings,
        warnings=warnings,
    )
    out_dir = Path(out) if out is not None else None
    t = time.perf_counter()
    result.scene, result.objects = _scene(result, names, frame, masks, out_dir)
    timings["scene"] = time.perf_counter() - t
    _score_fit(result, frame, masks, T_world_cam, table)
    if result.scene.objects:
        _simulate(result, frame, T_world_cam, config)
    if out_dir is not None:
        write_outputs(result, frame, masks, out_dir, config)
    return result


def _score_fit(
    result: Real2SimResult, frame: Frame, masks: Mapping[str, np.ndarray], T_world_cam: np.ndarray, table: Any
) -> None:
    """The fit score of the placed rigid objects seen from the photo's camera (into ``result.fit``, each
    object's ``scene.json`` entry and, for a poor fit, ``result.warnings``)."""
    t = time.perf_counter()
    rigid = {n: g for n, g in result.geometries.items() if n not in result.particles}
    by_name = {n: masks[g.label] for n, g in rigid.items() if g.label in masks}
    result.fit, result.renders = score_geometries(rigid, by_name, frame.depth, T_world_cam, frame.K, table)
    for entry in result.objects:
        if entry["name"] in result.fit["objects"]:
            entry["fit"] = result.fit["objects"][entry["name"]]
    result.warnings.extend(fit_warnings(result.fit))
    result.timings_s["fit"] = time.perf_counter() - t


def _object_entry(
    name: str, g: ObjectGeometry, p: PhysicalParameters, notes: Mapping[str, Any], rgba: Sequence[float]
) -> dict[str, Any]:
    """The ``scene.json`` entry of object ``name``: its geometry ``g``, physical parameters ``p`` with the
    ``notes`` on how they were set, and its colour ``rgba`` (0-1); position, extent in m."""
    entry: dict[str, Any] = {
        "name": name,
        "label": g.label,
        "kind": p.kind,
        "position": [round(float(v), 6) for v in g.position],
        "quaternion": [round(float(v), 6) for v in g.quaternion],
        "extent": [round(float(v), 6) for v in g.extent],
        "mass": round(float(p.mass_kg), 6),
        "friction": round(float(p.friction), 4),
        "physics": {**p.to_dict(), **notes},
        "symmetry": g.symmetry,
        "concave": bool(g.concave),
        "fit_rmse_m": round(float(g.fit_rmse_m), 6),
        "shape_source": g.shape_source,
        "pose_source": g.pose_source,
        "rgba": list(rgba),
    }
    if g.edge_radii_m is not None:  # a box with rounded edges: along its longest side, the others
        entry["edge_radii_m"] = [round(float(r), 4) for r in g.edge_radii_m]
    if g.neck_m is not None:  # a box with a bottle's neck: its radius and length
        entry["neck_m"] = [round(float(v), 4) for v in g.neck_m]
    if g.prism_depth_m is not None:  # an outline extruded back from a face or up from the table
        entry["prism_depth_m"] = round(float(g.prism_depth_m), 4)
    if g.heightfield_cell_m is not None:  # columns as high as the surface seen over them
        entry["heightfield_cell_m"] = round(float(g.heightfield_cell_m), 4)
    return entry


def _scratch_folder() -> Path:
    """A new temporary folder for a scene's files when no ``out`` is given, removed when the process exits:
    worlds are built from the scene's mesh files after the run returns, so they must outlive it, but a
    process that runs real2sim once per frame (a CALVIN evaluation, the test suite) must not leave a folder
    behind for each."""
    root = Path(tempfile.mkdtemp(prefix="real2sim_"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _scene(
    result: Real2SimResult,
    names: Sequence[str],
    frame: Frame,
    masks: Mapping[str, np.ndarray],
    out_dir: Path | None,
) -> tuple[Any, list[dict[str, Any]]]:
    """The Scene (rigid objects' meshes written under ``out_dir/meshes``, deformables' particles under
    ``out_dir/particles``; else in :func:`_scratch_folder`) and the ``scene.json`` object entries."""
    root = out_dir if out_dir is not None else _scratch_folder()
    mesh_dir = root / "meshes"
    mesh_dir.mkdir(parents=True, exist_ok=True)
    scene_objects = []
    entries: list[dict[str, Any]] = []
    concave: list[tuple[dict[str, Any], tuple[Path, np.ndarray]]] = []  # entry, cache_convex_parts' job
    for n in names:
        g, p = result.geometries[n], result.parameters[n]
        extent = np.asarray(g.extent, dtype=float)
        entry = _object_entry(
            n, g, p, result.physics.notes.get(n, {}), _median_rgba(frame.rgb, masks.get(g.label))
        )
        if p.kind == "rigid":
            unit = g.mesh.copy()
            unit.apply_scale(1.0 / extent)
            path = mesh_dir / f"{n}.obj"
            unit.export(path)
            if g.concave:
                entry["convex_parts"] = 0  # counted below, the objects' parts side by side
                concave.append((entry, (path, extent)))
            entry["mesh"] = f"meshes/{n}.obj"
            entry["mesh_scale"] = entry["extent"]
            scene_objects.append(
                SceneObject(
                    name=n,
                    shape="mesh",
                    size=tuple(float(v) for v in extent),
                    position=tuple(float(v) for v in g.position),  # type: ignore[arg-type]
                    quaternion=tuple(float(v) for v in g.quaternion),  # type: ignore[arg-type]
                    mass=float(p.mass_kg),
                    friction=float(p.friction),
                    rgba=entry["rgba"],
                    mesh=str(path.resolve()),
                    convex_decomposition=bool(g.concave),
                )
            )
        else:
            entry["particles"] = f"particles/{n}.npy"
            entry["particle_spacing_m"] = result.particles[n].spacing_m
            entry["particle_count"] = len(result.particles[n].points)
            entry["material"] = deformable_material(p, result.particles[n].spacing_m)
            (root / "particles").mkdir(exist_ok=True)
            np.save(root / entry["particles"], result.particles[n].points, allow_pickle=False)
            scene_objects.append(entry_object(entry, root))
        entries.append(entry)
    counts = run_all(cache_convex_parts, [job for _, job in concave], process_pool())
    for (entry, _), count in zip(concave, counts):
        entry["convex_parts"] = count
    objects = tuple(scene_objects)
    tops = [
        float(g.world_vertices()[:, 2].max())
        for n, g in result.geometries.items()
        if n not in result.particles
    ]
    tops += [float(np.max(p.points[:, 2])) for p in result.particles.values() if len(p.points)]
    robot = robot_start_above(max(tops, default=0.0))
    return Scene(objects, robot, table_size=covering_table_size(objects)), entries
