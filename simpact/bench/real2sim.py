"""``simpact bench real2sim``: how well real2sim rebuilds scenes, and how fast.

Rendered frames: each task's nominal scene (and more seeds on request) rendered as ``simpact render`` does,
with the true scene as the answer: per object the position error of the bounding-box centre (cm), the
rotation error (deg, symmetry-aware: a box's 180° turns about its axes and any relabelling of equal edges
count as no error; for a cylinder or bowl only the tilt of its axis counts), the extent error (largest
relative error over the three edges, %), the IoU of the segment with the rendered mask and the object's
visible pixels in it (``visible_px``: 0 for an object hidden from the camera, listed as not visible).

The same rendered frames again with a depth camera's errors (:mod:`simpact.bench.sensor_noise`: shadows,
smeared edges, axial noise, disparity steps), section ``rendered_noisy``: the development split, with ground
truth and the real frames' kind of depth, on which to tune; it carries no target.

Real frames (``<shared data>/rgbd``, skipped with a reason when absent): objects found among those present,
each object's extents (edges sorted, so orientation-free) against its reference, named per row
(``reference``): ``ycb``, the listed size of a YCB object of known size; ``object_pc``, the oriented extents
of the object points a 6-DoF GraspNet frame ships (``smoothed_object_pc``), for an object that is not one
(the green bowl); the GraspNet objects also get ``pc_extent_pct`` against those points, for information
(they are one view's surface: a completed hidden side is longer than theirs). And its support: the gap
between the reconstructed object's lowest point and the table before placement (cm) and how far it moved in
the settle run.

Targets (:data:`simpact.bench.real2sim_report.TARGETS`): rendered position error ≤ 1 cm and extent error ≤
10 %; on the real frames extent error ≤ 10 %, silhouette IoU ≥ 0.85 and median depth residual ≤ 5 mm on each
object, no mask over two objects; real2sim ≤ 10 s per frame (the whole pipeline, overlays and settle run
included). Glass: :mod:`simpact.bench.glass`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from fnmatch import fnmatch
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from real2sim.datasets import (
    YCB_SIZES_M,
    SharedDataMissing,
    discover_real_frames,
    read_any_frame,
    read_graspnet_object_points,
    reference_masks,
    shared_data_dir,
)
from real2sim.pipeline import Real2SimConfig, run_real2sim
from real2sim.workers import worker_count
from simpact.bench.glass import bench_glass_pair, glass_pairs
from simpact.bench.real2sim_marks import against_object_points, against_reference_masks, on_their_objects
from simpact.bench.real2sim_report import TARGETS, summarise
from simpact.bench.real_truth import EXPECTED_OBJECTS, LABEL_POINTS, REAL_FRAMES, object_pixels
from simpact.bench.scoring import (
    extent_error,
    ground_truth_box,
    mask_iou,
    particles_box,
    points_extent,
    pose_errors,
)
from simpact.bench.sensor_noise import SensorNoise, add_sensor_noise, edge_runs
from simpact.core.errors import UsageError
from simpact.core.frame import Frame, FrameError
from simpact.core.jsonio import write_json
from simpact.tasks import list_tasks, load_task
from solvers.mujoco.render import CameraSpec
from solvers.world import make_world

__all__ = ["Progress", "bench_real", "bench_rendered", "bench_result", "run_real2sim_bench"]


Truth = tuple[np.ndarray, np.ndarray, np.ndarray, str]
"""An object's true box: centre (3,) m, rotation (3, 3), extent (3,) m, symmetry."""

NOISY_SUFFIX = " (sensor noise)"
"""Ends the name of a rendered frame seen through the sensor model."""


def _rendered_frame(task_name: str, seed: int) -> tuple[Any, Any, Any, dict[str, Truth]]:
    """The task, its scene, the frame the world renders of it and each object's true box then: an MPM
    object's from the particles the frame shows (:func:`particles_box`), any other from the scene."""
    task = load_task(task_name)
    scene = task.scene(seed)
    raw = task.raw.get("camera")
    world = make_world(scene, camera=None if raw is None else CameraSpec.from_dict(raw))
    truth = {o.name: ground_truth_box(o) for o in scene.objects}
    for name, state in world.state().deformables.items():
        if scene.object(name).kind == "mpm":  # a rope keeps its shape; a pile slumps as the world is built
            truth[name] = (*particles_box(state.particles)[:3], truth[name][3])
    return task, scene, world.render(), truth


