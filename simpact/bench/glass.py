"""Objects without depth (glass) on ClearGrasp's real frames, part of ``simpact bench real2sim``.

ClearGrasp ships each real scene twice, the same camera and layout: with transparent objects and with
painted copies of them (``opaque``), and one annotation mask of those objects. For every such pair, each
annotated object is reconstructed by real2sim from the transparent frame and from the opaque one, both
segmented by the annotation itself (segmenter ``masks``: the mask is what the glass's reconstruction is
given, as Grounded-SAM 2 would give it, not what it is scored against). The transparent frame's objects are
compared with the opaque twin's, which the depth camera does see: the extents (sorted, largest relative
difference) and the distance between the bounding-box centres in the camera frame.

What it does not show: the opaque twin's reconstruction is itself a fit to one view's depth, not ground
truth (on a lying bottle it can be wrong); objects that touch in the image share one annotated mask on both
frames; and the segmentation of glass without the annotation (the geometric segmenter finds little of it).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np

from real2sim.datasets import read_any_frame, reference_masks, shared_data_dir, with_masks
from real2sim.pipeline import run_real2sim
from simpact.bench.scoring import extent_error

__all__ = ["bench_glass_pair", "glass_lines", "glass_pairs"]


def glass_pairs(relpaths: list[str]) -> list[tuple[str, str]]:
    """(transparent, opaque) frame pairs among ``relpaths`` (ClearGrasp's ``N-transparent-rgb-img.jpg`` and
    ``N-opaque-rgb-img.jpg``) whose folder holds the annotation ``N-mask.png``."""
    have = set(relpaths)
    pairs = []
    for rel in relpaths:
        if rel.endswith("-transparent-rgb-img.jpg"):
            twin = rel.replace("-transparent-rgb-img.jpg", "-opaque-rgb-img.jpg")
            if twin in have and reference_masks(shared_data_dir(rel)):
                pairs.append((rel, twin))
    return pairs


def _reconstruct(relpath: str, masks: list[np.ndarray], out: Path, config: Any) -> Any:
    labels = [f"object {i}" for i in range(len(masks))]
    frame = with_masks(read_any_frame(shared_data_dir(relpath)), masks, labels)
    return run_real2sim(frame, labels=labels, out=out, config=dataclasses.replace(config, segmenter="masks"))


def _centre_in_camera(result: Any, name: str) -> np.ndarray:
    T = np.asarray(result.frame_info["T_world_cam"], dtype=float)
    return (np.linalg.inv(T) @ np.append(result.geometries[name].position, 1.0))[:3]


def bench_glass_pair(transparent: str, opaque: str, out: Path, config: Any) -> dict[str, Any]:
    """The record of one pair (module docstring): per annotated object, how each frame's reconstruction was
    made (``source``: ``silhouette`` or the depth's ``geometric``), its extents, the transparent one's fit
    score, and the two's ``extent_pct`` and ``centre_cm``."""
    t0 = time.perf_counter()
    masks = reference_masks(shared_data_dir(transparent)) or []
    glass = _reconstruct(transparent, masks, out / "transparent", config)
    painted = _reconstruct(opaque, masks, out / "opaque", config)
    objects: dict[str, Any] = {}
    for i in range(len(masks)):
        name = f"object_{i}"
        entry: dict[str, Any] = {"found": name in glass.geometries, "twin_found": name in painted.geometries}
        if entry["found"] and entry["twin_found"]:
            g, twin = glass.geometries[name], painted.geometries[name]
            est, ref = np.sort(np.asarray(g.extent, float)), np.sort(np.asarray(twin.extent, float))
            fit = glass.fit.get("objects", {}).get(name, {})
            entry.update(
                source=g.shape_source,
                twin_source=twin.shape_source,
                extent_m=[round(float(v), 4) for v in est],
                twin_extent_m=[round(float(v), 4) for v in ref],
                extent_pct=extent_error(est, ref),
                centre_cm=100
                * float(np.linalg.norm(_centre_in_camera(glass, name) - _centre_in_camera(painted, name))),
                iou=fit.get("iou"),
                verdict=fit.get("verdict"),
            )
        objects[name] = entry
    return {
        "frame": transparent,
        "twin": opaque,
        "objects": objects,
        "seconds": time.perf_counter() - t0,
        "out": str(out),
    }


def glass_lines(records: list[dict[str, Any]]) -> list[str]:
    """The table of :func:`bench_glass_pair` records, a line per object."""
    lines = [
        "glass (ClearGrasp transparent frames, annotation masks) against the painted twin's depth fit:",
        f"{'frame':<50} {'object':<9} {'source':<11} {'extent cm':<17} {'twin cm':<17} "
        f"{'ext %':>6} {'ctr cm':>6} {'IoU':>5}",
    ]
    for r in records:
        for name, o in r.get("objects", {}).items():
            if "extent_pct" not in o:
                lines.append(f"{r['frame']:<50} {name:<9} not reconstructed on both frames")
                continue
            ext = " ".join(f"{100 * v:.1f}" for v in o["extent_m"])
            twin = " ".join(f"{100 * v:.1f}" for v in o["twin_extent_m"])
            lines.append(
                f"{r['frame']:<50} {name:<9} {o['source']:<11} {ext:<17} {twin:<17} {o['extent_pct']:>6.1f} "
                f"{o['centre_cm']:>6.1f} {'-' if o['iou'] is None else format(o['iou'], '.2f'):>5}"
            )
    return lines
