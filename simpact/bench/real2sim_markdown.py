"""``report.md`` of ``simpact bench real2sim``: the targets, the totals and one row per real object (extent
error, silhouette IoU, median depth residual, the table's beside it, verdict), each beside a baseline run's
where one is given, the real frames' masks and render against the objects they mark by hand, and every
real frame's photo-view overlay.

A baseline's objects are matched by frame and by where they are (``centre_px``, the mask's centre: the
nearest within :data:`MATCH_PX`, each at most once), else, for records without it, by name: an unlabelled
frame names its regions ``object_k`` in order of size, so a region that grows or shrinks past another takes
its name. A row whose baseline object had another name says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simpact.bench.real2sim_report import RENDERED_KEYS, TARGETS
from simpact.core.errors import UsageError
from simpact.guard.settle import SHIFTED_DEG, SHIFTED_M

__all__ = ["load_baseline", "markdown_report"]

#: The per-object columns: (record key, heading, format).
COLUMNS = (
    ("extent_pct", "extent %", ".1f"),
    ("iou", "IoU", ".3f"),
    ("depth_residual_mm", "residual mm", ".2f"),
    ("table_nearby_residual_mm", "table beside mm", ".2f"),  # the depth's own noise there
    ("verdict", "verdict", ""),
)

#: A baseline object whose mask centre lies within this many pixels of an object's is that object.
MATCH_PX = 20.0

#: The IoUs with the hand-marked objects, in report order (:func:`_marked_objects`).
MARKED_KEYS = ("mask", "depth_mask", "render", "render_covers", "render_outside")


def load_baseline(path: str | Path) -> dict[str, Any]:
    """The ``result.json`` of an earlier ``bench real2sim`` run (``path``: the file or its folder); a
    :class:`~simpact.core.errors.UsageError` naming the fix when it is not one."""
    p = Path(path)
    p = p / "result.json" if p.is_dir() else p
    try:
        result = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: not a readable result.json ({exc})") from None
    if not isinstance(result, dict) or not isinstance(result.get("real"), list):
        raise UsageError(f"--baseline {path}: not a 'simpact bench real2sim' result (no 'real' frames)")
    return result


def _objects(result: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (r["frame"], name): o
        for r in result.get("real", [])
        if "error" not in r
        for name, o in r.get("objects", {}).items()
    }


def _match(
    old: Mapping[tuple[str, str], Mapping[str, Any]], new: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[tuple[str, str], tuple[str, str]]:
    """Each of ``new``'s objects -> the ``old`` object it is (same frame): by the nearest mask centre within
    :data:`MATCH_PX`, nearest pairs first, each used once; a record without a centre by name."""
    pairs = []
    for (frame, name), o in new.items():
        for (frame_was, name_was), was in old.items():
            if frame_was == frame and o.get("centre_px") is not None and was.get("centre_px") is not None:
                d = float(np.hypot(*np.subtract(o["centre_px"], was["centre_px"])))
                if d <= MATCH_PX:
                    pairs.append((d, (frame, name), (frame_was, name_was)))
    matched: dict[tuple[str, str], tuple[str, str]] = {}
    for _, key, key_was in sorted(pairs):
        if key not in matched and key_was not in matched.values():
            matched[key] = key_was
    for key, o in new.items():  # a record without a centre (an older run): the name
        unplaced = None in (o.get("centre_px"), old.get(key, {}).get("centre_px"))
        if unplaced and key in old and key not in matched and key not in matched.values():
            matched[key] = key
    return matched


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    return format(value, fmt) if fmt else str(value)


def _pair(before: Any, after: Any, fmt: str, compare: bool) -> str:
    now = _cell(after, fmt)
    if not compare:
        return now
    was = _cell(before, fmt)
    return now if was == now else f"{was} -> **{now}**"


def _totals(
    objects: Mapping[tuple[str, str], Mapping[str, Any]], frames: list[Mapping[str, Any]]
) -> dict[str, str]:
    def mean(key: str, fmt: str) -> str:
        v = [o[key] for o in objects.values() if o.get(key) is not None]
        return f"{format(sum(v) / len(v), fmt)} (n {len(v)})" if v else "-"

    verdicts = [o.get("verdict") for o in objects.values()]
    unmeasured = _unmeasured_spill(objects)
    extents = [o["extent_pct"] for o in objects.values() if o.get("extent_pct") is not None]
    settled = sum(bool(r.get("settle_clean")) for r in frames)
    shifted = [o["settle_shifted"] for o in objects.values() if "settle_shifted" in o]
    marked = [o["on_its_object"] for o in objects.values() if "on_its_object" in o]
    on_their_objects = f"{sum(marked)} of {len(marked)}" if marked else "-"
    return {
        "labels on the object they name (a pixel placed by hand on each)": on_their_objects,
        "verdicts good / check / poor": " / ".join(str(verdicts.count(v)) for v in ("good", "check", "poor"))
        + f" of {len(verdicts)}",
        "IoU, mean": mean("iou", ".3f"),
        "median depth residual mm, mean": mean("depth_residual_mm", ".2f"),
        "extent % of the labelled objects, mean": mean("extent_pct", ".2f"),
        "extent % of the labelled objects, max": f"{max(extents):.1f}" if extents else "-",
        "real scenes that settle clean": f"{settled} of {len(frames)}",
        f"objects that do not rest where fitted (settling moves them > {100 * SHIFTED_M:g} cm or turns "
        f"them > {SHIFTED_DEG:g}°)": (f"{sum(shifted)} of {len(shifted)}" if shifted else "-"),
        "render outside the masks where no depth was measured": unmeasured,
    }


def _unmeasured_spill(objects: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """The share of the real objects' render outside their masks that falls where the camera measured no
    depth, over all frames and per data set (``rgbd/<set>/...``); "-" where no record has the counts."""
    sums: dict[str, list[int]] = {}
    for (frame, _), o in objects.items():
        if "spill_px" in o and "spill_unmeasured_px" in o:
            source = frame.split("/")[1] if frame.count("/") >= 2 else frame
            for key in ("all", source):
                total = sums.setdefault(key, [0, 0])
                total[0] += int(o["spill_unmeasured_px"])
                total[1] += int(o["spill_px"])
    if not sums:
        return "-"
    share = {k: f"{u / n:.2f}" if n else "-" for k, (u, n) in sums.items()}
    return share.pop("all") + " (" + ", ".join(f"{k} {v}" for k, v in sorted(share.items())) + ")"


def _on_frames_of(result: Mapping[str, Any], baseline: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """``baseline`` with only the real frames ``result`` ran (a run of some frames, or one interrupted, set
    beside the same frames before), and how many of its real frames were left out."""
    ran = {r.get("frame") for r in result.get("real", [])}
    kept = [r for r in baseline.get("real", []) if r.get("frame") in ran]
    return {**baseline, "real": kept}, len(baseline.get("real", [])) - len(kept)


def markdown_report(
    result: Mapping[str, Any],
    out: Path,
    baseline: Mapping[str, Any] | None = None,
    baseline_name: str = "an earlier run",
    interrupted: bool = False,
) -> str:
    """The report of ``result`` (written under ``out``; overlays linked relative to it), each value beside
    ``baseline``'s (``before -> **after**``, bold where it changed) when given (``baseline_name``: where it
    was read from); ``interrupted``: the run was stopped, ``result`` holds the frames that finished."""
    compare = baseline is not None
    left_out = 0
    if baseline is not None:
        baseline, left_out = _on_frames_of(result, baseline)
    old = _objects(baseline) if baseline is not None else {}
    new = _objects(result)
    lines = ["# bench real2sim", ""]
    if interrupted:
        done = sum(len(result.get(k, [])) for k in ("rendered", "rendered_noisy", "real", "glass"))
        lines += [f"**Interrupted** after {done} frames: every value below covers those frames only.", ""]
    if baseline is not None:
        lines += [f"Values: baseline -> **this run** (baseline: `{baseline_name}`).", ""]
    lines += _machines(result, baseline)
    if left_out:
        lines += [f"The baseline's {left_out} other real frames, not run here, are left out of it.", ""]
    lines += ["| target | limit | met |", "|---|---|---|"]
    verdicts = {True: "yes", False: "**no**", None: "not measured"}
    for key, met in result.get("targets_met", {}).items():
        lines.append(f"| {key} | {TARGETS.get(key, '-')} | {verdicts[met]} |")
    lines += ["", "| total | value |", "|---|---|"]
    now_totals = _totals(new, result.get("real", []))
    old_totals = _totals(old, baseline.get("real", []) if baseline is not None else [])
    for key, value in now_totals.items():
        lines.append(f"| {key} | {f'{old_totals[key]} -> {value}' if compare else value} |")
    lines += ["", "## Every real object", ""]
    lines += ["| frame | object | " + " | ".join(h for _, h, _ in COLUMNS) + " |"]
    lines += ["|---|---|" + "---|" * len(COLUMNS)]
    matched = _match(old, new)
    for frame, name in new:
        key_was = matched.get((frame, name))
        o, was = new[(frame, name)], old.get(key_was, {}) if key_was else {}
        cells = [_pair(was.get(k), o.get(k), fmt, compare) for k, _, fmt in COLUMNS]
        renamed = f" (was {key_was[1]})" if key_was and key_was[1] != name else ""
        lines.append(f"| {frame} | {name}{renamed} | " + " | ".join(cells) + " |")
    gone = [key for key in old if key not in matched.values()]
    if gone:
        lines += ["", "In the baseline only: " + ", ".join(f"{f} {n}" for f, n in gone)]
    lines += _marked_objects(result, baseline)
    lines += _marked_pixels(result, baseline)
    lines += _development_split(result)
    lines += ["", "## Overlays (the scene rendered from the photo's camera over the photo)", ""]
    for r in result.get("real", []):
        if "error" in r:
            lines += [f"{r['frame']}: error: {r['error']}", ""]
        elif r.get("out"):
            link = Path(r["out"]) / "overlay.png"
            rel = link.relative_to(out) if link.is_relative_to(out) else link
            lines += [f"{r['frame']}:", "", f"![{r['frame']}]({rel})", ""]
    return "\n".join(lines) + "\n"


def _machine_line(m: Mapping[str, Any]) -> str:
    return f"{m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs"


def _machines(result: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[str]:
    """Where the seconds were measured (``result.json``'s ``machine``), and whether the baseline's were
    measured on another machine, where they do not compare."""
    here = result.get("machine")
    if not here:
        return []
    processes = result.get("fitting_processes")
    fitted = f", each frame's objects fitted in {processes} processes" if processes else ""
    lines = [f"Timed on {_machine_line(here)}{fitted}: seconds compare only between runs on one machine."]
    there = baseline.get("machine") if baseline is not None else None
    if there and _machine_line(there) != _machine_line(here):
        lines.append(f"The baseline ran on {_machine_line(there)}: its seconds do not compare with these.")
    return [*lines, ""]


def _marked(result: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """Per real frame that marks its objects (ClearGrasp): found ``k of n`` and the mean IoU with the marked
    objects of the masks, the depth regions and the render."""
    out: dict[str, dict[str, str]] = {}
    for r in (result or {}).get("real", []):
        ious = r.get("annotated_iou")
        if "error" in r or not ious:
            continue
        row = {"found": f"{r['annotated_found']} of {r['annotated']}"}
        for key in MARKED_KEYS:
            if all(key in i for i in ious):  # an older result lacks the render's two shares
                row[key] = format(sum(i[key] for i in ious) / len(ious), ".3f")
        out[r["frame"]] = row
    return out


def _marked_objects(result: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[str]:
    """The real frames' segmentation and render against the objects the frames mark by hand: ground truth
    no stage reads (see :func:`simpact.bench.real2sim.bench_real`'s ``annotated_iou``)."""
    now, was = _marked(result), _marked(baseline)
    if not now:
        return []
    lines = ["", "## Real frames against their hand-marked objects", ""]
    lines += [
        "Mean IoU with each marked object of what covers it: the masks, the depth regions before their",
        "outlines were snapped to colour edges, and the scene's render from the photo's camera (shape and",
        "pose together). Truth the pipeline never reads; a mask near 1 with a lower render says the shape,",
        "not the segmentation, is what falls short. Which way: the share of the marked objects the render",
        "covers, and the share of the render outside them.",
        "",
        "| frame | marked objects found | mask IoU | depth region IoU | render IoU | render covers "
        "| render outside |",
        "|---|---|---|---|---|---|---|",
    ]
    for frame, row in now.items():
        old = was.get(frame, {})
        cells = [_pair(old.get(k), row.get(k), "", baseline is not None) for k in ("found", *MARKED_KEYS)]
        lines.append(f"| {frame} | " + " | ".join(cells) + " |")
    return lines


def _pixel_counts(result: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """Per real frame with pixels placed by hand on its objects: how many a mask holds, the masks over two
    or more and the objects in them; per unlabelled frame with a hand count, the regions against it."""
    out: dict[str, dict[str, str]] = {}
    for r in (result or {}).get("real", []):
        row = {}
        if r.get("points"):
            row["held"] = f"{r['points_found']} of {r['points']}"
            row["merging"], row["merged"] = str(r["masks_merging"]), str(r["objects_merged"])
        if r.get("expected_objects") is not None and r.get("regions") is not None:
            row["regions"] = f"{r['regions']} of {r['expected_objects']}"
        if row:
            out[r["frame"]] = row
    return out


def _marked_pixels(result: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[str]:
    """The masks against the pixels placed by hand on each object (``OBJECT_POINTS``, or a bundle's
    ``object_points``) and the regions against the hand counts: the issue-16 target of no mask over two."""
    now, was = _pixel_counts(result), _pixel_counts(baseline)
    if not now:
        return []
    lines = ["", "## Masks against the pixels marked by hand on each object", ""]
    lines += [
        "| frame | marked objects a mask holds | masks over two or more | objects in them | regions of the"
        " objects counted |",
        "|---|---|---|---|---|",
    ]
    for frame, row in now.items():
        old = was.get(frame, {})
        keys = ("held", "merging", "merged", "regions")
        cells = [_pair(old.get(k), row.get(k), "", baseline is not None) for k in keys]
        lines.append(f"| {frame} | " + " | ".join(cells) + " |")
    return lines


def _development_split(result: Mapping[str, Any]) -> list[str]:
    """The rendered frames' errors without and with sensor noise (mean / worst over their objects)."""
    summary = result.get("summary", {})
    clean, noisy = summary.get("rendered", {}), summary.get("rendered_noisy", {})
    if not any(noisy.values()):
        return []
    lines = ["", "## Development split: rendered frames, exact depth and with sensor noise", ""]
    lines += ["| per object | exact depth: mean / worst | sensor noise: mean / worst |", "|---|---|---|"]
    for key in RENDERED_KEYS:
        worst = "min" if key == "mask_iou" else "max"

        def cell(stats: Mapping[str, float] | None, worst: str = worst) -> str:
            return "-" if not stats else f"{stats['mean']:.2f} / {stats[worst]:.2f}"

        lines.append(f"| {key} | {cell(clean.get(key))} | {cell(noisy.get(key))} |")
    against = summary.get("verdicts_vs_truth", {})
    if any(against.values()):
        lines += [
            "",
            "The fit verdict real2sim gives itself (no ground truth) against the rendered scene: objects",
        ]
        lines += ["with each verdict, and how many of them are wrong (extent > 10 % or position > 1 cm).", ""]
        lines += ["| frames | verdict | objects | wrong |", "|---|---|---|---|"]
        for kind, verdicts in against.items():
            for v in ("good", "check", "poor"):
                if v in verdicts:
                    n, wrong = verdicts[v]
                    lines.append(f"| {kind} | {v} | {n} | {wrong} ({wrong / n:.0%}) |")
    runs = summary.get("edge_runs", {})
    if runs:
        lines += [
            "",
            "How sharp each kind of frame's depth edges are (shares of its steep edges that are runs of",
        ]
        lines += [
            "1 / 2 / 3 / 4+ px; `simpact.bench.sensor_noise.edge_runs`): the model beside the real sensors.",
            "",
        ]
        lines += ["| frames | 1 px | 2 px | 3 px | 4+ px |", "|---|---|---|---|---|"]
        lines += [
            f"| {kind} | " + " | ".join(f"{v:.2f}" for v in shares) + " |" for kind, shares in runs.items()
        ]
    return lines