def bench_rendered(
    task_name: str, seed: int, out: Path, config: Any, noise: SensorNoise | None = None
) -> dict[str, Any]:
    """real2sim on the rendered frame of one task scene (its depth as ``noise``'s sensor would measure it,
    when given), scored against the scene."""
    task, scene, frame, truth = _rendered_frame(task_name, seed)
    if noise is not None:
        frame = add_sensor_noise(frame, seed, noise)
    t0 = time.perf_counter()
    result = run_real2sim(frame, task=task, out=out, config=config)
    wall = time.perf_counter() - t0
    ids = {name: i for i, name in frame.mask_names.items()}
    masks = {result.labels.name_of(s.label): s.seen for s in result.perception.segments}
    estimate_of = _match_instances(
        [result.labels.name_of(lab) for lab in result.labels.labels], result, scene, truth
    )
    objects: dict[str, Any] = {}
    assert frame.masks is not None
    for label in result.labels.labels:
        name = result.labels.name_of(label)
        gt_centre, gt_R, gt_extent, symmetry = truth[name]
        est = estimate_of.get(name)
        entry: dict[str, Any] = {"found": est is not None}
        if est is not None and est != name:
            entry["matched"] = est
        gt_mask = frame.masks == ids[name] if name in ids else np.zeros(frame.masks.shape, bool)
        entry["visible_px"] = int(gt_mask.sum())  # 0: hidden from the camera, nothing to find
        entry["mask_iou"] = mask_iou(masks[est], gt_mask) if est in masks else 0.0
        if est is not None:
            g = result.geometries[est]
            entry.update(
                pose_errors(g.position, g.quaternion, g.extent, gt_centre, gt_R, gt_extent, symmetry)
            )
            entry["kind"] = result.parameters[est].kind
            fit = result.fit.get("objects", {}).get(est)
            if fit is not None:  # the score real2sim gives itself, no ground truth: set beside the truth
                entry["verdict"] = fit["verdict"]
                entry["fit_iou"] = fit["iou"]
        objects[name] = entry
    return {
        "frame": f"{task_name} seed {seed}" + (NOISY_SUFFIX if noise is not None else ""),
        "edge_runs": edge_runs(frame.depth).tolist(),
        "objects": objects,
        "seconds": wall,
        "timings_s": {k: round(v, 4) for k, v in result.timings_s.items()},
        "settle_clean": None if result.settle is None else result.settle.clean,
        "warnings": result.warnings,
        "out": str(out),
    }


def _instance_group(name: str) -> str:
    """``bean_07`` → ``bean``: numbered copies of one object are interchangeable."""
    return re.sub(r"[_ ]?\d+$", "", name)


def _match_instances(
    names: Sequence[str], result: Any, scene: Any, truth: dict[str, Truth]
) -> dict[str, str]:
    """Truth name → estimated object name. Objects that look alike, numbered copies of one object (``bean_00``
    ... ``bean_19``) or objects of one shape, size and colour (two walls), cannot be told apart by their
    names in a photo, so their estimates are paired with them by nearest centres (Hungarian assignment);
    every other object is its own estimate."""
    out = {n: n for n in names if n in result.geometries}
    groups: dict[Any, list[str]] = {}
    for n in names:
        key = _instance_group(n) if _instance_group(n) != n else scene.object(n).look
        groups.setdefault(key, []).append(n)
    for members in groups.values():
        if len(members) < 2:
            continue
        found = [n for n in members if n in result.geometries]
        if not found:
            continue
        cost = np.array(
            [[np.linalg.norm(result.geometries[e].position - truth[t][0]) for e in found] for t in members]
        )
        rows, cols = linear_sum_assignment(cost)
        for t in members:
            out.pop(t, None)
        for r, c in zip(rows, cols):
            out[members[r]] = found[c]
    return out


