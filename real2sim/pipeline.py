"""real2sim end to end: one RGB-D frame (and labels or an instruction) → a scene the planner can roll out.

Stages: labels (:mod:`real2sim.labels`) → perception (:func:`real2sim.perception.perceive`: table plane,
segments, completed meshes and poses) → physical parameters (:mod:`real2sim.physics`) → particles for
deformables (:mod:`real2sim.particles`) → placement (every rigid object rests on the table, pairs that
interpenetrate are cut apart where their observed points part, else pushed apart) → the Scene, a settle run
audited by SimuGuard (:func:`simpact.guard.settle.settle_check`) and the files.

Written to ``out`` (see :func:`write_outputs`):

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

Size: about 720 lines, over the project's 500: the assembly of the scene and the writing of its files share
the result record; the overlays already live in :mod:`real2sim.overlays` and the particles in
:mod:`real2sim.particles`. The next split is the file writing (``write_outputs``) into its own module.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import trimesh

from real2sim.fitscore import fit_warnings, score_geometries
from real2sim.labels import Labels, object_name, resolve_labels, vlm_assigner
from real2sim.overlays import (
    cloud_mesh_overlay,
    fit_overlay,
    mask_overlay,
    save_png,
    shaded_render,
    side_by_side,
)
from real2sim.particles import DEFAULT_SPACING_M, Particles, fill_particles
from real2sim.perception import perceive
from real2sim.physics import PhysicsEstimate, estimate_physics
from real2sim.scene_files import covering_table_size, deformable_material, entry_object, load_scene
from real2sim.separate import trim_overlaps
from real2sim.types import ObjectGeometry, PhysicalParameters, Real2SimError
from simpact.core.frame import Frame
from simpact.core.jsonio import write_json
from simpact.core.rotations import matrix_to_quat, quat_to_matrix
from simpact.core.scene import Scene, SceneObject
from simpact.guard.settle import settle_check
from solvers.mujoco import meshes
from solvers.mujoco.render import CameraSpec
from solvers.mujoco.world import mujoco_access
from solvers.world import World, make_world

__all__ = [
    "ROBOT_REACH_X",
    "Real2SimConfig",
    "Real2SimError",
    "Real2SimResult",
    "load_scene",
    "place_objects",
    "run_real2sim",
]

ROBOT_REACH_X = 0.5
"""Distance (m) in front of the robot base where the objects' centre goes when the frame is uncalibrated."""
REST_TOLERANCE_M = 0.03
"""An object whose lowest point is within this of the table (m) is set down on it; higher ones are left
where they are (stacked or held) with a warning."""
SEPARATION_M = 0.0005
"""Gap (m) left between objects pushed apart."""
MAX_SEPARATION_ROUNDS = 20


