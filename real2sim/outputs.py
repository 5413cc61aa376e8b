"""Writing a real2sim result's files under its output folder: ``scene.json``, ``scene.xml``, the VLM
exchange and the overlays (``masks.png``, ``meshes.png``, ``scene_vs_photo.png``, ``overlay.png``); see
:mod:`real2sim.pipeline` for what each holds."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from real2sim.overlays import (
    cloud_mesh_overlay,
    fit_overlay,
    mask_overlay,
    save_png,
    shaded_render,
    side_by_side,
)
from real2sim.result import Real2SimConfig, Real2SimResult
from simpact.core.frame import Frame
from simpact.core.jsonio import write_json
from solvers.mujoco.world import mujoco_access

__all__ = ["write_outputs"]


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
        result.files.update(_overlay_files(result, frame, masks, out, config))
        result.timings_s["overlays"] = time.perf_counter() - t


def _overlay_files(
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