def bench_real(
    relpath: str,
    known: dict[str, str | None] | None,
    out: Path,
    config: Any,
    expected_objects: int | None = None,
) -> dict[str, Any]:
    """real2sim on one real frame with the labels of the objects known to be in it.

    Each object's ``reference`` says what its ``extent_pct`` compares against: ``ycb`` (the listed size of
    the YCB object), ``object_pc`` (the oriented extents of the object points shipped with a 6-DoF GraspNet
    frame, for an object that is not a YCB object of known size) or ``none``. Where the frame ships object
    points, the object nearest to them also gets ``pc_extent_m`` and ``pc_extent_pct``: they are one view's
    surface, so a completed hidden side can only make the footprint longer than theirs. An unlabelled
    frame's ``regions`` (how many objects real2sim built) sits beside ``expected_objects``, the hand count
    of :data:`simpact.bench.real_truth.EXPECTED_OBJECTS` (given here, never to real2sim)."""
    path = shared_data_dir(relpath)
    frame = read_any_frame(path)
    marked = object_pixels(relpath, frame.metadata)  # a malformed annotation stops before the work
    if expected_objects is None:
        expected_objects = _expected(frame, relpath)
    t0 = time.perf_counter()
    result = run_real2sim(frame, labels=list(known) if known else None, out=out, config=config)
    wall = time.perf_counter() - t0
    pc_extent, pc_owner = _graspnet_object(path, frame, result)
    if not known:  # no reference table entry: every region found, scored by its fit alone
        known = {g.label: None for g in result.geometries.values()}
    labels = list(known)
    objects: dict[str, Any] = {}
    for label in labels:
        name = result.labels.name_of(label) if result.labels.labels else label
        reference = "ycb" if known[label] is not None else "object_pc" if pc_extent is not None else "none"
        owned = pc_extent if name == pc_owner else None
        objects[name] = _real_object(result, name, reference, known[label], owned)
    for seg in result.perception.segments:  # where each object is: the report matches a baseline's by it
        name = result.labels.name_of(seg.label) if result.labels.labels else seg.label
        rows, cols = np.nonzero(seg.seen)
        if name in objects and len(rows):
            objects[name]["centre_px"] = [round(float(cols.mean()), 1), round(float(rows.mean()), 1)]
    for label, on in on_their_objects(LABEL_POINTS.get(relpath, {}), result.perception.segments).items():
        if (name := result.labels.name_of(label)) in objects:
            objects[name]["on_its_object"] = on
    annotated = against_reference_masks(reference_masks(path), result, objects)
    return {
        "frame": relpath,
        "edge_runs": edge_runs(frame.depth).tolist(),
        **annotated,
        "labelled": bool(result.labels.labels),
        "objects": objects,
        "found": sum(o["found"] for o in objects.values()),
        "present": len(labels) if result.labels.labels else None,
        "regions": None if result.labels.labels else len(result.geometries),
        "expected_objects": expected_objects,
        **against_object_points(marked, [s.seen for s in result.perception.segments]),
        "table_residual_mm": (
            None if "table" not in result.fit else round(1000 * result.fit["table"]["depth_residual_m"], 3)
        ),
        "seconds": wall,
        "timings_s": {k: round(v, 4) for k, v in result.timings_s.items()},
        "settle_clean": None if result.settle is None else result.settle.clean,
        "warnings": result.warnings,
        "out": str(out),
    }


def _graspnet_object(path: Path, frame: Frame, result: Any) -> tuple[np.ndarray | None, str | None]:
    """For a 6-DoF GraspNet frame (the file, not a bundle made from it): the oriented extents (m) of the
    object points it ships and the reconstructed object nearest to them; else ``(None, None)``."""
    if frame.metadata.get("format") != "6dof_graspnet" or not path.is_file():
        return None, None
    T = result.perception.table.T_world_cam
    pc = read_graspnet_object_points(path) @ T[:3, :3].T + T[:3, 3]
    names = [n for n in map(result.labels.name_of, result.labels.labels) if n in result.geometries]
    if not names:
        return points_extent(pc), None
    centre = pc[:, :2].mean(axis=0)
    owner = min(names, key=lambda n: float(np.linalg.norm(result.geometries[n].position[:2] - centre)))
    return points_extent(pc), owner