@dataclasses.dataclass(frozen=True)
class Real2SimConfig:
    """Choices of back-ends and settings."""

    segmenter: str = "geometric"
    """``geometric``, ``masks`` (the frame's own masks) or ``grounded_sam2``."""
    shape: str = "geometric"
    pose: str = "icp"
    particle_spacing_m: float = DEFAULT_SPACING_M
    """Lattice pitch of deformables' particles (m)."""
    settle_s: float = 1.0
    """Settle run length (s); 0 skips it."""
    render: bool = True
    """Render the scene from the camera next to the photo (needs an OpenGL context)."""
    overlays: bool = True
    kinds: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Object name → solver, overriding the estimate (source ``user``)."""


@dataclasses.dataclass
class Real2SimResult:
    """Everything real2sim computed; :meth:`to_dict` is ``result.json``."""

    scene: Any
    """:class:`simpact.core.scene.Scene` of the rigid objects (what MuJoCo simulates)."""
    objects: list[dict[str, Any]]
    """``scene.json`` ``objects`` entries (file paths relative to the output folder)."""
    geometries: dict[str, ObjectGeometry]
    """Object name → its reconstruction after placement (world frame)."""
    parameters: dict[str, PhysicalParameters]
    particles: dict[str, Particles]
    labels: Labels
    physics: PhysicsEstimate
    perception: Any
    frame_info: dict[str, Any]
    table: dict[str, Any]
    placement: dict[str, dict[str, Any]]
    """Per object: how far placement moved it (``lift_m``, ``push_m``) and where it was cut against a
    neighbour (``cuts``, :func:`real2sim.separate.trim_overlaps`)."""
    settle: Any = None
    """:class:`simpact.guard.settle.SettleReport`, or None when skipped."""
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    world: World | None = None
    """The World built from ``scene`` (None when it has no objects)."""
    fit: dict[str, Any] = dataclasses.field(default_factory=dict)
    """How well the scene explains the measured depth (:mod:`real2sim.fitscore`): per object ``iou``,
    ``depth_residual_m``, ``verdict`` ...; ``table``."""
    renders: dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)
    """The ray-cast render from the photo's camera (``depth``, ``index``, ``normals``), for the overlays."""

    @property
    def names(self) -> list[str]:
        return [o["name"] for o in self.objects]

    def segmentation(self) -> dict[str, Any]:
        """``matches`` (object name → the confidence of its label's match to its region), ``not_found``
        (labels no region matched) and ``unlabelled`` (regions on the table no label matched: pixel count
        and bounding box ``[row0, col0, row1, col1]``)."""
        segments = list(getattr(self.perception, "segments", []))
        by_label = {s.label: s for s in segments}
        matches = {
            n: round(float(by_label[g.label].score), 3)
            for n, g in self.geometries.items()
            if g.label in by_label
        }
        regions = []
        for mask in getattr(self.perception, "unlabelled", []):
            rows, cols = np.nonzero(mask)
            if len(rows):
                box = [int(rows.min()), int(cols.min()), int(rows.max()), int(cols.max())]
                regions.append({"pixels": int(len(rows)), "bbox_px": box})
        found = {g.label for g in self.geometries.values()}
        return {
            "matches": matches,
            "not_found": [lab for lab in self.labels.labels if lab not in found],
            "unlabelled": regions,
        }

    def to_dict(self) -> dict[str, Any]:
        settle = self.settle.to_dict() if self.settle is not None else None
        return {
            "objects": [o["name"] for o in self.objects],
            "kinds": {o["name"]: o["kind"] for o in self.objects},
            "labels": self.labels.to_dict(),
            "physics": self.physics.to_dict(),
            "placement": self.placement,
            "frame": self.frame_info,
            "settle": settle,
            "clean": None if settle is None else settle["clean"],
            "fit": self.fit,
            **self.segmentation(),
            "timings_s": {k: round(v, 4) for k, v in self.timings_s.items()},
            "warnings": list(self.warnings),
            "files": dict(self.files),
        }


# --- geometry helpers -----------------------------------------------------------------------------------


def _moved(g: ObjectGeometry, shift: np.ndarray) -> ObjectGeometry:
    return dataclasses.replace(
        g,
        position=np.asarray(g.position, dtype=float) + shift,
        points_world=np.asarray(g.points_world, dtype=float) + shift,
    )


def _transformed(g: ObjectGeometry, T: np.ndarray) -> ObjectGeometry:
    """``g`` with its pose and points moved by the world-to-world transform ``T`` (4x4)."""
    R = T[:3, :3]
    return dataclasses.replace(
        g,
        position=R @ np.asarray(g.position, dtype=float) + T[:3, 3],
        quaternion=matrix_to_quat(R @ quat_to_matrix(g.quaternion)),
        points_world=np.asarray(g.points_world, dtype=float) @ R.T + T[:3, 3],
    )


