"""``simpact real2sim FRAME --out DIR``: one RGB-D frame → ``DIR/scene.json``, ``DIR/scene.xml``, meshes,
particles, overlays and ``DIR/result.json``; and the scene a task plans on with ``simpact plan --frame``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

__all__ = ["VLM_CHOICES", "add_real2sim_parser", "cmd_real2sim", "input_errors"]

VLM_CHOICES = ("none", "gemini", "openai", "replay")


def input_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input to real2sim (reported in one line), not a bug."""
    from real2sim.labels import LabelError
    from real2sim.particles import ParticleError
    from real2sim.physics import PhysicsError
    from real2sim.pipeline import Real2SimError
    from simpact.core.frame import FrameError
    from simpact.core.scene import SceneError
    from simpact.planner.commands import PlanningError
    from simpact.tasks import TaskError
    from simpact.vlm import VLMError

    errors: list[type[BaseException]] = [
        FrameError,
        LabelError,
        ParticleError,
        PhysicsError,
        PlanningError,
        Real2SimError,
        SceneError,
        TaskError,
        VLMError,
    ]
    for module, name in (
        ("real2sim.table", "TableError"),
        ("real2sim.segment", "SegmentationError"),
        ("real2sim.shape", "ShapeError"),
        ("real2sim.pose", "PoseError"),
        ("real2sim.datasets", "SharedDataMissing"),
    ):
        try:
            errors.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


def _kinds(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        match = re.fullmatch(r"\s*([A-Za-z0-9_]+)\s*=\s*(rigid|pd|mpm)\s*", item)
        if not match:
            raise ValueError(f"--kind {item!r}: expected NAME=rigid|pd|mpm (an object name, e.g. dough=mpm)")
        out[match.group(1)] = match.group(2)
    return out


def build_vlm(args: argparse.Namespace) -> Any:
    """The VLM the flags ask for (recording with ``--record``), or None for ``--vlm none``."""
    from simpact.planner.commands import build_vlm as build

    return build(
        argparse.Namespace(**{k: getattr(args, k) for k in ("vlm", "model", "base_url", "replay", "record")})
    )


def cmd_real2sim(args: argparse.Namespace) -> None:
    from real2sim.datasets import read_any_frame
    from real2sim.pipeline import Real2SimConfig, run_real2sim
    from simpact.core.errors import UsageError

    if not args.spacing > 0:
        raise UsageError(f"--spacing must be a positive length in metres, got {args.spacing}")
    if args.settle_s < 0:
        raise UsageError(f"--settle-s must be >= 0 s, got {args.settle_s}")
    try:
        kinds = _kinds(args.kind)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    config = Real2SimConfig(
        segmenter=args.segmenter,
        shape=args.shape,
        pose=args.pose,
        particle_spacing_m=args.spacing,
        settle_s=args.settle_s,
        render=not args.no_render,
        kinds=kinds,
    )
    errors = input_errors()
    try:
        vlm = build_vlm(args)
        task = None
        if args.task:
            from simpact.tasks import load_task

            task = load_task(args.task)
        frame = read_any_frame(args.frame)
        result = run_real2sim(
            frame,
            labels=args.labels,
            instruction=args.instruction,
            task=task,
            vlm=vlm,
            out=args.out,
            config=config,
        )
    except errors as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out)
    found = ", ".join(f"{o['name']} ({o['kind']})" for o in result.objects)
    settle = "not run" if result.settle is None else ("clean" if result.settle.clean else "NOT clean")
    for warning in result.warnings:
        print(f"simpact real2sim: warning: {warning}")
    print(
        f"real2sim {args.frame}: {len(result.objects)} objects [{found}], settle {settle}, "
        f"{result.timings_s['total']:.1f} s -> {out / 'scene.json'}"
    )


def add_real2sim_parser(verbs: Any) -> argparse.ArgumentParser:
    """Register ``real2sim`` on the ``simpact`` subparsers (sets ``func``)."""
    p = verbs.add_parser("real2sim", help="build a simulation scene from one RGB-D frame")
    p.add_argument("frame", help="frame bundle directory, PoseCNN NNNNNN-color.png or 6-DoF GraspNet .npy")
    p.add_argument("--labels", help='objects to look for, comma-separated ("green bowl, white bowl")')
    p.add_argument("--instruction", help="the task in words; a VLM reads the objects to look for from it")
    p.add_argument("--task", help="take the labels (and instruction) from a task config")
    p.add_argument(
        "--vlm", choices=VLM_CHOICES, default="none", help="VLM for labels and physics (default none)"
    )
    p.add_argument("--model", help="VLM model name (back-end default otherwise)")
    p.add_argument("--base-url", help="server URL for an OpenAI-compatible or Gemini endpoint")
    p.add_argument("--replay", help="JSONL of recorded answers (with --vlm replay)")
    p.add_argument("--record", help="append every VLM request and answer to this JSONL file")
    p.add_argument("--segmenter", default="geometric", help="geometric (default), masks, grounded_sam2")
    p.add_argument("--shape", default="geometric", help="shape completion back-end (default geometric)")
    p.add_argument("--pose", default="icp", help="pose back-end (default icp)")
    p.add_argument("--spacing", type=float, default=0.005, help="particle spacing of deformables, m")
    p.add_argument("--kind", action="append", help="force an object's solver: NAME=rigid|pd|mpm (repeatable)")
    p.add_argument("--settle-s", type=float, default=1.0, help="settle run audited by SimuGuard, s (0: skip)")
    p.add_argument("--no-render", action="store_true", help="skip scene_vs_photo.png (needs OpenGL)")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_real2sim)
    return p