def _real_object(
    result: Any, name: str, reference: str, ycb: str | None, pc_extent: np.ndarray | None
) -> dict[str, Any]:
    """One object's record on a real frame: found, what its extent is compared with (``reference``), its fit
    score, its extents (sorted, m) against YCB's listed size of ``ycb`` (if named) and against the object
    points' ``pc_extent`` (m, if it owns them: the reference of an object that is not YCB's), its support
    gap and settle motion."""
    entry: dict[str, Any] = {"found": name in result.geometries, "reference": reference}
    fit = result.fit.get("objects", {}).get(name)
    if fit is not None:
        entry["iou"] = fit["iou"]
        entry["verdict"] = fit["verdict"]
        for key in ("spill_px", "spill_unmeasured_px"):
            if key in fit:
                entry[key] = fit[key]
        for key in ("depth_residual", "table_nearby_residual"):  # the latter: the depth's noise beside it
            if fit.get(f"{key}_m") is not None:
                entry[f"{key}_mm"] = round(1000 * fit[f"{key}_m"], 3)
    if name not in result.geometries:
        return entry
    g = result.geometries[name]
    est = np.sort(np.asarray(g.extent, dtype=float))
    entry["extent_m"] = [round(float(v), 4) for v in est]
    if ycb is not None:
        ref = np.sort(np.asarray(YCB_SIZES_M[ycb], dtype=float))
        entry["known_extent_m"] = [float(v) for v in ref]
        entry["extent_pct"] = extent_error(est, ref)
    if pc_extent is not None:
        entry["pc_extent_m"] = [round(float(v), 4) for v in np.sort(pc_extent)]
        entry["pc_extent_pct"] = extent_error(est, pc_extent)
        if ycb is None:
            entry["extent_pct"] = entry["pc_extent_pct"]
    entry["support_gap_cm"] = -100 * float(result.placement.get(name, {}).get("lift_m", 0.0))
    if result.settle is not None and name in result.settle.motion:
        m = result.settle.motion[name]
        entry["settle_moved_cm"] = 100 * m.displacement
        entry["settle_rotated_deg"] = float(np.degrees(m.rotation))
        entry["settle_shifted"] = name in result.settle.shifted  # did not rest where it was fitted
    return entry


def _expected(frame: Frame, where: str) -> int | None:
    """The hand count of objects a frame bundle's ``frame.json`` gives (``expected_objects``), if any."""
    count = frame.metadata.get("expected_objects")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise FrameError(f"{where}: expected_objects must be a whole number of objects, got {count!r}")
    return count


def chosen_real_frames(patterns: Sequence[str]) -> list[str]:
    """The real frames under the shared data's ``rgbd`` folder whose path (``rgbd/uois/image_0006.npy``)
    contains one of ``patterns`` (shell wildcards allowed: ``cleargrasp/*opaque*``). Raises
    :class:`UsageError` when the shared data is missing or a pattern names no frame."""
    if not patterns:
        raise UsageError("--frames: name at least one part of a frame's path, e.g. uois/image_0006")
    try:
        relpaths = discover_real_frames(shared_data_dir("rgbd"))
    except SharedDataMissing as exc:
        raise UsageError(f"--frames: {exc}") from None
    for pattern in patterns:
        if not any(fnmatch(path, f"*{pattern}*") for path in relpaths):
            example = relpaths[0] if relpaths else "none"
            raise UsageError(
                f"--frames {pattern!r} names none of the {len(relpaths)} real frames (named like {example})"
            )
    return [path for path in relpaths if any(fnmatch(path, f"*{p}*") for p in patterns)]