def robot_facing_transform(T_world_cam: np.ndarray, centre_world: np.ndarray) -> np.ndarray:
    """World-to-world transform (4x4) that puts ``centre_world`` at (:data:`ROBOT_REACH_X`, 0, z) with the
    camera on the +x side beyond it (looking back at the robot), turning only about z."""
    cam = T_world_cam[:3, 3]
    d = cam[:2] - centre_world[:2]
    if np.linalg.norm(d) < 1e-6:  # camera straight above: keep the camera's own heading
        d = -T_world_cam[:2, 2] if np.linalg.norm(T_world_cam[:2, 2]) > 1e-6 else np.array([1.0, 0.0])
    yaw = -np.arctan2(d[1], d[0])
    c, s = np.cos(yaw), np.sin(yaw)
    T = np.eye(4)
    T[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    rotated = T[:3, :3] @ centre_world
    T[:3, 3] = [ROBOT_REACH_X - rotated[0], -rotated[1], 0.0]
    return T


def place_objects(
    geometries: Sequence[ObjectGeometry], names: Sequence[str], table_z: float = 0.0
) -> tuple[list[ObjectGeometry], dict[str, dict[str, Any]], list[str]]:
    """Set every object whose lowest vertex is within :data:`REST_TOLERANCE_M` of the table down on it, cut
    overlapping pairs apart where their observed points part (:func:`real2sim.separate.trim_overlaps`: only
    unseen volume goes), then push pairs still interpenetrating apart horizontally (convex hulls, MuJoCo's
    collision test) until none overlaps by more than :data:`SEPARATION_M`. Returns the moved geometries,
    what moved and cut each (``lift_m``, ``cuts``, ``push_m``), warnings. Masses were estimated before the
    cuts, from the uncut extents."""
    out = list(geometries)
    info: dict[str, dict[str, Any]] = {n: {"lift_m": 0.0, "cuts": [], "push_m": [0.0, 0.0]} for n in names}
    warnings: list[str] = []
    for i, (g, name) in enumerate(zip(out, names)):
        low = float(g.world_vertices()[:, 2].min()) - table_z
        if abs(low) <= REST_TOLERANCE_M or low < 0:
            out[i] = _moved(g, np.array([0.0, 0.0, -low]))
            info[name]["lift_m"] = round(-low, 6)
        else:
            warnings.append(f"'{name}' floats {low:.3f} m above the table: left in place (stacked or held?)")
    if len(out) < 2:
        return out, info, warnings
    out, cuts = trim_overlaps(out, names)
    for name, made in cuts.items():
        info[name]["cuts"] = made
    for _ in range(MAX_SEPARATION_ROUNDS):
        pushes = _overlap_pushes(out)
        if not pushes:
            break
        for i, push in pushes.items():
            out[i] = _moved(out[i], np.array([push[0], push[1], 0.0]))
            total = np.asarray(info[names[i]]["push_m"]) + push
            info[names[i]]["push_m"] = [round(float(v), 6) for v in total]
    else:
        warnings.append("objects still overlap after pushing them apart; see the settle report")
    return out, info, warnings


def _overlap_pushes(geoms: Sequence[ObjectGeometry]) -> dict[int, np.ndarray]:
    """Horizontal pushes (m) that separate overlapping convex hulls; each pair's depth split by mass proxy
    (hull volume) so the smaller object moves more."""
    spec = mujoco.MjSpec()
    hulls = [g.mesh.convex_hull for g in geoms]
    for i, (g, hull) in enumerate(zip(geoms, hulls)):
        mesh = spec.add_mesh(name=f"m{i}")
        mesh.uservert = np.asarray(hull.vertices, dtype=np.float32).ravel().tolist()
        mesh.userface = np.asarray(hull.faces, dtype=np.int32).ravel().tolist()
        body = spec.worldbody.add_body(name=f"b{i}", pos=list(g.position), quat=list(g.quaternion))
        body.add_freejoint()
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"m{i}", margin=SEPARATION_M)
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    volumes = np.array([max(float(h.volume), 1e-9) for h in hulls])
    pushes: dict[int, np.ndarray] = {}
    for k in range(data.ncon):
        c = data.contact[k]
        if c.dist >= -SEPARATION_M:
            continue
        a, b = (int(model.geom_bodyid[g]) - 1 for g in c.geom)
        normal = np.asarray(c.frame[:3])  # from geom 0 towards geom 1
        horizontal = normal[:2]
        if np.linalg.norm(horizontal) < 1e-6:
            horizontal = np.asarray(geoms[b].position[:2]) - np.asarray(geoms[a].position[:2])
        horizontal = horizontal / max(np.linalg.norm(horizontal), 1e-9)
        depth = -float(c.dist) + SEPARATION_M
        share_a = volumes[b] / (volumes[a] + volumes[b])
        for idx, sign, share in ((a, -1.0, share_a), (b, 1.0, 1.0 - share_a)):
            step = sign * share * depth * horizontal
            prev = pushes.get(idx)
            if prev is None or np.linalg.norm(step) > np.linalg.norm(prev):
                pushes[idx] = step
    return pushes


# --- fast convex decomposition ------------------------------------------------------------------------------

COLUMN_CELLS = 8
"""A concave object is split into up to this many columns along each horizontal axis of its frame."""
SURFACE_SAMPLES = 10_000


