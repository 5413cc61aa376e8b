"""The report of ``simpact bench real2sim``: its targets, the summary of its records and which targets they
meet, and its table."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from simpact.bench.glass import glass_lines

__all__ = ["TARGETS", "format_table", "summarise", "summary_stats"]


TARGETS = {
    "rendered_position_cm": 1.0,
    "rendered_extent_pct": 10.0,
    "real_extent_pct": 10.0,
    "real_iou_min": 0.85,
    "real_depth_residual_mm": 5.0,
    "seconds_per_frame": 10.0,
}


def summary_stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    v = np.asarray(values, dtype=float)
    return {
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "min": float(v.min()),
        "max": float(v.max()),
        "n": int(v.size),
    }


RENDERED_KEYS = ("position_cm", "rotation_deg", "extent_pct", "mask_iou")
"""What is measured on each object of a rendered frame (against the rendered scene)."""


def _values(records: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [o[key] for r in records for o in r.get("objects", {}).values() if key in o]


WRONG = {"extent_pct": 10.0, "position_cm": 1.0}
"""A rendered object is wrong when its extent or position error exceeds these (the rendered targets)."""


def verdicts_vs_truth(records: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    """Per fit verdict real2sim gave itself without ground truth (:mod:`real2sim.fitscore`): how many
    rendered objects got it and how many of those are :data:`WRONG` by the rendered scene; whether the
    verdict flags the wrong fits."""
    out: dict[str, list[int]] = {}
    for r in records:
        for o in r.get("objects", {}).values():
            if "verdict" in o:
                wrong = any(o.get(k, 0.0) > limit for k, limit in WRONG.items())
                counts = out.setdefault(o["verdict"], [0, 0])
                counts[0] += 1
                counts[1] += int(wrong)
    return out


def edge_run_shares(
    rendered: Mapping[str, Sequence[dict[str, Any]]], real_frames: Sequence[dict[str, Any]]
) -> dict[str, list[float]]:
    """Per kind of frame (each set of ``rendered`` records, the real frames by dataset folder): the shares of
    its steep depth edges that are runs of 1, 2, 3 and 4+ px (:func:`simpact.bench.sensor_noise.edge_runs`,
    summed over its frames): how much the sensor model smears edges beside the real sensors."""
    groups: dict[str, list[dict[str, Any]]] = {k: list(v) for k, v in rendered.items()}
    for r in real_frames:
        groups.setdefault(r["frame"].split("/")[1] if "/" in r["frame"] else r["frame"], []).append(r)
    shares = {}
    for kind, records in groups.items():
        total = np.sum([r["edge_runs"] for r in records if "edge_runs" in r], axis=0)
        if np.ndim(total) == 1 and total.sum() > 0:
            shares[kind] = [round(float(v), 3) for v in total / total.sum()]
    return shares


def summarise(
    rendered: list[dict[str, Any]],
    real_frames: list[dict[str, Any]],
    glass: Sequence[dict[str, Any]] = (),
    rendered_noisy: Sequence[dict[str, Any]] = (),
) -> tuple[dict[str, Any], dict[str, bool | None]]:
    """The summary statistics of all records (``glass``: :func:`simpact.bench.glass.bench_glass_pair`'s;
    ``rendered_noisy``: the rendered frames with sensor noise, the development split, no targets) and which
    targets they meet."""
    values = _values
    seconds = [r["seconds"] for r in rendered + real_frames if "seconds" in r]
    summary: dict[str, Any] = {
        "rendered": {key: summary_stats(values(rendered, key)) for key in RENDERED_KEYS},
        "rendered_noisy": {key: summary_stats(values(rendered_noisy, key)) for key in RENDERED_KEYS},
        "rendered_found": [
            sum(o["found"] for o in _objects(rendered)),
            sum(len(r.get("objects", {})) for r in rendered),
        ],
        "rendered_not_visible": [
            f"{r['frame']}: {name}"
            for r in rendered
            for name, o in r.get("objects", {}).items()
            if o.get("visible_px") == 0
        ],
        "real": _real_summary(real_frames),
        "seconds_per_frame": summary_stats(seconds),
        "verdicts_vs_truth": {
            "rendered, exact depth": verdicts_vs_truth(rendered),
            "rendered, sensor model": verdicts_vs_truth(rendered_noisy),
        },
        "edge_runs": edge_run_shares(
            {"rendered, exact depth": rendered, "rendered, sensor model": rendered_noisy}, real_frames
        ),
        "glass": {key: summary_stats(values(list(glass), key)) for key in ("extent_pct", "centre_cm")},
    }
    return summary, _targets_met(rendered, real_frames, seconds)


def _objects(frames: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every object record of ``frames``."""
    return (o for r in frames for o in r.get("objects", {}).values())