def run_real2sim_bench(
    out: str | Path,
    *,
    tasks: Sequence[str] | None = None,
    seeds: Sequence[int] = (0,),
    real: bool = True,
    progress: Progress | None = None,
    config: Any = None,
    real_frames: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Score real2sim on rendered task frames and the real frames (``real_frames``: paths relative to the
    shared data folder; default every frame found under its ``rgbd``); write ``out/result.json``.
    ``progress(section, record)`` gets each frame's record as it finishes (section: ``rendered``,
    ``rendered_noisy``, ``real`` or ``glass``)."""
    config = config or Real2SimConfig()
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    rendered = _run_jobs("rendered", _rendered_jobs(tasks, seeds, root, config), progress)
    noisy_jobs = _rendered_jobs(tasks, seeds, root, config, SensorNoise())
    rendered_noisy = _run_jobs("rendered_noisy", noisy_jobs, progress)
    real_records: list[dict[str, Any]] = []
    glass_records: list[dict[str, Any]] = []
    skipped = None
    if real:
        try:
            shared_data_dir("rgbd")
        except SharedDataMissing as exc:
            skipped = str(exc)
        else:
            relpaths = discover_real_frames(shared_data_dir("rgbd")) if real_frames is None else real_frames
            real_records = _run_jobs("real", _real_jobs(relpaths, root, config), progress)
            glass_records = _run_jobs("glass", _glass_jobs(relpaths, root, config), progress)
    result = bench_result(rendered, real_records, glass_records, skipped, rendered_noisy)
    write_json(root / "result.json", result)
    return result


def bench_result(
    rendered: list[dict[str, Any]],
    real: list[dict[str, Any]],
    glass: list[dict[str, Any]],
    real_skipped: str | None = None,
    rendered_noisy: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The bench's result of these frame records: targets, which are met, the summary and the records."""
    noisy = rendered_noisy or []
    summary, met = summarise(rendered, real, glass, noisy)
    errors = sum("error" in r for r in (*rendered, *noisy, *real, *glass))
    return {
        "targets": TARGETS,
        "targets_met": met,
        "summary": summary,
        "rendered": rendered,
        "rendered_noisy": noisy,
        "real": real,
        "glass": glass,
        "real_skipped": real_skipped,
        "errors": errors,
        "fitting_processes": worker_count(),
    }


Job = tuple[str, Callable[[], dict[str, Any]]]
"""A frame's name and the call that benchmarks it."""
Progress = Callable[[str, dict[str, Any]], None]
"""Called with the section (``rendered``, ``rendered_noisy``, ``real``, ``glass``) and a frame's record as it
finishes."""


def _run_jobs(section: str, jobs: Iterable[Job], progress: Progress | None) -> list[dict[str, Any]]:
    """Each job's record, in order, passed to ``progress`` (with ``section``) as it finishes; a failed
    job's record is its error (one frame's failure is a result too)."""
    records = []
    for frame, job in jobs:
        try:
            record = job()
        except Exception as exc:
            record = {"frame": frame, "error": f"{type(exc).__name__}: {exc}"}
        records.append(record)
        if progress:
            progress(section, record)
    return records


def _slug(relpath: str) -> str:
    return relpath.replace("rgbd/", "").replace("/", "_").rsplit(".", 1)[0]


def _rendered_jobs(
    tasks: Sequence[str] | None,
    seeds: Sequence[int],
    root: Path,
    config: Any,
    noise: SensorNoise | None = None,
) -> list[Job]:
    """One job per task (all when ``tasks`` is None) and seed, with ``noise``'s sensor when given."""
    folder = root / ("rendered" if noise is None else "rendered_noisy")
    suffix = "" if noise is None else NOISY_SUFFIX
    return [
        (
            f"{name} seed {seed}{suffix}",
            partial(bench_rendered, name, seed, folder / f"{name}_seed{seed}", config, noise),
        )
        for name in (tasks if tasks is not None else list_tasks())
        for seed in seeds
    ]


def _real_jobs(relpaths: Sequence[str], root: Path, config: Any) -> list[Job]:
    """One job per real frame: labels and reference sizes from :data:`REAL_FRAMES` where it lists the frame,
    else every region unlabelled, against the hand count of :data:`EXPECTED_OBJECTS`."""
    jobs: list[Job] = []
    for relpath in relpaths:
        known = REAL_FRAMES.get(relpath)
        expected = None if known else EXPECTED_OBJECTS.get(relpath)
        jobs.append(
            (relpath, partial(bench_real, relpath, known, root / "real" / _slug(relpath), config, expected))
        )
    return jobs


def _glass_jobs(relpaths: Sequence[str], root: Path, config: Any) -> list[Job]:
    """One job per ClearGrasp transparent frame with its opaque twin among ``relpaths``
    (:func:`simpact.bench.glass.bench_glass_pair`)."""
    return [
        (f"{glass} (glass)", partial(bench_glass_pair, glass, twin, root / "glass" / _slug(glass), config))
        for glass, twin in glass_pairs(list(relpaths))
    ]