def column_parts(
    mesh: Any, cells: int = COLUMN_CELLS, seed: int = 0
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Convex parts of a concave mesh in well under a second: the surface (vertices and ``SURFACE_SAMPLES``
    seeded samples) cut into ``cells`` x ``cells`` vertical columns of the object frame, each column's points
    wrapped in their convex hull. A bowl's floor and walls stay separate, so its cavity stays open (CoACD
    takes tens of seconds on a reconstructed bowl). Returns (vertices list, faces list)."""
    samples, _ = trimesh.sample.sample_surface(mesh, SURFACE_SAMPLES, seed=seed)
    pts = np.concatenate([np.asarray(mesh.vertices, dtype=float), np.asarray(samples, dtype=float)])
    lo, hi = pts[:, :2].min(axis=0), pts[:, :2].max(axis=0)
    size = np.maximum(hi - lo, 1e-9)
    idx = np.minimum((((pts[:, :2] - lo) / size) * cells).astype(np.int64), cells - 1)
    key = idx[:, 0] * cells + idx[:, 1]
    verts, faces = [], []
    for k in np.unique(key):
        col = pts[key == k]
        if len(col) < 4:
            continue
        try:
            hull = trimesh.convex.convex_hull(col)
        except Exception:  # degenerate (flat) column: qhull refuses it
            continue
        if hull.volume <= 1e-12:
            continue
        verts.append(np.asarray(hull.vertices, dtype=np.float64))
        faces.append(np.asarray(hull.faces, dtype=np.int32))
    return verts, faces


def _cache_convex_parts(mesh_file: Path, scale: Sequence[float] | np.ndarray) -> int:
    """Store :func:`column_parts` of the mesh as loaded by the scene builder (file, per-axis scale) as its
    convex decomposition, so building the MuJoCo scene does not run CoACD. Returns the part count."""
    mesh = meshes.load_mesh(mesh_file, tuple(float(v) for v in scale))  # type: ignore[arg-type]
    verts, faces = column_parts(mesh)
    if verts:
        meshes.store_convex_parts(mesh, meshes.ConvexParts(tuple(verts), tuple(faces)))
    return len(verts)


# --- the pipeline -------------------------------------------------------------------------------------------


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
    config: Real2SimConfig = Real2SimConfig(),
    perceive_fn: Callable[..., Any] | None = None,
) -> Real2SimResult:
    """Build a scene from ``frame``; write it under ``out`` when given.

    ``labels`` (a list or ``"a, b"``), else ``task``'s objects, else ``vlm``'s answer for ``instruction``
    (or the frame's own ``instruction`` metadata) name what to look for; ``vlm`` also answers the physics
    questions and labels geometric clusters. ``perceive_fn`` replaces :func:`real2sim.perception.perceive`
    (same signature) in tests.
    """
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
        geometries = [_transformed(g, T) for g in geometries]
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


def assemble(
    frame: Frame,
    perception: Any,
    labels: Labels,
    *,
    vlm: Any = None,
    instruction: str | None = None,
    config: Real2SimConfig = Real2SimConfig(),
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


def _scene(
    result: Real2SimResult,
    names: Sequence[str],
    frame: Frame,
    masks: Mapping[str, np.ndarray],
    out_dir: Path | None,
) -> tuple[Any, list[dict[str, Any]]]:
    """The Scene (rigid objects' meshes written under ``out_dir/meshes``, deformables' particles under
    ``out_dir/particles``; else in a temporary folder) and the ``scene.json`` object entries."""
    root = out_dir if out_dir is not None else Path(tempfile.mkdtemp(prefix="real2sim_"))
    mesh_dir = root / "meshes"
    mesh_dir.mkdir(parents=True, exist_ok=True)
    scene_objects = []
    entries: list[dict[str, Any]] = []
    for n in names:
        g, p = result.geometries[n], result.parameters[n]
        extent = np.asarray(g.extent, dtype=float)
        entry: dict[str, Any] = {
            "name": n,
            "label": g.label,
            "kind": p.kind,
            "position": [round(float(v), 6) for v in g.position],
            "quaternion": [round(float(v), 6) for v in g.quaternion],
            "extent": [round(float(v), 6) for v in extent],
            "mass": round(float(p.mass_kg), 6),
            "friction": round(float(p.friction), 4),
            "physics": {**p.to_dict(), **result.physics.notes.get(n, {})},
            "symmetry": g.symmetry,
            "concave": bool(g.concave),
            "fit_rmse_m": round(float(g.fit_rmse_m), 6),
            "shape_source": g.shape_source,
            "pose_source": g.pose_source,
            "rgba": list(_median_rgba(frame.rgb, masks.get(g.label))),
        }
        if p.kind == "rigid":
            unit = g.mesh.copy()
            unit.apply_scale(1.0 / extent)
            path = mesh_dir / f"{n}.obj"
            unit.export(path)
            if g.concave:
                entry["convex_parts"] = _cache_convex_parts(path, extent)
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
    objects = tuple(scene_objects)
    return Scene(objects, table_size=covering_table_size(objects)), entries


def write_outputs(
    result: Real2SimResult, frame: Frame, masks: Mapping[str, np.ndarray], out: Path, config: Real2SimConfig
) -> None:
    """``scene.json``, ``scene.xml``, particles, overlays (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    scene_json = {
        "objects": result.objects,
        "table": result.table,
        "frame": result.frame_info,
        "robot": result.scene.to_dict()["robot"],
        "table_size": list(result.scene.table_size),
        "units": "m, kg, s; quaternions (w, x, y, z); positions in the world frame",
    }
    write_json(out / "scene.json", scene_json)
    result.files["scene.json"] = "scene.json"
    exchange = result.labels.exchange + result.physics.exchange
    if exchange:
        write_json(out / "vlm_exchange.json", exchange)
        result.files["vlm_exchange.json"] = "vlm_exchange.json"
    if result.world is not None:
        (out / "scene.xml").write_text(mujoco_access(result.world).spec.to_xml())
        result.files["scene.xml"] = "scene.xml"
    if config.overlays:
        t = time.perf_counter()
        result.files.update(_overlays(result, frame, masks, out, config))
        result.timings_s["overlays"] = time.perf_counter() - t


def _overlays(
    result: Real2SimResult, frame: Frame, masks: Mapping[str, np.ndarray], out: Path, config: Real2SimConfig
) -> dict[str, str]:
    files: dict[str, str] = {}
    conf = result.segmentation()["matches"]
    named = [
        (f"{n} {conf[n]:.2f}" if n in conf else n, masks[g.label])
        for n, g in result.geometries.items()
        if g.label in masks
    ]
    unlabelled = list(getattr(result.perception, "unlabelled", []))
    save_png(mask_overlay(frame.rgb, named, unlabelled=unlabelled), out / "masks.png")
    files["masks.png"] = "masks.png"
    T_world_cam = np.asarray(result.frame_info["T_world_cam"], dtype=float)
    points, colours = _cloud(frame, T_world_cam)
    meshes = []
    for n, g in result.geometries.items():
        if n in result.particles:
            pts = result.particles[n].points.astype(float)
            meshes.append((n, pts, np.zeros((0, 3), np.int64)))
            points = np.concatenate([points, pts])
            colours = np.concatenate([colours, np.tile(np.array([[255, 0, 255]], np.uint8), (len(pts), 1))])
        else:
            meshes.append((n, g.world_vertices(), np.asarray(g.mesh.faces)))
    save_png(cloud_mesh_overlay(frame.rgb, points, colours, meshes, T_world_cam, frame.K), out / "meshes.png")
    files["meshes.png"] = "meshes.png"
    if config.render and result.renders:
        names = list(result.fit.get("objects", {}))
        index, normals = result.renders["index"], result.renders["normals"]
        rgba = {o["name"]: o["rgba"] for o in result.objects}
        render = shaded_render(index, normals, [rgba[n] for n in names])
        pair = side_by_side([frame.rgb, render], ["photo", "simulated scene (as placed), photo's camera"])
        save_png(pair, out / "scene_vs_photo.png")
        files["scene_vs_photo.png"] = "scene_vs_photo.png"
        by_name = {n: masks[result.geometries[n].label] for n in names if result.geometries[n].label in masks}
        verdicts = {n: str(s.get("verdict")) for n, s in result.fit.get("objects", {}).items()}
        save_png(fit_overlay(frame.rgb, index, normals, names, by_name, verdicts), out / "overlay.png")
        files["overlay.png"] = "overlay.png"
    return files


def _cloud(frame: Frame, T_world_cam: np.ndarray, max_points: int = 80_000) -> tuple[np.ndarray, np.ndarray]:
    """The frame's valid depth pixels as world points (m) with their colours, evenly subsampled."""
    v, u = np.nonzero(frame.depth > 0)
    step = max(1, int(np.ceil(len(u) / max_points)))
    v, u = v[::step], u[::step]
    z = frame.depth[v, u].astype(float)
    K = frame.K
    x = (u - K[0, 2] - K[0, 1] * (v - K[1, 2]) / K[1, 1]) * z / K[0, 0]
    y = (v - K[1, 2]) * z / K[1, 1]
    cam = np.stack([x, y, z], axis=1)
    return cam @ T_world_cam[:3, :3].T + T_world_cam[:3, 3], frame.rgb[v, u]