def _real_summary(real_frames: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of the real frames' records."""
    return {
        "extent_pct": summary_stats(_values(real_frames, "extent_pct")),
        "support_gap_cm": summary_stats([abs(v) for v in _values(real_frames, "support_gap_cm")]),
        "found": [
            sum(r.get("found", 0) for r in real_frames if r.get("labelled")),
            sum(r.get("present") or 0 for r in real_frames if r.get("labelled")),
        ],
        "labels_on_their_objects": [  # of the labels with a hand-marked pixel (LABEL_POINTS)
            sum(o.get("on_its_object") is True for o in _objects(real_frames)),
            sum("on_its_object" in o for o in _objects(real_frames)),
        ],
        "iou": summary_stats(_values(real_frames, "iou")),
        "depth_residual_mm": summary_stats(_values(real_frames, "depth_residual_mm")),
        "masks_spanning_two": sum(o.get("spans", 0) >= 2 for o in _objects(real_frames)),
        "annotated_found": [
            sum(r.get("annotated_found", 0) for r in real_frames),
            sum(r.get("annotated", 0) for r in real_frames),
        ],
        "annotated_iou": {
            kind: summary_stats([i[kind] for r in real_frames for i in r.get("annotated_iou", [])])
            for kind in ("mask", "depth_mask", "render")
        },
        "regions_vs_expected": {
            r["frame"]: [r["regions"], r["expected_objects"]]
            for r in real_frames
            if r.get("expected_objects") is not None and r.get("regions") is not None
        },
        "object_points": {
            r["frame"]: {k: r[k] for k in ("points", "points_found", "masks_merging", "objects_merged")}
            for r in real_frames
            if "points" in r
        },
        "verdicts": {
            v: sum(o.get("verdict") == v for o in _objects(real_frames)) for v in ("good", "check", "poor")
        },
    }


def _targets_met(
    rendered: list[dict[str, Any]], real_frames: list[dict[str, Any]], seconds: list[float]
) -> dict[str, bool | None]:
    """Which targets the records meet (None: nothing measured for it, e.g. ``--no-real``)."""

    def within(stats: dict[str, float] | None, target: str) -> bool | None:
        """Whether the worst value meets the target; None when nothing was measured (e.g. ``--no-real``)."""
        return None if stats is None else stats["max"] <= TARGETS[target]

    return {
        "rendered_position_cm": within(
            summary_stats(_values(rendered, "position_cm")), "rendered_position_cm"
        ),
        "rendered_extent_pct": within(summary_stats(_values(rendered, "extent_pct")), "rendered_extent_pct"),
        "real_extent_pct": within(summary_stats(_values(real_frames, "extent_pct")), "real_extent_pct"),
        "real_iou_min": (
            None
            if not _values(real_frames, "iou")
            else min(_values(real_frames, "iou")) >= TARGETS["real_iou_min"]
        ),
        "real_no_mask_spans_two": (  # against the frames' own masks and the hand-placed object points
            None
            if not any("annotated" in r or "points" in r for r in real_frames)
            else all(o.get("spans", 0) < 2 for o in _objects(real_frames))
            and not any(r.get("masks_merging", 0) for r in real_frames)
        ),
        "real_depth_residual_mm": within(
            summary_stats(_values(real_frames, "depth_residual_mm")), "real_depth_residual_mm"
        ),
        "seconds_per_frame": within(summary_stats(seconds), "seconds_per_frame"),
    }


def format_table(result: dict[str, Any]) -> str:
    """One line per object: frame, object, errors."""
    head = f"{'frame':<34} {'object':<18} {'pos cm':>7} {'rot deg':>8} {'ext %':>6} {'IoU':>5} {'s':>5}"
    lines = [f"{head} {'ref':<9} {'pc ext %':>8} {'res mm':>6} {'near mm':>7} verdict"]
    for r in result["rendered"] + result.get("rendered_noisy", []) + result["real"]:
        if "error" in r:
            lines.append(f"{r['frame']:<34} error: {r['error']}")
            continue
        for name, o in r["objects"].items():

            def f(key: str, fmt: str, o: dict[str, Any] = o) -> str:
                return format(o[key], fmt) if key in o else "-"

            found = "" if o["found"] else " (not visible)" if o.get("visible_px") == 0 else " (not found)"
            errors = (
                f"{f('position_cm', '7.2f'):>7} {f('rotation_deg', '8.1f'):>8} {f('extent_pct', '6.1f'):>6}"
            )
            iou = f("mask_iou", "5.2f") if "mask_iou" in o else f("iou", "5.2f")
            lines.append(
                f"{r['frame']:<34} {name + found:<18} {errors} {iou:>5} "
                f"{r['seconds']:5.1f} {o.get('reference', 'scene'):<9} {f('pc_extent_pct', '8.1f'):>8} "
                f"{f('depth_residual_mm', '6.1f'):>6} {f('table_nearby_residual_mm', '7.1f'):>7} "
                f"{o.get('verdict', '')}"
            )
    for r in result["real"]:
        if r.get("expected_objects") is not None and r.get("regions") is not None:
            lines.append(
                f"{r['frame']:<34} regions {r['regions']} of {r['expected_objects']} objects (hand count)"
            )
        if "points" in r:
            lines.append(
                f"{r['frame']:<34} {r['points_found']} of {r['points']} hand-marked objects in a mask, "
                f"{r['masks_merging']} masks over two or more ({r['objects_merged']} objects)"
            )
        if r.get("annotated_iou"):
            ious = r["annotated_iou"]
            lines.append(
                f"{r['frame']:<34} annotated objects' IoU, masks: "
                + " ".join(f"{i['mask']:.2f}" for i in ious)
                + "; depth regions: "
                + " ".join(f"{i['depth_mask']:.2f}" for i in ious)
                + "; render: "
                + " ".join(f"{i['render']:.2f}" for i in ious)
            )
    glass = [r for r in result.get("glass", []) if "error" not in r]
    if glass:
        lines += glass_lines(glass)
    lines += [f"{r['frame']:<34} error: {r['error']}" for r in result.get("glass", []) if "error" in r]
    return "\n".join(lines)
