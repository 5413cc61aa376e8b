"""``simpact real2sim FRAME --out DIR``: one RGB-D frame → ``DIR/scene.json``, ``DIR/scene.xml``, meshes,
particles, overlays and ``DIR/result.json``, with a one-line summary."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from pathlib import Path
from typing import Any

from real2sim.datasets import read_any_frame, read_mask_image, with_masks
from real2sim.pipeline import Real2SimConfig, check_backends, run_real2sim
from simpact.cli.common import add_vlm_arguments, vlm_from_args
from simpact.cli.preflight import finite, require_packages
from simpact.core.errors import UsageError
from simpact.core.frame import Frame
from simpact.core.rundir import prepare_out
from simpact.core.vocab import OBJECT_KINDS, VLM_CHOICES
from simpact.tasks import load_task

__all__ = ["add_parsers", "cmd_real2sim"]

_KIND = re.compile(rf"\s*([A-Za-z0-9_]+)\s*=\s*({'|'.join(OBJECT_KINDS)})\s*")
"""One ``--kind NAME=rigid|pd|mpm``."""


def _kinds(values: list[str] | None) -> dict[str, str]:
    """``--kind`` values as ``{object name: solver}``."""
    out: dict[str, str] = {}
    for item in values or []:
        match = _KIND.fullmatch(item)
        if not match:
            raise UsageError(f"--kind {item!r}: expected NAME=rigid|pd|mpm (an object name, e.g. dough=mpm)")
        out[match.group(1)] = match.group(2)
    return out


def _config(args: argparse.Namespace) -> Real2SimConfig:
    """The pipeline's settings from the flags (checked: spacing in m > 0, settle time in s >= 0)."""
    if not (args.spacing > 0 and math.isfinite(args.spacing)):
        raise UsageError(f"--spacing must be a positive length in metres, got {args.spacing}")
    finite(args.settle_s, "--settle-s", minimum=0.0)
    return Real2SimConfig(
        segmenter=args.segmenter,
        shape=args.shape,
        pose=args.pose,
        particle_spacing_m=args.spacing,
        settle_s=args.settle_s,
        render=not args.no_render,
        kinds=_kinds(args.kind),
    )


def _with_mask_image(frame: Frame, path: str, labels: str | None) -> tuple[Frame, list[str]]:
    """The frame with the objects of the mask image ``path`` (``--masks``), named by ``labels`` in order
    (``object 0``, ``object 1``, ... without), and those names."""
    masks = read_mask_image(path, frame.depth.shape)
    names = [n.strip() for n in labels.split(",") if n.strip()] if labels else []
    if names and len(names) != len(masks):
        raise UsageError(
            f"--labels names {len(names)} objects but --masks {path} holds {len(masks)}: give one label per "
            "object (in the order of their values, or, for a binary mask, of their first pixel row by row)"
        )
    names = names or [f"object {i}" for i in range(len(masks))]
    return with_masks(frame, masks, names), names


def cmd_real2sim(args: argparse.Namespace) -> None:
    require_packages("cv2", "open3d")
    if args.masks and args.segmenter not in ("geometric", "masks"):
        raise UsageError(f"--masks gives the objects' masks: drop --segmenter {args.segmenter}")
    config = _config(args)
    check_backends(config)  # a learned back-end's local weights, before any work or output folder
    vlm = vlm_from_args(args)
    task = load_task(args.task) if args.task else None
    frame = read_any_frame(args.frame)
    labels: str | list[str] | None = args.labels
    if args.masks:
        frame, labels = _with_mask_image(frame, args.masks, args.labels)
        config = dataclasses.replace(config, segmenter="masks")
    prepare_out(args.out, overwrite=args.overwrite)
    result = run_real2sim(
        frame,
        labels=labels,
        instruction=args.instruction,
        task=task,
        vlm=vlm,
        out=args.out,
        config=config,
    )
    out = Path(args.out)
    found = ", ".join(f"{o['name']} ({o['kind']})" for o in result.objects)
    settle = "not run" if result.settle is None else ("clean" if result.settle.clean else "NOT clean")
    if result.settle is not None and result.settle.shifted:  # see the warning: not where the photo shows it
        settle += f" but {', '.join(result.settle.shifted)} did not rest where fitted"
    for warning in result.warnings:
        print(f"simpact real2sim: warning: {warning}")
    fit = result.fit.get("objects", {})
    verdicts = ", ".join(f"{n} {s['verdict']} (IoU {s['iou']:.2f})" for n, s in fit.items())
    if fit:
        print(f"fit against the photo's depth: {verdicts} (see {out / 'overlay.png'})")
    print(
        f"real2sim {args.frame}: {len(result.objects)} objects [{found}], settle {settle}, "
        f"{result.timings_s['total']:.1f} s -> {out / 'scene.json'}"
    )


def add_parsers(verbs: Any) -> None:
    """Register ``real2sim`` (sets ``func``)."""
    p = verbs.add_parser("real2sim", help="build a simulation scene from one RGB-D frame")
    p.add_argument(
        "frame",
        help="frame bundle, PoseCNN NNNNNN-color.png, ClearGrasp *-rgb-img.jpg, UOIS or GraspNet .npy",
    )
    p.add_argument("--labels", help='objects to look for, comma-separated ("green bowl, white bowl")')
    p.add_argument("--instruction", help="the task in words; a VLM reads the objects to look for from it")
    p.add_argument("--task", help="take the labels (and instruction) from a task config")
    add_vlm_arguments(p, VLM_CHOICES, "none", "VLM for labels and physics (default none)", loop=False)
    p.add_argument("--segmenter", default="geometric", help="geometric (default), masks, grounded_sam2")
    p.add_argument(
        "--masks",
        help="the objects' masks from another tool (an annotation, SAM): a PNG of the frame's size, each "
        "object its own value (0: none), or a binary mask whose separate parts are the objects; --labels "
        "names them in order. Glass and clear plastic, which the depth camera misses, are fitted to these "
        "silhouettes",
    )
    p.add_argument("--shape", default="geometric", help="shape completion back-end (default geometric)")
    p.add_argument("--pose", default="icp", help="pose back-end (default icp)")
    p.add_argument("--spacing", type=float, default=0.005, help="particle spacing of deformables, m")
    p.add_argument("--kind", action="append", help="force an object's solver: NAME=rigid|pd|mpm (repeatable)")
    p.add_argument("--settle-s", type=float, default=1.0, help="settle run audited by SimuGuard, s (0: skip)")
    p.add_argument("--no-render", action="store_true", help="skip scene_vs_photo.png and overlay.png")
    p.add_argument("--out", required=True, help="output directory (refused if it holds an earlier run)")
    p.add_argument("--overwrite", action="store_true", help="clear an --out that holds an earlier run")
    p.set_defaults(func=cmd_real2sim)
