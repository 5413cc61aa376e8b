"""Pictures that show what real2sim did: masks over the photo, reconstructed meshes over the point cloud, and
the simulated scene rendered from the camera next to the photo. All return uint8 (H, W, 3) RGB arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = [
    "PALETTE",
    "cloud_mesh_overlay",
    "colour",
    "fit_overlay",
    "look_at",
    "mask_overlay",
    "project_points",
    "save_png",
    "shaded_render",
    "side_by_side",
]

#: Distinct colours (RGB) for objects, by index.
PALETTE = np.array(
    [
        [230, 25, 75],
        [60, 180, 75],
        [0, 130, 200],
        [245, 130, 48],
        [145, 30, 180],
        [70, 240, 240],
        [240, 50, 230],
        [210, 245, 60],
        [250, 190, 212],
        [0, 128, 128],
        [170, 110, 40],
        [128, 0, 0],
    ],
    dtype=np.uint8,
)
MAX_EDGES = 4000
"""Mesh edges drawn per object (evenly subsampled beyond this)."""


def colour(i: int) -> tuple[int, int, int]:
    c = PALETTE[i % len(PALETTE)]
    return int(c[0]), int(c[1]), int(c[2])


def save_png(image: np.ndarray, path: str | Path) -> Path:

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(image)).save(path, compress_level=1)
    return path


def _label(
    img: np.ndarray, text: str, at: tuple[int, int], rgb: tuple[int, int, int], scale: float = 0.5
) -> None:
    import cv2

    x, y = int(np.clip(at[0], 2, img.shape[1] - 10)), int(np.clip(at[1], 12, img.shape[0] - 4))
    # A dark outline from the same thin strokes shifted by a pixel: OpenCV spaces thicker text wider, so a
    # thick dark copy drifts off the letters along the line.
    for dx, dy in ((-1, -1), (-1, 1), (1, -1), (1, 1), (-1, 0), (1, 0), (0, -1), (0, 1)):
        cv2.putText(img, text, (x + dx, y + dy), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, text, (x, y), cv2.FONT_HERSHEY_SIMPLEX, scale, rgb, 1, cv2.LINE_AA)


def mask_overlay(
    rgb: np.ndarray,
    masks: Sequence[tuple[str, np.ndarray]],
    alpha: float = 0.5,
    unlabelled: Sequence[np.ndarray] = (),
) -> np.ndarray:
    """The photo with each (name, (H, W) bool mask) tinted, outlined and named; ``unlabelled`` regions
    outlined in grey and named so."""
    import cv2

    img = rgb.astype(np.float32).copy()
    for i, (_, mask) in enumerate(masks):
        img[mask] = (1 - alpha) * img[mask] + alpha * np.asarray(colour(i), np.float32)
    out = np.ascontiguousarray(np.clip(img, 0, 255).astype(np.uint8))
    for i, (name, mask) in enumerate(masks):
        if not mask.any():
            continue
        contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(out, contours, -1, colour(i), 2)
        ys, xs = np.nonzero(mask)
        _label(out, name, (int(xs.min()), int(ys.min()) - 4), colour(i))
    for mask in unlabelled:
        if mask.any():
            contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            cv2.drawContours(out, contours, -1, (160, 160, 160), 1)
            ys, xs = np.nonzero(mask)
            _label(out, "unlabelled", (int(xs.min()), int(ys.min()) - 4), (160, 160, 160), 0.4)
    return out


def look_at(
    eye: np.ndarray, target: np.ndarray, up: tuple[float, float, float] = (0.0, 0.0, 1.0)
) -> np.ndarray:
    """4x4 camera-to-world transform (OpenCV axes: z forward, y down) of a camera at ``eye`` looking at
    ``target`` (m)."""
    z = np.asarray(target, float) - np.asarray(eye, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, np.asarray(up, dtype=float))
    if np.linalg.norm(x) < 1e-9:
        x = np.cross(z, [1.0, 0.0, 0.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = x, y, z, eye
    return T


def project_points(
    points_world: np.ndarray, T_world_cam: np.ndarray, K: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (N, 2) and depths (N,) of world points seen by the camera at ``T_world_cam``."""
    T_cam_world = np.linalg.inv(T_world_cam)
    p = points_world @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]
    z = p[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = (p[:, :2] / z[:, None]) * [K[0, 0], K[1, 1]] + [K[0, 2], K[1, 2]]
    return uv, z


def _splat(img: np.ndarray, uv: np.ndarray, z: np.ndarray, colours: np.ndarray, radius: int = 1) -> None:
    h, w = img.shape[:2]
    ok = (z > 1e-3) & np.all(np.isfinite(uv), axis=1)
    uv, z, colours = uv[ok], z[ok], colours[ok]
    order = np.argsort(-z, kind="stable")  # far first: near points overwrite
    u = np.round(uv[order, 0]).astype(np.int64)
    v = np.round(uv[order, 1]).astype(np.int64)
    c = colours[order]
    for du in range(-radius, radius + 1):
        for dv in range(-radius, radius + 1):
            uu, vv = u + du, v + dv
            inside = (uu >= 0) & (uu < w) & (vv >= 0) & (vv < h)
            img[vv[inside], uu[inside]] = c[inside]


def _edges(faces: np.ndarray) -> np.ndarray:
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    e = np.unique(np.sort(e, axis=1), axis=0)
    if len(e) > MAX_EDGES:
        e = e[:: int(np.ceil(len(e) / MAX_EDGES))]
    return e


def _wireframe(
    img: np.ndarray,
    vertices_world: np.ndarray,
    faces: np.ndarray,
    T_world_cam: np.ndarray,
    K: np.ndarray,
    rgb: tuple[int, int, int],
) -> None:
    import cv2

    uv, z = project_points(vertices_world, T_world_cam, K)
    edges = _edges(faces)
    if not len(edges):
        return
    ends = uv[edges]  # (E, 2, 2)
    ok = (
        (z[edges] > 1e-3).all(axis=1)
        & np.isfinite(ends).all(axis=(1, 2))
        & (np.abs(ends) < 1e5).all(axis=(1, 2))
    )
    lines = [np.round(e).astype(np.int32).reshape(2, 1, 2) for e in ends[ok]]
    cv2.polylines(img, lines, False, rgb, 1, cv2.LINE_AA)


def cloud_mesh_overlay(
    rgb: np.ndarray,
    points_world: np.ndarray,
    point_colours: np.ndarray,
    meshes: Sequence[tuple[str, np.ndarray, np.ndarray]],
    T_world_cam: np.ndarray,
    K: np.ndarray,
    focus_world: np.ndarray | None = None,
) -> np.ndarray:
    """Two panels: the photo with every posed mesh as a wireframe, and the point cloud seen from an oblique
    viewpoint (the camera swung 50° about the vertical through ``focus_world``) with the same wireframes.

    ``points_world`` (N, 3) m with ``point_colours`` (N, 3) uint8; ``meshes``: (name, world vertices (V, 3) m,
    faces (F, 3)); ``T_world_cam`` the real camera's pose and ``K`` its intrinsics.
    """
    h, w = rgb.shape[:2]
    left = np.ascontiguousarray((rgb.astype(np.float32) * 0.6).astype(np.uint8))
    for i, (name, verts, faces) in enumerate(meshes):
        _wireframe(left, verts, faces, T_world_cam, K, colour(i))
        uv, z = project_points(verts, T_world_cam, K)
        good = (z > 0) & np.all(np.isfinite(uv), axis=1)
        if good.any():
            _label(left, name, (int(uv[good, 0].min()), int(uv[good, 1].min()) - 4), colour(i))
    if focus_world is None:
        focus_world = (
            np.mean([m[1].mean(axis=0) for m in meshes], axis=0)
            if meshes
            else np.median(points_world, axis=0)
        )
    eye0 = T_world_cam[:3, 3] - focus_world
    angle = np.deg2rad(50.0)
    rot = np.array(
        [[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]]
    )
    eye = focus_world + rot @ eye0
    T_view = look_at(eye, focus_world)
    right = np.full((h, w, 3), 255, np.uint8)
    _splat(right, *project_points(points_world, T_view, K), point_colours, radius=1)
    for i, (_, verts, faces) in enumerate(meshes):
        _wireframe(right, verts, faces, T_view, K, colour(i))
    _label(left, "meshes over the photo", (8, 20), (255, 255, 255), 0.6)
    _label(right, "meshes over the point cloud (side view)", (8, 20), (255, 255, 255), 0.6)
    return np.concatenate([left, right], axis=1)


def side_by_side(images: Sequence[np.ndarray], titles: Sequence[str]) -> np.ndarray:
    """Images of one height next to each other, each titled."""
    h = max(im.shape[0] for im in images)
    panels = []
    for im, title in zip(images, titles):
        panel = np.zeros((h, im.shape[1], 3), np.uint8)
        panel[: im.shape[0]] = im
        panel = np.ascontiguousarray(panel)
        _label(panel, title, (8, 20), (255, 255, 255), 0.6)
        panels.append(panel)
    return np.concatenate(panels, axis=1)


def shaded_render(index: np.ndarray, normals: np.ndarray, colours: Sequence[Sequence[float]]) -> np.ndarray:
    """A flat-shaded picture of a ray-cast render: each pixel's object colour (``colours[index]``, RGB in
    [0, 1]) lit from the camera by the surface normal (camera frame); black where nothing is hit."""
    img = np.zeros(index.shape + (3,), np.float64)
    light = np.clip(np.abs(np.nan_to_num(normals[..., 2])), 0.0, 1.0)[..., None]
    for i, c in enumerate(colours):
        hit = index == i
        img[hit] = np.asarray(c[:3], np.float64) * 255.0 * (0.35 + 0.65 * light[hit])
    return np.clip(img, 0, 255).astype(np.uint8)


def fit_overlay(
    rgb: np.ndarray,
    index: np.ndarray,
    normals: np.ndarray,
    names: Sequence[str],
    masks: dict[str, np.ndarray],
    verdicts: dict[str, str],
    alpha: float = 0.45,
) -> np.ndarray:
    """The rendered scene blended over the photo (each object in its palette colour, shaded), the render's
    outline of each object in its colour, the observed mask's outline in white, and the name and verdict."""
    import cv2

    tint = shaded_render(index, normals, [[c / 255.0 for c in colour(i)] for i in range(len(names))])
    hit = (index >= 0) & (index < len(names))
    img = rgb.astype(np.float32).copy()
    img[hit] = (1 - alpha) * img[hit] + alpha * tint[hit].astype(np.float32)
    out = np.ascontiguousarray(np.clip(img, 0, 255).astype(np.uint8))
    for i, name in enumerate(names):
        mask = masks.get(name)
        if mask is not None and mask.any():
            contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            cv2.drawContours(out, contours, -1, (255, 255, 255), 1)
        rendered = index == i
        if rendered.any():
            contours, _ = cv2.findContours(
                rendered.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
            )
            cv2.drawContours(out, contours, -1, colour(i), 2)
            ys, xs = np.nonzero(rendered)
            _label(out, f"{name}: {verdicts.get(name, '?')}", (int(xs.min()), int(ys.min()) - 4), colour(i))
    _label(out, "render from the photo camera, white: masks", (8, 20), (255, 255, 255), 0.5)
    return out
