"""Masks scored against what a person marked on a real frame (:mod:`simpact.bench.real_truth`), never read by
real2sim: a pixel placed by hand on each labelled object (:func:`on_their_objects`), one or a few on each
object of an unlabelled frame (:func:`against_object_points`), and the object masks a dataset ships
(ClearGrasp, :func:`against_reference_masks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from real2sim.masks import fill_holes
from simpact.bench.scoring import mask_iou

__all__ = [
    "OBJECT_TOLERANCE_PX",
    "POINT_TOLERANCE_PX",
    "SPAN_SHARE",
    "against_object_points",
    "against_reference_masks",
    "holds",
    "on_their_objects",
]

POINT_TOLERANCE_PX = 3
"""A label's mask holds its hand-marked pixel when it covers a pixel this near (px): a thin blade's mark."""
OBJECT_TOLERANCE_PX = 2
"""A mask holds an object's hand-marked pixel (``OBJECT_POINTS``) when it, holes filled, covers a pixel this
near it (px): tighter, as a mask right beside a mark on a neighbour would count as a merge."""


def holds(mask: np.ndarray, column: int, row: int, tolerance: int) -> bool:
    """Whether ``mask`` covers a pixel within ``tolerance`` (px, a square) of (``column``, ``row``)."""
    return bool(
        mask[
            max(row - tolerance, 0) : row + tolerance + 1, max(column - tolerance, 0) : column + tolerance + 1
        ].any()
    )


def on_their_objects(points: dict[str, tuple[int, int]], segments: Sequence[Any]) -> dict[str, bool]:
    """Per label with a hand-marked pixel (``points``: label -> (column, row), :data:`LABEL_POINTS`):
    whether the mask real2sim gave that label holds its pixel and no other label's (a label matched to the
    wrong object, or a mask over two, is False; so is a label not found)."""
    masks = {s.label: s.seen for s in segments}

    def held(mask: np.ndarray) -> set[str]:
        return {o for o, (x, y) in points.items() if holds(mask, x, y, POINT_TOLERANCE_PX)}

    return {label: label in masks and held(masks[label]) == {label} for label in points}


SPAN_SHARE = 0.15
"""A mask spans an annotated object when at least this share of the mask's pixels lies on it."""


def against_reference_masks(
    annotated: list[np.ndarray] | None, result: Any, objects: dict[str, Any]
) -> dict[str, Any]:
    """Where the frame marks its objects (ClearGrasp): per object how many marked objects its mask spans
    (``spans``; 2 or more is a mask over two objects), how many marked objects some mask covers at least
    half of (``annotated_found`` of ``annotated``), and per marked object the IoU with it of the masks and of
    the scene's render from the photo's camera of the objects whose masks lie mostly on it
    (``annotated_iou``: ``mask``, ``render``; 0 where none does), and of those objects' regions as the depth
    cut them, before their outlines were snapped to the colour edges (``depth_mask``, side by side). The
    render's IoU is ground truth the pipeline never reads, for shape and pose together; ``render_covers``
    (the share of the marked object the render covers) and ``render_outside`` (the share of the render off
    it) say whether the shapes fall short or spill over. Nothing when the frame marks none."""
    if not annotated:
        return {}
    segments = {
        n: s for s in result.perception.segments for n, g in result.geometries.items() if g.label == s.label
    }
    masks = {n: s.seen for n, s in segments.items()}
    index = result.renders.get("index")
    rendered = list(result.fit.get("objects", {}))  # the render's object order
    found = 0
    ious: list[dict[str, float]] = []
    for ref in annotated:
        size = int(ref.sum())
        found += any(int((m & ref).sum()) >= 0.5 * size for m in masks.values())
        on_it = [n for n, m in masks.items() if int((m & ref).sum()) >= 0.5 * max(int(m.sum()), 1)]
        mask, depth_cut, render = np.zeros_like(ref), np.zeros_like(ref), np.zeros_like(ref)
        for n in on_it:
            mask |= masks[n]
            depth_cut |= segments[n].mask
            if index is not None and n in rendered:
                render |= index == rendered.index(n)
        pairs = (("mask", mask), ("depth_mask", depth_cut), ("render", render))
        scores = {k: round(mask_iou(m, ref), 4) for k, m in pairs}
        # Which way the render errs: the share of the marked object it covers, and of itself outside it.
        scores["render_covers"] = round(int((render & ref).sum()) / max(size, 1), 4)
        scores["render_outside"] = round(int((render & ~ref).sum()) / max(int(render.sum()), 1), 4)
        ious.append(scores)
    for name, mask in masks.items():
        px = max(int(mask.sum()), 1)
        if name in objects:
            objects[name]["spans"] = sum(int((mask & ref).sum()) >= SPAN_SHARE * px for ref in annotated)
    return {"annotated": len(annotated), "annotated_found": found, "annotated_iou": ious}


def against_object_points(
    points: Sequence[Sequence[tuple[int, int]]] | None, masks: list[np.ndarray]
) -> dict[str, Any]:
    """Where the frame has hand-placed pixels (column, row) on each object (per object, one or a few:
    :func:`simpact.bench.real_truth.object_pixels`): how many objects some mask holds a pixel of
    (``points_found`` of ``points``; a mask within :data:`OBJECT_TOLERANCE_PX` counts, and one enclosing the
    pixel: a hole without depth in it is not a missed object), how many masks hold pixels of two or more
    objects (``masks_merging``) and how many objects such masks hold (``objects_merged``); nothing without
    pixels."""
    if points is None:
        return {}
    held = np.zeros((len(masks), len(points)), bool)
    for i, mask in enumerate(masks):
        m = fill_holes(mask)
        for j, pixels in enumerate(points):
            held[i, j] = any(holds(m, c, r, OBJECT_TOLERANCE_PX) for c, r in pixels)
    return {
        "points": len(points),
        "points_found": int(held.any(axis=0).sum()),
        "masks_merging": int((held.sum(axis=1) >= 2).sum()),
        "objects_merged": int(held[held.sum(axis=1) >= 2].sum()),
    }
